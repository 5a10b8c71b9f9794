#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# SPDK's own tools as independent peers of `nvmemu serve` (SPDK v25.05 binaries, unchanged):
#   checkers    unit tests of spdk_results.py and rpc_shape.py, which judge the checks below
#   identify    spdk_nvme_identify sees the serial, model and namespace nvmemu serves
#   waiting     spdk_nvme_identify as a second client waits while spdk_nvme_perf is attached,
#               then runs (as against SPDK's nvmf_tgt); the server logs that it waits
#   identity    two servers set up alike: their NGUIDs differ (each is the bdev's random UUID,
#               no EUI-64); both report a shared namespace (CMIC, NMIC) with reservations
#   perf        spdk_nvme_perf, 4 KiB randread QD16 and randwrite QD16: IOPS > 0, no errors
#   bdevperf    bdevperf -w verify over bdev_nvme (SPDK's bdev layer): IOPS > 0, 0 failed I/O
#   file-bdevperf  bdevperf -w verify against a file-backed namespace (--ns file:path=):
#               0 failed I/O; then nvmemu bench writes crc32c-verified blocks, the server
#               restarts on the same file, and bench --verify_only finds every block intact
#   bdevperf-faults  `serve --fault` fails every 50th read (Unrecovered Read Error, DNR);
#               bdevperf -f -w randread counts as many failed I/O as nvmemu injected
#   error-bdev  SPDK's bdev_error_inject_error sequence on nvmf_tgt and on nvmemu serve, then
#               spdk_nvme_perf reads meet the armed failures: the same results and error
#               codes, the same bdev_get_iostat io_error (tests/peers/spdk_error_bdev.sh)
#   compliance  nvme_compliance (SPDK's CUnit suite for vfio-user controllers): every test passes
#   rpc-setup   SPDK's rpc.py runs the set-up script against nvmemu serve; nvmemu bench
#               --verify=crc32c then passes on the controller it created
#   rpc-shape   the same script and queries against SPDK's nvmf_tgt: nvmemu's answers must
#               have the shape of SPDK's (tests/peers/rpc_shape.py)
#   hosts       a subsystem without allow_any_host refuses spdk_nvme_identify (with a log
#               line), nvmf_subsystem_allow_any_host -e admits it
#   rpc-cli     `nvmemu rpc` runs the set-up script against nvmf_tgt; spdk_nvme_identify sees
#               the controller it configured
#   config-to-spdk    nvmemu's save_config loaded by `nvmf_tgt --json`; identify sees it
#   config-from-spdk  nvmf_tgt's save_config loaded by `nvmemu serve --json` (each call it
#               skips named in the log); identify sees it
#   tcp-identify  `serve --tcp`: spdk_nvme_identify over NVMe/TCP sees the same controller,
#               and against the discovery NQN lists the subsystem with its listener
#   tcp-perf    spdk_nvme_perf over TCP: read, write and mixed, 512 B to 128 KiB, QD 1 to
#               128, -P 4: IOPS > 0, no errors
#   tcp-bdevperf  bdevperf with bdev_nvme_attach_controller -t tcp: -w verify and -w reset,
#               0 failed I/O
#   tcp-poll-groups  `serve -m 0x3 --tcp` (two TCP poll groups), two subsystems: bdevperf
#               -w verify on a controller of each, 0 failed I/O; nvmf_get_stats shows each
#               poll group serving one controller's queues
#   tcp-hostile spdk_nvme_perf over TCP (randrw QD32) while tcp_hostile.py sends bad PDUs
#               on connection after connection and holds 300 idle ones: each bad one ends
#               with a C2HTermReq, perf has no errors
#   tcp-driver  nvmemu's own NVMe/TCP host against SPDK's nvmf_tgt TCP target: identify --tcp
#               sees its controller and namespace; bench --tcp randwrite with crc32c verify
#               and randread, 512 B to 128 KiB, QD 1 and 32, with and without digests: no errors
# Each check gets a fresh server. Prints each check's time and "N passed, N failed".
#
# Usage: tests/peers/spdk.sh [path/to/nvmemu]   (default: cargo build --release -p nvmemu)
# Environment:
#   NVMEMU_SPDK_PEERS  the SPDK tools (docs/spdk-peers.md; .ci/run sets it to the CI machine's);
#                      missing: skipped in one line, except under CI=true where it fails
#   NVMEMU_PEERS_KEEP=1  keep the run directory (logs, JSON) even when every check passes
#   NVMEMU_PEERS_ONLY="NAME..."  run only these checks (rpc-shape needs rpc-setup)
#   NVMEMU_PEERS_TCP_PORT  loopback port of the NVMe/TCP checks (default 4420)
# Needs root (hugepages, apt-get for the tools' libraries).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/serve.sh
. scripts/lib/serve.sh

PEERS=${NVMEMU_SPDK_PEERS:-}
if [ ! -x "$PEERS/bin/nvmf_tgt" ]; then
  if [ "${CI:-}" = true ]; then
    echo "tests/peers/spdk.sh: FAILED: no SPDK peer tools at $PEERS (CI never skips this step)" >&2
    exit 1
  fi
  echo "tests/peers/spdk.sh: skipped: no SPDK peer tools at $PEERS"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "tests/peers/spdk.sh: FAILED: needs root (hugepages, apt-get); run it with sudo" >&2
  exit 1
fi
PEERS=$(cd "$PEERS" && pwd)
P=$PEERS/bin
HERE=$(pwd)/tests/peers

BIN=${1:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p nvmemu
  BIN="${CARGO_TARGET_DIR:-target}/release/nvmemu"
fi
BIN=$(realpath "$BIN")

NQN=nqn.2016-06.io.spdk:cnode1
SERIAL=NVMEMU-PEERS-01
MODEL="nvmemu SPDK peer check"
NS_BYTES=$((1 << 30))
LBA=512
WORK=$(mktemp -d /tmp/nvmemu-peers.XXXXXX)
PIDS=()  # started by this shell and not yet waited for
ENDED=() # waited for: not ours to signal any more, only their leftover files remain
PASSED=()
FAILED=()

# ended PID: PID has been waited for.
ended() {
  local p keep=()
  for p in "${PIDS[@]}"; do
    [ "$p" = "$1" ] || keep+=("$p")
  done
  PIDS=("${keep[@]}")
  ENDED+=("$1")
}

# stop PID: SIGTERM, then SIGKILL after 10 s (a wedged SPDK app may ignore SIGTERM).
stop() {
  serve_stop "$1"
  ended "$1"
}

# Stops what this shell started, newest first, and removes the hugepage files and DPDK
# runtime directories of those processes: SPDK apps leave them behind when killed, and
# spdk_nvme_perf even on a clean exit.
stop_started() {
  local i pid
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    stop "${PIDS[i]}"
  done
  for pid in "${ENDED[@]}"; do
    rm -rf "${HUGE:-/nonexistent}/spdk_pid${pid}map_"* "/var/run/dpdk/spdk_pid$pid"
  done
  ENDED=()
}

# Then the run directory, unless a check failed.
cleanup() {
  local rc=$?
  stop_started
  if [ "$rc" -eq 0 ] && [ "${NVMEMU_PEERS_KEEP:-0}" != 1 ]; then
    rm -rf "$WORK"
  else
    echo "run directory kept: $WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT

t0=$SECONDS
if ! dpkg -s libcunit1 >/dev/null 2>&1; then # nvme_compliance's, not in setup.sh's list
  { apt-get update -q=2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q=2 --no-install-recommends libcunit1 \
      >/dev/null; } || { echo "tests/peers/spdk.sh: FAILED: cannot install libcunit1" >&2; exit 1; }
fi
HUGE=$("$PEERS/setup.sh" | tail -n 1) ||
  { echo "tests/peers/spdk.sh: FAILED: $PEERS/setup.sh (libraries, hugepages)" >&2; exit 1; }
echo "--- peer set-up: $PEERS, hugepages at $HUGE ($((SECONDS - t0)) s)"

# ---- helpers -------------------------------------------------------------------------

# start NAME CMD...: runs CMD in the background, output in $WORK/NAME.log; sets LAST_PID and
# LAST_LOG.
start() {
  local name=$1
  shift
  LAST_LOG=$WORK/$name.log
  "$@" >"$LAST_LOG" 2>&1 &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
}

# run_bounded SECONDS NAME CMD...: CMD with its output in $WORK/NAME.log, killed (SIGKILL:
# a hung SPDK client may ignore SIGTERM) if it still runs after SECONDS; its exit status.
run_bounded() {
  local limit=$1 name=$2 rc=0
  shift 2
  start "$name" "$@"
  if ! timeout "$limit" tail -s 0.1 --pid="$LAST_PID" -f /dev/null; then
    echo "$name: still running after $limit s: killed"
    kill -KILL "$LAST_PID" 2>/dev/null || true
  fi
  wait "$LAST_PID" || rc=$?
  ended "$LAST_PID"
  return "$rc"
}

# wait_socket PATH PID: the server at PID, the last one started, listens on PATH within 20 s
# (otherwise its log's tail).
wait_socket() { SERVE_TIMEOUT=20 serve_wait "$2" "$LAST_LOG" "$1"; }

rpcpy() { python3 "$PEERS/scripts/rpc.py" -s "$@"; }
# nvmemu_rpc SOCK ARGS...: `nvmemu rpc`, which takes rpc.py's command lines.
nvmemu_rpc() { "$BIN" rpc -s "$@"; }

# serve NAME ARGS...: `nvmemu serve` on core 1 with one 1 GiB malloc namespace at
# $WORK/NAME/cntrl; sets SERVE_PID and TRID (SPDK's transport ID for it).
serve() {
  local name=$1
  shift
  mkdir -p "$WORK/$name"
  start "$name-serve" "$BIN" serve --socket-dir "$WORK/$name" --ns "malloc:size=1G,lba=$LBA" \
    -m 0x2 --serial "$SERIAL" --model "$MODEL" -r "$WORK/$name.sock" "$@"
  SERVE_PID=$LAST_PID
  wait_socket "$WORK/$name/cntrl" "$SERVE_PID"
  TRID="trtype:VFIOUSER traddr:$WORK/$name subnqn:$NQN"
}

# check NAME FUNCTION: runs FUNCTION in a subshell under `set -e` (output in $WORK/NAME.out,
# then shown; what it started is stopped when it ends), times it and counts it; a failing
# check does not stop the others.
check() {
  local name=$1 fn=$2 t=$SECONDS rc
  if [ -n "${NVMEMU_PEERS_ONLY:-}" ] && [[ " $NVMEMU_PEERS_ONLY " != *" $name "* ]]; then
    return 0
  fi
  echo "--- $name"
  set +e
  (
    set -e
    trap stop_started EXIT
    "$fn"
  ) >"$WORK/$name.out" 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 0 ]; then
    PASSED+=("$name")
    sed 's/^/    /' "$WORK/$name.out"
    echo "    $name: passed ($((SECONDS - t)) s)"
  else
    FAILED+=("$name")
    sed 's/^/    /' "$WORK/$name.out"
    echo "    $name: FAILED, exit $rc ($((SECONDS - t)) s; logs in $WORK)"
  fi
}

# ---- the checks (each runs in a subshell; `set -e` applies) ---------------------------

check_checkers() {
  python3 "$HERE/test_checkers.py" 2>&1 | tail -n 1
  return "${PIPESTATUS[0]}"
}

check_identify() {
  serve identify
  run_bounded 60 identify "$P/spdk_nvme_identify" -g -r "$TRID"
  python3 "$HERE/spdk_results.py" identify "$WORK/identify.log" \
    --serial "$SERIAL" --model "$MODEL" --lbas $((NS_BYTES / LBA)) --lba-size "$LBA"
}

# A second client waits its turn: identify started while perf is attached must end after
# perf, and succeed.
check_waiting() {
  RUST_LOG=info serve waiting # its "client connected" line
  start waiting-first "$P/spdk_nvme_perf" -r "$TRID" -c 0x1 -g -s 256 -q 4 -o 4096 \
    -w randread -t 5
  local first=$LAST_PID
  for _ in $(seq 100); do # perf's controller is attached
    grep -q "client connected" "$WORK/waiting-serve.log" && break
    sleep 0.1
  done
  run_bounded 60 waiting-second "$P/spdk_nvme_identify" -g -r "$TRID"
  if kill -0 "$first" 2>/dev/null; then
    echo "the second client ran while the first was still attached"
    return 1
  fi
  wait "$first"
  ended "$first"
  python3 "$HERE/spdk_results.py" perf "$WORK/waiting-first.log" --label "first client"
  python3 "$HERE/spdk_results.py" identify "$WORK/waiting-second.log" \
    --serial "$SERIAL" --model "$MODEL" --lbas $((NS_BYTES / LBA)) --lba-size "$LBA"
  grep -m1 -o "client of .* waits: .*" "$WORK/waiting-serve.log"
}

check_identity() {
  local n
  for n in 1 2; do
    serve "identity$n"
    run_bounded 60 "identity$n" "$P/spdk_nvme_identify" -g -r "$TRID"
  done
  python3 "$HERE/spdk_results.py" identity "$WORK/identity1.log" "$WORK/identity2.log"
}

check_perf() {
  serve perf
  local rw
  for rw in randwrite randread; do
    run_bounded 60 "perf-$rw" "$P/spdk_nvme_perf" -r "$TRID" -c 0x1 -g -s 256 -q 16 -o 4096 \
      -w "$rw" -t 2
    python3 "$HERE/spdk_results.py" perf "$WORK/perf-$rw.log" --label "4 KiB $rw QD16"
  done
}

check_bdevperf() {
  serve bdevperf
  cat >"$WORK/bdevperf.json" <<J
{"subsystems": [{"subsystem": "bdev", "config": [{"method": "bdev_nvme_attach_controller",
  "params": {"name": "Nvme0", "trtype": "vfiouser", "traddr": "$WORK/bdevperf",
             "subnqn": "$NQN"}}]}]}
J
  # -z: wait for perform_tests, whose JSON answer carries the per-job results.
  start bdevperf "$P/bdevperf" --json "$WORK/bdevperf.json" -m 0x1 -g -s 512 \
    --huge-dir "$HUGE" -r "$WORK/bdevperf-rpc.sock" -q 32 -o 4096 -w verify -t 5 -z
  local bp=$LAST_PID
  wait_socket "$WORK/bdevperf-rpc.sock" "$bp"
  PYTHONPATH="$PEERS/python" python3 "$HERE/spdk_results.py" bdevperf \
    "$WORK/bdevperf-rpc.sock" --timeout 30
  rpcpy "$WORK/bdevperf-rpc.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$bp"
}

# serve_file NAME IMG: `nvmemu serve` with IMG as its file-backed namespace at
# $WORK/file-bdevperf/cntrl, RPC on $WORK/NAME.sock; sets SERVE_PID.
serve_file() {
  mkdir -p "$WORK/file-bdevperf"
  start "$1-serve" "$BIN" serve --socket-dir "$WORK/file-bdevperf" \
    --ns "file:path=$2,lba=$LBA" -m 0x2 -r "$WORK/$1.sock"
  SERVE_PID=$LAST_PID
  wait_socket "$WORK/file-bdevperf/cntrl" "$SERVE_PID"
}

# The same bdevperf verify run on a namespace backed by a file (io_uring, O_DIRECT). Then
# the data outlives the server: nvmemu bench writes blocks with crc32c headers, the server
# stops, a new one opens the same file, and bench --verify_only reads every block back as
# written (a file that lost them fails it: no verify header).
check_file_bdevperf() {
  local img=$WORK/file-bdevperf.img
  local job=(--rw=randwrite --bs=4k --iodepth=16 --size=64M --verify=crc32c --eta never)
  truncate -s 256M "$img"
  serve_file file-bdevperf "$img"
  cat >"$WORK/file-bdevperf.json" <<J
{"subsystems": [{"subsystem": "bdev", "config": [{"method": "bdev_nvme_attach_controller",
  "params": {"name": "Nvme0", "trtype": "vfiouser", "traddr": "$WORK/file-bdevperf",
             "subnqn": "$NQN"}}]}]}
J
  start file-bdevperf "$P/bdevperf" --json "$WORK/file-bdevperf.json" -m 0x1 -g -s 512 \
    --huge-dir "$HUGE" -r "$WORK/file-bdevperf-rpc.sock" -q 32 -o 4096 -w verify -t 5 -z
  local bp=$LAST_PID
  wait_socket "$WORK/file-bdevperf-rpc.sock" "$bp"
  PYTHONPATH="$PEERS/python" python3 "$HERE/spdk_results.py" bdevperf \
    "$WORK/file-bdevperf-rpc.sock" --timeout 30
  rpcpy "$WORK/file-bdevperf-rpc.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$bp"
  "$BIN" bench --socket "$WORK/file-bdevperf" "${job[@]}" >"$WORK/file-bench-write.log" 2>&1 ||
    { cat "$WORK/file-bench-write.log"; return 1; }
  nvmemu_rpc "$WORK/file-bdevperf.sock" spdk_kill_instance SIGTERM
  stop "$SERVE_PID"
  serve_file file-bdevperf-again "$img"
  "$BIN" bench --socket "$WORK/file-bdevperf" "${job[@]}" --verify_only \
    >"$WORK/file-bench-verify.log" 2>&1 || { cat "$WORK/file-bench-verify.log"; return 1; }
  grep -E '^ *verify +:' "$WORK/file-bench-verify.log" | sed 's/^ */after a restart: /'
}

# nvmemu's fault rules seen by SPDK's bdev layer: DNR, so bdev_nvme does not retry (each
# injected error is one failed bdev I/O); -f keeps bdevperf going after failures.
check_bdevperf_faults() {
  serve bdevperf-faults --fault "io-type=read,sct=2,sc=0x81,dnr,every=50,count=0"
  cat >"$WORK/bdevperf-faults.json" <<J
{"subsystems": [{"subsystem": "bdev", "config": [{"method": "bdev_nvme_attach_controller",
  "params": {"name": "Nvme0", "trtype": "vfiouser", "traddr": "$WORK/bdevperf-faults",
             "subnqn": "$NQN"}}]}]}
J
  start bdevperf-faults "$P/bdevperf" --json "$WORK/bdevperf-faults.json" -m 0x1 -g -s 512 \
    --huge-dir "$HUGE" -r "$WORK/bdevperf-faults-rpc.sock" -q 32 -o 4096 -w randread -t 3 -z -f
  local bp=$LAST_PID
  wait_socket "$WORK/bdevperf-faults-rpc.sock" "$bp"
  PYTHONPATH="$PEERS/python" python3 "$HERE/spdk_results.py" bdevperf-run \
    "$WORK/bdevperf-faults-rpc.sock" "$WORK/bdevperf-faults-results.json" --timeout 30
  nvmemu_rpc "$WORK/bdevperf-faults.sock" nvmemu_bdev_get_faults >"$WORK/bdevperf-faults-rules.json"
  python3 "$HERE/spdk_results.py" bdevperf-failed "$WORK/bdevperf-faults-results.json" \
    "$WORK/bdevperf-faults-rules.json"
  rpcpy "$WORK/bdevperf-faults-rpc.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$bp"
}

check_compliance() {
  serve compliance
  local rc=0
  run_bounded 180 compliance "$P/nvme_compliance" -g -r "$TRID" || rc=$?
  python3 "$HERE/spdk_results.py" compliance "$WORK/compliance.log" || return 1
  # A crash or a non-zero exit after a complete summary is a failure too.
  [ "$rc" -eq 0 ] || { echo "nvme_compliance exited with $rc"; return 1; }
}

# setup_script SOCK DIR [CLIENT]: the README's set-up script, plus an unclaimed null bdev,
# through CLIENT (default SPDK's rpc.py; nvmemu_rpc takes the same command lines).
setup_script() {
  local sock=$1 dir=$2 rpc=${3:-rpcpy}
  "$rpc" "$sock" framework_wait_init
  [ "$("$rpc" "$sock" bdev_malloc_create 64 512 -b Malloc0)" = Malloc0 ]
  [ "$("$rpc" "$sock" bdev_null_create Null0 64 512)" = Null0 ]
  "$rpc" "$sock" bdev_wait_for_examine
  # Limits well above what the checks run, so that bdev_get_bdevs and save_config carry
  # them on both targets (compared by rpc-shape, carried by the config round trips).
  "$rpc" "$sock" bdev_set_qos_limit Malloc0 --rw-ios-per-sec 1000000 --rw-mbytes-per-sec 10000
  "$rpc" "$sock" nvmf_create_transport -t VFIOUSER
  "$rpc" "$sock" nvmf_create_subsystem "$NQN" -s SPDK00 -a
  "$rpc" "$sock" nvmf_subsystem_add_ns "$NQN" Malloc0
  mkdir -p "$dir"
  "$rpc" "$sock" nvmf_subsystem_add_listener "$NQN" -t VFIOUSER -a "$dir" -s 0
}

# identify_setup NAME DIR: spdk_nvme_identify sees the controller setup_script made at DIR
# (Malloc0: 64 MiB of 512 B blocks).
identify_setup() {
  run_bounded 60 "$1" "$P/spdk_nvme_identify" -g -r "trtype:VFIOUSER traddr:$2 subnqn:$NQN"
  python3 "$HERE/spdk_results.py" identify "$WORK/$1.log" \
    --serial SPDK00 --model "SPDK bdev Controller" --lbas $((64 << 11)) --lba-size 512
}

# nvmf_tgt NAME ARGS...: SPDK's target on core 1 with its RPC socket at $WORK/NAME.sock;
# sets TGT_PID.
nvmf_tgt() {
  local name=$1
  shift
  start "$name" "$P/nvmf_tgt" -m 0x2 -r "$WORK/$name.sock" --huge-dir "$HUGE" "$@"
  TGT_PID=$LAST_PID
  wait_socket "$WORK/$name.sock" "$TGT_PID"
}

# The queries whose answers are compared, saved as $2/METHOD.json: without parameters,
# then those that name the subsystem.
SHAPE_METHODS=(bdev_get_bdevs nvmf_get_subsystems nvmf_get_transports bdev_get_iostat
  framework_get_reactors save_config rpc_get_methods spdk_get_version nvmf_get_stats
  thread_get_stats thread_get_pollers thread_get_io_channels framework_get_scheduler
  log_get_flags log_get_level log_get_print_level notify_get_types notify_get_notifications)
SHAPE_NQN_METHODS=(nvmf_subsystem_get_controllers nvmf_subsystem_get_qpairs
  nvmf_subsystem_get_listeners)
# query_all SOCK OUT DIR: the queries, while spdk_nvme_perf is attached to the controller
# at DIR (so the controller and qpair listings have something to list).
query_all() {
  local sock=$1 out=$2 dir=$3 m perf
  mkdir -p "$out"
  start "perf-$(basename "$out")" "$P/spdk_nvme_perf" -r "trtype:VFIOUSER traddr:$dir subnqn:$NQN" \
    -c 0x1 -g -s 256 -q 4 -o 4096 -w randread -t 60
  perf=$LAST_PID
  for _ in $(seq 100); do
    [ "$(rpcpy "$sock" nvmf_subsystem_get_controllers "$NQN")" != "[]" ] && break
    sleep 0.1
  done
  for m in "${SHAPE_NQN_METHODS[@]}"; do
    rpcpy "$sock" "$m" "$NQN" >"$out/$m.json"
  done
  stop "$perf"
  for m in "${SHAPE_METHODS[@]}"; do
    rpcpy "$sock" "$m" >"$out/$m.json"
  done
}

check_rpc_setup() {
  start rpc-serve "$BIN" serve -r "$WORK/rpc.sock" -m 0x2
  local pid=$LAST_PID
  wait_socket "$WORK/rpc.sock" "$pid"
  setup_script "$WORK/rpc.sock" "$WORK/rpc-vfu" >/dev/null
  "$BIN" bench --socket "$WORK/rpc-vfu" --rw=randwrite --verify=crc32c --size=16M \
    --eta never >"$WORK/rpc-bench.log" 2>&1 || { cat "$WORK/rpc-bench.log"; return 1; }
  grep -E '^ *verify +:' "$WORK/rpc-bench.log" | sed 's/^ */nvmemu bench crc32c /'
  query_all "$WORK/rpc.sock" "$WORK/shape-nvmemu" "$WORK/rpc-vfu"
  rpcpy "$WORK/rpc.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$pid"
}

check_rpc_shape() {
  [ -s "$WORK/shape-nvmemu/save_config.json" ] || {
    echo "no nvmemu answers to compare (rpc-setup failed)"
    return 1
  }
  start nvmf_tgt "$P/nvmf_tgt" -m 0x2 -r "$WORK/spdk.sock" --huge-dir "$HUGE"
  local pid=$LAST_PID
  wait_socket "$WORK/spdk.sock" "$pid"
  setup_script "$WORK/spdk.sock" "$WORK/spdk-vfu" >/dev/null
  query_all "$WORK/spdk.sock" "$WORK/shape-spdk" "$WORK/spdk-vfu"
  rpcpy "$WORK/spdk.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$pid"
  python3 "$HERE/rpc_shape.py" "$WORK/shape-spdk" "$WORK/shape-nvmemu"
}

# A subsystem without allow_any_host refuses SPDK's client (vfio-user presents no host
# NQN, so no host list matches), logs why, and admits it once any host is allowed.
check_hosts() {
  start hosts-serve "$BIN" serve -r "$WORK/hosts.sock" -m 0x2
  wait_socket "$WORK/hosts.sock" "$LAST_PID"
  local sock=$WORK/hosts.sock dir=$WORK/hosts-vfu
  [ "$(rpcpy "$sock" bdev_malloc_create 64 512 -b Malloc0)" = Malloc0 ]
  rpcpy "$sock" nvmf_create_transport -t VFIOUSER
  rpcpy "$sock" nvmf_create_subsystem "$NQN" -s SPDK00
  rpcpy "$sock" nvmf_subsystem_add_ns "$NQN" Malloc0
  mkdir -p "$dir"
  rpcpy "$sock" nvmf_subsystem_add_listener "$NQN" -t VFIOUSER -a "$dir" -s 0
  rpcpy "$sock" nvmf_subsystem_add_host "$NQN" nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
  if run_bounded 60 hosts-refused "$P/spdk_nvme_identify" -g -r "trtype:VFIOUSER traddr:$dir subnqn:$NQN"; then
    echo "spdk_nvme_identify attached to a subsystem that allows no host"
    return 1
  fi
  grep -q 'client refused: its subsystem does not allow any host' "$WORK/hosts-serve.log"
  echo "refused while allow_any_host is off, with a log line"
  rpcpy "$sock" nvmf_subsystem_allow_any_host -e "$NQN"
  identify_setup hosts-identify "$dir"
}

check_rpc_cli() {
  nvmf_tgt cli-tgt
  setup_script "$WORK/cli-tgt.sock" "$WORK/cli-vfu" nvmemu_rpc
  identify_setup cli-identify "$WORK/cli-vfu"
}

check_config_to_spdk() {
  start to-spdk-serve "$BIN" serve -r "$WORK/to-spdk.sock" -m 0x2
  local pid=$LAST_PID
  wait_socket "$WORK/to-spdk.sock" "$pid"
  setup_script "$WORK/to-spdk.sock" "$WORK/to-spdk-vfu" >/dev/null
  rpcpy "$WORK/to-spdk.sock" save_config >"$WORK/nvmemu-config.json"
  stop "$pid"
  nvmf_tgt to-spdk-tgt --json "$WORK/nvmemu-config.json"
  rpcpy "$WORK/to-spdk-tgt.sock" framework_wait_init
  identify_setup to-spdk-identify "$WORK/to-spdk-vfu"
}

check_config_from_spdk() {
  nvmf_tgt from-spdk-tgt
  setup_script "$WORK/from-spdk-tgt.sock" "$WORK/from-spdk-vfu" >/dev/null
  rpcpy "$WORK/from-spdk-tgt.sock" save_config >"$WORK/spdk-config.json"
  rpcpy "$WORK/from-spdk-tgt.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$TGT_PID"
  start from-spdk-serve "$BIN" serve -r "$WORK/from-spdk.sock" -m 0x2 \
    --json "$WORK/spdk-config.json"
  wait_socket "$WORK/from-spdk.sock" "$LAST_PID"
  identify_setup from-spdk-identify "$WORK/from-spdk-vfu"
  local skipped
  skipped=$(grep -c ': skipped ' "$WORK/from-spdk-serve.log" || true)
  echo "nvmemu serve --json named $skipped SPDK calls it skipped"
  [ "$skipped" -gt 0 ]
}

# The NVMe/TCP checks (serve_tcp, check_tcp_*).
# shellcheck source=tests/peers/spdk_tcp.sh
. tests/peers/spdk_tcp.sh
# shellcheck source=tests/peers/spdk_error_bdev.sh
. tests/peers/spdk_error_bdev.sh

check checkers check_checkers
check identify check_identify
check waiting check_waiting
check identity check_identity
check perf check_perf
check bdevperf check_bdevperf
check file-bdevperf check_file_bdevperf
check bdevperf-faults check_bdevperf_faults
check error-bdev check_error_bdev
check compliance check_compliance
check rpc-setup check_rpc_setup
check rpc-shape check_rpc_shape
check hosts check_hosts
check rpc-cli check_rpc_cli
check config-to-spdk check_config_to_spdk
check config-from-spdk check_config_from_spdk
check tcp-identify check_tcp_identify
check tcp-perf check_tcp_perf
check tcp-bdevperf check_tcp_bdevperf
check tcp-poll-groups check_tcp_poll_groups
check tcp-hostile check_tcp_hostile
check tcp-driver check_tcp_driver

echo "--- SPDK peer checks: ${#PASSED[@]} passed, ${#FAILED[@]} failed ($((SECONDS - t0)) s)"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "failed: ${FAILED[*]}"
  exit 1
fi
