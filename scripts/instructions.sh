#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per I/O, counted with callgrind: what a machine without a PMU (a KVM guest
# like the development VM: `perf stat -e instructions` is "not supported") can measure
# exactly, run after run, however noisy the host. Times still need the benchmarks; this
# says how much work an I/O asks of the CPU and where (docs/performance.md 8.9).
#
#   scripts/instructions.sh poll
#       the controller's instructions per one-block Read: crates/ctrl/benches/poll_timing.rs
#       (16 reads per `Controller::poll`, one thread, hot caches) under callgrind; the
#       count is the bench's poll (`TestHost::poll`, a thin wrapper around
#       `Controller::poll`, with what it calls) over the commands it ran.
#   scripts/instructions.sh tcp SPDK_TOOLS
#       the NVMe/TCP poll group's user-space instructions per 4 KiB random read:
#       `nvmemu serve` under callgrind (collecting inside the group's thread only) serves a
#       1 GiB malloc namespace to SPDK's spdk_nvme_perf (QD32, 8 s) over loopback; the count
#       is over `nvmf_get_stats`' completed I/Os. Passes that found nothing count too, so
#       compare two builds on an otherwise idle machine.
#
# Environment: NVMEMU (default: target/release/nvmemu, built if missing), CALLGRIND_ARGS,
# CALLGRIND_KEEP (a file to keep the profile in, for callgrind_annotate).
# Needs valgrind (apt-get install -y valgrind); `tcp` also hugepages and root, as SPDK does.

set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/lib/serve.sh"
WORK=$(mktemp -d /tmp/instructions.XXXXXX)
keep() { if [ -n "${CALLGRIND_KEEP:-}" ] && [ -f "$WORK/cg.out" ]; then cp "$WORK/cg.out" "$CALLGRIND_KEEP"; fi; }
trap 'serve_stop || true; keep; rm -rf "$WORK"' EXIT

die() { echo "instructions.sh: $*" >&2; exit 1; }
command -v valgrind >/dev/null || die "valgrind is missing: apt-get install -y valgrind"

# Inclusive instructions of the function matching $2 in callgrind output $1, and its calls.
inclusive() {
  callgrind_annotate --inclusive=yes --auto=yes "$1" 2>/dev/null |
    grep -E "=> .*$2 \(" | head -1 |
    sed -E 's/^ *([0-9,]+) .*\(([0-9,]+)x\).*/\1 \2/' | tr -d ,
}

poll_mode() {
  local bench
  bench=$(cd "$ROOT" && cargo bench -p nvmemu-ctrl --bench poll_timing --no-run \
    --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "poll_timing" in m["executable"]:
        print(m["executable"])' | tail -1)
  [ -x "$bench" ] || die "could not build crates/ctrl/benches/poll_timing.rs"
  # shellcheck disable=SC2086
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" ${CALLGRIND_ARGS:-} \
    "$bench" --bench timing_off --profile-time 2 >/dev/null 2>&1
  read -r ir calls <<<"$(inclusive "$WORK/cg.out" 'TestHost::poll')"
  [ -n "${calls:-}" ] || die "no TestHost::poll in the profile"
  python3 -c "print(f'controller: {$ir / ($calls * 16):.0f} instructions per one-block read ($calls polls of 16)')"
}

# A prefix that runs a command in a session of its own at autogroup nice -20: other
# sessions' work (builds) shares the CPU by session before nice values count. The command
# replaces the prefix's processes, so a background one's $! is its own pid.
AHEAD=(setsid sh -c 'echo -20 > /proc/$$/autogroup && exec nice -n -20 "$@"' sh)

tcp_mode() {
  local peers=${1:?usage: instructions.sh tcp SPDK_TOOLS} bin sock=$WORK/rpc.sock
  local nqn=nqn.2016-06.io.spdk:cnode1
  bin=${NVMEMU:-$ROOT/target/release/nvmemu}
  [ -x "$bin" ] || (cd "$ROOT" && cargo build --release -p nvmemu >&2)
  "$peers/setup.sh" >/dev/null
  SERVE_TIMEOUT=120 serve_start "$WORK/serve.log" "$sock" -- "${AHEAD[@]}" \
    valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" --collect-atstart=no \
    '--toggle-collect=nvmemu_tcp::group::PollGroup::run*' "$bin" serve -m 0x2 -r "$sock"
  rpc() { python3 "$peers/scripts/rpc.py" -t 120 -s "$sock" "$@"; }
  rpc framework_wait_init >/dev/null
  rpc bdev_malloc_create 1024 512 -b Malloc0 >/dev/null
  rpc nvmf_create_transport -t TCP -q 256 >/dev/null
  rpc nvmf_create_subsystem "$nqn" -a -s SPDK00 >/dev/null
  rpc nvmf_subsystem_add_ns "$nqn" Malloc0 >/dev/null
  rpc nvmf_subsystem_add_listener "$nqn" -t TCP -a 127.0.0.1 -s 4420 -f ipv4 >/dev/null
  "${AHEAD[@]}" "$peers/bin/spdk_nvme_perf" -c 0x1 -s 256 -q 32 -o 4096 -w randread -t 8 \
    -r "trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 subnqn:$nqn ns:1" >"$WORK/perf.log" 2>&1 ||
    die "spdk_nvme_perf failed: $(tail -3 "$WORK/perf.log")"
  local ios
  ios=$(rpc nvmf_get_stats | python3 -c 'import json,sys
print(sum(g["completed_nvme_io"] for g in json.load(sys.stdin)["poll_groups"]))')
  serve_stop
  local ir
  ir=$(callgrind_annotate "$WORK/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  [ "${ios:-0}" -gt 0 ] || die "no I/O completed"
  python3 -c "print(f'NVMe/TCP poll group: {$ir / $ios:.0f} user-space instructions per 4 KiB read ($ios reads)')"
}

case "${1:-}" in
  poll) poll_mode ;;
  tcp) shift; tcp_mode "$@" ;;
  *) die "usage: instructions.sh poll | tcp SPDK_TOOLS" ;;
esac
