#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The NVMe/TCP checks of tests/peers/spdk.sh (sourced by it, after its helpers): SPDK's
# identify, perf and bdevperf, hostile hosts beside spdk_nvme_perf, and nvmemu's own
# initiator, each against `nvmemu serve --tcp` on loopback. What each checks: spdk.sh's header.

# serve_tcp NAME: `serve NAME` also listening on NVMe/TCP; sets TCP_TRID.
TCP_PORT=${NVMEMU_PEERS_TCP_PORT:-4420}
TCP_NQN=nqn.2019-07.io.nvmemu:cnode1
serve_tcp() {
  serve "$1" --tcp "127.0.0.1:$TCP_PORT"
  TCP_TRID="trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:$TCP_PORT subnqn:$TCP_NQN"
}

check_tcp_identify() {
  serve_tcp tcp-identify
  run_bounded 60 tcp-identify "$P/spdk_nvme_identify" -r "$TCP_TRID"
  python3 "$HERE/spdk_results.py" identify "$WORK/tcp-identify.log" \
    --serial "$SERIAL" --model "$MODEL" --lbas $((NS_BYTES / LBA)) --lba-size "$LBA"
  run_bounded 60 tcp-discovery "$P/spdk_nvme_identify" \
    -r "${TCP_TRID%subnqn:*}subnqn:nqn.2014-08.org.nvmexpress.discovery"
  grep -q "NVM Subsystem Qualified Name: *$TCP_NQN" "$WORK/tcp-discovery.log"
  grep -q "Transport Service Identifier: *$TCP_PORT" "$WORK/tcp-discovery.log"
  echo "discovery log page lists $TCP_NQN on port $TCP_PORT"
}

check_tcp_perf() {
  serve_tcp tcp-perf
  local spec rw size qd label
  for spec in "randread 512 1" "randwrite 4096 32" "randrw 16384 128" "read 131072 8" \
    "write 131072 4"; do
    read -r rw size qd <<<"$spec"
    label="$size B $rw QD$qd -P 4"
    run_bounded 60 "tcp-perf-$rw-$size" "$P/spdk_nvme_perf" -r "$TCP_TRID" -c 0x1 -s 256 \
      -q "$qd" -o "$size" -w "$rw" -M 50 -P 4 -t 2
    python3 "$HERE/spdk_results.py" perf "$WORK/tcp-perf-$rw-$size.log" --label "$label"
  done
}

# tcp_bdevperf NAME WORKLOAD JSON: bdevperf -w WORKLOAD (QD32, 4 KiB, 5 s) over the
# controllers JSON attaches; spdk_results.py checks it ran I/O with 0 failed.
tcp_bdevperf() {
  local name=$1 w=$2 json=$3 bp
  start "$name" "$P/bdevperf" --json "$json" -m 0x1 -g -s 512 \
    --huge-dir "$HUGE" -r "$WORK/$name.sock" -q 32 -o 4096 -w "$w" -t 5 -z
  bp=$LAST_PID
  wait_socket "$WORK/$name.sock" "$bp"
  PYTHONPATH="$PEERS/python" python3 "$HERE/spdk_results.py" bdevperf \
    "$WORK/$name.sock" --timeout 30
  rpcpy "$WORK/$name.sock" spdk_kill_instance SIGTERM >/dev/null
  stop "$bp"
}

# tcp_attach NAME SUBNQN: a bdev_nvme_attach_controller call of bdevperf's --json.
tcp_attach() {
  echo "{\"method\": \"bdev_nvme_attach_controller\", \"params\": {\"name\": \"$1\",
    \"trtype\": \"tcp\", \"adrfam\": \"ipv4\", \"traddr\": \"127.0.0.1\",
    \"trsvcid\": \"$TCP_PORT\", \"subnqn\": \"$2\"}}"
}

check_tcp_bdevperf() {
  serve_tcp tcp-bdevperf
  echo "{\"subsystems\": [{\"subsystem\": \"bdev\", \"config\": [$(tcp_attach Nvme0 "$TCP_NQN")]}]}" \
    >"$WORK/tcp-bdevperf.json"
  local w
  for w in verify reset; do
    tcp_bdevperf "tcp-bdevperf-$w" "$w" "$WORK/tcp-bdevperf.json"
  done
}

# Two TCP poll groups (-m 0x3) and two subsystems (one per --socket-dir, each with its own
# namespace): bdevperf -w verify on a controller of each; each poll group served one.
check_tcp_poll_groups() {
  local dir=$WORK/tcp-groups
  mkdir -p "$dir/a" "$dir/b"
  start tcp-groups-serve "$BIN" serve --socket-dir "$dir/a" --socket-dir "$dir/b" \
    --ns "malloc:size=256M,lba=$LBA" -m 0x3 -r "$WORK/tcp-groups.sock" --tcp "127.0.0.1:$TCP_PORT"
  wait_socket "$WORK/tcp-groups.sock" "$LAST_PID"
  echo "{\"subsystems\": [{\"subsystem\": \"bdev\", \"config\": [
    $(tcp_attach Nvme0 "$TCP_NQN"), $(tcp_attach Nvme1 "${TCP_NQN%1}2")]}]}" >"$dir.json"
  tcp_bdevperf tcp-groups-verify verify "$dir.json"
  rpcpy "$WORK/tcp-groups.sock" nvmf_get_stats >"$dir-stats.json"
  python3 - "$dir-stats.json" <<'PY'
import json
import sys

groups = json.load(open(sys.argv[1]))["poll_groups"]
tcp = [(g, t) for g in groups for t in g["transports"] if t["trtype"] == "TCP"]
assert len(tcp) == 2, f"two TCP poll groups expected: {groups}"
for g, t in tcp:
    print(f"{g['name']}: {g['admin_qpairs']} admin and {g['io_qpairs']} I/O qpairs, "
          f"{g['completed_nvme_io']} commands, {t['socket_reads']} recv and "
          f"{t['socket_writes']} send calls")
    assert g["admin_qpairs"] >= 1 and g["io_qpairs"] >= 1, f"a poll group served no host: {g}"
    assert t["socket_reads"] >= 1 and t["socket_writes"] >= 1, f"no socket calls counted: {t}"
PY
}

check_tcp_hostile() {
  serve_tcp tcp-hostile
  python3 "$HERE/tcp_hostile.py" 127.0.0.1 "$TCP_PORT" 8 >"$WORK/tcp-hostile-hosts.log" 2>&1 &
  local hostile=$!
  run_bounded 60 tcp-hostile-perf "$P/spdk_nvme_perf" -r "$TCP_TRID" -c 0x1 -s 256 \
    -q 32 -o 4096 -w randrw -M 50 -t 6
  python3 "$HERE/spdk_results.py" perf "$WORK/tcp-hostile-perf.log" \
    --label "randrw beside hostile hosts"
  wait "$hostile"
  cat "$WORK/tcp-hostile-hosts.log"
}

check_tcp_driver() {
  nvmf_tgt tcp-tgt
  local s=$WORK/tcp-tgt.sock addr=127.0.0.1:$TCP_PORT rw bs qd extra
  rpcpy "$s" framework_wait_init
  rpcpy "$s" bdev_malloc_create 64 512 -b Malloc0 >/dev/null
  rpcpy "$s" nvmf_create_transport -t TCP
  rpcpy "$s" nvmf_create_subsystem "$NQN" -s SPDK00 -a
  rpcpy "$s" nvmf_subsystem_add_ns "$NQN" Malloc0
  rpcpy "$s" nvmf_subsystem_add_listener "$NQN" -t TCP -a 127.0.0.1 -s "$TCP_PORT" -f ipv4
  run_bounded 60 tcp-driver-identify "$BIN" identify --tcp "$addr" --subnqn "$NQN"
  grep -q "^mn *: SPDK bdev Controller" "$WORK/tcp-driver-identify.log"
  grep -q "^nsze *: 0x20000$" "$WORK/tcp-driver-identify.log"
  while read -r rw bs qd extra; do
    # shellcheck disable=SC2086  # $extra is zero or more options
    run_bounded 120 "tcp-driver-$rw-$bs-qd$qd" "$BIN" bench --tcp "$addr" --subnqn "$NQN" \
      --rw "$rw" --bs "$bs" --iodepth "$qd" --size 16M $extra
    grep -q "err= 0" "$WORK/tcp-driver-$rw-$bs-qd$qd.log"
    echo "bench --tcp $rw $bs QD$qd $extra: $(grep -m1 -o 'IOPS=[^,]*' "$WORK/tcp-driver-$rw-$bs-qd$qd.log")"
  done <<JOBS
randwrite 512 32 --verify=crc32c
randwrite 128k 1 --verify=crc32c --hdr-digest --data-digest
randread 512 1
randread 128k 32 --hdr-digest --data-digest
randread 4k 32
JOBS
}
