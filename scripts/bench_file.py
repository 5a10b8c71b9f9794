#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The file-backed namespace against the file itself: 4 KiB random reads and writes at QD32
through `nvmemu bench --ns file:path=F` (our driver, vfio-user, the controller's io_uring
to F) and through fio's io_uring engine on the same F with O_DIRECT (the kernel's cost
alone). Writes section `file` of BENCHMARKS.md (scripts/lib/md_sections.py).

Usage: scripts/bench_file.py [--bin target/release/nvmemu] [--file PATH] [--size 1G]
       [--runtime 10] [--runs 3] [--no-write] [--check]
Run it under the machine-wide lock on a shared machine: flock /tmp/nvmemu-heavy.lock ...
With --check (CI, .ci/run) it is a smoke test of the script: one 1 s run per side and
workload on a small scratch file, each side must have done I/O without errors, and the table
is printed, never written.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import md_sections  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ("randread", "randwrite")
LABELS = {"nvmemu": "nvmemu bench --ns file (vfio-user, io_uring)",
          "fio": "fio --ioengine=io_uring --direct=1"}


def ensure_fio():
    if shutil.which("fio"):
        return
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "fio"], check=True)


def common(rw, runtime):
    return [f"--rw={rw}", "--bs=4k", "--iodepth=32", f"--runtime={runtime}", "--time_based",
            "--output-format=json", "--name=file"]


def nvmemu_cmd(binary, path, rw, runtime):
    return [binary, "bench", "--eta=never", f"--ns=file:path={path}"] + common(rw, runtime)


def fio_cmd(path, rw, runtime):
    return ["fio", f"--filename={path}", "--ioengine=io_uring", "--direct=1"] + common(rw, runtime)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def side(out, rw):
    """The one job of fio-shaped JSON, and its read or write figures."""
    job = json.loads(out)["jobs"][0]
    return job, job["read" if "read" in rw else "write"]


def figures(out, rw):
    """IOPS, p50 and p99 completion latency (us) of the one job in fio-shaped JSON."""
    _, s = side(out, rw)
    pct = s["clat_ns"]["percentile"]
    return s["iops"], pct["50.000000"] / 1000, pct["99.000000"] / 1000


def no_io(out, rw, who):
    """Why a run does not count (an error, or no I/O of the workload's direction), or None."""
    job, s = side(out, rw)
    if job.get("error", 0) != 0:
        return f"{who} {rw}: the job ended with error {job['error']}"
    if s.get("total_ios", 0) <= 0 or s.get("io_bytes", 0) <= 0:
        return f"{who} {rw}: no I/O completed"
    return None


def row(rw, who, runs):
    """The table row of `who`'s runs (figures() tuples): their medians."""
    iops, p50, p99 = (statistics.median(x) for x in zip(*runs))
    return f"| {rw} | {LABELS[who]} | {iops / 1000:.1f}k | {p50:.0f} | {p99:.0f} |"


def markdown(setup, rows, cmds):
    """BENCHMARKS.md's `file` section: `setup` says what was run where, then the table."""
    return "\n".join([
        "## File-backed namespace against the same file under fio's io_uring engine",
        "",
        setup,
        "",
        "| workload | path | IOPS | p50 clat (us) | p99 clat (us) |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Commands (`scripts/bench_file.py`):",
        "",
        "```",
        *cmds,
        "```",
    ])


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def fs_of(path):
    out = subprocess.run(["df", "-T", path], capture_output=True, text=True).stdout.splitlines()
    return out[-1].split()[1] if len(out) > 1 else "an unknown file system"


def fill(path, size):
    """Creates the file, written once so reads find data rather than holes."""
    subprocess.run(["truncate", "-s", size, path], check=True)
    subprocess.run(["fio", "--name=fill", f"--filename={path}", "--rw=write", "--bs=1M",
                    "--direct=1", "--ioengine=io_uring", "--iodepth=8"],
                   check=True, capture_output=True)


def measure(a, path):
    """Both sides, interleaved so they see the same machine: the table rows, the commands,
    and what made a run not count (--check only)."""
    rows, cmds, problems = [], [], []
    for rw in WORKLOADS:
        got = {"nvmemu": [], "fio": []}
        for _ in range(a.runs):
            for who, cmd in (("nvmemu", nvmemu_cmd(a.bin, path, rw, a.runtime)),
                             ("fio", fio_cmd(path, rw, a.runtime))):
                out = run(cmd)
                if a.check:
                    problems.append(no_io(out, rw, who))
                got[who].append(figures(out, rw))
                if len(got[who]) == 1:
                    cmds.append(" ".join(cmd))
        rows += [row(rw, who, got[who]) for who in ("nvmemu", "fio")]
    return rows, cmds, [p for p in problems if p]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/nvmemu"))
    ap.add_argument("--file", help="default: /var/tmp/nvmemu-bench-file.img (--check: a "
                    "scratch file in /var/tmp, removed after)")
    ap.add_argument("--size", help="default: 1G (--check: 16M)")
    ap.add_argument("--runtime", type=int, help="seconds per run; default: 10 (--check: 1)")
    ap.add_argument("--runs", type=int, help="default: 3 (--check: 1)")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--check", action="store_true",
                    help="smoke test: tiny runs, fail unless both sides did I/O; never writes")
    a = ap.parse_args(argv)
    small = a.check
    a.size = a.size or ("16M" if small else "1G")
    a.runtime = a.runtime or (1 if small else 10)
    a.runs = a.runs or (1 if small else 3)
    a.no_write = a.no_write or a.check
    return a


def main():
    a = parse_args()
    ensure_fio()
    scratch = tempfile.mkdtemp(prefix="nvmemu-bench-file.", dir="/var/tmp") if a.check else None
    path = a.file or (os.path.join(scratch, "check.img") if scratch
                      else "/var/tmp/nvmemu-bench-file.img")
    created = not os.path.exists(path)
    load_start = loadavg()
    try:
        if created:
            fill(path, a.size)
        rows, cmds, problems = measure(a, path)
        setup = (f"4 KiB, QD32, one job, {a.runtime} s per run, median of {a.runs} interleaved "
                 f"runs, a {a.size} file on {fs_of(os.path.dirname(path))}; {platform.node()}, "
                 f"{os.cpu_count()} CPUs, load average {load_start} at start and {loadavg()} "
                 "at the end (other work on the machine shows there and widens the spread). "
                 "The figures say how the two paths compare on this file system, not what a "
                 "device can do.")
    finally:
        if created:
            os.unlink(path)
        if scratch:
            os.rmdir(scratch)
    body = markdown(setup, rows, cmds)
    print(body)
    if problems:
        sys.exit("bench_file: FAILED: " + "; ".join(problems))
    if not a.no_write:
        md_sections.splice(os.path.join(ROOT, "BENCHMARKS.md"), "file", "scripts/bench_file.py",
                           body)


if __name__ == "__main__":
    main()
