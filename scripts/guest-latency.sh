#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The QD1 per-layer latency table of a QEMU guest's stack on nvmemu, in one command:
#
#   scripts/guest-latency.sh [--plot FILE.svg]
#
# Boots the e2e harness's TCG guest (tests/e2e/qemu.sh, which provisions QEMU and a Debian
# kernel on first use) against `nvmemu serve` with bdev_enable_histogram on, runs a QD1 fio
# job with the kernel's block, nvme and irq trace events on, reads the target's per-layer
# histograms for the same window and prints layer / cumulative ns / delta ns / %
# (docs/latency.md explains the rows). NVMEMU_LAT_SECONDS sets the fio run time (3 s).
set -euo pipefail
plot=""
case "${1:-}" in
--plot)
    plot=$(realpath -m "${2:?--plot needs a file name}")
    ;;
"") ;;
*)
    echo "usage: $0 [--plot FILE.svg]" >&2
    exit 2
    ;;
esac
exec "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/qemu.sh" latency ${plot:+"$plot"}
