#!/usr/bin/python3
"""Send hand-made RoCEv2 packets from a raw socket (hostile.sh).

usage: hostile_inject.py SRC_IP DST_IP STATE_FILE CASE COUNT
Builds the IPv4 and UDP headers itself (IP_HDRINCL, a fixed IP ID, so the
ICRC it computes covers exactly what is sent) and sends COUNT packets of
CASE to port 4791 of DST_IP.  The QP numbers, PSNs and Q_Key come from
hostile_target.py's STATE_FILE.  Cases (what softrnic must do with them):
  good_ud      a valid UD SEND (delivered: checks this injector is right)
  truncated    6 bytes of BTH (malformed)
  bad_icrc     a valid UD SEND with one ICRC bit flipped (bad ICRC)
  unknown_qp   a valid UD SEND to a QPN nobody has (unknown QP)
  bad_opcode   reserved opcode 0x1f (malformed)
  bad_tver     transport version 1 (malformed)
  bad_pad      PadCnt 3 with no payload (malformed)
  bad_pkey     P_Key 0x1234 (malformed)
  bad_qkey     UD SEND with the wrong Q_Key (dropped, bad state)
  rc_to_ud     an RC SEND to the UD QP (dropped, bad state)
  oversized    a UD SEND with 6000 bytes of payload (malformed)
  rc_ahead     RC SENDs far ahead of the expected PSN (one sequence NAK)
  rc_behind    RC SENDs behind the expected PSN (duplicates, re-ACKed)
  rc_stray_ack ACKs for PSNs never sent (duplicates, ignored)
  good_ud_frag a valid UD SEND of FRAG_PAYLOAD bytes that arrives in page
               fragments, its linear part ending inside the BTH (delivered,
               read in place: sent from an AF_PACKET socket on $IFACE to
               $DMAC with a virtio-net header asking for that split)
  bad_icrc_frag  the same with a payload byte in a fragment changed (bad ICRC)
  fuzz         COUNT random mutations of valid packets (dropped or handled)
  fuzz_states  COUNT packets of every RC, UC and UD opcode with hostile
               fields (PSNs, lengths, rkeys, pad counts, Q_Keys, flags),
               some mutated, some with a bad ICRC, at the QPs in every
               state of fuzz_targets.py's STATE_FILE, plus random garbage
"""
import random
import socket
import struct
import sys
import zlib

src, dst, state_file, case, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
st = dict(line.strip().split('=') for line in open(state_file) if '=' in line)
st = {k: int(v) for k, v in st.items()}
TARGETS = [v for k, v in st.items() if k.startswith('qpn_')]
SPORT = 49152 + 77


def ip_udp(payload_len, ident=0x4242):
    total = 20 + 8 + payload_len
    ip = struct.pack('>BBHHHBBH4s4s', 0x45, 0, total, ident, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack('>HHHH', SPORT, 4791, 8 + payload_len, 0)
    return ip, udp


def icrc(ip, udp, transport):
    ipm = bytearray(ip)
    ipm[1] = 0xff
    ipm[8] = 0xff
    ipm[10:12] = b'\xff\xff'
    udpm = bytearray(udp)
    udpm[6:8] = b'\xff\xff'
    t = bytearray(transport)
    if len(t) > 4:
        t[4] = 0xff
    return struct.pack('<I', zlib.crc32(b'\xff' * 8 + bytes(ipm) + bytes(udpm) + bytes(t)))


def bth(opcode, dest_qp, psn, pad=0, pkey=0xffff, tver=0, ack_req=False, se=False):
    return struct.pack('>BBHII', opcode, (0x80 if se else 0) | (pad << 4) | tver, pkey, dest_qp & 0xffffff,
                       (0x80000000 if ack_req else 0) | (psn & 0xffffff))


# The extension headers after the BTH of each RC/UC opcode (low 5 bits);
# UD SEND only (0x64) and SEND only with immediate (0x65) carry a DETH.
RETH, AETH, IMM, ATOMIC, ATOMIC_ACK, IETH = 'reth', 'aeth', 'imm', 'atomic', 'atomic_ack', 'ieth'
EXT = {0x00: [], 0x01: [], 0x02: [], 0x03: [IMM], 0x04: [], 0x05: [IMM],
       0x06: [RETH], 0x07: [], 0x08: [], 0x09: [IMM], 0x0a: [RETH], 0x0b: [RETH, IMM],
       0x0c: [RETH], 0x0d: [AETH], 0x0e: [], 0x0f: [AETH], 0x10: [AETH], 0x11: [AETH],
       0x12: [AETH, ATOMIC_ACK], 0x13: [ATOMIC], 0x14: [ATOMIC], 0x16: [IETH], 0x17: [IETH]}


def hostile(rng):
    """One packet of a real opcode with hostile fields, at one of the targets."""
    qpn = rng.choice(TARGETS + [rng.randrange(1 << 24)] if rng.random() < 0.05 else TARGETS)
    if rng.random() < 0.2:
        opcode = rng.choice([0x64, 0x65])
        qkey = st['qkey'] if rng.random() < 0.7 else rng.randrange(1 << 32)
        hdr = struct.pack('>II', qkey, rng.randrange(1 << 24))
        if opcode == 0x65:
            hdr += struct.pack('>I', rng.randrange(1 << 32))
    else:
        low = rng.choice(list(EXT))
        opcode = rng.choice([0x00, 0x20]) | low
        if opcode & 0x20 and low not in (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                         0x09, 0x0a, 0x0b):
            opcode = low              # UC has SEND and WRITE only; the rest as RC
        hdr = b''
        for ext in EXT[low]:
            if ext == RETH:
                rkey = rng.choice([st['rkey'], st['mw_rkey'], rng.randrange(1 << 32)])
                va = rng.choice([st['addr'], st['addr'] + rng.randrange(1 << 16),
                                 st['addr'] - rng.randrange(1, 4096), rng.randrange(1 << 64)])
                length = rng.choice([0, 1, 64, 4096, 65536, rng.randrange(1 << 32), (1 << 31), 0xffffffff])
                hdr += struct.pack('>QII', va % (1 << 64), rkey, length)
            elif ext == AETH:
                hdr += struct.pack('>I', (rng.randrange(256) << 24) | rng.randrange(1 << 24))
            elif ext == IMM or ext == IETH:
                hdr += struct.pack('>I', rng.choice([st['rkey'], st['mw_rkey'], rng.randrange(1 << 32)]))
            elif ext == ATOMIC:
                va = rng.choice([st['addr'], st['addr'] + rng.randrange(0, 64), rng.randrange(1 << 64)])
                hdr += struct.pack('>QIQQ', va, rng.choice([st['rkey'], rng.randrange(1 << 32)]),
                                   rng.randrange(1 << 64), rng.randrange(1 << 64))
            elif ext == ATOMIC_ACK:
                hdr += struct.pack('>Q', rng.randrange(1 << 64))
    psn = rng.choice([st['rq_psn'], st['rq_psn'] + rng.randrange(-4, 4), st['sq_psn'] + rng.randrange(-4, 4),
                      rng.randrange(1 << 24), (st['rq_psn'] + (1 << 23)) % (1 << 24)])
    size = rng.choice([0, 1, 3, 4, 60, 256, 1024, 1025, 4096, rng.randrange(4400)])
    pad = rng.randrange(4) if rng.random() < 0.3 else (-size) % 4
    pkey = 0xffff if rng.random() < 0.95 else rng.randrange(1 << 16)
    tver = 0 if rng.random() < 0.95 else rng.randrange(1, 16)
    t = bytearray(bth(opcode, qpn, psn, pad=pad, pkey=pkey, tver=tver, ack_req=rng.random() < 0.5,
                      se=rng.random() < 0.2) + hdr + bytes(rng.randrange(256) for _ in range(min(size, 64))) +
                  b'\xa5' * max(0, size - 64))
    if rng.random() < 0.2:
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(t))
            t[i] = rng.randrange(256)
    if rng.random() < 0.05:
        t = t[:rng.randrange(len(t))]
    if rng.random() < 0.03:
        t = bytearray(rng.randrange(256) for _ in range(rng.randrange(64)))
    return packet(bytes(t), good_icrc=rng.random() < 0.9)


def packet(transport_wo_icrc, good_icrc=True):
    ip, udp = ip_udp(len(transport_wo_icrc) + 4)
    c = icrc(ip, udp, transport_wo_icrc)
    if not good_icrc:
        c = bytes([c[0] ^ 1]) + c[1:]
    return ip + udp + transport_wo_icrc + c


# The fragmented UD SEND's payload: large enough that AF_PACKET puts the
# frame in page fragments (it keeps anything under a page linear).
FRAG_PAYLOAD = bytes(i % 251 for i in range(4030))
FRAG_LINEAR = 14 + 20 + 8 + 6


def ip_checksum(ip):
    s = sum(struct.unpack('>10H', ip))
    s = (s & 0xffff) + (s >> 16)
    s = (s & 0xffff) + (s >> 16)
    return struct.pack('>H', ~s & 0xffff)


def send_fragmented(packets):
    """Send IPv4 packets as Ethernet frames whose first FRAG_LINEAR bytes
    are linear and the rest in page fragments (PACKET_VNET_HDR's hdr_len)."""
    import os
    iface, dmac = os.environ['IFACE'], bytes.fromhex(os.environ['DMAC'].replace(':', ''))
    smac = bytes.fromhex(open('/sys/class/net/%s/address' % iface).read().strip().replace(':', ''))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.setsockopt(263, 15, 1)  # SOL_PACKET, PACKET_VNET_HDR
    s.bind((iface, 0))
    vnet = struct.pack('<BBHHHH', 0, 0, FRAG_LINEAR, 0, 0, 0)
    for p in packets:
        ip = p[:10] + ip_checksum(p[:20]) + p[12:20]
        s.send(vnet + dmac + smac + b'\x08\x00' + ip + p[20:])


def ud_send(qpn=None, qkey=None, payload=b'hostile!' * 8):
    qpn = st['ud_qpn'] if qpn is None else qpn
    qkey = st['qkey'] if qkey is None else qkey
    pad = (-len(payload)) % 4
    return bth(0x64, qpn, 0, pad=pad) + struct.pack('>II', qkey, 0x777) + payload + b'\0' * pad


def rc_send(psn, payload=b'x' * 64):
    return bth(0x04, st['rc_qpn'], psn, ack_req=True) + payload


def make(case, rng):
    if case == 'good_ud':
        return packet(ud_send())
    if case == 'truncated':
        return packet(ud_send()[:2])[:20 + 8 + 6]
    if case == 'bad_icrc':
        return packet(ud_send(), good_icrc=False)
    if case == 'unknown_qp':
        return packet(ud_send(qpn=0x7777))
    if case == 'bad_opcode':
        return packet(bth(0x1f, st['ud_qpn'], 0) + b'\0' * 16)
    if case == 'bad_tver':
        return packet(bth(0x64, st['ud_qpn'], 0, tver=1) + ud_send()[12:])
    if case == 'bad_pad':
        return packet(bth(0x64, st['ud_qpn'], 0, pad=3) + struct.pack('>II', st['qkey'], 1))
    if case == 'bad_pkey':
        return packet(bth(0x64, st['ud_qpn'], 0, pkey=0x1234) + ud_send()[12:])
    if case == 'bad_qkey':
        return packet(ud_send(qkey=0x22222222))
    if case == 'rc_to_ud':
        return packet(bth(0x04, st['ud_qpn'], 0) + b'y' * 32)
    if case == 'oversized':
        return packet(ud_send(payload=b'z' * 6000))
    if case == 'rc_ahead':
        return packet(rc_send(st['rq_psn'] + 1000))
    if case == 'rc_behind':
        return packet(rc_send(st['rq_psn'] - 5))
    if case == 'rc_stray_ack':
        aeth = struct.pack('>I', (0 << 24) | 7)
        return packet(bth(0x11, st['rc_qpn'], st['sq_psn'] + 500) + aeth)
    if case == 'good_ud_frag':
        return packet(ud_send(payload=FRAG_PAYLOAD))
    if case == 'bad_icrc_frag':
        p = bytearray(packet(ud_send(payload=FRAG_PAYLOAD)))
        p[-100] ^= 0x10
        return bytes(p)
    if case == 'fuzz_states':
        return hostile(rng)
    if case == 'fuzz':
        base = bytearray(rng.choice([ud_send(), rc_send(st['rq_psn'] + rng.randrange(-3, 3)),
                                     bth(0x0c, st['rc_qpn'], st['rq_psn']) +
                                     struct.pack('>QII', st['addr'], st['rkey'], rng.randrange(0, 1 << 20)),
                                     bth(0x13, st['rc_qpn'], st['rq_psn']) +
                                     struct.pack('>QIQQ', st['addr'] + rng.randrange(0, 64), st['rkey'], 1, 2)]))
        for _ in range(rng.randrange(1, 6)):
            i = rng.randrange(len(base))
            base[i] = rng.randrange(256)
        if rng.random() < 0.2:
            base = base[:rng.randrange(len(base))]
        return packet(bytes(base), good_icrc=rng.random() < 0.7)
    raise SystemExit('unknown case ' + case)


rng = random.Random(4791)
if case.endswith('_frag'):
    send_fragmented([make(case, rng) for _ in range(count)])
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for _ in range(count):
        s.sendto(make(case, rng), (dst, 0))
print('sent %d %s' % (count, case))
