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
  fuzz         COUNT random mutations of valid packets (dropped or handled)
"""
import random
import socket
import struct
import sys
import zlib

src, dst, state_file, case, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
st = dict(line.strip().split('=') for line in open(state_file) if '=' in line)
st = {k: int(v) for k, v in st.items()}
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


def bth(opcode, dest_qp, psn, pad=0, pkey=0xffff, tver=0, ack_req=False):
    return struct.pack('>BBHII', opcode, (pad << 4) | tver, pkey, dest_qp & 0xffffff,
                       (0x80000000 if ack_req else 0) | (psn & 0xffffff))


def packet(transport_wo_icrc, good_icrc=True):
    ip, udp = ip_udp(len(transport_wo_icrc) + 4)
    c = icrc(ip, udp, transport_wo_icrc)
    if not good_icrc:
        c = bytes([c[0] ^ 1]) + c[1:]
    return ip + udp + transport_wo_icrc + c


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


s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
rng = random.Random(4791)
for _ in range(count):
    s.sendto(make(case, rng), (dst, 0))
print('sent %d %s' % (count, case))
