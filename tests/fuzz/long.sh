#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long fuzzing run: one fuzz target for a budget of CPU time (not wall time, so a run on a
# busy machine still gets its full budget), starting from the kept corpus. New inputs go to a
# scratch directory; `cargo +nightly fuzz cmin` can fold them into the kept corpus afterwards.
# Prints the runs, the CPU seconds and the outcome; exits non-zero when the fuzzer found a crash.
# Usage: tests/fuzz/long.sh TARGET [CPU_SECONDS]   (default 3600: one CPU-hour)
set -euo pipefail
cd "$(dirname "$0")/../../fuzz"
target=${1:?usage: tests/fuzz/long.sh TARGET [CPU_SECONDS]}
budget=${2:-3600}
cargo fuzz list | grep -x "$target" >/dev/null || { echo "fuzz: no target '$target' (cargo fuzz list)" >&2; exit 2; }

cargo +nightly fuzz build --release "$target" >/dev/null
binary=target/x86_64-unknown-linux-gnu/release/$target
scratch=${FUZZ_SCRATCH:-$(mktemp -d)}
mkdir -p "$scratch" "corpus/$target"
log=$scratch.log
t0=$SECONDS
"$binary" "$scratch" "corpus/$target" -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="artifacts/$target/" >"$log" 2>&1 &
pid=$!
mkdir -p "artifacts/$target"
# Poll the fuzzer's CPU time (utime + stime of the process, in clock ticks) until the budget is spent.
hz=$(getconf CLK_TCK)
cpu=0
while kill -0 "$pid" 2>/dev/null; do
  cpu=$(awk -v hz="$hz" '{ print int(($14 + $15) / hz) }' "/proc/$pid/stat" 2>/dev/null || echo "$cpu")
  if [ "$cpu" -ge "$budget" ]; then
    kill -INT "$pid"
    break
  fi
  sleep 10
done
status=0
wait "$pid" || status=$?
runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 || true)
# libFuzzer exits 72 when interrupted (the budget is spent); anything else but 0 is a failure.
if [ "$status" -ne 0 ] && [ "$status" -ne 72 ] ||
    grep -qE 'ERROR: libFuzzer|panicked|deadly signal|SUMMARY: .*Sanitizer' "$log"; then
  echo "fuzz: $target FAILED after $cpu CPU s ($((SECONDS - t0)) s wall); log $log"
  grep -vE '^\s+[0-9]+: |^\s+at ' "$log" | tail -30
  exit 1
fi
echo "fuzz: $target: $runs runs, $cpu CPU s, $((SECONDS - t0)) s wall, $cov, no crash; new inputs in $scratch"
