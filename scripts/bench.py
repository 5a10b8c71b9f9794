#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The performance matrix: goals as ratios to the ceiling probe (bench and probe runs
interleaved), backends, controllers per poller, fresh vs written namespaces, nvmemu beside
SPDK's target and the cost of target-side timing; written to BENCHMARKS.md.

scripts/bench.sh builds the binary and runs this with its environment turned into options;
run directly: scripts/bench.py --bin target/release/nvmemu --out BENCHMARKS.md ...
"""

import argparse
import datetime
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from lib import md_sections
from lib.bench_report import machine_rows, render
from lib.bench_results import Runs, fio_summary, parse_json, probe_summary
from lib.serve import Server, ServeError, niced

MALLOC = "malloc:size=1G,lba=512"
NULL = "null:size=1G,lba=512"
SECTIONS = ("goals", "backends", "ctrls", "fresh", "peers", "timing", "plot")

# kind: "goal" cases have a probe and a goal; "backend" and "ctrls" are tables.
CASES = [
    dict(id="rr512_qd16_malloc", title="512 B randread, iodepth 16, malloc", rw="randread",
         bs="512", qd=16, ns=MALLOC, probe="copy", goal=("iops", 0.85)),
    dict(id="rr512_qd16_null", title="512 B randread, iodepth 16, null", rw="randread",
         bs="512", qd=16, ns=NULL, probe="nocopy", goal=("iops", 0.65)),
    dict(id="rr512_qd1_malloc", title="512 B randread, iodepth 1, malloc (avg round trip)",
         rw="randread", bs="512", qd=1, ns=MALLOC, probe="copy", goal=("lat", 1.15)),
    dict(id="rr4k_qd128_malloc", title="4 KiB randread, iodepth 128, malloc", rw="randread",
         bs="4k", qd=128, ns=MALLOC, probe="copy", goal=("iops", 0.80)),
    dict(id="rw4k_qd32_malloc", title="4 KiB randwrite, iodepth 32, malloc", rw="randwrite",
         bs="4k", qd=32, ns=MALLOC, probe="copy", goal=("iops", 0.80)),
]
BACKENDS = [
    dict(id=f"be_{b}_{rw}", backend=b, rw=rw, bs="4k", qd=32, ns=ns, probe=None)
    for b, ns in (("malloc", MALLOC), ("null", NULL))
    for rw in ("randread", "randwrite")
]
# One job spreads iodepth over the controllers: "ctrl" keeps the total at 16 (2 per queue at
# 8 controllers), "ctrleach" gives every controller the single-controller load (16 each).
CTRLS = [
    dict(id=f"ctrl{n}", n=n, rw="randread", bs="512", qd=16, ns=MALLOC, probe=None)
    for n in (1, 2, 4, 8)
] + [
    dict(id=f"ctrleach{n}", n=n, rw="randread", bs="512", qd=16 * n, ns=MALLOC, probe=None)
    for n in (2, 4, 8)
]
# Fresh vs written: an external client against `nvmemu serve`, reading a namespace as created
# and again after one write pass over it; the default (backed) namespace and lazy=on, whose
# unwritten blocks read from the kernel's zero page.
FRESH = (("backed", MALLOC), ("lazy", MALLOC + ",lazy=on"))


def log(msg):
    print("bench.sh: " + msg, file=sys.stderr, flush=True)


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def binary_flags(binary):
    """Which optional `nvmemu bench` flags the binary has (rows needing others are skipped)."""
    text = sh([binary, "bench", "--help"])

    def has(flag):
        return re.search(r"(^|\s)" + re.escape(flag) + r"([=\s,\[]|$)", text, re.M) is not None

    flags = {f: has(f) for f in ("--ceiling", "--controllers", "--lat-breakdown", "--plot")}
    flags["nocopy"] = flags["--ceiling"] and "nocopy" in text
    return flags


def cpu_busy(interval=0.5):
    """Share of all CPUs busy (anything but idle/iowait) over `interval` seconds."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(interval)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet():
    """Before a bench/probe pair: wait (at most BENCH_QUIET_WAIT s) for the machine to be
    idle enough (busy share below BENCH_QUIET, default 0.25); returns the share seen."""
    deadline = time.time() + float(os.environ.get("BENCH_QUIET_WAIT", "60"))
    limit = float(os.environ.get("BENCH_QUIET", "0.25"))
    while True:
        b = cpu_busy()
        if b < limit or time.time() >= deadline:
            return b
        time.sleep(1.5)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[:3]
    except OSError:
        return ["?"] * 3


class Bench:
    """One run of the matrix: the commands, what they measured, the goals' verdicts."""

    def __init__(self, args):
        self.args = args
        self.flags = binary_flags(args.bin)
        self.runs = Runs()
        self.commands = {}  # (case id, kind) -> the first command line
        self.socket_dirs = []  # of `nvmemu serve` runs, shown as $D in the Commands section
        self.fresh = FRESH
        self.fresh_backing = {}  # mode -> the serve start-up line about its namespace
        self.profiles = {}  # case id -> perf report text of a missed case
        self.peers_md = self.timing_md = self.plot = None
        self.peers_why = self.timing_why = "not asked for (BENCH_ONLY)"
        log("flags: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in self.flags.items()))

    def wanted(self, section):
        return not self.args.only or section in self.args.only

    # ------------------------------------------------------------ command lines
    def base_cmd(self, c):
        a = self.args
        return [a.bin, "bench", f"--rw={c['rw']}", f"--bs={c['bs']}", f"--iodepth={c['qd']}",
                f"--runtime={a.runtime}", "--time_based", "--output-format=json", "--eta=never",
                f"--target-cpus={a.target_cpu}", f"--cpus_allowed={a.job_cpu}"]

    def bench_cmd(self, c, extra=()):
        # The probe warms up for a tenth of its run (at most 1 s); the bench gets a ramp too,
        # so neither side counts first-touch page faults of the namespace memory.
        cmd = self.base_cmd(c) + [f"--ns={c['ns']}", f"--ramp_time={self.args.ramp}"]
        if "n" in c:
            cmd.append(f"--controllers={c['n']}")
        return cmd + list(extra)

    def probe_cmd(self, c):
        flag = "--ceiling=nocopy" if c["probe"] == "nocopy" else "--ceiling"
        return self.base_cmd(c) + [f"--ns={c['ns']}", flag]

    def runnable_probe(self, c):
        if not self.flags["--ceiling"]:
            return "the binary has no --ceiling"
        if c["probe"] == "nocopy" and not self.flags["nocopy"]:
            return "the binary has no --ceiling=nocopy"
        return None

    # ------------------------------------------------------------ running
    def run(self, cid, kind, cmd, rep, busy=None):
        self.commands.setdefault((cid, kind), cmd)
        tag = f"{cid}.{kind}.{rep}"
        try:
            p = subprocess.run(niced(cmd, self.args.nice), capture_output=True, text=True,
                               timeout=self.args.runtime * 4 + 60)
            out, err, rc = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired:
            out, err, rc = "", "timed out", -1
        for ext, text in ((".out", out), (".err", err)):
            with open(os.path.join(self.args.results, tag + ext), "w") as f:
                f.write(text)
        summary = None
        if rc == 0:
            summary = probe_summary(out) if kind == "probe" else fio_summary(parse_json(out) or {})
        error = None if summary else (err.strip().splitlines() or [f"exit {rc}"])[-1][:200]
        self.runs.add(id=cid, kind=kind, rep=rep, s=summary, error=error, busy=busy)
        if summary:
            lat = summary.get("lat_ns")
            log(f"{tag}: {summary['iops']:,.0f} IOPS" + (f", {lat:,.0f} ns avg" if lat else ""))
        else:
            log(f"{tag}: not measured ({error})")

    def run_matrix(self):
        for rep in range(self.args.reps):
            for c in CASES if self.wanted("goals") else ():
                busy = wait_quiet()
                self.run(c["id"], "bench", self.bench_cmd(c), rep, busy)
                if self.runnable_probe(c) is None:
                    self.run(c["id"], "probe", self.probe_cmd(c), rep, busy)
            for c in BACKENDS if self.wanted("backends") else ():
                self.run(c["id"], "bench", self.bench_cmd(c), rep, wait_quiet())
            if self.flags["--controllers"] and self.wanted("ctrls"):
                for c in CTRLS:
                    self.run(c["id"], "bench", self.bench_cmd(c), rep, wait_quiet())
            if self.wanted("fresh"):
                self.run_fresh(rep)

    def run_fresh(self, rep):
        a = self.args
        for mode, spec in self.fresh:
            tag = f"fresh_{mode}"
            d = tempfile.mkdtemp(prefix="nvmemu-fresh-")
            self.socket_dirs.append(d)
            serve_log = os.path.join(a.results, tag + ".serve.err")
            cmd = [a.bin, "serve", "--socket-dir", d, "--ns", spec, "--busy-poll",
                   "-m", hex(1 << int(a.target_cpu)), "-r", os.path.join(d, "rpc.sock")]
            self.commands.setdefault((tag, "serve"), cmd)
            try:
                with Server(cmd, wait_for=[os.path.join(d, "cntrl")], log=serve_log, timeout=120):
                    self.fresh_pass(mode, d, serve_log, rep)
            except ServeError as e:
                log(f"{tag}: not measured: {e}")
            finally:
                shutil.rmtree(d, ignore_errors=True)

    def fresh_pass(self, mode, d, serve_log, rep):
        """Random reads of the namespace as served, one write pass, the same reads again."""
        a = self.args
        with open(serve_log) as f:
            line = next((ln.strip() for ln in f if "bdev ns0n1:" in ln), None)
        if line:
            self.fresh_backing.setdefault(mode, line.removeprefix("nvmemu: "))
        client = [a.bin, "bench", "--socket", d, "--output-format=json", "--eta=never",
                  f"--cpus_allowed={a.job_cpu}"]
        read = client + ["--rw=randread", "--bs=4k", "--iodepth=32",
                         f"--runtime={a.runtime}", "--time_based", f"--ramp_time={a.ramp}"]
        self.run(f"fresh_{mode}", "bench", read, rep, wait_quiet())
        self.run(f"fill_{mode}", "fill",
                 client + ["--rw=write", "--bs=64k", "--iodepth=16", "--size=1G"], rep)
        self.run(f"written_{mode}", "bench", read, rep, wait_quiet())

    def run_section_script(self, name, extra):
        """scripts/bench_NAME.py with the common options; its Markdown, or (None, why)."""
        a = self.args
        md = os.path.join(a.results, name + ".md")
        cmd = [sys.executable, os.path.join(a.repo, "scripts", f"bench_{name}.py"),
               "--nvmemu", a.bin, "--reps", str(a.reps), "--runtime", str(a.runtime),
               "--target-cpu", a.target_cpu, "--md", md,
               "--json", os.path.join(a.results, name + ".json"), *extra]
        log(f"section {name}: " + shlex.join(cmd))
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            return None, f"scripts/bench_{name}.py exited {done.returncode} (see its stderr above)"
        with open(md) as f:
            return f.read(), None

    def run_peers(self):
        """nvmemu's and SPDK's targets with both clients, interleaved in bench_peers.py."""
        peers = os.environ.get("BENCH_SPDK_PEERS") or os.environ.get("NVMEMU_SPDK_PEERS") or ""
        if not self.wanted("peers"):
            return
        if not os.path.isdir(peers):
            self.peers_why = (f"no SPDK peers at {peers!r} (set NVMEMU_SPDK_PEERS: "
                              "docs/spdk-peers.md)")
            return
        extra = ["--peers", peers, "--client-cpu", self.args.job_cpu]
        if self.args.profile:
            extra += ["--profile", os.path.join(self.args.results, "peers-profiles")]
        self.peers_md, self.peers_why = self.run_section_script("peers", extra)

    def run_timing(self):
        """bdev_enable_histogram on vs off, interleaved in bench_timing.py."""
        if self.wanted("timing"):
            self.timing_md, self.timing_why = self.run_section_script(
                "timing", ["--client-cpu", self.args.job_cpu])

    def run_plot(self):
        """One extra, unmeasured run for the plot (and the layer breakdown when there is one)."""
        if not (self.flags["--plot"] and self.wanted("plot")):
            return
        plot = os.path.join(self.args.results, "randread-512-qd16.svg")
        extra = ["--lat-breakdown"] if self.flags["--lat-breakdown"] else []
        self.run("plot", "bench", self.bench_cmd(CASES[0], extra + [f"--plot={plot}"]), 0)
        self.plot = plot if os.path.exists(plot) else None

    # ------------------------------------------------------------ verdicts
    def goals(self):
        out = []
        for c in CASES:
            kind, target = c["goal"]
            key = "iops" if kind == "iops" else "lat_ns"
            m = self.runs.med(c["id"], "bench", key)
            p = self.runs.med(c["id"], "probe", key)
            why = self.runnable_probe(c) or self.runs.first_error(c["id"], "probe")
            ratio = (m / p) if (m is not None and p) else None
            if ratio is None:
                verdict = "not measured"
            elif kind == "iops":
                verdict = "pass" if ratio >= target else "miss"
            else:
                verdict = "pass" if ratio <= target else "miss"
            out.append(dict(c=c, kind=kind, target=target, m=m, p=p, ratio=ratio,
                            paired=self.runs.paired_ratio(c["id"], key), verdict=verdict,
                            why=why))
            if verdict == "miss":
                self.profile_missed(c)
        return out

    def ctrl_rows(self):
        rows = []
        one = self.runs.med("ctrl1", "bench", "iops")
        for c in CTRLS:
            m = self.runs.med(c["id"], "bench", "iops")
            ratio = (m / one) if (m is not None and one) else None
            verdict = "–" if c["n"] == 1 else ("not measured" if ratio is None else
                                               ("pass" if ratio >= 0.90 else "miss"))
            rows.append((c, m, ratio, verdict))
            if verdict == "miss":
                self.profile_missed(c)
        return rows

    def profile_missed(self, c):
        """perf record of one extra run of a missed case; its top symbols by self time."""
        perf = shutil.which("perf")
        if not self.args.profile or not perf:
            return
        log(f"profiling {c['id']} (missed)")
        data = os.path.join(self.args.results, c["id"] + ".perf.data")
        cmd = [perf, "record", "-q", "-F", "999", "-g", "-o", data, "--"] + self.bench_cmd(c)
        try:
            p = subprocess.run(niced(cmd, self.args.nice), capture_output=True, text=True,
                               timeout=self.args.runtime * 4 + 60)
            if p.returncode != 0:
                self.profiles[c["id"]] = None
                return
            rep = subprocess.run([perf, "report", "-i", data, "--stdio", "--no-children",
                                  "--percent-limit", "2", "--sort", "comm,symbol", "-g", "none"],
                                 capture_output=True, text=True, timeout=120).stdout
        except (OSError, subprocess.TimeoutExpired):
            self.profiles[c["id"]] = None
            return
        lines = [re.sub(r"(\s+-)+\s*$", "", ln).rstrip() for ln in rep.splitlines()
                 if ln.strip() and not ln.startswith("#")]
        self.profiles[c["id"]] = "\n".join(lines[:14])


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the nvmemu binary")
    ap.add_argument("--out", required=True, help="the Markdown file to write")
    ap.add_argument("--results", required=True, help="directory for raw JSON and logs")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run")
    ap.add_argument("--ramp", default="1", help="--ramp_time of each bench run")
    ap.add_argument("--target-cpu", default="1")
    ap.add_argument("--job-cpu", default="0")
    ap.add_argument("--quick", action="store_true", help="a smoke test, said so in the output")
    ap.add_argument("--nice", help="run each bench and probe in a session of its own at this "
                    "autogroup nice value (e.g. -20 beside other jobs)")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="no perf record of missed cases")
    ap.add_argument("--only", type=lambda s: [x for x in s.split(",") if x], default=[],
                    help="comma-separated sections: " + ", ".join(SECTIONS))
    args = ap.parse_args(argv)
    unknown = [x for x in args.only if x not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    return args


def main():
    args = parse_args()
    os.makedirs(args.results, exist_ok=True)
    b = Bench(args)
    load_start = loadavg()
    start = datetime.datetime.now(datetime.timezone.utc)
    log(f"{args.reps} repetition(s) of {args.runtime} s runs, load average {' '.join(load_start)}")
    b.run_matrix()
    load_end = loadavg()
    b.run_peers()
    b.run_timing()
    b.run_plot()
    goals, ctrl_rows = b.goals(), b.ctrl_rows()
    machine = machine_rows(args, start, load_start, load_end)
    kept = md_sections.read_sections(args.out)
    with open(args.out, "w") as f:
        f.write(render(b, goals, ctrl_rows, machine))
        for section in kept:
            f.write("\n" + section)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
