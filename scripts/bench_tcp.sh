#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# NVMe/TCP over loopback, nvmemu's target beside SPDK's nvmf_tgt (one target core each,
# spdk_nvme_perf and nvmemu bench --tcp as clients), written to BENCHMARKS.md's section
# `tcp`; the other sections stay as they are.
#
# Usage: scripts/bench_tcp.sh [OUTPUT.md]      (default: BENCHMARKS.md at the repo root)
#
# Environment:
#   BENCH_REPS=3          interleaved repetitions (target order alternates)
#   BENCH_RUNTIME=3       seconds per run
#   BENCH_TARGET_CPU=1    the targets' core;  BENCH_JOB_CPU=0  the clients' core
#   BENCH_TCP_PORT=4420   loopback port of SPDK's target; nvmemu's listens on the next one
#   BENCH_LOCK=file       flock this file around each target's runs (on a shared machine:
#                         /tmp/nvmemu-heavy.lock)
#   BENCH_NICE=n          run targets and clients at nice n (e.g. -15 beside other jobs)
#   BENCH_NOTE=text       a sentence for the table (e.g. "The machine was shared.")
#   BENCH_WORKLOADS=...  only these workloads, comma-separated table labels (e.g.
#                         "4 KiB randread QD32,128 KiB read QD8"); BENCH_CLIENTS=... only
#                         these clients ("spdk_nvme_perf" or "nvmemu bench"). A subset prints
#                         its table and leaves OUTPUT.md as it is.
#   BENCH_BIN=path        use this nvmemu binary instead of building one
#   BENCH_SPDK_PEERS=dir  SPDK's tools (default: $NVMEMU_SPDK_PEERS; docs/spdk-peers.md)
# Needs root (hugepages), python3 and SPDK's tools; the measuring is scripts/bench_tcp.py.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(realpath "${1:-$ROOT/BENCHMARKS.md}")
PEERS=${BENCH_SPDK_PEERS:-${NVMEMU_SPDK_PEERS:-}}
if [[ ! -x $PEERS/bin/nvmf_tgt ]]; then
    echo "bench_tcp.sh: no SPDK tools at '$PEERS': set BENCH_SPDK_PEERS (docs/spdk-peers.md)" >&2
    exit 1
fi
BIN=${BENCH_BIN:-}
if [[ -z $BIN ]]; then
    echo "bench_tcp.sh: building nvmemu (release)" >&2
    (cd "$ROOT" && cargo build --release -q -p nvmemu >&2)
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/nvmemu
fi
BIN=$(realpath "$BIN")
ARGS=(--nvmemu "$BIN" --peers "$PEERS" --md "$OUT" --reps "${BENCH_REPS:-3}"
    --runtime "${BENCH_RUNTIME:-3}" --target-cpu "${BENCH_TARGET_CPU:-1}"
    --client-cpu "${BENCH_JOB_CPU:-0}" --port "${BENCH_TCP_PORT:-4420}")
[[ -n ${BENCH_LOCK:-} ]] && ARGS+=(--lock "$BENCH_LOCK")
[[ -n ${BENCH_NOTE:-} ]] && ARGS+=(--note "$BENCH_NOTE")
[[ -n ${BENCH_NICE:-} ]] && ARGS+=(--nice "$BENCH_NICE")
[[ -n ${BENCH_WORKLOADS:-} ]] && ARGS+=(--workloads "$BENCH_WORKLOADS")
[[ -n ${BENCH_CLIENTS:-} ]] && ARGS+=(--clients "$BENCH_CLIENTS")
cd "$ROOT/scripts"
exec python3 bench_tcp.py "${ARGS[@]}"
