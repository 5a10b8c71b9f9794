#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The kernel study's seed table, inside the e2e harness's TCG guest, in one command:
#
#   scripts/guest-tcp-bench.sh            the full comparison; writes BENCHMARKS.md's
#                                         guest-tcp section
#   scripts/guest-tcp-bench.sh --check    connect all three targets and verify each namespace
#                                         (fio crc32c), no timing: a short run for CI
#
# One guest (tests/e2e/qemu.sh tcp-bench, guest/tcp_bench.sh) runs Linux's nvmet-tcp with a
# memory-backed null_blk namespace and with a brd namespace, and nvmemu serve --tcp with a
# malloc namespace of the same size, all on its own loopback; the guest kernel's nvme-tcp
# connects to each and fio runs 4k randread and randwrite, iodepth 64, TB_JOBS jobs, the
# targets interleaved over TB_ROUNDS rounds; scripts/guest_tcp_report.py makes the table of
# medians relative to nvmet + null_blk. Heavy: run it under flock /tmp/nvmemu-heavy.lock on a
# shared machine.
#
# Environment: TB_SECONDS (8 s per run), TB_ROUNDS (5), TB_JOBS (2), TB_SIZE_MB (128),
# TB_ENGINE (io_uring), NVMEMU_BIN (default: cargo build --release -p nvmemu),
# BENCHMARKS (the file to write, default BENCHMARKS.md at the top of the tree). The guest's
# results (fio's JSON of every run) stay in target/bench-results/guest-tcp-<time>.txt.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QEMU_SH=$ROOT/tests/e2e/qemu.sh

case "${1:-}" in
--check) exec "$QEMU_SH" tcp-bench check ;;
"") ;;
*)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac

results=${CARGO_TARGET_DIR:-$ROOT/target}/bench-results/guest-tcp-$(date -u +%Y%m%dT%H%M%SZ).txt
mkdir -p "$(dirname "$results")"
command="scripts/guest-tcp-bench.sh  # TB_SECONDS=${TB_SECONDS:-8} TB_ROUNDS=${TB_ROUNDS:-5} TB_JOBS=${TB_JOBS:-2} TB_SIZE_MB=${TB_SIZE_MB:-128} TB_ENGINE=${TB_ENGINE:-io_uring}"
load_before=$(cut -d' ' -f1 /proc/loadavg)
"$QEMU_SH" tcp-bench full "$results"
load_after=$(cut -d' ' -f1 /proc/loadavg)
prov=$("$ROOT/tests/e2e/provision.sh")
qemu_ver=$(sed -n "s/^QEMU_VER='\(.*\)'$/\1/p" "$prov/env")
python3 "$ROOT/scripts/guest_tcp_report.py" "$results" --command "$command" --qemu "$qemu_ver" \
    --load "$load_before" "$load_after" --raw "${results#"$ROOT"/}" --splice "${BENCHMARKS:-$ROOT/BENCHMARKS.md}"
