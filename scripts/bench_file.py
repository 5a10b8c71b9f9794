#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The file-backed namespace against the file itself: 4 KiB random reads and writes at QD32
through `nvmemu bench --ns file:path=F` (our driver, vfio-user, the controller's io_uring
to F) and through fio's io_uring engine on the same F with O_DIRECT (the kernel's cost
alone). Writes section `file` of BENCHMARKS.md (scripts/lib/md_sections.py).

Usage: scripts/bench_file.py [--bin target/release/nvmemu] [--file PATH] [--size 1G]
       [--runtime 10] [--runs 3] [--no-write]
Run it under the machine-wide lock on a shared machine: flock /tmp/nvmemu-heavy.lock ...
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import md_sections  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_fio():
    if shutil.which("fio"):
        return
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "fio"], check=True)


def common(rw, runtime):
    return [f"--rw={rw}", "--bs=4k", "--iodepth=32", f"--runtime={runtime}", "--time_based",
            "--output-format=json", "--name=file"]


def nvmemu_run(binary, path, rw, runtime):
    cmd = [binary, "bench", "--eta=never", f"--ns=file:path={path}"] + common(rw, runtime)
    return cmd, subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def fio_run(path, rw, runtime):
    cmd = ["fio", f"--filename={path}", "--ioengine=io_uring", "--direct=1"] + common(rw, runtime)
    return cmd, subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def figures(out, rw):
    """IOPS, p50 and p99 completion latency (us) of the one job in fio-shaped JSON."""
    side = json.loads(out)["jobs"][0]["read" if "read" in rw else "write"]
    pct = side["clat_ns"]["percentile"]
    return side["iops"], pct["50.000000"] / 1000, pct["99.000000"] / 1000


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/nvmemu"))
    ap.add_argument("--file", default="/var/tmp/nvmemu-bench-file.img")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--runtime", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    a = ap.parse_args()
    ensure_fio()
    created = not os.path.exists(a.file)
    if created:
        subprocess.run(["truncate", "-s", a.size, a.file], check=True)
        # Written once, so reads find data rather than holes.
        subprocess.run(["fio", "--name=fill", f"--filename={a.file}", "--rw=write", "--bs=1M",
                        "--direct=1", "--ioengine=io_uring", "--iodepth=8"],
                       check=True, capture_output=True)
    rows, cmds = [], []
    load_start = loadavg()
    try:
        for rw in ("randread", "randwrite"):
            got = {"nvmemu": [], "fio": []}
            for _ in range(a.runs):
                # Interleaved, so both sides see the same machine.
                cmd_n, out = nvmemu_run(a.bin, a.file, rw, a.runtime)
                got["nvmemu"].append(figures(out, rw))
                cmd_f, out = fio_run(a.file, rw, a.runtime)
                got["fio"].append(figures(out, rw))
            cmds += [" ".join(cmd_n), " ".join(cmd_f)]
            for who, label in (("nvmemu", "nvmemu bench --ns file (vfio-user, io_uring)"),
                               ("fio", "fio --ioengine=io_uring --direct=1")):
                iops, p50, p99 = (statistics.median(x) for x in zip(*got[who]))
                rows.append(f"| {rw} | {label} | {iops / 1000:.1f}k | {p50:.0f} | {p99:.0f} |")
    finally:
        if created:
            os.unlink(a.file)
    body = "\n".join([
        "## File-backed namespace against the same file under fio's io_uring engine",
        "",
        f"4 KiB, QD32, one job, {a.runtime} s per run, median of {a.runs} interleaved runs, a "
        f"{a.size} file on {fs_of(os.path.dirname(a.file))}; {platform.node()}, "
        f"{os.cpu_count()} CPUs, load average {load_start} at start and {loadavg()} at the end "
        "(other work on the machine shows there and widens the spread). The figures say how "
        "the two paths compare on this file system, not what a device can do.",
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
    print(body)
    if not a.no_write:
        md_sections.splice(os.path.join(ROOT, "BENCHMARKS.md"), "file", "scripts/bench_file.py",
                           body)


def fs_of(path):
    out = subprocess.run(["df", "-T", path], capture_output=True, text=True).stdout.splitlines()
    return out[-1].split()[1] if len(out) > 1 else "an unknown file system"


if __name__ == "__main__":
    main()
