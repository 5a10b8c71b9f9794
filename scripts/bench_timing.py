#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What target-side timing costs: IOPS with `bdev_enable_histogram` on and off.

One `nvmemu serve --busy-poll` (poller on --target-cpu, a backed malloc namespace) and
`nvmemu bench --socket` on --client-cpu (512 B random reads at QD16 by default). Each
repetition runs one short job with the histogram off and one with it on, switched over
RPC between the jobs, alternating which goes first; the result is the medians and their
ratio. Writes a markdown fragment (--md) and the raw runs (--json); scripts/bench.sh runs
it as its "timing" section.

    scripts/bench_timing.py --nvmemu target/release/nvmemu [--reps 3] [--runtime 3]
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

from lib.serve import Server

BDEV = "ns0n1"


def log(msg):
    print(f"[bench_timing] {msg}", file=sys.stderr, flush=True)


def rpc(bin_, sock, *args):
    subprocess.run([bin_, "rpc", "-s", sock, *args], check=True, stdout=subprocess.DEVNULL)


def iops_of(text):
    doc = json.loads(text[text.index("{"):])
    jobs = doc.get("jobs", [])
    return sum(j.get("read", {}).get("iops", 0) + j.get("write", {}).get("iops", 0) for j in jobs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nvmemu", required=True)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--runtime", type=int, default=3)
    p.add_argument("--bs", default="512")
    p.add_argument("--iodepth", type=int, default=16)
    p.add_argument("--target-cpu", default="1")
    p.add_argument("--client-cpu", default="0")
    p.add_argument("--md")
    p.add_argument("--json")
    a = p.parse_args()
    load_start = os.getloadavg()
    tmp = tempfile.TemporaryDirectory(prefix="nvmemu-timing.")
    d = tmp.name
    sock, ctrl = os.path.join(d, "rpc.sock"), os.path.join(d, "ctrl")
    os.mkdir(ctrl)
    mask = hex(1 << int(a.target_cpu))
    serve = [a.nvmemu, "serve", "-r", sock, "--socket-dir", ctrl, "-m", mask, "--busy-poll",
             "--ns", "malloc:size=256M,lba=512"]
    log(" ".join(shlex.quote(x) for x in serve))
    runs = []
    with tmp, Server(serve, wait_for=[os.path.join(ctrl, "cntrl"), sock],
                     log=os.path.join(d, "serve.log")):
        bench = [a.nvmemu, "bench", "--socket", ctrl, "--rw=randread", f"--bs={a.bs}",
                 f"--iodepth={a.iodepth}", f"--runtime={a.runtime}", "--time_based",
                 "--ramp_time=1", "--output-format=json", "--eta=never",
                 f"--cpus_allowed={a.client_cpu}"]
        log(" ".join(shlex.quote(x) for x in bench))
        for rep in range(a.reps):
            order = ["off", "on"] if rep % 2 == 0 else ["on", "off"]
            for mode in order:
                rpc(a.nvmemu, sock, "bdev_enable_histogram", "-e" if mode == "on" else "-d", BDEV)
                out = subprocess.run(bench, capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"bench_timing: nvmemu bench failed: {out.stderr.strip()[-300:]}")
                iops = iops_of(out.stdout)
                runs.append({"rep": rep, "timing": mode, "iops": iops})
                log(f"rep {rep} timing {mode}: {iops:,.0f} IOPS")
        # The histogram saw the "on" runs: a sanity line for the fragment.
        rpc(a.nvmemu, sock, "bdev_enable_histogram", "-e", BDEV)
    off = [r["iops"] for r in runs if r["timing"] == "off"]
    on = [r["iops"] for r in runs if r["timing"] == "on"]
    m_off, m_on = statistics.median(off), statistics.median(on)
    change = 100.0 * (m_on - m_off) / m_off if m_off else 0.0
    spread = 100.0 * (max(off) - min(off)) / m_off if m_off else 0.0
    md = [
        f"`nvmemu serve --busy-poll -m {mask}` with a 256 MiB malloc namespace and `nvmemu bench "
        f"--socket` on CPU {a.client_cpu}: {a.bs} B random reads at QD{a.iodepth}, "
        f"{a.reps} repetitions of {a.runtime} s, each one run with target-side timing off and one "
        "with it on (`bdev_enable_histogram`, switched between the runs), alternating which goes "
        "first. Written by `scripts/bench_timing.py`.",
        "",
        "| timing | runs (IOPS) | median IOPS |",
        "|---|---|---:|",
        f"| off | {', '.join(f'{x / 1e6:.3f} M' for x in off)} | {m_off / 1e6:.3f} M |",
        f"| on | {', '.join(f'{x / 1e6:.3f} M' for x in on)} | {m_on / 1e6:.3f} M |",
        "",
        f"On vs off: {change:+.1f} % IOPS (medians). Load average "
        f"{' '.join(f'{x:.1f}' for x in load_start)} at start, "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at end." + (
            f" The spread of the off runs ({spread:.0f} % of their median) is larger than the "
            "difference: on this run the cost is below what the machine can resolve."
            if spread > abs(change) else ""),
    ]
    text = "\n".join(md) + "\n"
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "median_off": m_off, "median_on": m_on, "change_pct": change}, f)
    print(text)


if __name__ == "__main__":
    main()
