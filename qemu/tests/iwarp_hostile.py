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
bad_queue, unknown_stag_write.  Prints one line: "closed ...", or
"terminate layer L etype E code C", and exits 0 when the server behaved,
1 (with the reason) when not.
"""

import socket
import struct
import sys

REQ_KEY = b'MPA ID Req Frame'
REP_KEY = b'MPA ID Rep Frame'


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def request(flags=0x10, rev=2, private=b'', words=True):
    pd = (struct.pack('>HH', 1, 1) if words else b'') + private
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


def connect(host, port):
    s = socket.create_connection((host, port), timeout=10)
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
    s = connect(host, port)
    if case in ('garbage', 'bad_key', 'bad_rev', 'big_private', 'markers'):
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
    if case in ('truncated', 'silent'):
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
    crc_on = case == 'bad_crc'
    s.sendall(request(flags=0x10 | (0x40 if crc_on else 0)))
    s.settimeout(10)
    rep = b''
    while len(rep) < 20:
        b = s.recv(20 - len(rep))
        if not b:
            print('server closed before its MPA reply')
            return 1
        rep += b
    if rep[:16] != REP_KEY or rep[16] & 0x20:
        print(f'not an accepting MPA reply: {rep.hex()}')
        return 1
    pd_len = struct.unpack('>H', rep[18:20])[0]
    while pd_len:
        b = s.recv(pd_len)
        if not b:
            print('server closed inside its MPA reply')
            return 1
        pd_len -= len(b)
    # The CRC binds both ways when the reply has C (a responder that wants
    # it sets C whatever the request asked).
    if crc_on and not rep[16] & 0x40:
        print('reply without CRC to a request that asked for it')
        return 1
    crc_on = bool(rep[16] & 0x40)
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
    else:
        print(f'unknown case {case}')
        return 2
    got, how = read_until_closed(s)
    if len(got) < 24:
        print(f'no TERMINATE ({len(got)} bytes, then {how})')
        return 1
    ulpdu = struct.unpack('>H', got[:2])[0]
    opcode = got[3] & 0x0F
    if opcode != 7 or ulpdu < 22 or got[2] & 0x80:
        print(f'first FPDU back is not a TERMINATE: {got[:24].hex()}')
        return 1
    qn, msn, mo = struct.unpack('>III', got[8:20])
    layer, etype, code = got[20] >> 4, got[20] & 0x0F, got[21]
    print(f'terminate layer {layer} etype {etype} code {code:#04x} (qn {qn} msn {msn} mo {mo}), then {how}')
    if (qn, msn, mo) != (2, 1, 0):
        print('TERMINATE not on queue 2, MSN 1, MO 0')
        return 1
    if want is None:
        return 0 if (layer, etype) == (1, 1) else 1
    return 0 if (layer, etype, code) == want else 1


if __name__ == '__main__':
    sys.exit(main())
