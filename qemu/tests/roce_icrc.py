#!/usr/bin/env python3
"""Check the RoCEv2 ICRC of every UDP/4791 packet in a classic pcap file.

usage: roce_icrc.py FILE.pcap
Prints "checked N bad M" (and one line per bad packet) and exits 1 when a
packet is bad or none was checked.  Wireshark's infiniband dissector only
shows the ICRC (infiniband.invariant.crc), it does not verify it.

The ICRC (IBA 1.3 annex A17.3.3) is a CRC-32 over 8 bytes of ones (the masked
LRH), the IP header with the variant fields set to ones (IPv4: TOS, TTL,
header checksum; IPv6: traffic class, flow label, hop limit), the UDP header
with its checksum set to ones, the BTH with its byte 4 (FECN, BECN, resv6a)
set to ones, and the rest of the packet up to the ICRC; stored little-endian.
"""
import struct
import sys
import zlib

ROCE_PORT = 4791


def frames(path):
    with open(path, 'rb') as f:
        data = f.read()
    magic = struct.unpack('<I', data[:4])[0]
    if magic in (0xa1b2c3d4, 0xa1b23c4d):
        end = '<'
    elif magic in (0xd4c3b2a1, 0x4d3cb2a1):
        end = '>'
    else:
        raise SystemExit('not a classic pcap file (write it with dumpcap -F pcap)')
    linktype = struct.unpack(end + 'I', data[20:24])[0]
    if linktype != 1:
        raise SystemExit('link type %d, expected Ethernet' % linktype)
    off, n = 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack(end + 'I', data[off + 8:off + 12])[0]
        n += 1
        yield n, data[off + 16:off + 16 + incl]
        off += 16 + incl


def ip_packet(frame):
    """The IP packet in an Ethernet frame (VLAN tags skipped), or None."""
    off = 12
    etype = struct.unpack('>H', frame[off:off + 2])[0]
    while etype in (0x8100, 0x88a8):
        off += 4
        etype = struct.unpack('>H', frame[off:off + 2])[0]
    off += 2
    if etype == 0x0800:
        total = struct.unpack('>H', frame[off + 2:off + 4])[0]
        return 4, frame[off:off + total]
    if etype == 0x86dd:
        plen = struct.unpack('>H', frame[off + 4:off + 6])[0]
        return 6, frame[off:off + 40 + plen]
    return None


def check(ver, pkt):
    """(is_roce, ok, detail) for one IP packet."""
    if ver == 4:
        ihl = (pkt[0] & 0xf) * 4
        if pkt[9] != 17:
            return False, True, ''
        ip = bytearray(pkt[:ihl])
        ip[1] = 0xff                 # TOS
        ip[8] = 0xff                 # TTL
        ip[10:12] = b'\xff\xff'      # header checksum
        l4 = ihl
    else:
        if pkt[6] != 17:             # (extension headers are not expected)
            return False, True, ''
        ip = bytearray(pkt[:40])
        ip[0] |= 0x0f                # traffic class, high nibble
        ip[1:4] = b'\xff\xff\xff'    # traffic class low nibble, flow label
        ip[7] = 0xff                 # hop limit
        l4 = 40
    udp = bytearray(pkt[l4:l4 + 8])
    if struct.unpack('>H', udp[2:4])[0] != ROCE_PORT:
        return False, True, ''
    udp[6:8] = b'\xff\xff'
    rest = bytearray(pkt[l4 + 8:])
    if len(rest) < 12 + 4:
        return True, False, 'too short for BTH and ICRC (%d bytes)' % len(rest)
    rest[4] = 0xff                   # BTH: FECN, BECN, resv6a
    body, icrc = rest[:-4], struct.unpack('<I', rest[-4:])[0]
    want = zlib.crc32(b'\xff' * 8 + bytes(ip) + bytes(udp) + bytes(body))
    if want != icrc:
        return True, False, 'ICRC 0x%08x, expected 0x%08x (opcode 0x%02x)' % (icrc, want, rest[0])
    return True, True, ''


def main():
    checked = bad = 0
    for n, frame in frames(sys.argv[1]):
        p = ip_packet(frame)
        if p is None:
            continue
        roce, ok, detail = check(*p)
        if not roce:
            continue
        checked += 1
        if not ok:
            bad += 1
            if bad <= 10:
                print('frame %d: %s' % (n, detail))
    print('checked %d bad %d' % (checked, bad))
    return 0 if checked and not bad else 1


if __name__ == '__main__':
    sys.exit(main())
