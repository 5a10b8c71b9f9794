#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The issue's acceptance run against the real binary:
#   1. SPDK's reference set-up script, as `nvmemu rpc` command lines, against `nvmemu serve`;
#      then `nvmemu bench --socket $TRADDR` must pass a crc32c verify run; save_config is
#      replayed by a second `nvmemu serve --json` and must give the same subsystems.
#   2. tests/rpc/test_rawrpc.py (raw JSON-RPC spoken like rpc.py) against a fresh server.
# Usage: tests/rpc/reference.sh [path/to/nvmemu]   (default: target/debug/nvmemu, built here)
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN=${1:-}
if [ -z "$BIN" ]; then
  cargo build -q -p nvmemu
  BIN="${CARGO_TARGET_DIR:-target}/debug/nvmemu"
fi
TRADDR=${NVMEMU_TRADDR:-/tmp/vfu-test}
NQN=nqn.2016-06.io.spdk:cnode1
. scripts/lib/serve.sh
serve_scratch
SOCK=$WORK/rpc.sock

# start_serve ARGS...: a server on $SOCK, ready once framework_wait_init answers.
start_serve() {
  serve_start "$WORK/serve.log" "$SOCK" -- "$BIN" serve -r "$SOCK" -m 0x1 "$@"
  "$BIN" rpc -s "$SOCK" -t 5 framework_wait_init
}

stop_serve() {
  "$BIN" rpc -s "$SOCK" spdk_kill_instance SIGTERM
  wait "$SERVE_PID"
  SERVE_PID=
  [ ! -e "$SOCK" ] || { echo "RPC socket left behind" >&2; return 1; }
}

rpc() { "$BIN" rpc -s "$SOCK" "$@"; }

mkdir -p "$TRADDR"

echo "--- reference set-up script through nvmemu rpc"
start_serve
rpc framework_wait_init
[ "$(rpc bdev_malloc_create 4092 512 -b Malloc0)" = Malloc0 ]
rpc nvmf_create_transport -t VFIOUSER
rpc nvmf_create_subsystem "$NQN" -s SPDK00 -a
rpc nvmf_subsystem_add_ns "$NQN" Malloc0
rpc nvmf_subsystem_add_listener "$NQN" -t VFIOUSER -a "$TRADDR" -s 0

echo "--- nvmemu bench --socket $TRADDR (verify)"
"$BIN" bench --socket "$TRADDR" --rw randwrite --verify crc32c --size 32M --bs 4k \
  --iodepth 16 --eta never

echo "--- save_config replayed by nvmemu serve --json"
rpc save_config > "$WORK/config.json"
rpc nvmf_get_subsystems > "$WORK/subsystems.before"
stop_serve
start_serve --json "$WORK/config.json"
rpc nvmf_get_subsystems > "$WORK/subsystems.after"
diff -u "$WORK/subsystems.before" "$WORK/subsystems.after"
stop_serve

if command -v python3 >/dev/null; then
  echo "--- tests/rpc/test_rawrpc.py against a fresh nvmemu serve"
  start_serve
  NVMEMU_RPC_SOCK="$SOCK" NVMEMU_VFU_DIR="$TRADDR" python3 tests/rpc/test_rawrpc.py
  # The suite ends with spdk_kill_instance: the server exits by itself, cleanly.
  wait "$SERVE_PID"
  SERVE_PID=
else
  echo "--- python3 not found: tests/rpc/test_rawrpc.py skipped"
fi
echo "--- rpc reference run passed"
