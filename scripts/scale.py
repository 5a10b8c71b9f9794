#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How nvmemu's target scales with poller/client pairs, beside SPDK's nvmf_tgt.

For N = 1, 2, 4, ... pairs (up to half the physical cores this process may use), each target
runs N busy pollers with N subsystems (one namespace and one vfio-user listener each), and N
clients read them: one `nvmemu bench --socket` process per subsystem, or one
`spdk_nvme_perf` process with one core per subsystem. Pair i has its client and its poller on
two physical cores of their own, next to each other in the same NUMA node (so the same
package); on a machine with more than one node, nvmemu binds pair i's namespace to that node
and its client process runs on that node's CPUs. Namespaces are
malloc or null; workloads 512 B randread QD16 and 4 KiB randread QD32 by default. nvmemu's
`serve` and SPDK's `nvmf_tgt` are measured the same way in the same run, alternating which
goes first.

Output: a Markdown table (aggregate IOPS, per-pair IOPS, scaling efficiency against N times
the one-pair figure, nvmemu / SPDK) on stdout and --md, every measurement in --json, and an
SVG of aggregate IOPS against N with --plot. Exits 1 if any run fails.

    scripts/scale.py --nvmemu target/release/nvmemu [--peers DIR] [--pairs 1,2] [--runtime 4]

Without --peers (SPDK's tools: bin/, scripts/rpc.py, setup.sh; needs root for hugepages) only
nvmemu's target and driver are measured. scripts/scale.sh builds the binary and finds the
peers, as scripts/bench.sh does.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from lib.scale_report import markdown, svg
from lib.serve import Server

NQN = "nqn.2016-06.io.spdk:cnode{}"
TARGETS = ("nvmemu", "spdk")


def log(msg):
    print(f"scale: {msg}", file=sys.stderr, flush=True)


def node_of(cpu, sysfs="/sys/devices/system"):
    """The NUMA node of a CPU (its `nodeN` link in sysfs); 0 without NUMA support."""
    try:
        links = os.listdir(f"{sysfs}/cpu/cpu{cpu}")
    except OSError:
        return 0
    nodes = [int(n[4:]) for n in links if n.startswith("node") and n[4:].isdigit()]
    return min(nodes, default=0)


def physical_cores(sysfs="/sys/devices/system", cpus=None):
    """One logical CPU per physical core this process may run on, ordered by NUMA node, then
    package, then core, so that neighbours share a node; and {cpu: node}."""
    cores = {}
    for cpu in sorted(os.sched_getaffinity(0) if cpus is None else cpus):
        topo = f"{sysfs}/cpu/cpu{cpu}/topology"
        try:
            with open(f"{topo}/physical_package_id") as f:
                pkg = int(f.read())
            with open(f"{topo}/core_id") as f:
                core = int(f.read())
        except (OSError, ValueError):
            pkg, core = 0, cpu
        cores.setdefault((node_of(cpu, sysfs), pkg, core), cpu)
    keys = sorted(cores)
    return [cores[k] for k in keys], {cores[k]: k[0] for k in keys}


def pairs_of(cores, nodes):
    """Every (client, poller, node) pair the cores give: two neighbouring cores of one node
    (a node's odd core out stays unused, so no pair spans two nodes)."""
    by_node = {}
    for c in cores:
        by_node.setdefault(nodes.get(c, 0), []).append(c)
    return [(cs[2 * i], cs[2 * i + 1], node) for node, cs in sorted(by_node.items())
            for i in range(len(cs) // 2)]


def placement(pairs, n):
    """(client CPUs, poller CPUs, nodes) of the first n pairs."""
    chosen = pairs[:n]
    return [c for c, _, _ in chosen], [p for _, p, _ in chosen], [nd for _, _, nd in chosen]


def mask(cpus):
    return hex(sum(1 << c for c in cpus))


def run(cmd, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[-400:]}")
    return p.stdout


class Target:
    """One target with n subsystems on n pollers, configured over JSON-RPC."""

    def __init__(self, kind, a, work, pollers, ns, nodes):
        self.kind, self.a, self.ns, self.n = kind, a, ns, len(pollers)
        # nvmemu binds each namespace to its pair's node (SPDK's rpc.py has no numa-id: its
        # malloc bdevs come from the hugepages of nvmf_tgt's own node).
        self.nodes = nodes if kind == "nvmemu" and a.many_nodes else [None] * self.n
        self.sock = os.path.join(work, kind + ".sock")
        self.dirs = [os.path.join(work, f"{kind}-vfu{i}") for i in range(self.n)]
        if kind == "spdk":
            cmd = [os.path.join(a.peers, "bin", "nvmf_tgt"), "-m", mask(pollers), "-r", self.sock,
                   "--huge-dir", a.huge_dir, "--disable-cpumask-locks"]
        else:
            cmd = [a.nvmemu, "serve", "-m", mask(pollers), "--busy-poll", "-r", self.sock]
        self.server = Server(cmd, wait_for=[self.sock], timeout=60,
                             log=os.path.join(work, kind + ".log"))

    def rpc(self, *params):
        if self.kind == "spdk":
            cmd = [sys.executable, os.path.join(self.a.peers, "scripts", "rpc.py")]
        else:
            cmd = [self.a.nvmemu, "rpc"]
        return run(cmd + ["-s", self.sock, "-t", "30", *params], 60)

    def __enter__(self):
        self.server.start()
        try:
            self.rpc("framework_wait_init")
            self.rpc("nvmf_create_transport", "-t", "VFIOUSER")
            for i, d in enumerate(self.dirs):
                bdev = f"B{i}"
                if self.ns == "null":
                    self.rpc("bdev_null_create", bdev, str(self.a.ns_mib), "512")
                else:
                    node = [] if self.nodes[i] is None else ["-n", str(self.nodes[i])]
                    self.rpc("bdev_malloc_create", str(self.a.ns_mib), "512", "-b", bdev, *node)
                self.rpc("nvmf_create_subsystem", NQN.format(i), "-a", "-s", f"SCALE{i:02}")
                self.rpc("nvmf_subsystem_add_ns", NQN.format(i), bdev)
                os.makedirs(d, exist_ok=True)
                self.rpc("nvmf_subsystem_add_listener", NQN.format(i), "-t", "VFIOUSER",
                         "-a", d, "-s", "0")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.server.stop()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


def node_cpus(a, cpu):
    """The CPUs a client process may use: those of its CPU's node when there are several
    (its buffers then come from that node), else every CPU."""
    if not a.many_nodes:
        return None
    node = a.nodes.get(cpu, 0)
    return {c for c in os.sched_getaffinity(0) if node_of(c) == node}


def own_clients(a, target, clients, bs, qd):
    """One `nvmemu bench --socket` per subsystem, all at once; the IOPS of each."""
    procs = []
    for d, cpu in zip(target.dirs, clients):
        cmd = [a.nvmemu, "bench", "--socket", d, "--rw=randread", f"--bs={bs}",
               f"--iodepth={qd}", f"--runtime={a.runtime}", "--time_based", "--ramp_time=1",
               f"--cpus_allowed={cpu}", "--output-format=json", "--eta=never"]
        allowed = node_cpus(a, cpu)
        procs.append(subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=None if allowed is None else lambda: os.sched_setaffinity(0, allowed)))
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=a.runtime + 120)
        if p.returncode != 0:
            raise RuntimeError(f"nvmemu bench exited {p.returncode}: {stderr.strip()[-400:]}")
        job = json.loads(stdout[stdout.index("{"):])["jobs"][0]
        if job.get("error"):
            raise RuntimeError(f"nvmemu bench reported error {job['error']}")
        out.append(float(job["read"]["iops"]))
    return out


PERF_DEVICE = re.compile(r"^VFIOUSER \((.+?)\).* from core\s+\d+\s*:\s*([\d.]+)", re.M)


def spdk_clients(a, target, clients, bs, qd):
    """One spdk_nvme_perf with one core per subsystem; the IOPS of each subsystem."""
    cmd = [os.path.join(a.peers, "bin", "spdk_nvme_perf")]
    for i, d in enumerate(target.dirs):
        cmd += ["-r", f"trtype:VFIOUSER traddr:{d} subnqn:{NQN.format(i)}"]
    cmd += ["-c", mask(clients), "-g", "-s", str(256 * len(clients)), "-q", str(qd),
            "-o", str(bs), "-w", "randread", "-t", str(a.runtime)]
    out = run(cmd, a.runtime + 60)
    if re.search(r"error|fail", out, re.I):
        raise RuntimeError(f"spdk_nvme_perf reported an error:\n{out[-800:]}")
    per_dir = {d: float(v) for d, v in PERF_DEVICE.findall(out)}
    if len(per_dir) != len(target.dirs):
        raise RuntimeError(f"spdk_nvme_perf: {len(per_dir)} device lines for "
                           f"{len(target.dirs)} subsystems:\n{out[-800:]}")
    return [per_dir.get(d, per_dir.get(d + "/cntrl", 0.0)) for d in target.dirs]


def measure(a, pairs):
    """Every case; a list of dicts (target, client, ns, workload, pairs, rep, per_pair)."""
    rows = []
    clients_of = {"nvmemu bench": own_clients, "spdk_nvme_perf": spdk_clients}
    targets = TARGETS if a.peers else TARGETS[:1]
    clients = list(clients_of) if a.peers else ["nvmemu bench"]
    with tempfile.TemporaryDirectory(prefix="nvmemu-scale-") as work:
        for rep in range(a.reps):
            for ns in a.ns:
                for n in a.pairs:
                    cpus, pollers, nodes = placement(pairs, n)
                    order = targets if (rep + n) % 2 == 0 else targets[::-1]
                    for kind in order:
                        with Target(kind, a, work, pollers, ns, nodes) as t:
                            for client in clients:
                                for bs, qd in a.workloads:
                                    per_pair = clients_of[client](a, t, cpus, bs, qd)
                                    rows.append(dict(target=kind, client=client, ns=ns,
                                                     bs=bs, qd=qd, pairs=n, rep=rep,
                                                     per_pair=per_pair, clients=cpus,
                                                     pollers=pollers, nodes=nodes))
                                    log(f"rep {rep + 1} {kind:6} {client:14} {ns:6} {bs:>4} B "
                                        f"QD{qd:<3} {n} pair(s): {sum(per_pair) / 1e6:.3f} M "
                                        "IOPS")
    return rows


def summarize(rows):
    """Medians over repetitions, with efficiency and the ratio to SPDK per case."""
    groups = {}
    for r in rows:
        key = (r["client"], r["ns"], r["bs"], r["qd"], r["pairs"])
        groups.setdefault(key, {}).setdefault(r["target"], []).append(sum(r["per_pair"]))
    agg = {k: {t: statistics.median(v) for t, v in per.items()} for k, per in groups.items()}
    out = []
    for (client, ns, bs, qd, n), per in sorted(agg.items()):
        row = dict(client=client, ns=ns, bs=bs, qd=qd, pairs=n)
        for t, iops in per.items():
            one = agg.get((client, ns, bs, qd, 1), {}).get(t)
            row[t] = dict(iops=iops, per_pair=iops / n,
                          efficiency=iops / (n * one) if one else None)
        if "nvmemu" in per and per.get("spdk"):
            row["ratio"] = per["nvmemu"] / per["spdk"]
        out.append(row)
    return out


def workload(text):
    bs, _, qd = text.partition(":")
    return int(bs), int(qd)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvmemu", required=True)
    ap.add_argument("--peers", help="SPDK's tools (bin/, scripts/rpc.py, setup.sh)")
    ap.add_argument("--pairs", help="comma-separated pair counts (default: 1, 2, 4, ... up to "
                    "half the physical cores)")
    ap.add_argument("--ns", default="malloc,null", help="namespace kinds: malloc, null")
    ap.add_argument("--workloads", default="512:16,4096:32", help="BS:QD,... of random reads")
    ap.add_argument("--ns-mib", type=int, default=256, help="namespace size per subsystem")
    ap.add_argument("--runtime", type=int, default=4, help="seconds per run")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--plot", help="an SVG of aggregate IOPS against pairs")
    a = ap.parse_args(argv)
    a.ns = a.ns.split(",")
    if set(a.ns) - {"malloc", "null"}:
        ap.error(f"--ns takes malloc and null, not {a.ns}")
    a.workloads = [workload(w) for w in a.workloads.split(",")]
    return a


def main():
    a = parse_args()
    cores, a.nodes = physical_cores()
    a.many_nodes = len(set(a.nodes.values())) > 1
    pairs = pairs_of(cores, a.nodes)
    most = len(pairs)
    if most < 1:
        sys.exit(f"scale: needs two physical cores of one NUMA node (a client and a poller), "
                 f"has {cores}")
    if a.pairs:
        a.pairs = [int(x) for x in a.pairs.split(",")]
    else:
        a.pairs = sorted({1 << i for i in range(most.bit_length()) if 1 << i <= most} | {most})
    if max(a.pairs) > most:
        sys.exit(f"scale: {max(a.pairs)} pairs need {2 * max(a.pairs)} physical cores, two "
                 f"per NUMA node; this process may use {len(cores)} ({cores}), {most} pairs")
    if a.peers:
        # Hugepages for nvmf_tgt's malloc bdevs and spdk_nvme_perf's -s, at the most pairs.
        mib = max(2048, max(a.pairs) * (a.ns_mib + 256) + 1024)
        setup = ["bash", os.path.join(a.peers, "setup.sh"), str(mib)]
        a.huge_dir = run(setup, 600).strip().splitlines()[-1]
    log(f"physical cores {cores}; pairs {a.pairs}; "
        f"{'with' if a.peers else 'without'} SPDK's tools")
    for i, (c, p, node) in enumerate(pairs[:max(a.pairs)]):
        log(f"pair {i}: client CPU {c}, poller CPU {p}, NUMA node {node}")
    rows = measure(a, pairs)
    table = summarize(rows)
    text = markdown(table, a, cores, pairs[:max(a.pairs)])
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(cores=cores, pairs=pairs[:max(a.pairs)], runtime_s=a.runtime,
                           reps=a.reps, runs=rows, summary=table), f, indent=1)
    if a.plot:
        with open(a.plot, "w") as f:
            f.write(svg(table))
    print(text)


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        sys.exit(f"scale: FAILED: {e}")
