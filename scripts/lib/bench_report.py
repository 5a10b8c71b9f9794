# SPDX-License-Identifier: Apache-2.0
"""BENCHMARKS.md from a finished scripts/bench.py run: the machine, the goals, the tables,
every run and the commands. `render` takes the run (a bench.Bench) and its verdicts."""

import os
import shlex
import subprocess

FRESH_HEAD = ("| Namespace | Fresh | Written | Written / fresh | Spread (fresh, written) "
              "| Backing (serve start-up line) |")


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


def _out(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def memory():
    with open("/proc/meminfo") as f:
        return next((f"{int(ln.split()[1]) / 2**20:.1f} GiB" for ln in f
                     if ln.startswith("MemTotal")), "?")


def machine_rows(args, start, load_start, load_end):
    """(name, value) rows of the Machine table."""
    def git(*a):
        return _out(["git", "-C", args.repo, *a])
    commit = os.environ.get("BENCH_COMMIT") or (
        (git("rev-parse", "--short=12", "HEAD") or "?")
        + (" (with uncommitted changes)"
           if git("status", "--porcelain", "--untracked-files=no") else ""))
    return [
        ("CPU", cpu_model()),
        ("CPUs online", str(os.cpu_count())),
        ("Memory", memory()),
        ("Kernel", os.uname().release),
        ("rustc", _out(["rustc", "--version"]) or "?"),
        ("Date (UTC)", start.strftime("%Y-%m-%d %H:%M")),
        ("Commit", commit),
        ("Placement", f"target poller / probe server on CPU {args.target_cpu}, "
                      f"job / probe client on CPU {args.job_cpu}"
                      + (f"; each run in a session of its own at autogroup nice {args.nice}"
                         if getattr(args, "nice", None) else "")),
        ("Load average", f"{' '.join(load_start)} at start, {' '.join(load_end)} at end"),
        ("Repetitions", f"{args.reps} x {args.runtime} s per case, bench and probe interleaved"
                        + (" (BENCH_QUICK: a smoke test, not a measurement)" if args.quick else "")),
    ]


def render(b, goals, ctrl_rows, machine):
    """The whole of BENCHMARKS.md."""
    L = []
    head(L, b, machine)
    goal_table(L, b, goals, ctrl_rows)
    bounds_and_profiles(L, b, goals, ctrl_rows)
    tables(L, b)
    sections(L, b)
    every_run(L, b)
    return "\n".join(L)


def head(L, b, machine):
    w = L.append
    w("<!-- SPDX-License-Identifier: Apache-2.0 -->")
    w("# Benchmarks")
    w("")
    w("Written by `scripts/bench.sh` (do not edit by hand; re-run the script), except the sections")
    w("at the end: each is written by the script its marker names, and bench.sh keeps them. Every")
    w("figure is the")
    w("median of interleaved repetitions: each case's bench run is followed by its ceiling probe")
    w("run (`nvmemu bench --ceiling`: the two-thread ring round trip with nothing behind it), so")
    w("the ratio compares two measurements taken under the same conditions. What the numbers mean")
    w("and what bounds them: [docs/performance.md](docs/performance.md).")
    w("")
    w("Malloc namespaces are backed by memory at creation: every page is faulted in")
    w("before a run, in transparent huge pages where the kernel gives them (4 KiB base pages")
    w("otherwise), so no read comes from the kernel's zero page." + (
        " The fresh-vs-written section quotes what `nvmemu serve` reported for its namespace."
        if b.fresh_backing else ""))
    w("")
    w("## Machine")
    w("")
    w("| | |")
    w("|---|---|")
    for k, v in machine:
        w(f"| {k} | {v} |")
    w("")
    w("This is a shared 2-CPU virtual machine: other work running at the same time shows up as a")
    w("higher load average above and a wider spread below. Treat ratios as the result; absolute")
    w("IOPS belong to this machine only.")
    w("")


def goal_table(L, b, goals, ctrl_rows):
    w, runs = L.append, b.runs
    w("## Goals, as ratios to the ceiling probe")
    w("")
    w("Ratio = median of the bench runs / median of the probe runs; paired = median of the")
    w("per-repetition ratios (each bench run against the probe run right after it).")
    w("")
    w("| Case | Measured | Probe | Ratio | Paired | Goal | Result | Spread (bench) |")
    w("|---|---|---|---|---|---|---|---|")
    for g in goals:
        c = g["c"]
        if g["kind"] == "iops":
            m, p = fmt_iops(g["m"]), fmt_iops(g["p"])
            goal = f"≥ {g['target']:.2f}" + (" of the no-copy probe" if c["probe"] == "nocopy"
                                             else "")
            sp = runs.spread(c["id"], "bench", "iops")
        else:
            m, p = fmt_ns(g["m"]), fmt_ns(g["p"])
            goal = f"≤ {g['target']:.2f}x"
            sp = runs.spread(c["id"], "bench", "lat_ns")
        ratio = "–" if g["ratio"] is None else f"{g['ratio']:.2f}"
        res = (g["verdict"] if g["verdict"] != "not measured"
               else f"not measured ({g['why'] or 'no data'})")
        paired = "–" if g["paired"] is None else f"{g['paired']:.2f}"
        w(f"| {c['title']} | {m} | {p} | {ratio} | {paired} | {goal} | {res} | {sp} |")
    one = runs.med("ctrl1", "bench", "iops")
    for c, m, ratio, verdict in ctrl_rows[1:]:
        rr = "–" if ratio is None else f"{ratio:.2f}"
        res = verdict if verdict != "not measured" else (
            "not measured (the binary has no --controllers)" if not b.flags["--controllers"]
            else f"not measured ({runs.first_error(c['id'], 'bench') or 'no data'})")
        w(f"| one poller, {c['n']} controllers (512 B randread {ctrl_load(c)}) | {fmt_iops(m)} | "
          f"{fmt_iops(one)} (1 controller) | {rr} | – | ≥ 0.90 of 1 controller | {res} | "
          f"{runs.spread(c['id'], 'bench', 'iops')} |")
    w("")


def ctrl_load(c):
    return "QD16 in total" if c["qd"] == 16 else f"QD16 each, {c['qd']} in total"


def bounds_and_profiles(L, b, goals, ctrl_rows):
    w, runs = L.append, b.runs
    w("What bounds each case (from the run's own counters: poller busy share, target ns per I/O,")
    w("job thread CPU). The job polls without pausing, so its CPU share is near 100 % whether or")
    w("not it waits for the poller; a poller near 100 % busy is the one figure that says a side")
    w("is saturated, and where it is, the profile shows whether the job is too:")
    w("")
    for g in goals:
        w(f"- {g['c']['title']}: {g['verdict']}; bounded by {runs.bound(g['c']['id'])}.")
    one_ns = runs.med("ctrl1", "bench", "ns_per_io")
    for c, _, _, verdict in ctrl_rows:
        if verdict != "miss":
            continue
        ref = f"; one controller: {one_ns:.0f} target ns/IO" if one_ns else ""
        w(f"- one poller, {c['n']} controllers ({ctrl_load(c)}): miss; bounded by "
          f"{runs.bound(c['id'])}{ref}.")
    w("")
    if not b.profiles:
        return
    w("### Profiles of the missed goals")
    w("")
    w("`perf record -F 999 -g` of one extra run of each missed case (goals and controller rows),")
    w("top symbols by self time (raw data in the results directory).")
    w("")
    for cid, text in b.profiles.items():
        w(f"`{cid}`:")
        w("")
        w("```")
        w(text or "(perf record failed on this machine)")
        w("```")
        w("")


def tables(L, b):
    """The release-build figures, the backends and fresh vs written."""
    w, runs = L.append, b.runs
    med = runs.med
    w("## `cargo run --release -- bench` figures")
    w("")
    w("| Case | IOPS | avg latency | p50 clat | p99 clat | p99.9 clat | poller busy | target ns/IO |")
    w("|---|---|---|---|---|---|---|---|")
    for cid, title in (("rr512_qd16_malloc", "512 B randread, iodepth 16"),
                       ("rr4k_qd128_malloc", "4 KiB randread, iodepth 128")):
        w(f"| {title} | {fmt_iops(med(cid, 'bench', 'iops'))} | "
          f"{fmt_ns(med(cid, 'bench', 'lat_ns'))} | {fmt_ns(runs.pct_of(cid, '50.000000'))} | "
          f"{fmt_ns(runs.pct_of(cid, '99.000000'))} | {fmt_ns(runs.pct_of(cid, '99.900000'))} | "
          f"{fmt_opt(med(cid, 'bench', 'busy'), '.0f')}% | "
          f"{fmt_opt(med(cid, 'bench', 'ns_per_io'), '.0f')} |")
    w("")
    w("## Backend comparison (4 KiB, iodepth 32)")
    w("")
    w("Like the in-memory nvmet backend study against null_blk and brd: the same front end and")
    w("transport, with the data copy (malloc) or without it (null). A file-backed row appears")
    w("once that backend exists.")
    w("")
    w("| Backend | randread IOPS | randread avg lat | randwrite IOPS | randwrite avg lat "
      "| poller busy (r/w) | target ns/IO (r/w) |")
    w("|---|---|---|---|---|---|---|")
    for be in ("malloc", "null"):
        r, wr = f"be_{be}_randread", f"be_{be}_randwrite"
        w(f"| {be} | {fmt_iops(med(r, 'bench', 'iops'))} | {fmt_ns(med(r, 'bench', 'lat_ns'))} | "
          f"{fmt_iops(med(wr, 'bench', 'iops'))} | {fmt_ns(med(wr, 'bench', 'lat_ns'))} | "
          f"{fmt_opt(med(r, 'bench', 'busy'), '.0f')}% / "
          f"{fmt_opt(med(wr, 'bench', 'busy'), '.0f')}% | "
          f"{fmt_opt(med(r, 'bench', 'ns_per_io'), '.0f')} / "
          f"{fmt_opt(med(wr, 'bench', 'ns_per_io'), '.0f')} |")
    w("")
    fresh_table(L, b)


def fresh_table(L, b):
    w, runs, a = L.append, b.runs, b.args
    w("## Fresh vs written namespace, external client")
    w("")
    w(f"`nvmemu serve` with one 1 GiB malloc namespace (poller busy-polling on CPU {a.target_cpu})")
    w(f"and `nvmemu bench --socket` (job on CPU {a.job_cpu}): 4 KiB random reads at iodepth 32")
    w("of the namespace as created, then again after one sequential write pass over all of it.")
    w("A backed namespace reads at the same rate either way; with `lazy=on` the fresh run reads")
    w("the kernel's zero page, which flatters it.")
    w("")
    w(FRESH_HEAD)
    w("|---|---|---|---|---|---|")
    for mode, spec in b.fresh:
        fr, wr = f"fresh_{mode}", f"written_{mode}"
        f, wv = runs.med(fr, "bench", "iops"), runs.med(wr, "bench", "iops")
        ratio = "–" if not (f and wv) else f"{wv / f:.2f}"
        sp = f"{runs.spread(fr, 'bench', 'iops')}, {runs.spread(wr, 'bench', 'iops')}"
        back = b.fresh_backing.get(mode)
        w(f"| `{spec}` | {fmt_iops(f)} | {fmt_iops(wv)} | {ratio} | {sp} | "
          f"{'`' + back + '`' if back else 'not measured'} |")
    w("")


def sections(L, b):
    """The side-by-side and timing sections, written by their own scripts."""
    w, a = L.append, b.args
    w("## Side by side with SPDK's vfio-user target")
    w("")
    w(f"SPDK v25.05's `nvmf_tgt` and `nvmemu serve --busy-poll`, each on one core "
      f"(CPU {a.target_cpu}),")
    w("configured by the same SPDK `rpc.py` commands: a 1 GiB malloc bdev of 512 B blocks written in")
    w("full before any read (nsid 1) and a 1 GiB null bdev (nsid 2). Clients on CPU "
      f"{a.job_cpu}: SPDK's `spdk_nvme_perf` and nvmemu's driver (`nvmemu bench --socket`).")
    w(f"Medians of {a.reps} repetitions of {a.runtime} s; each repetition restarts both targets,")
    w("alternating which goes first. Written by `scripts/bench_peers.py` (run by this script).")
    w("")
    w(b.peers_md if b.peers_md else f"Not measured: {b.peers_why}.")
    w("")
    w("## Target-side timing: IOPS with it on and off")
    w("")
    w("What `bdev_enable_histogram` costs (docs/latency.md): the same job with the target's")
    w("per-command timing off and on.")
    w("")
    w(b.timing_md if b.timing_md else f"Not measured: {b.timing_why}.")
    w("")


def every_run(L, b):
    """Every run's figures, the commands, where the plot and the raw output are."""
    w, a = L.append, b.args
    w("## Every run")
    w("")
    w("Machine busy = share of both CPUs used by anything in the half second before the pair")
    w("started (the script waits up to BENCH_QUIET_WAIT s for it to drop below BENCH_QUIET).")
    w("")
    w("| Case | Kind | IOPS per repetition | avg latency per repetition | machine busy before |")
    w("|---|---|---|---|---|")
    seen = []
    for r in b.runs.all:
        if (r["id"], r["kind"]) not in seen and r["id"] != "plot":
            seen.append((r["id"], r["kind"]))
    for cid, kind in seen:
        rs = b.runs.of(cid, kind)
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
    for (cid, kind), cmd in b.commands.items():
        if cid == "plot":
            continue
        shown = " ".join(shlex.quote(x) for x in ["nvmemu"] + cmd[1:])
        for d in b.socket_dirs:
            shown = shown.replace(d, "$D")
        w(f"# {cid} ({kind})")
        w(shown)
    w("```")
    w("")

    # Paths inside the repository are shown relative to it; anything else is named by the
    # variable that chose it, so the file never points outside the repository.
    def shown_results(path):
        rel = os.path.relpath(path, a.repo)
        return "$BENCH_RESULTS" + path[len(a.results):] if rel.startswith("..") else rel
    if b.plot:
        w(f"The latency plot of one extra 512 B randread QD16 run was written to "
          f"`{shown_results(b.plot)}` (`nvmemu bench --plot FILE`).")
        w("")
    w(f"Raw JSON and stderr of every run: `{shown_results(a.results)}` (not committed; "
      "`BENCH_RESULTS` chooses the directory).")
    w("")
