#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The latency model's curve (scripts/bench_model.py): 4 KiB random reads at QD 1..256
# against each preset and a hand-set model, configured vs measured, into BENCHMARKS.md's
# `model` section and docs/model-curve.svg. About 4 minutes; each model's sweep holds the
# machine-wide lock (/tmp/nvmemu-heavy.lock) while it runs.
#
# Environment: NVMEMU_BIN (default target/release/nvmemu, built first), BENCH_MODEL_ARGS
# (more options for bench_model.py, e.g. '--models hand --runtime 2 --note "..."').
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${NVMEMU_BIN:-}
if [[ -z "$BIN" ]]; then
    (cd "$ROOT" && cargo build --release -p nvmemu >&2)
    BIN=$ROOT/target/release/nvmemu
fi
# shellcheck disable=SC2086 # BENCH_MODEL_ARGS is a list of options
exec python3 "$ROOT/scripts/bench_model.py" --nvmemu "$BIN" --lock /tmp/nvmemu-heavy.lock \
    --md "$ROOT/BENCHMARKS.md" --plot "$ROOT/docs/model-curve.svg" ${BENCH_MODEL_ARGS:-}
