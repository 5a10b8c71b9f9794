#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# How nvmemu's target scales with poller/client pairs (1, 2, 4, ... up to half the physical
# cores), beside SPDK's nvmf_tgt measured the same way in the same run: scripts/scale.py
# (its --help, and docs/performance.md, "Scaling with pairs").
#
# Usage: scripts/scale.sh [scale.py options]      e.g. --pairs 1 --runtime 1 --ns malloc
#
# Environment:
#   NVMEMU_BIN=path       the nvmemu binary (default: target/release/nvmemu, built here)
#   NVMEMU_SPDK_PEERS=dir SPDK's tools (docs/spdk-peers.md); absent: nvmemu alone, said in one
#                         line; present: needs root (hugepages)
#   SCALE_RESULTS=dir     where scale.md, scale.json and scale.svg go (default
#                         target/scale-results/<time>)
# Runs the same, unchanged, on the 2-CPU development VM (one pair) and on a many-core server.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${NVMEMU_BIN:-}
if [[ -z $BIN ]]; then
    echo "scale.sh: building nvmemu (release)" >&2
    (cd "$ROOT" && cargo build --release -q -p nvmemu >&2)
    BIN=$TARGET_DIR/release/nvmemu
fi
[[ -x $BIN ]] || { echo "scale.sh: no nvmemu binary at $BIN" >&2; exit 1; }
RESULTS=${SCALE_RESULTS:-$TARGET_DIR/scale-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RESULTS"

PEERS=()
if [[ -x ${NVMEMU_SPDK_PEERS:-}/bin/nvmf_tgt ]]; then
    [[ $(id -u) == 0 ]] || { echo "scale.sh: SPDK's tools need root (hugepages); run it with sudo" >&2; exit 1; }
    PEERS=(--peers "$NVMEMU_SPDK_PEERS")
else
    echo "scale.sh: no SPDK tools at '${NVMEMU_SPDK_PEERS:-}': nvmemu alone, no ratio to SPDK" >&2
fi
exec python3 "$ROOT/scripts/scale.py" --nvmemu "$BIN" "${PEERS[@]}" --md "$RESULTS/scale.md" \
    --json "$RESULTS/scale.json" --plot "$RESULTS/scale.svg" "$@"
