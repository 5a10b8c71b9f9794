#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""NVMe/TCP over loopback: SPDK's nvmf_tgt and nvmemu's target side by side, both clients.

SPDK's `nvmf_tgt` and `nvmemu serve` run at once, both on one core (--target-cpu), each
configured with the same SPDK `rpc.py` commands: a 1 GiB malloc bdev of 512 B blocks,
written in full before any read, in one subsystem with a TCP listener on 127.0.0.1 (SPDK's
on --port, nvmemu's on the next port). Only the target being measured runs: the other is
stopped (SIGSTOP) and continued for its own run, so each run of one target follows the
other's run of the same workload within seconds, and the host's slow swings fall on both
(the order alternates run by run). Against each, SPDK's `spdk_nvme_perf` and nvmemu's
driver (`nvmemu bench --tcp`) run every workload on --client-cpu. Medians and the spread
(lowest to highest) over the repetitions go to BENCHMARKS.md's section `tcp` (--md) and to
a JSON file (--json); the goal's line adds the median of the per-repetition ratios.

Around each run the script reads both targets' `thread_get_stats` (busy time of every
thread) and `nvmf_get_stats` (NVMe I/O commands completed): the I/Os over the busy seconds
are the IOPS one fully busy target core would give, and the client's IOPS over that are
the target core's busy share. A run the client limits leaves the target partly idle, so its
plain IOPS say little about the target's cost; these columns do.

While a run goes on, the script also samples the target's connections (`ss -tin`: the data
segments each received) together with its completed I/Os, twice, a second into the run and
near its end: the I/Os per segment received is the client's batch of a read workload (the
commands it sent at once; a write's data fills segments up to the MSS). A client that is
itself the limit sends small batches, and every segment costs the target kernel time, so
the per busy core column depends on the client as well as on the target (docs/performance.md
9).

Usage: scripts/bench_tcp.py --nvmemu BIN --peers DIR [--reps 3] [--runtime 3] [--md FILE]
           [--json FILE] [--target-cpu 1] [--client-cpu 0] [--port 4420] [--lock FILE]
           [--note TEXT] [--nice N] [--workloads LABEL,...] [--clients NAME,...]
DIR is the folder of SPDK's tools (bin/, scripts/rpc.py, setup.sh). Needs root (hugepages).
With --lock, the set-up and each pair of runs (both targets, one workload) hold that file's
flock, so other heavy jobs on a shared machine can run between them.
--workloads and --clients run a subset (labels as in the table, e.g. "4 KiB randread QD32");
such a run prints its table (and writes --json) but leaves --md's section as it is.
"""

import argparse
import contextlib
import fcntl
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench_peers import CLIENTS, PERF_TOTAL, TARGETS, run
from lib.md_sections import splice
from lib.peer_cli import add_peer_arguments, resolve_peers
from lib.serve import Server, niced as serve_niced

NQN = "nqn.2016-06.io.spdk:cnode1"
# (label, block size, queue depth, perf -w / fio rw)
WORKLOADS = (
    ("4 KiB randread QD32", 4096, 32, "randread"),
    ("4 KiB randread QD128", 4096, 128, "randread"),
    ("512 B randread QD16", 512, 16, "randread"),
    ("128 KiB read QD8", 131072, 8, "read"),
    ("4 KiB randwrite QD32", 4096, 32, "randwrite"),
)
GOAL_CASE = ("spdk_nvme_perf", "4 KiB randread QD32")
GOAL_RATIO = 1.3


def log(msg):
    print(f"bench_tcp: {msg}", file=sys.stderr, flush=True)


class Target:
    """One target process listening on NVMe/TCP, configured through rpc.py, stopped on exit."""

    def __init__(self, name, work, port):
        self.name = name
        self.port = port
        short = name.split()[0].lower()
        self.sock = os.path.join(work, short + ".sock")
        self.server = Server(self.command(), wait_for=[self.sock], timeout=60,
                             log=os.path.join(work, short + ".log"))

    def command(self):
        mask = hex(1 << args.target_cpu)
        if self.name.startswith("SPDK"):
            return niced([os.path.join(args.peers, "bin", "nvmf_tgt"), "-m", mask, "-r",
                          self.sock, "--huge-dir", args.huge_dir, "--disable-cpumask-locks"])
        return niced([args.nvmemu, "serve", "-m", mask, "-r", self.sock])

    def rpc(self, *params):
        return run([sys.executable, args.rpc_py, "-s", self.sock, "-t", "30", *params], 60)

    def calls(self, *methods):
        """The results of these JSON-RPC methods (no parameters), called in turn."""
        from spdk.rpc.client import JSONRPCClient  # the peers' python/ (see main)
        client = JSONRPCClient(self.sock, timeout=30)
        try:
            return [client.call(m) for m in methods]
        finally:
            client.close()

    def counters(self):
        """(seconds its threads were busy, NVMe I/O commands completed) so far."""
        threads, stats = self.calls("thread_get_stats", "nvmf_get_stats")
        busy = sum(t["busy"] for t in threads["threads"]) / threads["tick_rate"]
        return busy, completed_ios(stats)

    def completed(self):
        """NVMe I/O commands completed so far."""
        return completed_ios(*self.calls("nvmf_get_stats"))

    def measure(self, workload):
        """Run `workload` (a function returning the client's IOPS); returns the IOPS, the
        I/Os per busy second of the target's threads (None if they did not count) and the
        batches (`Batches.result`)."""
        busy0, ios0 = self.counters()
        batches = Batches(self)
        batches.start()
        try:
            iops = workload()
        finally:
            batches.join()
        busy1, ios1 = self.counters()
        per_core = (ios1 - ios0) / (busy1 - busy0) if busy1 > busy0 and ios1 > ios0 else None
        return iops, per_core, batches.result

    def segments(self):
        """This target's TCP connections now (`data_segments`), as `ss` lists them."""
        cmd = ["ss", "-tinH", "state", "established", f"( sport = :{self.port} )"]
        return data_segments(run(niced(cmd), 30))

    def __enter__(self):
        self.server.start()
        try:
            for call in setup_calls(self.port):
                self.rpc(*call)
        except BaseException:
            self.server.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.signal(signal.SIGCONT)  # a stopped process would not act on SIGTERM
        self.server.stop()

    def signal(self, sig):
        if self.server.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.server.pid, sig)

    @contextlib.contextmanager
    def running(self):
        """Continue the target for a run and stop it again after. It settles a second
        first: the pass or iteration the stop interrupted is charged before the counters
        are read; and half a second after, for the client's disconnect."""
        self.signal(signal.SIGCONT)
        time.sleep(1)
        try:
            yield self
        finally:
            time.sleep(0.5)
            self.signal(signal.SIGSTOP)


def completed_ios(stats):
    """The NVMe I/O commands `nvmf_get_stats`'s poll groups completed."""
    return sum(g["completed_nvme_io"] for g in stats["poll_groups"])


def data_segments(ss_out):
    """{peer: data segments received} of the connections in `ss -tinH`'s output (each
    connection's line, then its counters' line)."""
    conns, peer = {}, None
    for line in ss_out.splitlines():
        fields = line.split()
        if not line[:1].isspace() and len(fields) >= 4:
            peer = fields[-1]
            continue
        got = re.search(r"\bdata_segs_in:(\d+)", line)
        if peer and got:
            conns[peer] = int(got.group(1))
    return conns


class Batches(threading.Thread):
    """Samples a target's connections and completed I/Os a second into a run and again half a
    second before --runtime has passed (before either client stops). `result`: the I/Os per
    data segment received between the two, or None when a sample failed or the connections
    changed between them."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self.target, self.result = target, None

    def sample(self):
        return self.target.segments(), self.target.completed()

    def run(self):
        try:
            time.sleep(1)
            (segs0, ios0) = self.sample()
            time.sleep(max(args.runtime - 1.5, 0.5))
            (segs1, ios1) = self.sample()
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            log(f"no batch sample: {e}")
            return
        if not segs0 or segs0.keys() != segs1.keys() or ios1 <= ios0:
            return
        rx = sum(segs1[k] - segs0[k] for k in segs1)
        if rx > 0:
            self.result = (ios1 - ios0) / rx


def niced(cmd):
    """`cmd` at --nice's priority (targets and clients alike), if given (`serve.niced`)."""
    return serve_niced(cmd, args.nice or None)


def setup_calls(port):
    """The rpc.py calls that make both targets serve the same namespace over TCP."""
    return [
        ["framework_wait_init"],
        ["bdev_malloc_create", "1024", "512", "-b", "Malloc0"],
        # Queues of 256 entries, so QD128 fits one queue on both targets (MQES 255).
        ["nvmf_create_transport", "-t", "TCP", "-q", "256"],
        ["nvmf_create_subsystem", NQN, "-a", "-s", "SPDK00"],
        ["nvmf_subsystem_add_ns", NQN, "Malloc0"],
        ["nvmf_subsystem_add_listener", NQN, "-t", "TCP", "-a", "127.0.0.1", "-s",
         str(port), "-f", "ipv4"],
    ]


def bench_cmd(rw, bs, qd, extra, port):
    return [args.nvmemu, "bench", "--tcp", f"127.0.0.1:{port}", "--subnqn", NQN,
            "--nsid=1", f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
            f"--cpus_allowed={args.client_cpu}", "--output-format=json", *extra]


def timing():
    return [f"--runtime={args.runtime}", "--time_based", "--ramp_time=1"]


def nvmemu_bench(rw, bs, qd, extra, port):
    cmd = bench_cmd(rw, bs, qd, extra, port)
    job = json.loads(run(niced(cmd), args.runtime + 120))["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"nvmemu bench reported error {job['error']}: {shlex.join(cmd)}")
    return job["write" if rw.endswith("write") else "read"]["iops"]


def perf_cmd(rw, bs, qd, port):
    trid = (f"trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:{port} subnqn:{NQN} ns:1")
    return [os.path.join(args.peers, "bin", "spdk_nvme_perf"), "-r", trid,
            "-c", hex(1 << args.client_cpu), "-s", "256", "-q", str(qd), "-o", str(bs),
            "-w", rw, "-t", str(args.runtime)]


def spdk_perf(rw, bs, qd, port):
    out = run(niced(perf_cmd(rw, bs, qd, port)), args.runtime + 60)
    m = PERF_TOTAL.search(out)
    if not m:
        raise RuntimeError(f"no Total line in spdk_nvme_perf output:\n{out[-800:]}")
    return float(m.group(1))


@contextlib.contextmanager
def heavy_lock():
    """The machine-wide lock of heavy jobs, if --lock names one."""
    if not args.lock:
        yield
        return
    with open(args.lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def main():
    work = tempfile.mkdtemp(prefix="nvmemu-bench-tcp-")
    results = {}  # (client, workload) -> target -> [iops]
    per_core = {}  # the same -> target -> [I/Os per busy target second]
    batches = {}  # the same -> target -> [I/Os per data segment received]
    started = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            targets = {}
            for i, tname in enumerate(TARGETS):
                with heavy_lock():
                    t = stack.enter_context(Target(tname, work, args.port + i))
                    nvmemu_bench("write", "128k", 16, ["--size=100%"], t.port)
                    t.signal(signal.SIGSTOP)
                targets[tname] = t
            runs = [(c, w) for c in args.clients for w in args.workloads]
            for rep in range(args.reps):
                for k, (client, (label, bs, qd, rw)) in enumerate(runs):
                    order = TARGETS if (rep + k) % 2 == 0 else TARGETS[::-1]
                    with heavy_lock():
                        for tname in order:
                            t = targets[tname]
                            with t.running():
                                iops, core, batch = t.measure(
                                    (lambda: spdk_perf(rw, bs, qd, t.port))
                                    if client == "spdk_nvme_perf"
                                    else (lambda: nvmemu_bench(rw, bs, qd, timing(), t.port)))
                            results.setdefault((client, label), {}).setdefault(tname, []).append(iops)
                            if core:
                                per_core.setdefault((client, label), {}).setdefault(tname, []).append(core)
                            if batch:
                                batches.setdefault((client, label), {}).setdefault(tname, []).append(batch)
                            log(f"rep {rep + 1}/{args.reps} {tname:14} {client:14} {label:22} "
                                f"{iops / 1e3:8.1f} K IOPS, "
                                + (f"{core / 1e3:.1f} K per busy core" if core else "busy unknown"))
        log(f"done in {time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [{"client": c, "workload": w, "spdk": t["SPDK nvmf_tgt"], "nvmemu": t["nvmemu serve"],
             "spdk_per_busy_core": per_core.get((c, w), {}).get("SPDK nvmf_tgt", []),
             "nvmemu_per_busy_core": per_core.get((c, w), {}).get("nvmemu serve", []),
             "spdk_batches": batches.get((c, w), {}).get("SPDK nvmf_tgt", []),
             "nvmemu_batches": batches.get((c, w), {}).get("nvmemu serve", [])}
            for (c, w), t in results.items()]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reps": args.reps, "runtime_s": args.runtime, "rows": rows}, f, indent=1)
    text = report(rows)
    if args.md and args.partial:
        log(f"a subset of the workloads or clients ran: {args.md} left as it was")
    elif args.md:
        splice(args.md, "tcp", "scripts/bench_tcp.sh", text)
    print(text)


def spread(samples):
    """Median and range, in K IOPS ("-" without samples)."""
    if not samples:
        return "-"
    return (f"{statistics.median(samples) / 1e3:.1f} K "
            f"({min(samples) / 1e3:.0f}-{max(samples) / 1e3:.0f})")


def ratio(row, suffix):
    """nvmemu's median over SPDK's, of the samples `nvmemu{suffix}` and `spdk{suffix}`."""
    a, b = row["nvmemu" + suffix], row["spdk" + suffix]
    return f"{statistics.median(a) / statistics.median(b):.2f}x" if a and b else "-"


def paired(row, suffix):
    """The median and range of the per-repetition ratios nvmemu / SPDK (each repetition's
    two runs came one after the other)."""
    a, b = row["nvmemu" + suffix], row["spdk" + suffix]
    r = [x / y for x, y in zip(a, b)] if len(a) == len(b) else []
    return (f"median {statistics.median(r):.2f}x, {min(r):.2f}-{max(r):.2f}x" if r else "-")


def busy(row, target):
    """The target core's busy share: median IOPS over median IOPS per busy core."""
    per_core = row[target + "_per_busy_core"]
    if not per_core:
        return "-"
    return f"{100 * statistics.median(row[target]) / statistics.median(per_core):.0f} %"


def batch(row, target):
    """The median client batch of a target's runs (I/Os per data segment received)."""
    b = row.get(target + "_batches") or []
    return f"{statistics.median(b):.1f}" if b else "-"


def goal_lines(rows):
    """The goals' verdicts (the per-core one only if its case ran)."""
    goal = next((r for r in rows if (r["client"], r["workload"]) == GOAL_CASE), None)
    lines = []
    if goal:
        per_core = ratio(goal, "_per_busy_core")
        met = per_core != "-" and float(per_core[:-1]) >= GOAL_RATIO
        lines.append(f"- Goal: nvmemu >= {GOAL_RATIO}x SPDK's IOPS per busy target core, "
                     f"{GOAL_CASE[1]} with {GOAL_CASE[0]}: {per_core} (paired: "
                     f"{paired(goal, '_per_busy_core')}; plain IOPS {ratio(goal, '')}), "
                     f"{'met' if met else 'missed'}.")
    behind = [f"{r['client']} {r['workload']}" for r in rows
              if statistics.median(r["nvmemu"]) < statistics.median(r["spdk"])]
    lines.append("- Goal: not behind anywhere (plain IOPS): "
                 + ("met." if not behind else "missed (" + "; ".join(behind) + ")."))
    return lines


def choose(given, known, what):
    """The entries of `known` named in the comma list `given` (all when None), in table
    order; exits with one line naming an unknown one."""
    if given is None:
        return list(known)
    names = [n.strip() for n in given.split(",") if n.strip()]
    label = (lambda k: k[0]) if what == "workload" else (lambda k: k)
    unknown = [n for n in names if n not in {label(k) for k in known}]
    if unknown or not names:
        sys.exit(f"bench_tcp: unknown {what} {unknown or given!r}; known: "
                 + ", ".join(label(k) for k in known))
    return [k for k in known if label(k) in names]


def machine():
    cpu = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    return f"{cpu}, {os.cpu_count()} CPUs, Linux {platform.release()}"


def show(cmd):
    """A command as the table shows it: tools by name, only arguments with spaces quoted."""
    cmd = [os.path.basename(cmd[0]) if cmd[0] == args.nvmemu else
           cmd[0].replace(os.path.join(args.peers, "bin"), "$P"), *cmd[1:]]
    return " ".join(shlex.quote(a) if " " in a else a for a in cmd
                    if a != "--output-format=json")


def report(rows):
    lines = [
        "## NVMe/TCP over loopback: nvmemu's target vs SPDK's nvmf_tgt",
        "",
        f"One target core each (CPU {args.target_cpu}), the client on CPU {args.client_cpu}; "
        f"a 1 GiB malloc namespace of 512 B blocks, written in full first; {args.reps} "
        f"repetitions of {args.runtime} s, median IOPS and (lowest-highest); both targets "
        "up at once, the one not measured stopped (SIGSTOP), so each run of one follows the "
        "other's run of the same workload within seconds (the order alternating). "
        f"Machine: {machine()}; {time.strftime('%Y-%m-%d', time.gmtime())}."
        + (f" Targets and clients ran at nice {args.nice}, each in its own session "
           "(autogroup), beside other jobs." if args.nice else "")
        + (f" {args.note}" if args.note else ""),
        "",
        "IOPS per busy core: the NVMe I/Os each target completed over the seconds its threads "
        "were busy (`nvmf_get_stats`, `thread_get_stats`, read before and after each run; a "
        "pass or iteration that did work is busy), i.e. its IOPS if the client kept its core "
        "fully busy; busy: the target core's share busy during the run (the IOPS over that). "
        "Client batch: the I/Os the target completed per TCP data segment it received, "
        "sampled with `ss -tin` over the middle of each run (median): of a read workload, "
        "the commands the client sent at once.",
        "",
        "| client | workload | SPDK nvmf_tgt | nvmemu | nvmemu / SPDK | busy SPDK / nvmemu "
        "| per busy core: SPDK | per busy core: nvmemu | per busy core: nvmemu / SPDK "
        "| client batch: SPDK / nvmemu |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['client']} | {r['workload']} | {spread(r['spdk'])} "
                     f"| {spread(r['nvmemu'])} | {ratio(r, '')} | {busy(r, 'spdk')} / "
                     f"{busy(r, 'nvmemu')} | {spread(r['spdk_per_busy_core'])} "
                     f"| {spread(r['nvmemu_per_busy_core'])} | {ratio(r, '_per_busy_core')} "
                     f"| {batch(r, 'spdk')} / {batch(r, 'nvmemu')} |")
    lines += ["", *goal_lines(rows), "",
        "Commands (`$P` = the peers' `bin/`; `$BS`/`$QD`/`$RW` = block size, depth, workload):",
        "",
        "```sh",
        f"$P/nvmf_tgt -m {hex(1 << args.target_cpu)} -r SOCK --huge-dir HUGE "
        "--disable-cpumask-locks     # or:",
        f"nvmemu serve -m {hex(1 << args.target_cpu)} -r SOCK",
        *(f"rpc.py -s SOCK {shlex.join(c)}" for c in setup_calls(args.port)),
        show(bench_cmd("write", "128k", 16, ["--size=100%"], args.port)) + "   # fill",
        show(perf_cmd("$RW", "$BS", "$QD", args.port)),
        show(bench_cmd("$RW", "$BS", "$QD", timing(), args.port)),
        "```",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_peer_arguments(ap, runtime=3)
    ap.add_argument("--port", type=int, default=4420)
    ap.add_argument("--lock", help="flock this file around each target's runs")
    ap.add_argument("--note", help="a sentence for the table's heading (e.g. the load)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run targets and clients at this nice value (a shared machine: -15)")
    ap.add_argument("--workloads", help="run only these (comma-separated table labels)")
    ap.add_argument("--clients", help="run only these clients (comma-separated)")
    args = ap.parse_args()
    args.partial = args.workloads is not None or args.clients is not None
    args.workloads = choose(args.workloads, WORKLOADS, "workload")
    args.clients = choose(args.clients, CLIENTS, "client")
    args.nvmemu = os.path.abspath(args.nvmemu)
    args.peers = os.path.abspath(args.peers)
    resolve_peers(args)
    # SPDK's JSON-RPC client (Target.counters), from the peers' python package.
    sys.path.insert(0, os.path.join(args.peers, "python"))
    main()
