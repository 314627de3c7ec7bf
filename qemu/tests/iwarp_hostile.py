#!/usr/bin/env python3
"""Hostile MPA and FPDU input at a softrnic_iwarp listener, from a plain TCP
socket (hostile_iwarp.sh).

usage: iwarp_hostile.py SERVER_IP PORT CASE

Cases that break MPA setup (the connection must be closed or reset by the
server, and nothing else happen): garbage, bad_key, bad_rev, big_private,
markers, truncated, silent.  silent_listener turns it round: it listens,
takes a softrnic initiator's MPA request and never replies.  Cases that set up a connection (an rping
server accepts it) and then send a bad FPDU (the server must answer with a
TERMINATE naming the cause, then close): bad_ddp_version, bad_crc,
bad_queue, unknown_stag_write, msn_gap, msn_replay, bad_mo, too_long,
write_past_end, read_past_end, rtr_write, rtr_read, rtr_send (RFC 6581
peer-to-peer mode with that RTR alone offered), and foreign_stag PORT2 (a WRITE with the
STag of another rping server's buffer: another process, another PD).
Cases that play rping's client first advertise a buffer and read the
server's RDMA READ request for it, which names the server's own buffer.
stop_reading and reset_mid_message leave the server a stalled or broken
stream (hostile_iwarp.sh checks what follows); drain_on_kill stalls it
until hostile_iwarp.sh has killed the server, then reads to the end.  Prints one line: "closed
...", or "terminate layer L etype E code C", and exits 0 when the server
behaved, 1 (with the reason) when not.
"""

import os
import socket
import struct
import sys
import time

REQ_KEY = b'MPA ID Req Frame'
REP_KEY = b'MPA ID Rep Frame'


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def request(flags=0x10, rev=2, private=b'', words=True, ird_ord=(1, 1)):
    pd = (struct.pack('>HH', *ird_ord) if words else b'') + private
    return REQ_KEY + bytes([flags, rev]) + struct.pack('>H', len(pd)) + pd


def fpdu(ulpdu, crc_on, bad_crc=False):
    body = struct.pack('>H', len(ulpdu)) + ulpdu
    body += b'\0' * ((-len(body)) % 4)
    c = crc32c(body) if crc_on else 0
    if bad_crc:
        c ^= 0xDEADBEEF
    return body + struct.pack('<I', c)


def untagged(opcode, qn=0, msn=1, mo=0, ddp_version=1, payload=b''):
    ctrl = bytes([0x40 | ddp_version, 0x40 | opcode])  # L, DDP version; RDMAP v1
    return ctrl + struct.pack('>IIII', 0, qn, msn, mo) + payload


def tagged_write(stag, to, payload):
    ctrl = bytes([0x80 | 0x40 | 1, 0x40 | 0])  # T, L, v1; RDMAP v1 WRITE
    return ctrl + struct.pack('>IQ', stag, to) + payload


def read_until_closed(s, limit=65536):
    got = b''
    s.settimeout(10)
    try:
        while len(got) < limit:
            b = s.recv(4096)
            if not b:
                return got, 'fin'
            got += b
    except ConnectionResetError:
        return got, 'reset'
    except socket.timeout:
        return got, 'open'
    return got, 'open'


def connect(host, port, rcvbuf=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def setup_case(s, name):
    if name == 'garbage':
        s.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    elif name == 'bad_key':
        s.sendall(request()[:15] + b'X' + request()[16:])
    elif name == 'bad_rev':
        s.sendall(request(rev=7))
    elif name == 'big_private':
        s.sendall(REQ_KEY + bytes([0x10, 2]) + struct.pack('>H', 600) + b'\0' * 600)
    elif name == 'markers':
        s.sendall(request(flags=0x90))
    elif name == 'truncated':
        s.sendall(REQ_KEY[:10])
    elif name == 'silent':
        pass
    elif name == 'join_stranger':
        # A well-formed request at a join port that is no join request.
        s.sendall(request(private=b'not a join request'))
    elif name == 'join_nobody':
        # A join request (core/iwarp/join.rs) for a QP that is not waiting.
        s.sendall(request(private=b'SRNJOIN1' + struct.pack('>II', 0xfffff0, 16)))


def silent_listener(host, port):
    """Take one connection, read its MPA request and never answer: the
    softrnic initiator must give up at its MPA deadline and reset."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(1)
    print('listening', flush=True)
    ls.settimeout(30)
    s, _ = ls.accept()
    got, how = read_until_closed(s, limit=1 << 20)
    if not got.startswith(REQ_KEY):
        print(f'no MPA request from the initiator: {got[:24].hex()}')
        return 1
    if how == 'open':
        print('the initiator kept the connection open with no reply')
        return 1
    print(f'request of {len(got)} bytes, then {how}')
    return 0


def main():
    host, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if case == 'silent_listener':
        return silent_listener(host, port)
    # (A peer that stops reading has a small receive window.)
    s = connect(host, port, rcvbuf=4096 if case in ('stop_reading', 'drain_on_kill') else 0)
    if case in ('garbage', 'bad_key', 'bad_rev', 'big_private', 'markers', 'join_stranger'):
        setup_case(s, case)
        got, how = read_until_closed(s)
        if how == 'open':
            print(f'server kept the connection open after {case}')
            return 1
        if got:
            print(f'server answered {case} with {len(got)} bytes: {got[:24].hex()}')
            return 1
        print(f'closed ({how})')
        return 0
    if case in ('truncated', 'silent', 'join_nobody'):
        # The peer stops mid-frame or never starts: the server lets go
        # when its MPA deadline passes (hostile_iwarp.sh sets it to 2 s).
        setup_case(s, case)
        got, how = read_until_closed(s)
        if how == 'open':
            print(f'server kept the connection open after {case}')
            return 1
        if got:
            print(f'server answered {case} with {len(got)} bytes: {got[:24].hex()}')
            return 1
        print(f'closed by the server ({how})')
        return 0
    if case.startswith('rtr_'):
        return rtr_case(s, case[4:])
    crc_on = case == 'bad_crc'
    crc_on = mpa_setup(s, crc_on)
    if crc_on is None:
        return 1
    if case == 'foreign_stag':
        # Another rping server (another process: another PD) on PORT2.
        s2 = connect(host, int(sys.argv[4]))
        crc2 = mpa_setup(s2, False)
        if crc2 is None:
            return 1
        other = advertise(s2, crc2)
        if other is None:
            return 1
        own = advertise(s, crc_on)
        if own is None:
            return 1
        print(f'own STag {own[0]:#x}, the other server\'s {other[0]:#x}')
        # Within the other buffer's bounds: only the STag's PD is wrong.
        s.sendall(fpdu(tagged_write(other[0], other[1], b'x' * 16), crc_on))
        want = (1, 1, 0x02)
        return expect_terminate(s, want)
    if case == 'stop_reading':
        return stop_reading(s, crc_on)
    if case == 'drain_on_kill':
        return drain_on_kill(s, crc_on)
    if case == 'reset_mid_message':
        # Half of a SEND's FPDU, then a reset.
        # (A SEND that fits rping's 16-byte receive: only the reset is
        # wrong.)
        n = int(sys.argv[4]) if len(sys.argv) > 4 else 16
        frame = fpdu(untagged(3, payload=b'y' * n), crc_on)
        s.sendall(frame[:len(frame) // 2])
        time.sleep(0.5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        s.close()
        print(f'sent {len(frame) // 2} of {len(frame)} bytes, then a reset')
        return 0
    if case == 'bad_ddp_version':
        s.sendall(fpdu(untagged(3, ddp_version=2), crc_on))
        want = (1, 2, 0x06)
    elif case == 'bad_crc':
        s.sendall(fpdu(untagged(3, payload=b'hello'), crc_on, bad_crc=True))
        want = (2, 0, 0x02)
    elif case == 'bad_queue':
        s.sendall(fpdu(untagged(3, qn=5), crc_on))
        want = (1, 2, 0x01)
    elif case == 'unknown_stag_write':
        s.sendall(fpdu(tagged_write(0x12345678, 0x1000, b'x' * 64), crc_on))
        want = None  # a DDP tagged error: layer 1, type 1 (the code says which)
    elif case == 'msn_gap':
        # The first SEND numbered 5: MSN out of range.
        s.sendall(fpdu(untagged(3, msn=5, payload=rping_info()), crc_on))
        want = (1, 2, 0x03)
    elif case == 'msn_replay':
        # A good first SEND (the server answers with its READ), then the
        # same MSN again.
        if advertise(s, crc_on) is None:
            return 1
        s.sendall(fpdu(untagged(3, msn=1, payload=rping_info()), crc_on))
        want = (1, 2, 0x03)
    elif case == 'bad_mo':
        # A single-segment SEND that claims to start 8 bytes in.
        s.sendall(fpdu(untagged(3, mo=8, payload=b'z' * 8), crc_on))
        want = (1, 2, 0x04)
    elif case == 'too_long':
        # rping posts 16-byte receive buffers.
        s.sendall(fpdu(untagged(3, payload=b'z' * 64), crc_on))
        want = (1, 2, 0x05)
    elif case == 'write_past_end':
        # A WRITE into the server's buffer that runs 8 bytes past its end.
        adv = advertise(s, crc_on)
        if adv is None:
            return 1
        stag, to, size = adv
        s.sendall(fpdu(tagged_write(stag, to + size - 8, b'x' * 16), crc_on))
        want = (1, 1, 0x01)
    elif case == 'read_past_end':
        # A READ request for 64 bytes more than the server's buffer holds:
        # RDMAP remote protection, base or bounds violation.
        adv = advertise(s, crc_on)
        if adv is None:
            return 1
        stag, to, size = adv
        s.sendall(fpdu(read_request(0x99, 0x2000, size + 64, stag, to), crc_on))
        want = (0, 1, 0x01)
    else:
        print(f'unknown case {case}')
        return 2
    return expect_terminate(s, want)


# RFC 6581's IRD and ORD words: the peer-to-peer bit and the RTR options.
P2P, RTR_SEND = 0x8000, 0x4000     # in the IRD word
RTR_WRITE, RTR_READ = 0x8000, 0x4000  # in the ORD word
RTR_BITS = {'send': (RTR_SEND, 0), 'write': (0, RTR_WRITE), 'read': (0, RTR_READ)}


def mpa_setup(s, crc_on, rtr=None):
    """Send an MPA request (revision 2, IRD/ORD 16/16; with `rtr`, peer-to-
    peer mode offering only that RTR) and read an accepting reply (which
    must pick that RTR): whether FPDUs carry the CRC, or None."""
    ird, ord_ = 16, 16
    if rtr:
        ird |= P2P | RTR_BITS[rtr][0]
        ord_ |= RTR_BITS[rtr][1]
    s.sendall(request(flags=0x10 | (0x40 if crc_on else 0), ird_ord=(ird, ord_)))
    s.settimeout(10)
    rep = recv_exact(s, 20)
    if rep is None:
        print('server closed before its MPA reply')
        return None
    if rep[:16] != REP_KEY or rep[16] & 0x20:
        print(f'not an accepting MPA reply: {rep.hex()}')
        return None
    pd = recv_exact(s, struct.unpack('>H', rep[18:20])[0])
    if pd is None:
        print('server closed inside its MPA reply')
        return None
    if rtr:
        r_ird, r_ord = struct.unpack('>HH', pd[:4])
        want = (P2P | RTR_BITS[rtr][0], RTR_BITS[rtr][1])
        if (r_ird & 0xC000, r_ord & 0xC000) != want:
            print(f'reply IRD/ORD words {r_ird:#06x}/{r_ord:#06x}: not peer-to-peer with the {rtr} RTR')
            return None
    # The CRC binds both ways when the reply has C (a responder that wants
    # it sets C whatever the request asked).
    if crc_on and not rep[16] & 0x40:
        print('reply without CRC to a request that asked for it')
        return None
    return bool(rep[16] & 0x40)


def recv_exact(s, n):
    got = b''
    while len(got) < n:
        b = s.recv(n - len(got))
        if not b:
            return None
        got += b
    return got


def rping_info(buf=0x10000, rkey=0x4242, size=64):
    """rping's first message: the client's buffer (address, key, length)."""
    return struct.pack('>QII', buf, rkey, size)


def read_request(sink_stag, sink_to, size, src_stag, src_to, msn=1):
    ctrl = bytes([0x40 | 1, 0x40 | 1])  # L, v1; RDMAP v1 READ request
    return (ctrl + struct.pack('>IIII', 0, 1, msn, 0) +
            struct.pack('>IQIIQ', sink_stag, sink_to, size, src_stag, src_to))


def next_fpdu(s):
    """The next FPDU's ULPDU (no markers), or None when the stream ends."""
    head = recv_exact(s, 2)
    if head is None:
        return None
    n = struct.unpack('>H', head)[0]
    rest = recv_exact(s, n + (-(n + 2)) % 4 + 4)
    return None if rest is None else rest[:n]


def rtr_case(s, rtr):
    """Peer-to-peer mode with only `rtr` offered: the server must pick it,
    send nothing before it (a READ RTR's zero-length response aside), and
    then serve rping as usual: the SEND RTR takes none of its receives."""
    crc_on = mpa_setup(s, False, rtr)
    if crc_on is None:
        return 1
    msn = 1
    if rtr == 'write':
        s.sendall(fpdu(tagged_write(0, 0, b''), crc_on))
    elif rtr == 'send':
        s.sendall(fpdu(untagged(3, msn=1), crc_on))
        msn = 2
    else:
        s.sendall(fpdu(read_request(0x77, 0, 0, 0, 0), crc_on))
        s.settimeout(10)
        u = next_fpdu(s)
        if u is None or u[1] & 0x0F != 2 or not u[0] & 0x80 or len(u) != 14:
            print(f'not a zero-length READ response: {u and u.hex()}')
            return 1
        if struct.unpack('>I', u[2:6])[0] != 0x77:
            print(f'READ response to STag {struct.unpack(">I", u[2:6])[0]:#x}, not the RTR\'s 0x77')
            return 1
    adv = advertise(s, crc_on, msn=msn)
    if adv is None:
        return 1
    print(f'{rtr} RTR taken; rping\'s first message (MSN {msn}) answered with a READ request')
    return 0


def advertise(s, crc_on, size=64, msn=1):
    """Play rping's client: advertise a buffer of `size` bytes (at most
    the server's -S); the server's RDMA READ request for it names the
    server's own buffer (sink STag, TO) and the length."""
    s.sendall(fpdu(untagged(3, msn=msn, payload=rping_info(size=size)), crc_on))
    s.settimeout(10)
    try:
        u = next_fpdu(s)
    except (socket.timeout, ConnectionResetError) as e:
        print(f'no READ request from the server: {e}')
        return None
    if u is None or u[1] & 0x0F != 1:
        print(f'not a READ request: {u and u[:20].hex()}')
        return None
    sink_stag, sink_to, size = struct.unpack('>IQI', u[18:34])
    return sink_stag, sink_to, size


def expect_terminate(s, want):
    """Read FPDUs until the TERMINATE; check its cause."""
    s.settimeout(10)
    while True:
        try:
            u = next_fpdu(s)
        except ConnectionResetError:
            u = None
        except socket.timeout:
            print('no TERMINATE: the server kept the connection open')
            return 1
        if u is None:
            print('no TERMINATE: the stream ended')
            return 1
        if u[1] & 0x0F == 7 and not u[0] & 0x80:
            break
    qn, msn, mo = struct.unpack('>III', u[6:18])
    layer, etype, code = u[18] >> 4, u[18] & 0x0F, u[19]
    got, how = read_until_closed(s)
    print(f'terminate layer {layer} etype {etype} code {code:#04x} (qn {qn} msn {msn} mo {mo}), then {how}')
    if (qn, msn, mo) != (2, 1, 0):
        print('TERMINATE not on queue 2, MSN 1, MO 0')
        return 1
    if how == 'open':
        print('the server kept the connection open after its TERMINATE')
        return 1
    if want is None:
        return 0 if (layer, etype) == (1, 1) else 1
    return 0 if (layer, etype, code) == want else 1


def stop_reading(s, crc_on):
    """Have the server (rping -S 65535) send far more than a 4 KiB receive
    window and the socket buffers hold (READ requests for its whole buffer,
    16 of them: past its IRD of 1, so a TERMINATE waits behind the data
    too) and read none of it for 5 s; then reset.  hostile_iwarp.sh checks
    that the device served others meanwhile and that the server then
    ends."""
    adv = advertise(s, crc_on, size=65535)
    if adv is None:
        return 1
    stag, to, size = adv
    for i in range(16):
        s.sendall(fpdu(read_request(0x99, 0x2000 + i * size, size, stag, to, msn=i + 1), crc_on))
    print(f'16 READ requests of {size} bytes sent; reading nothing', flush=True)
    time.sleep(5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.close()
    print('reset')
    return 0


DRAIN_GO = '/tmp/drain_go'


def drain_on_kill(s, crc_on):
    """Have the server owe more than its socket takes (a READ of its whole
    64 KiB buffer against a 4 KiB receive window), read nothing until
    hostile_iwarp.sh has killed the server (it creates DRAIN_GO), then read
    to the end: what the server's stream had built must arrive as whole
    FPDUs, then a FIN, not a reset."""
    adv = advertise(s, crc_on, size=65535)
    if adv is None:
        return 1
    stag, to, size = adv
    s.sendall(fpdu(read_request(0x99, 0x2000, size, stag, to), crc_on))
    print(f'a READ request of {size} bytes sent; reading nothing', flush=True)
    deadline = time.time() + 60
    while not os.path.exists(DRAIN_GO):
        if time.time() > deadline:
            print('never told to read')
            return 1
        time.sleep(0.1)
    s.settimeout(30)
    data, how = b'', 'FIN'
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except ConnectionResetError:
        how = 'reset'
    except socket.timeout:
        how = 'open'
    off = frames = placed = 0
    while off + 2 <= len(data):
        n = struct.unpack('>H', data[off:off + 2])[0]
        end = off + 2 + n + (-(n + 2)) % 4 + 4
        if end > len(data):
            break
        u = data[off + 2:off + 2 + n]
        if u[0] & 0x80 and u[1] & 0x0F == 2:  # tagged READ response
            placed += n - 14
        frames += 1
        off = end
    cut = len(data) - off
    print(f'{frames} whole FPDUs ({placed} bytes of READ response), {cut} bytes of a cut one, then {how}')
    # More than the socket could have held: the rest came from the stream.
    return 0 if how == 'FIN' and cut == 0 and placed >= 32768 else 1


if __name__ == '__main__':
    sys.exit(main())
