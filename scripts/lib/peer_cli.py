# SPDX-License-Identifier: Apache-2.0
"""The command line shared by the scripts that run nvmemu beside SPDK's target
(scripts/bench_peers.py, scripts/bench_tcp.py): the binaries, repetitions, output files and
the two cores, and what follows from --peers (rpc.py, the hugepage directory)."""

import os
import subprocess


def add_peer_arguments(ap, runtime):
    """The options both scripts take; `runtime` is the default seconds per run."""
    ap.add_argument("--nvmemu", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=runtime)
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--target-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)


def resolve_peers(args):
    """Set args.rpc_py and args.huge_dir (running the peers' setup.sh: libraries, hugepages)."""
    args.rpc_py = os.path.join(args.peers, "scripts", "rpc.py")
    setup = os.path.join(args.peers, "setup.sh")
    out = subprocess.run(["bash", setup], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{setup} exited {out.returncode}: {out.stderr.strip()[-400:]}")
    args.huge_dir = out.stdout.strip().splitlines()[-1]
