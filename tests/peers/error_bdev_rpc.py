#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""SPDK's error bdev RPCs, run alike on SPDK's nvmf_tgt and on `nvmemu serve`, and compared.

  error_bdev_rpc.py inject SOCK OUT.json   the bdev_error_inject_error sequence: each
                                           call's result or error code, in OUT.json
  error_bdev_rpc.py iostat SOCK OUT.json   each bdev's bdev_get_iostat io_error object
                                           (null when the entry has none)
  error_bdev_rpc.py compare SPDK.json NVMEMU.json   the same answers, step by step

The target must have EE_Malloc0 (bdev_error_create Malloc0). Raw JSON-RPC over the UNIX
socket, so error codes are compared as the targets send them.
"""

import json
import socket
import sys

EE = "EE_Malloc0"


def inject(**params):
    return ["bdev_error_inject_error", {"name": EE, **params}]


# Each step: method and params. What SPDK v25.05 answers is what nvmemu must answer. Not
# here: an unknown parameter, which SPDK answers with -32603 and nvmemu, for every method,
# with -32602 naming it (crates/rpc/src/declare.rs).
STEPS = [
    inject(io_type="read", error_type="failure", num=2),
    inject(io_type="write", error_type="corrupt_data"),
    inject(io_type="write", error_type="corrupt_data", corrupt_value=0),
    inject(io_type="write", error_type="corrupt_data", corrupt_offset=7, corrupt_value=255),
    inject(io_type="trim", error_type="failure"),
    inject(io_type="read", error_type="explode"),
    ["bdev_error_inject_error", {"name": "Malloc0", "io_type": "read", "error_type": "failure"}],
    ["bdev_error_inject_error", {"name": "EE_none", "io_type": "read", "error_type": "failure"}],
    inject(io_type="flush", error_type="nomem", queue_depth=4),
    inject(io_type="all", error_type="pending", num=0),
    inject(io_type="clear", error_type="failure"),
    # Left armed: the reads that follow meet it (the caller runs them).
    inject(io_type="read", error_type="failure", num=3),
]


def call(sock_path, method, params, ident):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(sock_path)
        req = {"jsonrpc": "2.0", "method": method, "id": ident}
        if params is not None:
            req["params"] = params
        s.sendall(json.dumps(req).encode())
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            try:
                return json.loads(buf)
            except ValueError:
                continue
    raise SystemExit(f"{method}: no complete answer from {sock_path}")


def outcome(answer):
    if "error" in answer:
        return {"error": answer["error"]["code"]}
    return {"result": answer["result"]}


def run_inject(sock_path):
    return [
        {"method": m, "params": p, **outcome(call(sock_path, m, p, i))}
        for i, (m, p) in enumerate(STEPS, 1)
    ]


def run_iostat(sock_path):
    answer = call(sock_path, "bdev_get_iostat", None, 1)
    return {b["name"]: b.get("io_error") for b in answer["result"]["bdevs"]}


def compare(spdk, nvmemu):
    """The differences, one line each (none: the same)."""
    problems = []
    if isinstance(spdk, list):
        for i, (s, n) in enumerate(zip(spdk, nvmemu), 1):
            if s != n:
                problems.append(f"step {i} {s['method']} {json.dumps(s['params'])}: "
                                f"SPDK {s}, nvmemu {n}")
        if len(spdk) != len(nvmemu):
            problems.append(f"{len(spdk)} steps from SPDK, {len(nvmemu)} from nvmemu")
        return problems
    for name, errors in sorted(spdk.items()):
        if name not in nvmemu:
            problems.append(f"{name}: no bdev_get_iostat entry from nvmemu")
        elif nvmemu[name] != errors:
            problems.append(f"{name} io_error: SPDK {errors}, nvmemu {nvmemu[name]}")
    return problems


def main(argv):
    if len(argv) == 3 and argv[0] in ("inject", "iostat"):
        run = run_inject if argv[0] == "inject" else run_iostat
        with open(argv[2], "w") as f:
            json.dump(run(argv[1]), f, indent=1)
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        with open(argv[1]) as a, open(argv[2]) as b:
            problems = compare(json.load(a), json.load(b))
        for p in problems:
            print(p)
        if problems:
            return 1
        print(f"same answers as SPDK's nvmf_tgt: {argv[1]}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
