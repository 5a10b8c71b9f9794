#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The QD1 per-layer latency table of a host client on nvmemu (the guest's is
# scripts/guest-latency.sh):
#
#   scripts/client-latency.sh nvmemu [--plot FILE.svg]   nvmemu's driver (nvmemu bench --socket)
#   scripts/client-latency.sh spdk [--plot FILE.svg]     SPDK's spdk_nvme_perf (root, hugepages)
#
# Starts `nvmemu serve --busy-poll` (poller on CPU 1, 256 MiB malloc namespace), turns
# bdev_enable_histogram on, reads the target's breakdown, runs the client for
# NVMEMU_LAT_SECONDS (3) of 4 KiB random reads at QD1 on CPU 0, reads the breakdown again
# and prints layer / cumulative ns / delta ns / % (scripts/latency_table.py): the client's
# mean latency, the target (doorbell seen to interrupt signalled) and the backend.
# Environment: NVMEMU_BIN (default target/release/nvmemu, built if missing),
# NVMEMU_SPDK_PEERS (SPDK's tools, docs/spdk-peers.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
client=${1:-}
plot=""
[[ "${2:-}" == --plot ]] && plot=$(realpath -m "${3:?--plot needs a file name}")
case $client in
nvmemu | spdk) ;;
*)
    echo "usage: $0 nvmemu|spdk [--plot FILE.svg]" >&2
    exit 2
    ;;
esac
BIN=${NVMEMU_BIN:-$ROOT/target/release/nvmemu}
if [[ ! -x "$BIN" ]]; then
    (cd "$ROOT" && cargo build --release -p nvmemu >&2)
fi
SECS=${NVMEMU_LAT_SECONDS:-3}
# shellcheck source=scripts/lib/serve.sh
. "$ROOT/scripts/lib/serve.sh"
serve_scratch
mkdir "$WORK/ctrl"
serve_start "$WORK/serve.log" "$WORK/ctrl/cntrl" "$WORK/rpc.sock" -- \
    "$BIN" serve -r "$WORK/rpc.sock" --socket-dir "$WORK/ctrl" -m 0x2 --busy-poll \
    --ns malloc:size=256M,lba=512
rpc() { "$BIN" rpc -s "$WORK/rpc.sock" "$@"; }
rpc bdev_enable_histogram ns0n1
rpc nvmemu_get_latency_breakdown >"$WORK/before.json"
case $client in
nvmemu)
    taskset -c 0 "$BIN" bench --socket "$WORK/ctrl" --rw=randread --bs=4k --iodepth=1 \
        --runtime="$SECS" --time_based --output-format=json --eta=never >"$WORK/client.json"
    lat=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(d["jobs"][0]["read"]["lat_ns"]["mean"]))' "$WORK/client.json")
    name="nvmemu bench (driver, mean latency)"
    ;;
spdk)
    peers=${NVMEMU_SPDK_PEERS:-}
    [[ -x "$peers/bin/spdk_nvme_perf" ]] || {
        echo "no spdk_nvme_perf under $peers (set NVMEMU_SPDK_PEERS: docs/spdk-peers.md)" >&2
        exit 1
    }
    "$peers/setup.sh" >/dev/null
    timeout -s KILL $((SECS + 60)) "$peers/bin/spdk_nvme_perf" \
        -r "trtype:VFIOUSER traddr:$WORK/ctrl subnqn:nqn.2019-07.io.nvmemu:cnode1" \
        -c 0x1 -g -s 256 -q 1 -o 4096 -w randread -t "$SECS" >"$WORK/perf.txt" 2>&1 || {
        tail -20 "$WORK/perf.txt" >&2
        exit 1
    }
    # "Total : IOPS MiB/s Average min max", latencies in microseconds.
    lat=$(awk -F: '/^Total/ { split($2, f, " "); printf "%.0f", f[3] * 1000 }' "$WORK/perf.txt")
    name="spdk_nvme_perf (driver, mean latency)"
    ;;
esac
rpc nvmemu_get_latency_breakdown >"$WORK/after.json"
[[ -n "$lat" ]] || {
    echo "no mean latency from the client" >&2
    exit 1
}
python3 "$ROOT/scripts/latency_table.py" --before "$WORK/before.json" --after "$WORK/after.json" \
    --title "$client client: 4 KiB randread QD1, nvmemu serve --busy-poll" \
    ${plot:+--plot "$plot"} "$name=$lat"
