#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The error-bdev check of tests/peers/spdk.sh (sourced by it, after its helpers): SPDK's
# error bdev RPCs run alike on SPDK's nvmf_tgt and on `nvmemu serve`, then the same reads
# from spdk_nvme_perf meet the injection left armed; the answers (results and error codes)
# and bdev_get_iostat's io_error objects must be the same (tests/peers/error_bdev_rpc.py).

# error_bdev_run NAME SOCK: EE_Malloc0 in a subsystem at $WORK/NAME-vfu, the RPC sequence,
# 64 reads at QD1 from spdk_nvme_perf, and the iostat.
error_bdev_run() {
  local name=$1 sock=$2 dir=$WORK/$1-vfu
  rpcpy "$sock" framework_wait_init
  [ "$(rpcpy "$sock" bdev_malloc_create 64 512 -b Malloc0)" = Malloc0 ]
  rpcpy "$sock" bdev_error_create Malloc0 >/dev/null
  rpcpy "$sock" bdev_wait_for_examine
  rpcpy "$sock" nvmf_create_transport -t VFIOUSER
  rpcpy "$sock" nvmf_create_subsystem "$NQN" -s SPDK00 -a
  rpcpy "$sock" nvmf_subsystem_add_ns "$NQN" EE_Malloc0
  mkdir -p "$dir"
  rpcpy "$sock" nvmf_subsystem_add_listener "$NQN" -t VFIOUSER -a "$dir" -s 0
  python3 "$HERE/error_bdev_rpc.py" inject "$sock" "$WORK/$name-inject.json"
  # Three of the reads fail: perf reports them and may exit non-zero; the iostat judges.
  run_bounded 60 "$name-perf" "$P/spdk_nvme_perf" -r "trtype:VFIOUSER traddr:$dir subnqn:$NQN" \
    -c 0x1 -g -s 256 -q 1 -o 512 -w randread -t 1 || true
  python3 "$HERE/error_bdev_rpc.py" iostat "$sock" "$WORK/$name-iostat.json"
}

check_error_bdev() {
  nvmf_tgt error-tgt
  error_bdev_run error-spdk "$WORK/error-tgt.sock"
  rpcpy "$WORK/error-tgt.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$TGT_PID"
  start error-serve "$BIN" serve -r "$WORK/error-serve.sock" -m 0x2
  wait_socket "$WORK/error-serve.sock" "$LAST_PID"
  error_bdev_run error-nvmemu "$WORK/error-serve.sock"
  python3 "$HERE/error_bdev_rpc.py" compare "$WORK/error-spdk-inject.json" \
    "$WORK/error-nvmemu-inject.json"
  python3 "$HERE/error_bdev_rpc.py" compare "$WORK/error-spdk-iostat.json" \
    "$WORK/error-nvmemu-iostat.json"
}
