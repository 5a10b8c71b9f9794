#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The performance matrix (goals stated as ratios to the project's own ceiling probe, measured
# in the same run), written to BENCHMARKS.md.
#
# Usage: scripts/bench.sh [OUTPUT.md]          (default: BENCHMARKS.md at the repo root)
#
# Environment:
#   BENCH_REPS=3        repetitions; each repetition runs every case once, then its probe
#                       (bench, probe, bench, probe, ...), so slow drift hits both alike
#   BENCH_RUNTIME=5     seconds per run
#   BENCH_QUICK=1       one repetition of 2 s (a smoke test, not a measurement)
#   BENCH_RAMP=1        seconds of --ramp_time before each bench run's statistics
#   BENCH_PROFILE=1     perf record one extra run of each missed goal and controller row
#                       (0: skip)
#   BENCH_TARGET_CPU=1  CPU of the target poller (and of the probe's server thread)
#   BENCH_JOB_CPU=0     CPU of the job thread (and of the probe's client thread)
#   BENCH_BIN=path      use this nvmemu binary instead of building one
#   BENCH_RESULTS=dir   where raw JSON and logs go (default target/bench-results/<time>)
#   BENCH_SKIP_BUILD=1  do not run cargo build (BENCH_BIN or the default path must exist)
#   BENCH_COMMIT=text   what to record as the commit (when BENCH_BIN was built elsewhere)
#   BENCH_ONLY=list     run only these sections, comma separated: goals, backends, ctrls,
#                       fresh, peers, timing, plot (default: all; the others are reported
#                       "not measured")
#   BENCH_SPDK_PEERS=dir  SPDK's tools for the side-by-side section (default: $NVMEMU_SPDK_PEERS,
#                       as for tests/peers/spdk.sh; see scripts/bench_peers.py)
#   CARGO_TARGET_DIR    as for cargo (default: target)
#
# Rows whose flag the binary lacks (--ceiling, --controllers, ...) are reported as
# "not measured" instead of failing the script. Needs bash, cargo and python3 (stdlib).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/BENCHMARKS.md}
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
    REPS=${BENCH_REPS:-1}
    RUNTIME=${BENCH_RUNTIME:-2}
else
    REPS=${BENCH_REPS:-3}
    RUNTIME=${BENCH_RUNTIME:-5}
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${BENCH_BIN:-$TARGET_DIR/release/nvmemu}
RESULTS=${BENCH_RESULTS:-$TARGET_DIR/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}

if [[ ${BENCH_SKIP_BUILD:-0} != 1 && -z ${BENCH_BIN:-} ]]; then
    echo "bench.sh: building nvmemu (release)" >&2
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release -p nvmemu >&2)
fi
if [[ ! -x $BIN ]]; then
    echo "bench.sh: no nvmemu binary at $BIN" >&2
    exit 1
fi
mkdir -p "$RESULTS"

exec python3 - \
    --bin "$BIN" --out "$OUT" --results "$RESULTS" --reps "$REPS" --runtime "$RUNTIME" \
    --target-cpu "${BENCH_TARGET_CPU:-1}" --job-cpu "${BENCH_JOB_CPU:-0}" \
    --repo "$ROOT" --quick "${BENCH_QUICK:-0}" <<'PY'
"""Runs the goal matrix (bench and ceiling probe interleaved) and writes BENCHMARKS.md."""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
for a in ("bin", "out", "results", "repo"):
    ap.add_argument("--" + a, required=True)
ap.add_argument("--reps", type=int, required=True)
ap.add_argument("--runtime", type=int, required=True)
ap.add_argument("--target-cpu", required=True)
ap.add_argument("--job-cpu", required=True)
ap.add_argument("--quick", default="0")
args = ap.parse_args()

BIN = args.bin
RAMP = os.environ.get("BENCH_RAMP", "1")
MALLOC = "malloc:size=1G,lba=512"
NULL = "null:size=1G,lba=512"


def log(msg):
    print("bench.sh: " + msg, file=sys.stderr, flush=True)


ONLY = [x for x in os.environ.get("BENCH_ONLY", "").split(",") if x]


def wanted(section):
    return not ONLY or section in ONLY


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


HELP = sh([BIN, "bench", "--help"])


def has_flag(flag):
    return re.search(r"(^|\s)" + re.escape(flag) + r"([=\s,\[]|$)", HELP, re.M) is not None


FLAGS = {f: has_flag(f) for f in ("--ceiling", "--controllers", "--lat-breakdown", "--plot")}
CEILING_NOCOPY = FLAGS["--ceiling"] and "nocopy" in HELP
log("flags: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in FLAGS.items()))

# ---------------------------------------------------------------- the matrix
# kind: "goal" cases have a probe and a goal; "backend" and "ctrls" are tables.
CASES = [
    dict(id="rr512_qd16_malloc", title="512 B randread, iodepth 16, malloc", rw="randread",
         bs="512", qd=16, ns=MALLOC, probe="copy", goal=("iops", 0.80)),
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


# Fresh vs written: an external client against `nvmemu serve`, reading a namespace
# as created and again after one write pass over it; the default (backed) namespace and
# lazy=on, whose unwritten blocks read from the kernel's zero page.
FRESH = (("backed", MALLOC), ("lazy", MALLOC + ",lazy=on"))
FRESH_BACKING = {}  # mode -> the serve start-up line about its namespace


def base_cmd(c):
    return [BIN, "bench", f"--rw={c['rw']}", f"--bs={c['bs']}", f"--iodepth={c['qd']}",
            f"--runtime={args.runtime}", "--time_based", "--output-format=json", "--eta=never",
            f"--target-cpus={args.target_cpu}", f"--cpus_allowed={args.job_cpu}"]


def bench_cmd(c, extra=()):
    # The probe warms up for a tenth of its run (at most 1 s); the bench gets a ramp too, so
    # neither side counts first-touch page faults of the namespace memory.
    cmd = base_cmd(c) + [f"--ns={c['ns']}", f"--ramp_time={RAMP}"]
    if "n" in c:
        cmd.append(f"--controllers={c['n']}")
    return cmd + list(extra)


def probe_cmd(c):
    flag = "--ceiling=nocopy" if c["probe"] == "nocopy" else "--ceiling"
    return base_cmd(c) + [f"--ns={c['ns']}", flag]


def runnable_probe(c):
    if not FLAGS["--ceiling"]:
        return "the binary has no --ceiling"
    if c["probe"] == "nocopy" and not CEILING_NOCOPY:
        return "the binary has no --ceiling=nocopy"
    return None


# ---------------------------------------------------------------- parsing
def parse_json(text):
    """The report; a second JSON object after it (--lat-breakdown's) is merged in."""
    dec = json.JSONDecoder()
    i = text.find("{")
    doc = None
    while i >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            return doc
        if doc is None:
            doc = obj
        elif isinstance(doc, dict) and isinstance(obj, dict):
            doc.update(obj)
        i = text.find("{", end)
    return doc


def walk_numbers(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk_numbers(v, path + (str(k),))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk_numbers(v, path + (str(i),))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, float(obj)


def fio_summary(doc):
    """IOPS, mean latency and clat percentiles summed/merged over jobs, fio shape."""
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not jobs:
        return None
    iops = 0.0
    lat_w = 0.0
    n_w = 0.0
    pct = {}
    cpu = []
    for j in jobs:
        for d in ("read", "write"):
            s = j.get(d) or {}
            if not s.get("total_ios"):
                continue
            iops += float(s.get("iops", 0.0))
            lat = (s.get("lat_ns") or {}).get("mean")
            n = float(s.get("total_ios"))
            if lat is not None:
                lat_w += float(lat) * n
                n_w += n
            for p, v in ((s.get("clat_ns") or {}).get("percentile") or {}).items():
                pct[p] = max(pct.get(p, 0), v)
        cpu.append(float(j.get("usr_cpu", 0.0)) + float(j.get("sys_cpu", 0.0)))
    out = dict(iops=iops, lat_ns=(lat_w / n_w) if n_w else None, pct=pct,
               job_cpu_pct=max(cpu) if cpu else None)
    t = doc.get("target") or {}
    if isinstance(t, dict):
        out["busy"] = t.get("poller_busy_pct")
        out["ns_per_io"] = t.get("target_ns_per_io")
    return out


def find_key(doc, patterns):
    for pat in patterns:
        for path, v in walk_numbers(doc):
            if re.search(pat, path[-1], re.I) and v > 0:
                return v
    return None


def probe_summary(stdout):
    """The ceiling probe's ops/s and average round trip, whatever shape it prints."""
    doc = parse_json(stdout)
    if doc is not None:
        section = doc.get("ceiling", doc) if isinstance(doc, dict) else doc
        iops = find_key(section, [r"^ops_per_s", r"ops_s$", r"^iops$", r"ops.*sec"])
        rtt = find_key(section, [r"round_trip.*ns", r"rtt.*ns", r"round_trip", r"rtt"])
        fio = fio_summary(doc)
        if iops is None and fio:
            iops = fio["iops"]
        if rtt is None and fio:
            rtt = fio["lat_ns"]
        if iops is None:
            return None
        return dict(iops=iops, lat_ns=rtt)
    m = re.search(r"([\d.,]+)\s*([kM]?)\s*(?:ops/s|IOPS)", stdout)
    if not m:
        return None
    mult = {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]
    iops = float(m.group(1).replace(",", "")) * mult
    r = re.search(r"(?:round[- ]trip|rtt)[^\d]*([\d.]+)\s*(ns|us)", stdout, re.I)
    rtt = None
    if r:
        rtt = float(r.group(1)) * (1000 if r.group(2) == "us" else 1)
    return dict(iops=iops, lat_ns=rtt)


# ---------------------------------------------------------------- running
RUNS = []  # (case id, kind, cmd, summary or None, error)
COMMANDS = {}
# Temporary socket directories of `nvmemu serve` runs, shown as $D in the Commands section.
SOCKET_DIRS = []


def run(cid, kind, cmd, rep, busy=None):
    COMMANDS.setdefault((cid, kind), cmd)
    tag = f"{cid}.{kind}.{rep}"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=args.runtime * 4 + 60)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired:
        out, err, rc = "", "timed out", -1
    with open(os.path.join(args.results, tag + ".out"), "w") as f:
        f.write(out)
    with open(os.path.join(args.results, tag + ".err"), "w") as f:
        f.write(err)
    summary = None
    if rc == 0:
        summary = probe_summary(out) if kind == "probe" else fio_summary(parse_json(out) or {})
    error = None if summary else (err.strip().splitlines() or [f"exit {rc}"])[-1][:200]
    RUNS.append(dict(id=cid, kind=kind, rep=rep, s=summary, error=error, busy=busy))
    if summary:
        lat = summary.get("lat_ns")
        log(f"{tag}: {summary['iops']:,.0f} IOPS" + (f", {lat:,.0f} ns avg" if lat else ""))
    else:
        log(f"{tag}: not measured ({error})")


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
        return open("/proc/loadavg").read().split()[:3]
    except OSError:
        return ["?"] * 3


def start_serve(spec, tag):
    """`nvmemu serve` with one namespace on a socket in a new temporary directory; returns
    (process, directory) once the socket exists, or (None, directory)."""
    d = tempfile.mkdtemp(prefix="nvmemu-fresh-")
    SOCKET_DIRS.append(d)
    cmd = [BIN, "serve", "--socket-dir", d, "--ns", spec, "--busy-poll",
           "-m", hex(1 << int(args.target_cpu)), "-r", os.path.join(d, "rpc.sock")]
    COMMANDS.setdefault((tag, "serve"), cmd)
    err = open(os.path.join(args.results, tag + ".serve.err"), "w")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    err.close()
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(os.path.join(d, "cntrl")):
            return p, d
        time.sleep(0.1)
    stop_serve(p, d)
    return None, d


def stop_serve(p, d):
    if p is not None and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    shutil.rmtree(d, ignore_errors=True)


def run_fresh(rep):
    for mode, spec in FRESH:
        tag = f"fresh_{mode}"
        p, d = start_serve(spec, tag)
        if p is None:
            log(f"{tag}: nvmemu serve did not start; not measured")
            continue
        try:
            with open(os.path.join(args.results, tag + ".serve.err")) as f:
                line = next((ln.strip() for ln in f if "bdev ns0n1:" in ln), None)
            if line:
                FRESH_BACKING.setdefault(mode, line.removeprefix("nvmemu: "))
            client = [BIN, "bench", "--socket", d, "--output-format=json", "--eta=never",
                      f"--cpus_allowed={args.job_cpu}"]
            read = client + ["--rw=randread", "--bs=4k", "--iodepth=32",
                             f"--runtime={args.runtime}", "--time_based", f"--ramp_time={RAMP}"]
            run(tag, "bench", read, rep, wait_quiet())
            run(f"fill_{mode}", "fill",
                client + ["--rw=write", "--bs=64k", "--iodepth=16", "--size=1G"], rep)
            run(f"written_{mode}", "bench", read, rep, wait_quiet())
        finally:
            stop_serve(p, d)


LOAD_START = loadavg()
START = datetime.datetime.now(datetime.timezone.utc)
log(f"{args.reps} repetition(s) of {args.runtime} s runs, load average {' '.join(LOAD_START)}")
for rep in range(args.reps):
    for c in CASES if wanted("goals") else ():
        busy = wait_quiet()
        run(c["id"], "bench", bench_cmd(c), rep, busy)
        why = runnable_probe(c)
        if why is None:
            run(c["id"], "probe", probe_cmd(c), rep, busy)
    for c in BACKENDS if wanted("backends") else ():
        run(c["id"], "bench", bench_cmd(c), rep, wait_quiet())
    if FLAGS["--controllers"] and wanted("ctrls"):
        for c in CTRLS:
            run(c["id"], "bench", bench_cmd(c), rep, wait_quiet())
    if wanted("fresh"):
        run_fresh(rep)
LOAD_END = loadavg()

# The side-by-side section: nvmemu's and SPDK's targets with both clients, interleaved
# inside scripts/bench_peers.py (each repetition restarts both targets).
PEERS_MD, PEERS_WHY = None, "not asked for (BENCH_ONLY)"
PEERS_DIR = os.environ.get("BENCH_SPDK_PEERS") or os.environ.get("NVMEMU_SPDK_PEERS") or ""
if wanted("peers"):
    if not os.path.isdir(PEERS_DIR):
        PEERS_WHY = f"no SPDK peers at {PEERS_DIR!r} (set NVMEMU_SPDK_PEERS: docs/spdk-peers.md)"
    else:
        peers_cmd = [sys.executable, os.path.join(args.repo, "scripts", "bench_peers.py"),
                     "--nvmemu", BIN, "--peers", PEERS_DIR, "--reps", str(args.reps),
                     "--runtime", str(args.runtime),
                     "--target-cpu", args.target_cpu, "--client-cpu", args.job_cpu,
                     "--md", os.path.join(args.results, "peers.md"),
                     "--json", os.path.join(args.results, "peers.json")]
        if os.environ.get("BENCH_PROFILE", "1") != "0":
            peers_cmd += ["--profile", os.path.join(args.results, "peers-profiles")]
        log("side by side with SPDK's target: " + " ".join(shlex.quote(x) for x in peers_cmd))
        done = subprocess.run(peers_cmd, stdout=subprocess.DEVNULL)
        if done.returncode == 0:
            with open(os.path.join(args.results, "peers.md")) as f:
                PEERS_MD = f.read()
        else:
            PEERS_WHY = f"scripts/bench_peers.py exited {done.returncode} (see its stderr above)"

# The cost of target-side timing: bdev_enable_histogram on vs off, interleaved inside
# scripts/bench_timing.py against one nvmemu serve.
TIMING_MD, TIMING_WHY = None, "not asked for (BENCH_ONLY)"
if wanted("timing"):
    timing_cmd = [sys.executable, os.path.join(args.repo, "scripts", "bench_timing.py"),
                  "--nvmemu", BIN, "--reps", str(args.reps), "--runtime", str(args.runtime),
                  "--target-cpu", args.target_cpu, "--client-cpu", args.job_cpu,
                  "--md", os.path.join(args.results, "timing.md"),
                  "--json", os.path.join(args.results, "timing.json")]
    log("target-side timing on vs off: " + " ".join(shlex.quote(x) for x in timing_cmd))
    done = subprocess.run(timing_cmd, stdout=subprocess.DEVNULL)
    if done.returncode == 0:
        with open(os.path.join(args.results, "timing.md")) as f:
            TIMING_MD = f.read()
    else:
        TIMING_WHY = f"scripts/bench_timing.py exited {done.returncode} (see its stderr above)"

# One extra, unmeasured run for the plot (and the layer breakdown when there is one).
PLOT = None
if FLAGS["--plot"] and wanted("plot"):
    PLOT = os.path.join(args.results, "randread-512-qd16.svg")
    extra = ["--lat-breakdown"] if FLAGS["--lat-breakdown"] else []
    run("plot", "bench", bench_cmd(CASES[0], extra + [f"--plot={PLOT}"]), 0)
    if not os.path.exists(PLOT):
        PLOT = None


# ---------------------------------------------------------------- statistics
def values(cid, kind, key):
    return [r["s"][key] for r in RUNS
            if r["id"] == cid and r["kind"] == kind and r["s"] and r["s"].get(key) is not None]


def med(cid, kind, key):
    v = values(cid, kind, key)
    return statistics.median(v) if v else None


def first_error(cid, kind):
    for r in RUNS:
        if r["id"] == cid and r["kind"] == kind and r["error"]:
            return r["error"]
    return None


def fmt_iops(v):
    if v is None:
        return "not measured"
    return f"{v / 1e6:.3f} M" if v >= 1e6 else f"{v / 1e3:.1f} k"


def fmt_ns(v):
    if v is None:
        return "not measured"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1000:.2f} µs" if v >= 1000 else f"{v:.0f} ns"


def fmt_opt(v, spec):
    return "–" if v is None else format(v, spec)


def spread(cid, kind, key):
    v = values(cid, kind, key)
    if len(v) < 2:
        return "–"
    m = statistics.median(v)
    return f"±{(max(v) - min(v)) / 2 / m * 100:.1f}%" if m else "–"


def bound(cid):
    """What limited a run, from its own counters."""
    busy = med(cid, "bench", "busy")
    job = med(cid, "bench", "job_cpu_pct")
    nsio = med(cid, "bench", "ns_per_io")
    parts = []
    if busy is not None:
        parts.append(f"poller busy {busy:.0f}%")
    if nsio:
        parts.append(f"{nsio:.0f} target ns/IO")
    if job is not None:
        parts.append(f"job thread CPU {job:.0f}%")
    if busy is not None and busy >= 90:
        who = "the target poller"
    elif job is not None and job >= 90:
        who = "the job (driver) thread"
    else:
        who = "round trip or CPU taken by other processes (neither thread saturated)"
    return f"{who} ({', '.join(parts)})" if parts else "unknown (no target counters)"


# ---------------------------------------------------------------- profiles of misses
PROFILES = {}


def profile(c):
    perf = shutil_which("perf")
    if not perf:
        return None
    data = os.path.join(args.results, c["id"] + ".perf.data")
    cmd = [perf, "record", "-q", "-F", "999", "-g", "-o", data, "--"] + bench_cmd(c)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.runtime * 4 + 60)
    if p.returncode != 0:
        return None
    rep = subprocess.run([perf, "report", "-i", data, "--stdio", "--no-children",
                          "--percent-limit", "2", "--sort", "comm,symbol", "-g", "none"],
                         capture_output=True, text=True, timeout=120).stdout
    lines = [re.sub(r"(\s+-)+\s*$", "", ln).rstrip() for ln in rep.splitlines()
             if ln.strip() and not ln.startswith("#")]
    return "\n".join(lines[:14])


def shutil_which(name):
    for d in os.environ.get("PATH", "").split(":"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def profile_missed(c):
    if os.environ.get("BENCH_PROFILE", "1") != "1":
        return
    log(f"profiling {c['id']} (missed)")
    try:
        PROFILES[c["id"]] = profile(c)
    except (OSError, subprocess.TimeoutExpired):
        PROFILES[c["id"]] = None


# ---------------------------------------------------------------- verdicts
GOALS = []
for c in CASES:
    kind, target = c["goal"]
    key = "iops" if kind == "iops" else "lat_ns"
    m = med(c["id"], "bench", key)
    p = med(c["id"], "probe", key)
    why = runnable_probe(c) or first_error(c["id"], "probe")
    ratio = (m / p) if (m is not None and p) else None
    pairs = []
    for r in RUNS:
        if r["id"] == c["id"] and r["kind"] == "bench" and r["s"]:
            q = [x for x in RUNS if x["id"] == c["id"] and x["kind"] == "probe"
                 and x["rep"] == r["rep"] and x["s"] and x["s"].get(key)]
            if q and r["s"].get(key) is not None:
                pairs.append(r["s"][key] / q[0]["s"][key])
    paired = statistics.median(pairs) if pairs else None
    if ratio is None:
        verdict = "not measured"
    elif kind == "iops":
        verdict = "pass" if ratio >= target else "miss"
    else:
        verdict = "pass" if ratio <= target else "miss"
    GOALS.append(dict(c=c, kind=kind, target=target, m=m, p=p, ratio=ratio, paired=paired,
                      verdict=verdict, why=why))
    if verdict == "miss":
        profile_missed(c)

CTRL_ROWS = []
one = med("ctrl1", "bench", "iops")
for c in CTRLS:
    m = med(c["id"], "bench", "iops")
    ratio = (m / one) if (m is not None and one) else None
    verdict = "–" if c["n"] == 1 else ("not measured" if ratio is None else
                                       ("pass" if ratio >= 0.90 else "miss"))
    CTRL_ROWS.append((c, m, ratio, verdict))
    if verdict == "miss":
        profile_missed(c)


# ---------------------------------------------------------------- machine
def cpu_model():
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def git(*a):
    return sh(["git", "-C", args.repo] + list(a)).strip()


MACHINE = [
    ("CPU", cpu_model()),
    ("CPUs online", str(os.cpu_count())),
    ("Memory", next((f"{int(ln.split()[1]) / 2**20:.1f} GiB" for ln in open("/proc/meminfo")
                     if ln.startswith("MemTotal")), "?")),
    ("Kernel", os.uname().release),
    ("rustc", sh(["rustc", "--version"]).strip() or "?"),
    ("Date (UTC)", START.strftime("%Y-%m-%d %H:%M")),
    ("Commit", os.environ.get("BENCH_COMMIT") or (
        (git("rev-parse", "--short=12", "HEAD") or "?")
        + (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""))),
    ("Placement", f"target poller / probe server on CPU {args.target_cpu}, "
                  f"job / probe client on CPU {args.job_cpu}"),
    ("Load average", f"{' '.join(LOAD_START)} at start, {' '.join(LOAD_END)} at end"),
    ("Repetitions", f"{args.reps} x {args.runtime} s per case, bench and probe interleaved"
                    + (" (BENCH_QUICK: a smoke test, not a measurement)" if args.quick == "1" else "")),
]

# ---------------------------------------------------------------- BENCHMARKS.md
L = []
w = L.append
w("<!-- SPDX-License-Identifier: Apache-2.0 -->")
w("# Benchmarks")
w("")
w("Written by `scripts/bench.sh` (do not edit by hand; re-run the script). Every figure is the")
w("median of interleaved repetitions: each case's bench run is followed by its ceiling probe")
w("run (`nvmemu bench --ceiling`: the two-thread ring round trip with nothing behind it), so")
w("the ratio compares two measurements taken under the same conditions. What the numbers mean")
w("and what bounds them: [docs/performance.md](docs/performance.md).")
w("")
w("Malloc namespaces are backed by memory at creation: every page is faulted in")
w("before a run, in transparent huge pages where the kernel gives them (4 KiB base pages")
w("otherwise), so no read comes from the kernel's zero page." + (
    " The fresh-vs-written section quotes what `nvmemu serve` reported for its namespace."
    if FRESH_BACKING else ""))
w("")
w("## Machine")
w("")
w("| | |")
w("|---|---|")
for k, v in MACHINE:
    w(f"| {k} | {v} |")
w("")
w("This is a shared 2-CPU virtual machine: other work running at the same time shows up as a")
w("higher load average above and a wider spread below. Treat ratios as the result; absolute")
w("IOPS belong to this machine only.")
w("")
w("## Goals, as ratios to the ceiling probe")
w("")
w("Ratio = median of the bench runs / median of the probe runs; paired = median of the")
w("per-repetition ratios (each bench run against the probe run right after it).")
w("")
w("| Case | Measured | Probe | Ratio | Paired | Goal | Result | Spread (bench) |")
w("|---|---|---|---|---|---|---|---|")
for g in GOALS:
    c = g["c"]
    if g["kind"] == "iops":
        m, p = fmt_iops(g["m"]), fmt_iops(g["p"])
        goal = f"≥ {g['target']:.2f}" + (" of the no-copy probe" if c["probe"] == "nocopy" else "")
        sp = spread(c["id"], "bench", "iops")
    else:
        m, p = fmt_ns(g["m"]), fmt_ns(g["p"])
        goal = f"≤ {g['target']:.2f}x"
        sp = spread(c["id"], "bench", "lat_ns")
    ratio = "–" if g["ratio"] is None else f"{g['ratio']:.2f}"
    res = g["verdict"] if g["verdict"] != "not measured" else f"not measured ({g['why'] or 'no data'})"
    paired = "–" if g["paired"] is None else f"{g['paired']:.2f}"
    w(f"| {c['title']} | {m} | {p} | {ratio} | {paired} | {goal} | {res} | {sp} |")
n_ok = sum(1 for _, _, _, v in CTRL_ROWS if v == "pass")
for c, m, ratio, verdict in CTRL_ROWS[1:]:
    rr = "–" if ratio is None else f"{ratio:.2f}"
    res = verdict if verdict != "not measured" else (
        "not measured (the binary has no --controllers)" if not FLAGS["--controllers"]
        else f"not measured ({first_error(c['id'], 'bench') or 'no data'})")
    load = ("QD16 in total" if c["qd"] == 16 else f"QD16 each, {c['qd']} in total")
    w(f"| one poller, {c['n']} controllers (512 B randread {load}) | {fmt_iops(m)} | "
      f"{fmt_iops(one)} (1 controller) | {rr} | – | ≥ 0.90 of 1 controller | {res} | "
      f"{spread(c['id'], 'bench', 'iops')} |")
w("")
w("What bounds each case (from the run's own counters: poller busy share, target ns per I/O,")
w("job thread CPU). The job polls without pausing, so its CPU share is near 100 % whether or")
w("not it waits for the poller; a poller near 100 % busy is the one figure that says a side")
w("is saturated, and where it is, the profile shows whether the job is too:")
w("")
for g in GOALS:
    w(f"- {g['c']['title']}: {g['verdict']}; bounded by {bound(g['c']['id'])}.")
one_ns = med("ctrl1", "bench", "ns_per_io")
for c, _, _, verdict in CTRL_ROWS:
    if verdict != "miss":
        continue
    load = "QD16 in total" if c["qd"] == 16 else f"QD16 each, {c['qd']} in total"
    ref = f"; one controller: {one_ns:.0f} target ns/IO" if one_ns else ""
    w(f"- one poller, {c['n']} controllers ({load}): miss; bounded by {bound(c['id'])}{ref}.")
w("")
if PROFILES:
    w("### Profiles of the missed goals")
    w("")
    w("`perf record -F 999 -g` of one extra run of each missed case (goals and controller rows),")
    w("top symbols by self time (raw data in the results directory).")
    w("")
    for cid, text in PROFILES.items():
        w(f"`{cid}`:")
        w("")
        w("```")
        w(text or "(perf record failed on this machine)")
        w("```")
        w("")

w("## `cargo run --release -- bench` figures")
w("")
w("| Case | IOPS | avg latency | p50 clat | p99 clat | p99.9 clat | poller busy | target ns/IO |")
w("|---|---|---|---|---|---|---|---|")


def pct_of(cid, p):
    v = [r["s"]["pct"].get(p) for r in RUNS if r["id"] == cid and r["kind"] == "bench"
         and r["s"] and r["s"].get("pct")]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


for cid, title in (("rr512_qd16_malloc", "512 B randread, iodepth 16"),
                   ("rr4k_qd128_malloc", "4 KiB randread, iodepth 128")):
    w(f"| {title} | {fmt_iops(med(cid, 'bench', 'iops'))} | {fmt_ns(med(cid, 'bench', 'lat_ns'))} | "
      f"{fmt_ns(pct_of(cid, '50.000000'))} | {fmt_ns(pct_of(cid, '99.000000'))} | "
      f"{fmt_ns(pct_of(cid, '99.900000'))} | {fmt_opt(med(cid, 'bench', 'busy'), '.0f')}% | "
      f"{fmt_opt(med(cid, 'bench', 'ns_per_io'), '.0f')} |")
w("")
w("## Backend comparison (4 KiB, iodepth 32)")
w("")
w("Like the in-memory nvmet backend study against null_blk and brd: the same front end and")
w("transport, with the data copy (malloc) or without it (null). A file-backed row appears")
w("once that backend exists.")
w("")
w("| Backend | randread IOPS | randread avg lat | randwrite IOPS | randwrite avg lat | poller busy (r/w) | target ns/IO (r/w) |")
w("|---|---|---|---|---|---|---|")
for b in ("malloc", "null"):
    r, wr = f"be_{b}_randread", f"be_{b}_randwrite"
    w(f"| {b} | {fmt_iops(med(r, 'bench', 'iops'))} | {fmt_ns(med(r, 'bench', 'lat_ns'))} | "
      f"{fmt_iops(med(wr, 'bench', 'iops'))} | {fmt_ns(med(wr, 'bench', 'lat_ns'))} | "
      f"{fmt_opt(med(r, 'bench', 'busy'), '.0f')}% / {fmt_opt(med(wr, 'bench', 'busy'), '.0f')}% | "
      f"{fmt_opt(med(r, 'bench', 'ns_per_io'), '.0f')} / {fmt_opt(med(wr, 'bench', 'ns_per_io'), '.0f')} |")
w("")
w("## Fresh vs written namespace, external client")
w("")
w(f"`nvmemu serve` with one 1 GiB malloc namespace (poller busy-polling on CPU {args.target_cpu})")
w(f"and `nvmemu bench --socket` (job on CPU {args.job_cpu}): 4 KiB random reads at iodepth 32")
w("of the namespace as created, then again after one sequential write pass over all of it.")
w("A backed namespace reads at the same rate either way; with `lazy=on` the fresh run reads")
w("the kernel's zero page, which flatters it.")
w("")
w("| Namespace | Fresh | Written | Written / fresh | Spread (fresh, written) | Backing (serve start-up line) |")
w("|---|---|---|---|---|---|")
for mode, spec in FRESH:
    f, wr = med(f"fresh_{mode}", "bench", "iops"), med(f"written_{mode}", "bench", "iops")
    ratio = "–" if not (f and wr) else f"{wr / f:.2f}"
    sp = f"{spread(f'fresh_{mode}', 'bench', 'iops')}, {spread(f'written_{mode}', 'bench', 'iops')}"
    back = FRESH_BACKING.get(mode)
    w(f"| `{spec}` | {fmt_iops(f)} | {fmt_iops(wr)} | {ratio} | {sp} | "
      f"{'`' + back + '`' if back else 'not measured'} |")
w("")
w("## Side by side with SPDK's vfio-user target")
w("")
w(f"SPDK v25.05's `nvmf_tgt` and `nvmemu serve --busy-poll`, each on one core (CPU {args.target_cpu}),")
w("configured by the same SPDK `rpc.py` commands: a 1 GiB malloc bdev of 512 B blocks written in")
w("full before any read (nsid 1) and a 1 GiB null bdev (nsid 2). Clients on CPU "
  f"{args.job_cpu}: SPDK's `spdk_nvme_perf` and nvmemu's driver (`nvmemu bench --socket`).")
w(f"Medians of {args.reps} repetitions of {args.runtime} s; each repetition restarts both targets,")
w("alternating which goes first. Written by `scripts/bench_peers.py` (run by this script).")
w("")
w(PEERS_MD if PEERS_MD else f"Not measured: {PEERS_WHY}.")
w("")
w("## Target-side timing: IOPS with it on and off")
w("")
w("What `bdev_enable_histogram` costs (docs/latency.md): the same job with the target's")
w("per-command timing off and on.")
w("")
w(TIMING_MD if TIMING_MD else f"Not measured: {TIMING_WHY}.")
w("")
w("## Every run")
w("")
w("Machine busy = share of both CPUs used by anything in the half second before the pair")
w("started (the script waits up to BENCH_QUIET_WAIT s for it to drop below BENCH_QUIET).")
w("")
w("| Case | Kind | IOPS per repetition | avg latency per repetition | machine busy before |")
w("|---|---|---|---|---|")
seen = []
for r in RUNS:
    if (r["id"], r["kind"]) not in seen and r["id"] != "plot":
        seen.append((r["id"], r["kind"]))
for cid, kind in seen:
    rs = [r for r in RUNS if r["id"] == cid and r["kind"] == kind]
    iops = ", ".join(fmt_iops(r["s"]["iops"]) if r["s"] else "failed" for r in rs)
    lat = ", ".join(fmt_ns(r["s"].get("lat_ns")) if r["s"] else "failed" for r in rs)
    busy = ", ".join("?" if r.get("busy") is None else f"{r['busy'] * 100:.0f}%" for r in rs)
    w(f"| {cid} | {kind} | {iops} | {lat} | {busy} |")
w("")
w("## Commands")
w("")
w("`nvmemu` below is the release binary (`cargo build --release -p nvmemu`); `$D` is the")
w("temporary socket directory of the `nvmemu serve` the case runs against.")
w("")
w("```sh")
for (cid, kind), cmd in COMMANDS.items():
    if cid == "plot":
        continue
    shown = " ".join(shlex.quote(x) for x in ["nvmemu"] + cmd[1:])
    for d in SOCKET_DIRS:
        shown = shown.replace(d, "$D")
    w(f"# {cid} ({kind})")
    w(shown)
w("```")
w("")
# Paths inside the repository are shown relative to it; anything else is named by the variable
# that chose it, so the file never points outside the repository.
def shown_results(path):
    rel = os.path.relpath(path, args.repo)
    return "$BENCH_RESULTS" + path[len(args.results):] if rel.startswith("..") else rel
if PLOT:
    w(f"The latency plot of one extra 512 B randread QD16 run was written to "
      f"`{shown_results(PLOT)}` (`nvmemu bench --plot FILE`).")
    w("")
w(f"Raw JSON and stderr of every run: `{shown_results(args.results)}` (not committed; "
  "`BENCH_RESULTS` chooses the directory).")
w("")
with open(args.out, "w") as f:
    f.write("\n".join(L))
log(f"wrote {args.out}")
PY
