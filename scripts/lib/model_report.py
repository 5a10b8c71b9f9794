# SPDX-License-Identifier: Apache-2.0
"""The latency model benchmark's Markdown table and SVG plot (scripts/bench_model.py)."""

import math

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def k(v):
    return f"{v / 1000:.1f} K" if v < 1e6 else f"{v / 1e6:.2f} M"


def us(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def verdict(p):
    if p["ok"] is None:
        return "host-bound"
    return "yes" if p["ok"] else "**no**"


def describe(model):
    r = model["read"]
    units = model["units"] or "unlimited"
    name = model.get("preset") or "hand-set"
    return (f"`{name}`: reads {r['avg_us']} us mean, {r['p99_us']} us p99 ({model['tail']}), "
            f"{units} units")


def markdown(report, a):
    tol, abs_us = report["tolerance"], report["tolerance_abs_us"]
    load = ", ".join(f"{v:.1f}" for v in report["load"])
    lines = [
        "## Latency model: configured vs measured",
        "",
        f"Run {report['started']} by `scripts/bench_model.sh` on the shared 2-CPU development "
        f"machine (load average at the end {load}): other builds and tests ran at the same "
        "time, so latencies carry their scheduling stalls. 4 KiB random reads, `nvmemu bench "
        f"--socket` on CPU {a.client_cpu} against `nvmemu serve --busy-poll` on CPU "
        f"{a.poller_cpu}, {report['runtime_s']} s per point after 1 s of ramp.",
        "",
    ]
    if report["note"]:
        lines += ["Conditions: " + report["note"].rstrip(".") + ".", ""]
    lines += [
        "Predicted: the model's own queue (its log-normal service times on its units, a "
        "closed loop at that depth) simulated by `scripts/lib/model_predict.py`: at QD1 the "
        "configured distribution's p50 and p99, at saturation units / mean service time. "
        f"Within tolerance: IOPS within {tol['iops']:.0%}, p50 within {tol['p50']:.0%} and "
        f"p99 within {tol['p99']:.0%} of the prediction, latencies also up to {abs_us:.0f} us "
        "above it (the host's own round trip). `host-bound`: the model allows more than 80 % "
        "of what this machine reaches without a model at that depth, so the host, not the "
        "model, sets the figure; not judged.",
        "",
        "Without a model (the host's ceiling): " + ", ".join(
            f"QD{h['qd']} {k(h['iops'])}" for h in report["host"]) + " IOPS.",
        "",
    ]
    for name, res in report["models"].items():
        m = res["model"]
        cap = f"; ceiling {k(res['ceiling'])} IOPS" if res["ceiling"] else ""
        lines += [f"### {name}", "", describe(m) + cap, "",
                  "| QD | IOPS predicted | IOPS measured | p50 us predicted | p50 us measured "
                  "| p99 us predicted | p99 us measured | within tolerance |",
                  "|---:|---:|---:|---:|---:|---:|---:|---|"]
        for p in res["points"]:
            q = p["pred"]
            lines.append(f"| {p['qd']} | {k(q['iops'])} | {k(p['iops'])} | {us(q['p50_us'])} | "
                         f"{us(p['p50_us'])} | {us(q['p99_us'])} | {us(p['p99_us'])} | "
                         f"{verdict(p)} |")
        lines.append("")
    lines += ["![p50 latency against IOPS as the queue deepens, predicted (dashed) and "
              "measured (solid)](docs/model-curve.svg)", "",
              "Reproduce: `scripts/bench_model.sh` (`BENCH_MODEL_ARGS='--models hand "
              "--runtime 2'` for a subset)."]
    return "\n".join(lines) + "\n"


def svg(report, width=760, height=440):
    """p50 latency against IOPS on log-log axes: one colour per model, measured solid with
    dots, predicted dashed."""
    series = []
    for name, res in report["models"].items():
        pts = res["points"]
        series.append((name, [(p["iops"], p["p50_us"]) for p in pts],
                       [(p["pred"]["iops"], p["pred"]["p50_us"]) for p in pts]))
    xs = [x for _, m, q in series for x, _ in m + q if x > 0]
    ys = [y for _, m, q in series for _, y in m + q if y > 0]
    lo_x, hi_x = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    lo_y, hi_y = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    left, right, up, down = 70, width - 170, 20, height - 45

    def x(v):
        return left + (right - left) * (math.log10(max(v, 1e-9)) - lo_x) / max(hi_x - lo_x, 1)

    def y(v):
        return down - (down - up) * (math.log10(max(v, 1e-9)) - lo_y) / max(hi_y - lo_y, 1)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<line x1="{left}" y1="{down}" x2="{right}" y2="{down}" stroke="black"/>',
           f'<line x1="{left}" y1="{up}" x2="{left}" y2="{down}" stroke="black"/>',
           f'<text x="{(left + right) / 2}" y="{height - 8}" text-anchor="middle">'
           'IOPS (log), queue depth growing to the right</text>',
           f'<text x="8" y="{up + 10}">p50 us (log)</text>']
    for e in range(lo_x, hi_x + 1):
        out.append(f'<text x="{x(10 ** e):.1f}" y="{down + 15}" text-anchor="middle">'
                   f'{k(10 ** e)}</text>')
    for e in range(lo_y, hi_y + 1):
        out.append(f'<text x="{left - 6}" y="{y(10 ** e) + 4:.1f}" text-anchor="end">'
                   f'{10 ** e:g}</text>')
    for i, (name, measured, predicted) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        for pts, dash in ((predicted, ' stroke-dasharray="5 3"'), (measured, "")):
            path = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{c}"{dash}/>')
        out += [f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="3" fill="{c}"/>'
                for a, b in measured]
        out.append(f'<text x="{right + 12}" y="{up + 16 * i + 10}" fill="{c}">{name}</text>')
    out.append(f'<text x="{right + 12}" y="{up + 16 * len(series) + 16}">dashed: predicted</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
