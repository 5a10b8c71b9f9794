#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CI's bounded fuzzing: every cargo-fuzz target runs a fixed number of inputs from its kept
# corpus with a fixed seed (so a CI failure replays), then the crash, if any, is printed.
# The one-CPU-hour runs are by hand (fuzz/README.md). Needs the machine's nightly toolchain;
# installs cargo-fuzz from crates.io when missing.
# Usage: tests/fuzz/ci.sh [RUNS]   (default 100000 inputs per target; fewer for the slow
# whole-server targets, see `divisor`)
set -euo pipefail
cd "$(dirname "$0")/../../fuzz"
RUNS=${1:-100000}

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: no nightly toolchain (cargo +nightly); cargo-fuzz needs one" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo install --locked --quiet cargo-fuzz
fi

targets=$(cargo fuzz list)
[ -n "$targets" ] || { echo "fuzz: cargo fuzz list found no target" >&2; exit 1; }
# Build every target first, so each target's time below is its run alone.
t0=$SECONDS
cargo +nightly fuzz build --release >/dev/null
echo "fuzz: built $(echo $targets | wc -w) targets in $((SECONDS - t0)) s"
# Targets that run a whole server per input (a control thread, a controller or the RPC
# handler, a well-behaved client afterwards) manage hundreds of inputs a second, not tens
# of thousands: they run a 50th or 25th of the inputs, for a time of the same order.
declare -A divisor=([vfio_user_device]=50 [rpc_handler]=25)
passed=0 failed=0
for target in $targets; do
  runs=$((RUNS / ${divisor[$target]:-1}))
  mkdir -p "corpus/$target"
  t0=$SECONDS
  # Inputs found during the run go to a scratch directory: the kept corpus stays as committed.
  scratch=$(mktemp -d)
  if cargo +nightly fuzz run "$target" "$scratch" "corpus/$target" -- \
      -seed=1 -runs="$runs" -max_len=4096 -print_final_stats=1 >"$scratch.log" 2>&1; then
    passed=$((passed + 1))
    echo "fuzz: $target: $(grep -oE 'Done [0-9]+ runs' "$scratch.log" || echo done) in $((SECONDS - t0)) s"
  else
    failed=$((failed + 1))
    echo "fuzz: $target FAILED after $((SECONDS - t0)) s; replay with the artifact it names:"
    grep -vE '^\s+[0-9]+: |^\s+at ' "$scratch.log" | tail -25
  fi
  rm -rf "$scratch" "$scratch.log"
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
