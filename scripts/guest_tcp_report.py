#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The guest-tcp section of BENCHMARKS.md from one run of scripts/guest-tcp-bench.sh: the
guest's results file (each file after a line "=== NAME": guest.meta, TARGET.meta and fio's
JSON as TARGET.RW.ROUND.json), reduced to medians over the rounds and put relative to
nvmet + null_blk.

  guest_tcp_report.py RESULTS --command CMD [--qemu VERSION] [--load BEFORE AFTER]
                      [--splice BENCHMARKS.md]

Prints the markdown; --splice also writes it into that file's `guest-tcp` section."""

import argparse
import statistics
import sys

from lib import md_sections
from lib.bench_results import fio_summary, parse_json

TARGETS = (("nvmet-null", "nvmet + null_blk"), ("nvmet-brd", "nvmet + brd"),
           ("nvmemu", "nvmemu serve --tcp"))
WORKLOADS = ("randread", "randwrite")
BASE = "nvmet-null"
SECTION = "guest-tcp"

DIFFERENCES = """\
What differs between the targets (the initiator, the fio jobs and the guest are the same):

- **Where the target runs.** nvmet-tcp is in the guest kernel: each queue's socket callbacks
  queue work on a kernel workqueue, which receives the PDUs, submits a bio to the namespace's
  block device and sends the response, all without leaving the kernel. nvmemu serve runs in
  guest userspace: one poll group thread, pinned to vCPU 0, owns every connection and reaches
  the sockets through `recv`/`send` system calls.
- **Poll vs interrupt.** nvmet sleeps until the network stack wakes it. nvmemu's poll group
  spins over its non-blocking sockets while there is work and for 2,000 empty passes after,
  then sleeps in poll(2) (at most 10 ms); while it spins it holds vCPU 0, which the
  initiator, fio and the loopback's softirqs share with it on a 2-vCPU guest.
- **Copies.** nvmet receives write data from the socket into its request's pages and the
  backend copies it into its own (null_blk's memory-backed pages, brd's pages); reads go the
  other way and are handed to the socket as pages. nvmemu copies socket data into the
  connection's buffer (a system call's copy), then the controller copies it into the malloc
  namespace, and back for reads: one more copy per byte, plus the kernel/user crossing.
- **Backends.** null_blk (memory-backed, blk-mq, completions in softirq, one submission queue
  per vCPU, 128 deep) and brd (bio-based, copies in the submitting context) are the kernel's
  in-memory block devices; nvmemu's malloc namespace is an anonymous mapping, every page
  faulted in at creation."""


def split_results(text):
    """{name: text} of the guest's results file; raises ValueError when it is cut short."""
    files, name, lines = {}, None, []
    for line in text.splitlines():
        if line.startswith("=== "):
            if name is not None:
                files[name] = "\n".join(lines)
            name, lines = line[4:].strip(), []
            if name == "END":
                return files
        elif name is not None:
            lines.append(line)
    raise ValueError("the results end without '=== END': the guest did not finish writing them")


def meta(text):
    """key=value words of a .meta file; the first '=' splits, a value may hold blanks up to the
    next key (fio=fio-3.39 stays whole)."""
    out = {}
    for line in text.splitlines():
        for word in line.split():
            if "=" in word:
                key, value = word.split("=", 1)
                out[key] = value
    return out


def collect(files):
    """{(target, rw): [summary per round]}, every target and workload required."""
    runs = {}
    for name, text in files.items():
        parts = name.split(".")
        if len(parts) != 4 or parts[3] != "json":
            continue
        target, rw, rnd = parts[0], parts[1], int(parts[2])
        summary = fio_summary(parse_json(text) or {})
        if summary is None or not summary["iops"]:
            raise ValueError(f"{name}: no fio job results in it")
        runs.setdefault((target, rw), []).append((rnd, summary))
    missing = [f"{t} {w}" for t, _ in TARGETS for w in WORKLOADS if (t, w) not in runs]
    if missing:
        raise ValueError("no runs for " + ", ".join(missing))
    return {k: [s for _, s in sorted(v, key=lambda r: r[0])] for k, v in runs.items()}


def medians(rounds):
    return dict(iops=statistics.median(r["iops"] for r in rounds),
                p50=statistics.median(r["pct"]["50.000000"] for r in rounds),
                p99=statistics.median(r["pct"]["99.000000"] for r in rounds),
                each=[r["iops"] for r in rounds])


def ratios(rounds, base):
    """Medians of the per-round ratios to base: the targets of one round ran back to back, so
    the host's load, which drifts from round to round, divides out."""
    if len(rounds) != len(base):
        raise ValueError(f"{len(rounds)} rounds against {len(base)} of the base")
    pairs = list(zip(rounds, base))
    return dict(iops=statistics.median(r["iops"] / b["iops"] for r, b in pairs),
                **{k: statistics.median(r["pct"][p] / b["pct"][p] for r, b in pairs)
                   for k, p in (("p50", "50.000000"), ("p99", "99.000000"))})


def kilo(v):
    return f"{v / 1e3:.1f} K"


def msec(ns):
    return f"{ns / 1e6:.1f} ms"


def table(runs, jobs):
    rows = ["| workload | target | IOPS (TCG) | clat p50 | clat p99 | IOPS vs nvmet+null_blk "
            "| p50 vs | p99 vs | IOPS per round |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for rw in WORKLOADS:
        base = runs[(BASE, rw)]
        for target, label in TARGETS:
            m, q = medians(runs[(target, rw)]), ratios(runs[(target, rw)], base)
            rows.append(f"| {rw} 4k QD64 x{jobs} | {label} | {kilo(m['iops'])} | {msec(m['p50'])} "
                        f"| {msec(m['p99'])} | {q['iops']:.2f} | {q['p50']:.2f} | {q['p99']:.2f} "
                        f"| {' / '.join(kilo(v) for v in m['each'])} |")
    return "\n".join(rows)


def markdown(files, runs, a):
    g = meta(files.get("guest.meta", ""))
    queues = {label: meta(files.get(t + ".meta", "")) for t, label in TARGETS}
    shapes = {label: f"{int(m.get('queue_count', 1)) - 1} I/O queues of {int(m.get('sqsize', -1)) + 1} entries"
              for label, m in queues.items()}
    if len(set(shapes.values())) == 1:
        queues = f"{next(iter(shapes.values()))} to each target"
    else:
        queues = "; ".join(f"{label}: {shape}" for label, shape in shapes.items())
    raw = f"\nfio's JSON of every run: `{a.raw}` (not committed).\n" if a.raw else ""
    load = f" (load average {a.load[0]} at the start, {a.load[1]} at the end)" if a.load else ""
    return f"""## Inside a QEMU guest: Linux nvmet-tcp (null_blk, brd) vs nvmemu serve --tcp

The seed table of the kernel study: one TCG guest runs three NVMe/TCP targets on its own
loopback, each with one {g.get('size_mb', '?')} MiB namespace in memory, and the guest kernel's
nvme-tcp initiator connected to all three (`nvme connect -t tcp -a 127.0.0.1`). fio runs the
same jobs on each namespace's block device. TCG makes every figure slow (thousands of IOPS,
milliseconds per I/O) and emulates the kernel's code and nvmemu's alike, so the columns that
matter are the ratios to nvmet + null_blk (above 1.00: more IOPS, or a longer latency); they
rank the targets on this guest, not on KVM or hardware. Each namespace was written whole and
verified (crc32c) before the runs.

```sh
{a.command}
```

- Guest: Linux {g.get('kernel', '?')}, {g.get('vcpus', '?')} vCPUs under TCG (multi-threaded),
  2 GiB; {a.qemu or 'QEMU'}; {g.get('fio', 'fio')}.
- Jobs: `--ioengine={g.get('engine', '?')} --direct=1 --bs=4k --iodepth=64
  --numjobs={g.get('jobs', '?')} --group_reporting --time_based --runtime={g.get('seconds', '?')}
  --ramp_time=1 --norandommap`, randread and randwrite over the whole namespace;
  {g.get('rounds', '?')} rounds, the targets interleaved (nvmet + null_blk, nvmet + brd, nvmemu,
  then again). IOPS and latencies are medians of the rounds; each ratio is the median of the
  rounds' ratios (a target against nvmet + null_blk of the same round). clat is fio's
  completion latency.
- nvme-tcp made {queues} (nvme connect's defaults: one per vCPU, 128 deep).
- Host: 2 CPUs shared with other builds and tests{load}; the
  figures move with that load, which is why the runs interleave.

{table(runs, g.get('jobs', '?'))}
{raw}
{DIFFERENCES}
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("--command", required=True, help="the command line, shown above the table")
    p.add_argument("--qemu", default="", help="QEMU's version line")
    p.add_argument("--load", nargs=2, metavar=("BEFORE", "AFTER"), help="host load averages")
    p.add_argument("--raw", help="where the results file is kept, named under the table")
    p.add_argument("--splice", metavar="BENCHMARKS_MD", help="write the section into this file")
    a = p.parse_args(argv)
    try:
        with open(a.results, errors="replace") as f:
            files = split_results(f.read())
        runs = collect(files)
        md = markdown(files, runs, a)
    except (OSError, ValueError) as e:
        print(f"guest_tcp_report: {a.results}: {e}", file=sys.stderr)
        return 1
    print(md)
    if a.splice:
        md_sections.splice(a.splice, SECTION, "scripts/guest-tcp-bench.sh", md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
