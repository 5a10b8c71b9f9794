#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Soak and leak check: starts `nvmemu serve` with one 64 MiB malloc namespace and
# runs crates/nvmemu/examples/soak against it: verified random I/O (reads, writes, Write
# Zeroes, Deallocate; several queues), then connect/disconnect and DMA map/unmap cycles with
# the server's fd count and VmRSS checked flat, then reconnects while former clients
# scribble the doorbell pages they kept. Exits non-zero on any bad block, failed command
# or growth.
#
# Usage: scripts/soak.sh [soak options]   (the full run: 10^8 I/Os, 2000 connects, 1000 maps,
#                                          200 reconnects under stale doorbell scribbles)
#        SOAK_QUICK=1 scripts/soak.sh     (CI: 10^5 I/Os, 200 connects, 100 maps, 20 reconnects)
# SOAK_PROFILE=debug builds the debug profile instead of release (faster to build, slower
# to run); SOAK_BIN_DIR=DIR runs DIR/nvmemu and DIR/soak as they are, building nothing. Run the full version niced on a shared machine: nice -n 5 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${SOAK_PROFILE:-release}
if [ -n "${SOAK_BIN_DIR:-}" ]; then
  # Binaries built earlier and copied aside (nvmemu and soak), so a long run is not
  # disturbed by rebuilds in this tree.
  NVMEMU=$SOAK_BIN_DIR/nvmemu
  SOAK=$SOAK_BIN_DIR/soak
else
  if [ "$PROFILE" = release ]; then
    cargo build -q --release -p nvmemu --bin nvmemu --example soak
  else
    cargo build -q -p nvmemu --bin nvmemu --example soak
  fi
  OUT="${CARGO_TARGET_DIR:-target}/$PROFILE"
  NVMEMU=$OUT/nvmemu
  SOAK=$OUT/examples/soak
fi
QUICK=()
if [ "${SOAK_QUICK:-}" = 1 ]; then
  QUICK=(--ios 100000 --connects 200 --maps 100 --reconnects 20)
fi

. scripts/lib/serve.sh
serve_scratch

mkdir "$WORK/ctrl"
serve_start "$WORK/serve.log" "$WORK/ctrl/cntrl" -- env RUST_LOG="${RUST_LOG:-warn}" \
  "$NVMEMU" serve -r "$WORK/rpc.sock" -m 0x1 --socket-dir "$WORK/ctrl" \
  --ns malloc:size=64M,lba=512

# The server's poller spins on CPU 0; the client gets the other CPUs. Sharing the poller's
# CPU costs the client about 60x (docs/soak.md: about 10 k instead of 600 k I/Os per second).
CLIENT_CPUS=()
if [ "$(nproc)" -ge 2 ]; then
  CLIENT_CPUS=(taskset -c "1-$(($(nproc) - 1))")
fi
echo "--- soak against nvmemu serve (pid $SERVE_PID, poller on CPU 0) on $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
"${CLIENT_CPUS[@]}" "$SOAK" --socket "$WORK/ctrl" --server-pid "$SERVE_PID" "${QUICK[@]}" "$@"
