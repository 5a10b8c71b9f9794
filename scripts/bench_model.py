#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The latency model's curve: IOPS and latency as the queue deepens, configured vs measured.

For each model (the presets and a hand-set one), `nvmemu serve` exports one malloc bdev with
that model set over JSON-RPC (`nvmemu_bdev_set_model`), and `nvmemu bench --socket` runs 4 KiB
random reads against it at each queue depth. The same sweep without a model gives the host's
own ceiling: where the model predicts more IOPS than that, the point is host-bound and not
judged. The prediction comes from the model's configuration as the server reports it
(`bdev_get_bdevs`), through scripts/lib/model_predict.py.

Writes the table into BENCHMARKS.md's `model` section and the plot to docs/model-curve.svg.
Run it through scripts/bench_model.sh, which builds the binary and takes the machine-wide lock.
With --check it exits 1 when a judged point is outside the tolerance: CI runs the hand-set
model that way at QD1 and at saturation (.ci/run).
"""

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))

from lib.md_sections import splice  # noqa: E402
from lib.model_predict import ceiling, simulate, within  # noqa: E402
from lib.model_report import markdown, svg  # noqa: E402
from lib.serve import Server  # noqa: E402

NQN = "nqn.2016-06.io.spdk:model"
# A hand-set model whose ceiling (4 units / 500 us = 8 K IOPS) this machine can reach.
HAND = ["--avg-read-latency", "500", "--p99-read-latency", "2000", "--tail", "lognormal",
        "--units", "4", "--seed", "1"]
# Tolerances: IOPS and p50 within 15 %, p99 within 30 %; latencies may also exceed the
# prediction by the host's own round trip (TOL_ABS_US).
TOL = dict(iops=0.15, p50=0.15, p99=0.30)
TOL_ABS_US = 20.0


def log(msg):
    print(f"bench_model: {msg}", file=sys.stderr, flush=True)


def run(cmd, timeout):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}: "
                           f"{p.stderr.strip()[-400:]}")
    return p.stdout


@contextlib.contextmanager
def heavy_lock(path):
    """Hold the machine-wide lock for heavy runs (none when path is empty)."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Target:
    """`nvmemu serve` exporting one malloc bdev, with `model_args` set on it (none: no model)."""

    def __init__(self, a, work, model_args):
        self.a, self.model_args = a, model_args
        self.sock = os.path.join(work, "rpc.sock")
        self.dir = os.path.join(work, "vfu")
        cmd = [a.nvmemu, "serve", "-m", hex(1 << a.poller_cpu), "--busy-poll", "-r", self.sock]
        self.server = Server(cmd, wait_for=[self.sock], timeout=60,
                             log=os.path.join(work, "serve.log"))

    def rpc(self, *params):
        return run([self.a.nvmemu, "rpc", "-s", self.sock, "-t", "30", *params], 60)

    def __enter__(self):
        self.server.start()
        try:
            self.rpc("framework_wait_init")
            self.rpc("nvmf_create_transport", "-t", "VFIOUSER")
            self.rpc("bdev_malloc_create", "256", "512", "-b", "M0")
            if self.model_args:
                self.rpc("nvmemu_bdev_set_model", "M0", *self.model_args)
            self.rpc("nvmf_create_subsystem", NQN, "-a", "-s", "MODEL01")
            self.rpc("nvmf_subsystem_add_ns", NQN, "M0")
            os.makedirs(self.dir, exist_ok=True)
            self.rpc("nvmf_subsystem_add_listener", NQN, "-t", "VFIOUSER", "-a", self.dir,
                     "-s", "0")
        except BaseException:
            self.__exit__()
            raise
        return self

    def model(self):
        """The model as the server holds it (`driver_specific.model`), or None."""
        bdev = json.loads(self.rpc("bdev_get_bdevs", "-b", "M0"))[0]
        return bdev.get("driver_specific", {}).get("model")

    def __exit__(self, *exc):
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def bench(a, target, qd):
    """One `nvmemu bench --socket` run: dict(iops, p50_us, p99_us)."""
    cmd = [a.nvmemu, "bench", "--socket", target.dir, "--rw=randread", "--bs=4k",
           f"--iodepth={qd}", f"--runtime={a.runtime}", "--time_based", "--ramp_time=1",
           f"--cpus_allowed={a.client_cpu}", "--output-format=json", "--eta=never"]
    out = run(cmd, a.runtime + 120)
    job = json.loads(out[out.index("{"):])["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"nvmemu bench reported error {job['error']}")
    r = job["read"]
    pct = r["clat_ns"]["percentile"]
    return dict(iops=float(r["iops"]), p50_us=pct["50.000000"] / 1000.0,
                p99_us=pct["99.000000"] / 1000.0)


def sweep(a, name, model_args):
    """Every queue depth against one target: (the model it reported, [measured])."""
    work = tempfile.mkdtemp(prefix=f"nvmemu-model-{a.tag}-")
    try:
        with heavy_lock(a.lock), Target(a, work, model_args) as t:
            model = t.model()
            points = []
            for qd in a.qds:
                m = bench(a, t, qd)
                log(f"{name} QD{qd}: {m['iops']:.0f} IOPS, p50 {m['p50_us']:.1f} us, "
                    f"p99 {m['p99_us']:.1f} us")
                points.append(dict(qd=qd, **m))
            return model, points
    finally:
        shutil.rmtree(work, ignore_errors=True)


def judge(model, points, host):
    """Add the prediction and the verdict to each measured point of one model."""
    read, units = model["read"], model["units"]
    for p, h in zip(points, host):
        pred = simulate(read["avg_us"], read["p99_us"], units, p["qd"], tail=model["tail"])
        p["pred"] = pred
        p["host_bound"] = pred["iops"] > 0.8 * h["iops"]
        p["ok"] = None if p["host_bound"] else (
            within(p["iops"], pred["iops"], TOL["iops"])
            and within(p["p50_us"], pred["p50_us"], TOL["p50"], TOL_ABS_US)
            and within(p["p99_us"], pred["p99_us"], TOL["p99"], TOL_ABS_US))
    return dict(model=model, ceiling=ceiling(read["avg_us"], units), points=points)


def out_of_tolerance(report):
    """What fails `--check`: each judged point outside the tolerance, or that no point was
    judged (every one host-bound proves nothing). One line each."""
    judged = [(name, p) for name, r in report["models"].items() for p in r["points"]
              if p["ok"] is not None]
    if not judged:
        return ["no point was judged: every one is host-bound on this machine"]
    return [f"{name} QD{p['qd']}: measured {p['iops']:.0f} IOPS, p50 {p['p50_us']:.1f} us, "
            f"p99 {p['p99_us']:.1f} us; predicted {p['pred']['iops']:.0f} IOPS, "
            f"p50 {p['pred']['p50_us']:.1f} us, p99 {p['pred']['p99_us']:.1f} us"
            for name, p in judged if not p["ok"]]


def measure(a):
    """The sweep without a model, then one per model: the report."""
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    _, host = sweep(a, "no model", [])
    results = {}
    for name in a.models:
        args = HAND if name == "hand" else ["--preset", name, "--seed", "1"]
        model, points = sweep(a, name, args)
        results[name] = judge(model, points, host)
    return dict(started=started, runtime_s=a.runtime, note=a.note, tolerance=TOL,
                tolerance_abs_us=TOL_ABS_US, host=host, models=results, load=os.getloadavg(),
                qds=a.qds)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nvmemu", required=True, help="the nvmemu binary")
    p.add_argument("--models", default="scm,tlc,qlc,hand",
                   help="presets and/or 'hand' (the hand-set model), comma-separated")
    p.add_argument("--qds", default="1,2,4,8,16,32,64,128,256")
    p.add_argument("--runtime", type=int, default=3, help="seconds per run")
    p.add_argument("--poller-cpu", type=int, default=1)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--lock", default="", help="hold this lock file around each sweep")
    p.add_argument("--md", help="splice the table into this Markdown file's `model` section")
    p.add_argument("--plot", help="write the SVG plot here")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--note", default="", help="a line about the machine's state for the table")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a point not host-bound is outside the tolerance")
    p.add_argument("--from-json", help="write the table and plot of this earlier --json run "
                   "(with --note) instead of measuring")
    a = p.parse_args(argv)
    a.qds = [int(q) for q in a.qds.split(",")]
    a.models = [m for m in a.models.split(",") if m]
    a.tag = f"{os.getpid()}"
    return a


def main():
    a = parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            report = json.load(f)
        report["note"] = a.note or report["note"]
    else:
        report = measure(a)
    text = markdown(report, a)
    if a.md:
        splice(a.md, "model", "scripts/bench_model.sh", text)
    if a.plot:
        with open(a.plot, "w") as f:
            f.write(svg(report))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    print(text)
    failed = out_of_tolerance(report) if a.check else []
    if failed:
        sys.exit("bench_model: FAILED: outside the tolerance (or nothing judged):\n  "
                 + "\n  ".join(failed))


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        sys.exit(f"bench_model: FAILED: {e}")
