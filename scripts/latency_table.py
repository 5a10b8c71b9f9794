#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The per-layer latency table of one client stack at QD1: layer, cumulative ns, delta ns, %.

The client's own layers come as ROW=CUM_NS arguments, outermost first (each layer's span
contains the ones below it); the target's two layers are appended from two
`nvmemu_get_latency_breakdown` answers taken around the run (`--before`, `--after`): the
mean of `total` (doorbell seen to interrupt signalled) and of `backend` over the commands
timed in between. Each row's delta is its span minus the next one's; % is of the top span.

    scripts/latency_table.py --before a.json --after b.json \\
        "guest benchmark (fio)=52000" "guest block layer=47000" ... [--plot out.svg]

Exits 1 (one line on stderr) when an input is missing or no command was timed.
"""

import argparse
import json
import sys

COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"]


def window(before, after, layer):
    """(commands, mean ns) of `layer` between two breakdowns, over every controller."""
    def sums(doc):
        n = s = 0
        for c in doc.get("controllers", []):
            for l in c.get("layers", []):
                if l.get("layer") == layer:
                    n += l.get("count", 0)
                    s += l.get("sum_ns", 0)
        return n, s
    n0, s0 = sums(before)
    n1, s1 = sums(after)
    n = n1 - n0
    return n, ((s1 - s0) / n if n > 0 else 0.0)


def table(rows):
    """[(name, cum)] -> [(name, cum, delta, pct)]."""
    top = rows[0][1] if rows and rows[0][1] > 0 else 1.0
    out = []
    for i, (name, cum) in enumerate(rows):
        below = rows[i + 1][1] if i + 1 < len(rows) else 0.0
        delta = cum - below
        out.append((name, cum, delta, 100.0 * delta / top))
    return out


def svg(title, rows):
    """One horizontal stacked bar of the deltas, with a legend."""
    width, bar_h, left = 760, 40, 20
    total = sum(max(d, 0.0) for _, _, d, _ in rows) or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{110 + 22 * len(rows)}" '
             'font-family="sans-serif" font-size="13">',
             f'<text x="{left}" y="24" font-size="15">{esc(title)}</text>']
    x = float(left)
    span = width - 2 * left
    for i, (name, cum, delta, pct) in enumerate(rows):
        w = span * max(delta, 0.0) / total
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<rect x="{x:.1f}" y="40" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                     f'<title>{esc(name)}: {delta:.0f} ns</title></rect>')
        x += w
        y = 40 + bar_h + 24 + 22 * i
        parts.append(f'<rect x="{left}" y="{y - 11}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{left + 18}" y="{y}">{esc(name)}: {delta:.0f} ns ({pct:.1f} %)</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rows", nargs="+", metavar="ROW=CUM_NS")
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--title", default="QD1 latency by layer")
    p.add_argument("--plot", metavar="SVG")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    a = p.parse_args()
    rows = []
    for r in a.rows:
        name, sep, value = r.rpartition("=")
        try:
            rows.append((name, float(value)))
        except ValueError:
            sep = ""
        if not sep or not name:
            sys.exit(f"latency_table: bad row {r!r} (want NAME=CUM_NS)")
    try:
        with open(a.before) as f:
            before = json.load(f)
        with open(a.after) as f:
            after = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"latency_table: cannot read the target's breakdowns: {e}")
    n, target = window(before, after, "total")
    _, backend = window(before, after, "backend")
    if n <= 0:
        sys.exit("latency_table: the target timed no command between the two breakdowns "
                 "(is bdev_enable_histogram on?)")
    rows += [("target (doorbell seen -> interrupt)", target), ("backend", backend)]
    t = table(rows)
    if a.json:
        print(json.dumps({"title": a.title, "target_commands": n, "layers": [
            {"layer": name, "cum_ns": cum, "delta_ns": d, "pct": pct} for name, cum, d, pct in t]}))
    else:
        print(f"{a.title} (target timed {n} commands)")
        print(f"  {'layer':<40} {'cum ns':>10} {'delta ns':>10} {'%':>7}")
        for name, cum, d, pct in t:
            print(f"  {name:<40} {cum:>10.0f} {d:>10.0f} {pct:>6.1f}%")
    if not a.json:
        # Percentiles are cumulative since the histogram was enabled (right before the run in
        # the scripts here): enough to tell a few slow commands from a slow median.
        for layer in ("total", "backend"):
            ls = [l for c in after.get("controllers", []) for l in c.get("layers", [])
                  if l.get("layer") == layer and l.get("count")]
            if ls:
                l = max(ls, key=lambda x: x["count"])
                print(f"  target {layer}: p50 {l['p50_ns']} ns, p99 {l['p99_ns']} ns, "
                      f"max {l['max_ns']} ns (since enabled)")
    if a.plot:
        with open(a.plot, "w") as f:
            f.write(svg(a.title, t))


if __name__ == "__main__":
    main()
