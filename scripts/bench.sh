#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The performance matrix (goals stated as ratios to the project's own ceiling probe, measured
# in the same run), written to BENCHMARKS.md.
#
# Usage: scripts/bench.sh [OUTPUT.md]          (default: BENCHMARKS.md at the repo root)
#
# Environment:
#   BENCH_REPS=3        repetitions; each repetition runs every case once, then its probe
#                       (bench, probe, bench, probe, ...), so slow drift hits both alike
#   BENCH_RUNTIME=5     seconds per run
#   BENCH_QUICK=1       one repetition of 2 s (a smoke test, not a measurement)
#   BENCH_RAMP=1        seconds of --ramp_time before each bench run's statistics
#   BENCH_PROFILE=1     perf record one extra run of each missed goal and controller row
#                       (0: skip)
#   BENCH_TARGET_CPU=1  CPU of the target poller (and of the probe's server thread)
#   BENCH_JOB_CPU=0     CPU of the job thread (and of the probe's client thread)
#   BENCH_NICE=n        run each bench and probe at autogroup nice n (e.g. -20 beside other
#                       jobs: the goal rows then measure nvmemu and the probe, not the load)
#   BENCH_BIN=path      use this nvmemu binary instead of building one
#   BENCH_RESULTS=dir   where raw JSON and logs go (default target/bench-results/<time>)
#   BENCH_SKIP_BUILD=1  do not run cargo build (BENCH_BIN or the default path must exist)
#   BENCH_COMMIT=text   what to record as the commit (when BENCH_BIN was built elsewhere)
#   BENCH_ONLY=list     run only these sections, comma separated: goals, backends, ctrls,
#                       fresh, peers, timing, plot (default: all; the others are reported
#                       "not measured")
#   BENCH_SPDK_PEERS=dir  SPDK's tools for the side-by-side section (default: $NVMEMU_SPDK_PEERS,
#                       as for tests/peers/spdk.sh; see scripts/bench_peers.py)
#   CARGO_TARGET_DIR    as for cargo (default: target)
#
# Rows whose flag the binary lacks (--ceiling, --controllers, ...) are reported as
# "not measured" instead of failing the script. Needs bash, cargo and python3 (stdlib).
# This wrapper builds the binary and turns the environment into scripts/bench.py's options
# (scripts/bench.py --help); the measuring and the writing are there.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/BENCHMARKS.md}
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
    REPS=${BENCH_REPS:-1}
    RUNTIME=${BENCH_RUNTIME:-2}
else
    REPS=${BENCH_REPS:-3}
    RUNTIME=${BENCH_RUNTIME:-5}
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${BENCH_BIN:-$TARGET_DIR/release/nvmemu}
RESULTS=${BENCH_RESULTS:-$TARGET_DIR/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}

if [[ ${BENCH_SKIP_BUILD:-0} != 1 && -z ${BENCH_BIN:-} ]]; then
    echo "bench.sh: building nvmemu (release)" >&2
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release -p nvmemu >&2)
fi
if [[ ! -x $BIN ]]; then
    echo "bench.sh: no nvmemu binary at $BIN" >&2
    exit 1
fi
mkdir -p "$RESULTS"

ARGS=(--bin "$BIN" --out "$OUT" --results "$RESULTS" --reps "$REPS" --runtime "$RUNTIME"
    --ramp "${BENCH_RAMP:-1}" --target-cpu "${BENCH_TARGET_CPU:-1}" --job-cpu "${BENCH_JOB_CPU:-0}"
    --repo "$ROOT" --only "${BENCH_ONLY:-}")
[[ ${BENCH_QUICK:-0} == 1 ]] && ARGS+=(--quick)
[[ ${BENCH_PROFILE:-1} == 0 ]] && ARGS+=(--no-profile)
[[ -n ${BENCH_NICE:-} ]] && ARGS+=(--nice "$BENCH_NICE")
exec python3 "$ROOT/scripts/bench.py" "${ARGS[@]}"
