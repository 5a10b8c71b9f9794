# SPDX-License-Identifier: Apache-2.0
"""The table and the plot of scripts/scale.py, from its summary rows (one per client,
namespace, workload and pair count, with each target's aggregate IOPS, per-pair IOPS and
efficiency, and the nvmemu / SPDK ratio)."""

import os

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                        "unknown")
    except OSError:
        return "unknown"


def m(v):
    return "–" if v is None else f"{v / 1e6:.3f} M"


def eff(v):
    return "–" if v is None else f"{v:.2f}"


def markdown(table, a, cores, pairs=()):
    targets = ["nvmemu"] + (["spdk"] if a.peers else [])
    names = {"nvmemu": "nvmemu serve", "spdk": "SPDK nvmf_tgt"}
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Machine: {cpu_model()}, {len(cores)} physical cores usable ({', '.join(map(str, cores))}); "
        f"load average {load} at the end. Pairs (client CPU / poller CPU, NUMA node): "
        + ", ".join(f"{c} / {p} node {nd}" for c, p, nd in pairs)
        + " (neighbours in one node). "
        f"{a.runtime} s runs after a 1 s ramp (nvmemu bench), medians of {a.reps}; "
        f"{a.ns_mib} MiB namespace per subsystem, 512 B blocks; random reads.",
        "",
        "Efficiency = aggregate IOPS / (pairs x the one-pair aggregate of the same target, client, "
        "namespace and workload).",
        "",
    ]
    head = "| client | namespace | workload | pairs |"
    rule = "|---|---|---|---:|"
    for t in targets:
        head += f" {names[t]} IOPS | per pair | efficiency |"
        rule += "---:|---:|---:|"
    if a.peers:
        head += " nvmemu / SPDK |"
        rule += "---:|"
    lines += [head, rule]
    for r in table:
        size = "512 B" if r["bs"] == 512 else f"{r['bs'] // 1024} KiB"
        row = f"| {r['client']} | {r['ns']} | {size} QD{r['qd']} | {r['pairs']} |"
        for t in targets:
            s = r.get(t, {})
            row += f" {m(s.get('iops'))} | {m(s.get('per_pair'))} | {eff(s.get('efficiency'))} |"
        if a.peers:
            row += f" {r['ratio']:.2f}x |" if r.get("ratio") else " – |"
        lines.append(row)
    lines += ["", "Commands, for pair i (`$Di` its listener directory, `$C`/`$P` the CPU lists of "
              "the clients and the pollers):", "", "```sh",
              "nvmemu serve -m MASK($P) --busy-poll -r SOCK     # or: nvmf_tgt -m MASK($P) -r SOCK "
              "--huge-dir HUGE --disable-cpumask-locks",
              f"rpc.py -s SOCK bdev_malloc_create {a.ns_mib} 512 -b Bi [-n NODEi]   # or: "
              f"bdev_null_create Bi {a.ns_mib} 512; -n (nvmemu, more than one node): pair i's node",
              "rpc.py -s SOCK nvmf_create_subsystem nqn.2016-06.io.spdk:cnodei -a; "
              "rpc.py -s SOCK nvmf_subsystem_add_ns ... Bi; ... add_listener ... -a $Di",
              f"nvmemu bench --socket $Di --rw=randread --bs=BS --iodepth=QD --runtime={a.runtime} "
              "--time_based --ramp_time=1 --cpus_allowed=$C[i]   # one process per pair",
              "spdk_nvme_perf -r 'trtype:VFIOUSER traddr:$D0 subnqn:...cnode0' -r ... "
              f"-c MASK($C) -g -q QD -o BS -w randread -t {a.runtime}   # one process",
              "```"]
    return "\n".join(lines) + "\n"


def svg(table, width=720, height=420):
    """Aggregate IOPS against pairs, one line per target, client, namespace and workload."""
    series = {}
    for r in table:
        for t in ("nvmemu", "spdk"):
            if t in r:
                key = f"{t} / {r['client']} / {r['ns']} / {r['bs']} B QD{r['qd']}"
                series.setdefault(key, []).append((r["pairs"], r[t]["iops"]))
    pairs = sorted({r["pairs"] for r in table}) or [1]
    top = max((v for pts in series.values() for _, v in pts), default=1.0) * 1.1
    left, right, up, down = 70, width - 260, 20, height - 40

    def x(n):
        i = pairs.index(n)
        return left + (right - left) * (i + 0.5) / len(pairs)

    def y(v):
        return down - (down - up) * v / top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<line x1="{left}" y1="{down}" x2="{right}" y2="{down}" stroke="black"/>',
           f'<line x1="{left}" y1="{up}" x2="{left}" y2="{down}" stroke="black"/>',
           f'<text x="{(left + right) / 2}" y="{height - 8}" text-anchor="middle">pairs</text>',
           f'<text x="12" y="{up + 10}">M IOPS</text>']
    for n in pairs:
        out.append(f'<text x="{x(n)}" y="{down + 15}" text-anchor="middle">{n}</text>')
    for i in range(5):
        v = top * i / 4
        out.append(f'<text x="{left - 6}" y="{y(v) + 4}" text-anchor="end">{v / 1e6:.1f}</text>')
    for k, (name, pts) in enumerate(sorted(series.items())):
        c = COLOURS[k % len(COLOURS)]
        dash = ' stroke-dasharray="4 3"' if name.startswith("spdk") else ""
        pts.sort()
        path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}"{dash}/>')
        out += [f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3" fill="{c}"/>' for n, v in pts]
        out.append(f'<text x="{right + 10}" y="{up + 14 * k + 10}" fill="{c}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
