#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile NVMe/TCP hosts, for tests/peers/spdk.sh's tcp-hostile check: while an honest host
(SPDK's spdk_nvme_perf) runs, open connection after connection that sends a bad PDU and
check that each ends with a C2HTermReq (PDU type 03h) or, for the stalls, a close; keep a
few hundred connections idle meanwhile. Exits 1 naming the first case the target answered
otherwise.

Usage: tcp_hostile.py HOST PORT SECONDS
"""

import socket
import struct
import sys
import time

ICREQ = bytes([0x00, 0, 128, 0]) + struct.pack("<I", 128) + bytes(120)


def capsule(hlen=72, plen=72, flags=0, body=b""):
    """A command capsule common header (and zeros for the SQE) with the given fields."""
    head = bytes([0x04, flags, hlen, 0]) + struct.pack("<I", plen)
    return head + body.ljust(max(hlen, 8) - 8, b"\0")


# (name, sent after ICReq/ICResp (else as the first bytes), the bad PDU)
CASES = [
    ("capsule before ICReq", False, capsule()),
    ("wrong HLEN", True, capsule(hlen=24, plen=24)),
    ("PLEN of 4 GiB", True, capsule(plen=0xFFFF_FFFF)[:8]),
    ("C2HData from a host", True, bytes([0x07, 0, 24, 0]) + struct.pack("<I", 24) + bytes(16)),
    ("second ICReq", True, ICREQ),
    ("header digest flag not negotiated", True, capsule(flags=0x01, plen=76) + bytes(4)),
    ("data PDU larger than a capsule before Connect",
     True, bytes([0x06, 0x04, 24, 24]) + struct.pack("<I", 24 + 65536) + bytes(16) + bytes(65536)),
]


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            return data
        data += chunk
    return data


def one(host, port, name, after_icreq, payload):
    with socket.create_connection((host, port), timeout=10) as s:
        if after_icreq:
            s.sendall(ICREQ)
            resp = recv_exact(s, 128)
            if len(resp) != 128 or resp[0] != 0x01:
                sys.exit(f"tcp_hostile: {name}: no ICResp")
        s.sendall(payload)
        head = recv_exact(s, 8)
        if len(head) < 8 or head[0] != 0x03:
            sys.exit(f"tcp_hostile: {name}: no C2HTermReq (got {head.hex()})")
        plen = struct.unpack_from("<I", head, 4)[0]
        recv_exact(s, plen - 8)
        if not closed(s):
            sys.exit(f"tcp_hostile: {name}: not closed after the C2HTermReq")


def closed(s):
    """Whether the peer closed `s` (a reset counts: it closes with our bytes unread)."""
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def main():
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    idle = []
    for i in range(300):
        s = socket.create_connection((host, port), timeout=10)
        if i % 2:
            s.sendall(ICREQ)
            recv_exact(s, 128)
        idle.append(s)
    slow = socket.create_connection((host, port), timeout=30)
    slow.sendall(ICREQ[:64])
    end = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < end:
        for name, after_icreq, payload in CASES:
            one(host, port, name, after_icreq, payload)
        rounds += 1
    # The half ICReq is closed by the target's stall timeout (5 s), never answered.
    if not closed(slow):
        sys.exit("tcp_hostile: half ICReq: answered instead of closed")
    for s in idle:
        s.close()
    print(f"tcp_hostile: {rounds} rounds of {len(CASES)} bad PDUs, each ended by a C2HTermReq; "
          f"{len(idle)} idle connections held; a half ICReq closed")


if __name__ == "__main__":
    main()
