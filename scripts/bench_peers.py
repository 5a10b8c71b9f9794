#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nvmemu's target and SPDK's vfio-user target side by side, with both clients.

Each repetition starts SPDK's `nvmf_tgt`, then `nvmemu serve` (the order alternates between
repetitions), each on one busy-polling core, and configures both with the same SPDK
`rpc.py` commands: a 1 GiB malloc bdev of 512 B blocks (nsid 1, written in full before any
read) and a 1 GiB null bdev (nsid 2) in one subsystem. Against each, SPDK's
`spdk_nvme_perf` and nvmemu's driver (`nvmemu bench --socket`) run every workload on the
other core. Medians over the repetitions go to a Markdown section and a JSON file.

Usage: scripts/bench_peers.py --nvmemu BIN --peers DIR [--reps 3] [--runtime 5]
           [--md OUT.md] [--json OUT.json] [--target-cpu 1] [--client-cpu 0] [--profile DIR]
DIR is the folder of SPDK's tools (bin/, scripts/rpc.py, setup.sh). Needs root (hugepages).
With --profile, each missed goal's case runs once more per target under a system-wide
`perf record` (both cores: the target and the client), whose top symbols join the Markdown.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from lib.peer_cli import add_peer_arguments, resolve_peers
from lib.serve import Server

NQN = "nqn.2016-06.io.spdk:cnode1"
MALLOC_NSID, NULL_NSID = 1, 2
NAMESPACES = (("malloc", MALLOC_NSID), ("null", NULL_NSID))
# (label, block size, queue depth, fio rw / perf -w)
WORKLOADS = (
    ("512 B randread QD16", 512, 16, "randread"),
    ("512 B randread QD1", 512, 1, "randread"),
    ("4 KiB randread QD128", 4096, 128, "randread"),
    ("4 KiB randwrite QD32", 4096, 32, "randwrite"),
)
CLIENTS = ("spdk_nvme_perf", "nvmemu bench")
TARGETS = ("SPDK nvmf_tgt", "nvmemu serve")


def log(msg):
    print(f"bench_peers: {msg}", file=sys.stderr, flush=True)


def run(cmd, timeout, **kw):
    """Run `cmd`, killed after `timeout` s (hung SPDK clients ignore SIGTERM)."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout


class Target:
    """One target process, configured through SPDK's rpc.py, stopped on exit."""

    def __init__(self, name, work):
        self.name = name
        self.dir = os.path.join(work, "vfu-" + name.split()[0].lower())
        self.sock = os.path.join(work, name.split()[0].lower() + ".sock")
        self.server = Server(self.command(), wait_for=[self.sock], timeout=60,
                             log=os.path.join(work, name.split()[0].lower() + ".log"))

    def rpc(self, *params, timeout=60):
        return run([sys.executable, args.rpc_py, "-s", self.sock, "-t", "30", *params], timeout)

    def __enter__(self):
        os.makedirs(self.dir, exist_ok=True)
        self.server.start()
        try:
            self.configure()
        except BaseException:
            self.__exit__()
            raise
        return self

    def configure(self):
        self.rpc("framework_wait_init")
        self.rpc("bdev_malloc_create", "1024", "512", "-b", "Malloc0")
        self.rpc("bdev_null_create", "Null0", "1024", "512")
        self.rpc("nvmf_create_transport", "-t", "VFIOUSER")
        self.rpc("nvmf_create_subsystem", NQN, "-a", "-s", "SPDK00")
        self.rpc("nvmf_subsystem_add_ns", NQN, "Malloc0")
        self.rpc("nvmf_subsystem_add_ns", NQN, "Null0")
        self.rpc("nvmf_subsystem_add_listener", NQN, "-t", "VFIOUSER", "-a", self.dir, "-s", "0")

    def command(self):
        if self.name.startswith("SPDK"):
            return [os.path.join(args.peers, "bin", "nvmf_tgt"), "-m", hex(1 << args.target_cpu),
                    "-r", self.sock, "--huge-dir", args.huge_dir, "--disable-cpumask-locks"]
        return [args.nvmemu, "serve", "-m", hex(1 << args.target_cpu), "--busy-poll",
                "-r", self.sock]

    def __exit__(self, *exc):
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def nvmemu_bench(target, nsid, rw, bs, qd, extra):
    cmd = [args.nvmemu, "bench", "--socket", target.dir, f"--nsid={nsid}", f"--rw={rw}",
           f"--bs={bs}", f"--iodepth={qd}", f"--cpus_allowed={args.client_cpu}",
           "--output-format=json", *extra]
    out = json.loads(run(cmd, args.runtime + 120))
    job = out["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"nvmemu bench reported error {job['error']}: {' '.join(cmd)}")
    side = job["write"] if rw.endswith("write") else job["read"]
    return side["iops"], side["lat_ns"]["mean"]


PERF_TOTAL = re.compile(r"^\s*Total\s*:\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)


def spdk_perf(target, nsid, rw, bs, qd):
    trid = f"trtype:VFIOUSER traddr:{target.dir} subnqn:{NQN} ns:{nsid}"
    cmd = [os.path.join(args.peers, "bin", "spdk_nvme_perf"), "-r", trid,
           "-c", hex(1 << args.client_cpu), "-g", "-s", "256", "-q", str(qd), "-o", str(bs),
           "-w", rw, "-t", str(args.runtime)]
    out = run(cmd, args.runtime + 60)
    if re.search(r"error|fail", out, re.I):
        raise RuntimeError(f"spdk_nvme_perf reported an error:\n{out[-800:]}")
    m = PERF_TOTAL.search(out)
    if not m:
        raise RuntimeError(f"no Total line in spdk_nvme_perf output:\n{out[-800:]}")
    return float(m.group(1)), float(m.group(3)) * 1000.0


def measure(target, client, nsid, bs, qd, rw):
    if client == "spdk_nvme_perf":
        return spdk_perf(target, nsid, rw, bs, qd)
    timing = [f"--runtime={args.runtime}", "--time_based", "--ramp_time=1"]
    return nvmemu_bench(target, nsid, rw, bs, qd, timing)


def fill(target):
    """Write the whole malloc namespace once, so reads touch real data, not zero pages."""
    nvmemu_bench(target, MALLOC_NSID, "write", "128k", 16, ["--size=100%"])


def main():
    work = tempfile.mkdtemp(prefix="nvmemu-peers-")
    results = {}  # (client, ns, workload) -> target -> [(iops, lat_ns)]
    started = time.monotonic()
    try:
        for rep in range(args.reps):
            order = TARGETS if rep % 2 == 0 else TARGETS[::-1]
            for tname in order:
                with Target(tname, work) as target:
                    fill(target)
                    for client in CLIENTS:
                        for ns, nsid in NAMESPACES:
                            for label, bs, qd, rw in WORKLOADS:
                                r = measure(target, client, nsid, bs, qd, rw)
                                key = (client, ns, label)
                                results.setdefault(key, {}).setdefault(tname, []).append(r)
                                log(f"rep {rep + 1}/{args.reps} {tname:14} {client:14} {ns:6} "
                                    f"{label:22} {r[0] / 1e6:6.3f} M IOPS {r[1]:9.0f} ns")
        log(f"done in {time.monotonic() - started:.0f} s")
        rows = summarize(results)
        profiles = profile_misses(rows, work) if args.profile else {}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write(rows, profiles)


def median(samples, i):
    return statistics.median(s[i] for s in samples)


def summarize(results):
    rows = []
    for (client, ns, label), per_target in results.items():
        spdk, ours = per_target["SPDK nvmf_tgt"], per_target["nvmemu serve"]
        rows.append({
            "client": client, "namespace": ns, "workload": label,
            "spdk_iops": median(spdk, 0), "nvmemu_iops": median(ours, 0),
            "spdk_lat_ns": median(spdk, 1), "nvmemu_lat_ns": median(ours, 1),
            "spdk_samples": spdk, "nvmemu_samples": ours,
        })
    return rows


def write(rows, profiles):
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reps": args.reps, "runtime_s": args.runtime, "rows": rows}, f, indent=1)
    lines = [
        "| client | namespace | workload | SPDK target IOPS | nvmemu IOPS | nvmemu / SPDK "
        "| SPDK mean lat | nvmemu mean lat |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['client']} | {r['namespace']} | {r['workload']} | {r['spdk_iops'] / 1e6:.3f} M "
            f"| {r['nvmemu_iops'] / 1e6:.3f} M | {r['nvmemu_iops'] / r['spdk_iops']:.2f}x "
            f"| {r['spdk_lat_ns'] / 1e3:.2f} us | {r['nvmemu_lat_ns'] / 1e3:.2f} us |")
    lines.append("")
    lines += [text for text, _, _ in goals(rows)]
    lines += ["", "Commands (`$P` = the peers' `bin/`, `$D` = the listener directory, "
              "`$N`/`$BS`/`$QD`/`$RW` = nsid, block size, depth, workload):", "", "```sh",
              f"$P/nvmf_tgt -m {hex(1 << args.target_cpu)} -r SOCK --huge-dir HUGE "
              "--disable-cpumask-locks     # or:",
              f"nvmemu serve -m {hex(1 << args.target_cpu)} --busy-poll -r SOCK",
              "rpc.py -s SOCK bdev_malloc_create 1024 512 -b Malloc0; "
              "rpc.py -s SOCK bdev_null_create Null0 1024 512",
              f"rpc.py -s SOCK nvmf_create_transport -t VFIOUSER; "
              f"rpc.py -s SOCK nvmf_create_subsystem {NQN} -a -s SPDK00",
              f"rpc.py -s SOCK nvmf_subsystem_add_ns {NQN} Malloc0   # then Null0",
              f"rpc.py -s SOCK nvmf_subsystem_add_listener {NQN} -t VFIOUSER -a $D -s 0",
              f"nvmemu bench --socket $D --nsid=1 --rw=write --bs=128k --iodepth=16 --size=100% "
              f"--cpus_allowed={args.client_cpu}   # fill",
              f"$P/spdk_nvme_perf -r 'trtype:VFIOUSER traddr:$D subnqn:{NQN} ns:$N' "
              f"-c {hex(1 << args.client_cpu)} -g -s 256 -q $QD -o $BS -w $RW -t {args.runtime}",
              f"nvmemu bench --socket $D --nsid=$N --rw=$RW --bs=$BS --iodepth=$QD "
              f"--cpus_allowed={args.client_cpu} --runtime={args.runtime} --time_based --ramp_time=1",
              "```"]
    for title, report in profiles.items():
        lines += ["", f"Profile, {title} (`perf record -a -g`, top symbols by self time):", "",
                  "```", report or "(perf record failed on this machine)", "```"]
    text = "\n".join(lines) + "\n"
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    print(text)


def goals(rows):
    """The issue's goals: (sentence, met, (client, namespace, workload)) for each."""
    def row(client, ns, label):
        return next(r for r in rows
                    if (r["client"], r["namespace"], r["workload"]) == (client, ns, label))
    out = []
    case = ("nvmemu bench", "malloc", "512 B randread QD16")
    qd16 = row(*case)
    ratio = qd16["nvmemu_iops"] / qd16["spdk_iops"]
    met = ratio >= 3.5
    out.append((f"- Goal: nvmemu's target >= 3.5x SPDK's, 512 B randread QD16, malloc, nvmemu's "
                f"driver: {ratio:.2f}x, {'met' if met else 'missed'}.", met, case))
    for client in CLIENTS:
        case = (client, "malloc", "512 B randread QD1")
        qd1 = row(*case)
        lat = qd1["nvmemu_lat_ns"] / qd1["spdk_lat_ns"]
        out.append((f"- Goal: nvmemu ahead at QD1 (malloc) with {client}: mean latency "
                    f"{qd1['nvmemu_lat_ns']:.0f} vs {qd1['spdk_lat_ns']:.0f} ns "
                    f"({lat:.2f}x), {'met' if lat < 1.0 else 'missed'}.", lat < 1.0, case))
    return out


def profile_misses(rows, work):
    """One more run of each missed goal's case per target, under a system-wide profile."""
    os.makedirs(args.profile, exist_ok=True)
    reports = {}
    missed = [case for _, met, case in goals(rows) if not met]
    for tname in TARGETS:
        if not missed:
            break
        with Target(tname, work) as target:
            fill(target)
            for client, ns, label in missed:
                _, bs, qd, rw = next(w for w in WORKLOADS if w[0] == label)
                slug = re.sub(r"[^a-z0-9]+", "-", f"{tname} {client} {label}".lower())
                data = os.path.join(args.profile, slug + ".data")
                rec = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "999", "-o", data],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    measure(target, client, dict(NAMESPACES)[ns], bs, qd, rw)
                finally:
                    rec.send_signal(signal.SIGINT)
                    try:
                        rec.wait(60)
                    except subprocess.TimeoutExpired:
                        rec.kill()
                        rec.wait()
                rep = subprocess.run(
                    ["perf", "report", "-i", data, "--no-children", "--stdio", "-g", "none",
                     "--sort", "comm,symbol", "--percent-limit", "2"],
                    capture_output=True, text=True, timeout=300)
                top = [re.sub(r"(\s+-)*\s*$", "", ln) for ln in rep.stdout.splitlines()
                       if ln.strip() and not ln.startswith("#")]
                reports[f"{tname}, {client}, {ns} {label}"] = "\n".join(top[:20])
    return reports


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_peer_arguments(ap, runtime=5)
    ap.add_argument("--profile", help="directory for perf data of the missed goals")
    args = ap.parse_args()
    resolve_peers(args)
    main()
