#!/usr/bin/python3
"""A steady trickle of UDP datagrams both ways across a pair's veth, so
that netem's Gilbert-Elliott loss chain (one step per packet) moves on in
time: see set_fault in lib_pairs.sh.

    link_clock.py NETNS_A IP_A NETNS_B IP_B [PER_SECOND]

Each second, PER_SECOND (200) datagrams of 16 bytes from A to B's discard
port and as many from B to A.  Nothing listens there: the datagrams are
dropped by the receiving stack (its ICMP answers are rate-limited), after
both qdiscs have counted them.  The process lives in the initial network
namespace, with one socket in each of the pair's, so `ip netns pids`
(kill_leftovers) does not list it.  Runs until killed.
"""
import os
import socket
import sys
import time

DISCARD = 9


def socket_in(netns):
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        os.setns(fd, os.CLONE_NEWNET)
    finally:
        os.close(fd)
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def main():
    ns_a, ip_a, ns_b, ip_b = sys.argv[1:5]
    rate = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    a, b = socket_in(ns_a), socket_in(ns_b)
    os.setns(home, os.CLONE_NEWNET)
    os.close(home)
    gap = 1.0 / rate
    data = b"softrnic clock.."
    while True:
        for s, to in ((a, ip_b), (b, ip_a)):
            try:
                s.sendto(data, (to, DISCARD))
            except OSError:
                pass  # (an ICMP error queued on the socket, or no route yet)
        time.sleep(gap)


if __name__ == "__main__":
    main()
