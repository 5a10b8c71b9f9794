# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh disable=SC2015 # "cond && ok ... || fail ...": ok only echoes, never fails
#
# Scenario "tcp_bench" (sourced by checks.sh when the host packed it with /usr/bin/nvmemu and
# the modules; host side tests/e2e/tcp_bench.sh): the kernel study's seed table. Three NVMe/TCP
# targets on the guest's own loopback, each with one TB_SIZE_MB namespace in memory:
#   nvmet-null  Linux's nvmet-tcp, namespace on a memory-backed null_blk device
#   nvmet-brd   Linux's nvmet-tcp, namespace on a brd RAM disk
#   nvmemu      nvmemu serve --tcp, a malloc namespace
# The kernel's nvme-tcp connects to all three. Each namespace is then written whole and verified,
# and verified again with the benchmark's own I/O shape (tb_verify).
# TB_MODE=full then runs fio 4k randread and randwrite on each, the targets interleaved, for
# TB_ROUNDS rounds, and writes fio's JSON to the virtio disk the host attached (see tb_export);
# TB_MODE=check stops after the verify.

TB_HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6e766d65-6d75-4000-8000-000000000b28
TB_NQN_NULL=nqn.2026-11.io.nvmemu.bench:nvmet-null
TB_NQN_BRD=nqn.2026-11.io.nvmemu.bench:nvmet-brd
TB_NQN_NVMEMU=nqn.2019-07.io.nvmemu:cnode1
TB_PORT_NVMET=4421
TB_PORT_NVMEMU=4420
TB_TARGETS="nvmet-null nvmet-brd nvmemu"
TB_OUT=/tmp/tcp-bench
TB_NVMET=/sys/kernel/config/nvmet

# Loads the packed modules in order; null_blk makes no device of its own (tb_null_blk does,
# through configfs, to set its size), brd makes one RAM disk of the namespace's size.
tb_modules() {
    while read -r m; do
        name=${m%.ko}
        [ -d "/sys/module/$(echo "$name" | tr - _)" ] && continue
        case $name in
        null_blk) set -- nr_devices=0 ;;
        brd) set -- rd_nr=1 "rd_size=$((TB_SIZE_MB * 1024))" ;;
        *) set -- ;;
        esac
        insmod "/e2e/modules/$m" "$@" || fail "insmod $m $*"
    done </e2e/modules/order
}

# /dev/nullb0: memory-backed (reads return what was written), TB_SIZE_MB, 512 B blocks, one
# submission queue per vCPU and the initiator's queue depth.
tb_null_blk() {
    d=/sys/kernel/config/nullb/nullb0
    mkdir "$d" && echo "$TB_SIZE_MB" >"$d/size" && echo 1 >"$d/memory_backed" &&
        echo 512 >"$d/blocksize" && nproc >"$d/submit_queues" && echo 128 >"$d/hw_queue_depth" &&
        echo 1 >"$d/power" && wait_for /dev/nullb0 30 &&
        ok "null_blk /dev/nullb0: ${TB_SIZE_MB} MiB, memory_backed" || fail "null_blk through configfs"
}

# tb_nvmet_subsystem NQN DEVICE: an nvmet subsystem with DEVICE as namespace 1, any host.
tb_nvmet_subsystem() {
    s=$TB_NVMET/subsystems/$1
    mkdir "$s" && echo 1 >"$s/attr_allow_any_host" && mkdir "$s/namespaces/1" &&
        printf '%s' "$2" >"$s/namespaces/1/device_path" && echo 1 >"$s/namespaces/1/enable" &&
        ln -s "$s" "$TB_NVMET/ports/1/subsystems/$1" &&
        ok "nvmet subsystem $1: namespace 1 on $2" || fail "nvmet subsystem $1 on $2"
}

# nvmet's TCP port 1 on 127.0.0.1:TB_PORT_NVMET with the null_blk and brd subsystems.
tb_nvmet() {
    p=$TB_NVMET/ports/1
    mkdir "$p" && echo tcp >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" &&
        echo 127.0.0.1 >"$p/addr_traddr" && echo "$TB_PORT_NVMET" >"$p/addr_trsvcid" ||
        { fail "nvmet port through configfs"; return; }
    tb_nvmet_subsystem "$TB_NQN_NULL" /dev/nullb0
    tb_nvmet_subsystem "$TB_NQN_BRD" /dev/ram0
}

tb_nvmemu() {
    nvmemu serve --tcp "127.0.0.1:$TB_PORT_NVMEMU" --ns "malloc:size=${TB_SIZE_MB}M,lba=512" -m 0x1 \
        -r /tmp/nvmemu-tb.rpc >/tmp/nvmemu-tb.log 2>&1 &
    TB_SERVER=$!
    wait_for /tmp/nvmemu-tb.rpc 60 && ok "nvmemu serve --tcp 127.0.0.1:$TB_PORT_NVMEMU" ||
        { tail -20 /tmp/nvmemu-tb.log; fail "nvmemu serve --tcp did not start"; }
}

# tb_device NQN: the block device of namespace 1 of subsystem NQN (the multipath head's parent
# is the subsystem, a plain namespace's the controller: both have subsysnqn).
tb_device() {
    for b in /sys/block/nvme*n1; do
        case ${b##*/} in *c*) continue ;; esac
        [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$1" ] && echo "/dev/${b##*/}" && return 0
    done
    return 1
}

tb_nqn() {
    case $1 in
    nvmet-null) echo "$TB_NQN_NULL" ;;
    nvmet-brd) echo "$TB_NQN_BRD" ;;
    nvmemu) echo "$TB_NQN_NVMEMU" ;;
    esac
}

# tb_connect TARGET: nvme connect, then the namespace's block device; records the device and
# the controller's queues in $TB_OUT/TARGET.meta.
tb_connect() {
    nqn=$(tb_nqn "$1")
    port=$TB_PORT_NVMET
    [ "$1" = nvmemu ] && port=$TB_PORT_NVMEMU
    check "$1: nvme connect -t tcp -a 127.0.0.1 -s $port -n $nqn" \
        nvme connect -t tcp -a 127.0.0.1 -s "$port" -n "$nqn" --hostnqn="$TB_HOSTNQN"
    i=0
    until dev=$(tb_device "$nqn") || [ "$i" -ge 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ -n "$dev" ] || { fail "$1: no block device after nvme connect"; return; }
    ctrl=$(grep -l "^$nqn\$" /sys/class/nvme/nvme*/subsysnqn | head -1)
    ctrl=${ctrl%/subsysnqn}
    echo "dev=$dev queue_count=$(cat "$ctrl/queue_count") sqsize=$(cat "$ctrl/sqsize")" >"$TB_OUT/$1.meta"
    ok "$1: namespace over TCP at $dev ($(cat "$TB_OUT/$1.meta"))"
}

tb_dev() { sed -n 's/^dev=\([^ ]*\).*/\1/p' "$TB_OUT/$1.meta" 2>/dev/null; }

# tb_verify TARGET: the whole namespace written sequentially in 1 MiB blocks and read back
# (crc32c), so every run reads written blocks; then the benchmark's own shape with verify
# (4k randwrite, iodepth 64, TB_JOBS jobs, each its own slice of TB_VERIFY_MB).
tb_verify() {
    dev=$(tb_dev "$1")
    check "$1: fio write 1M over ${TB_SIZE_MB} MiB + verify crc32c" \
        fio --name="fill-$1" --filename="$dev" --ioengine="$TB_ENGINE" --direct=1 --rw=write \
        --bs=1M --iodepth=4 --size="${TB_SIZE_MB}M" --verify=crc32c --do_verify=1 --verify_fatal=1
    slice=$((TB_VERIFY_MB / TB_JOBS))
    check "$1: fio 4k randwrite iodepth 64 x $TB_JOBS jobs over ${TB_VERIFY_MB} MiB + verify crc32c" \
        fio --name="verify-$1" --filename="$dev" --ioengine="$TB_ENGINE" --direct=1 \
        --rw=randwrite --bs=4k --iodepth=64 --numjobs="$TB_JOBS" --size="${slice}M" \
        --offset_increment="${slice}M" --verify=crc32c --do_verify=1 --verify_fatal=1
}

# tb_run TARGET RW ROUND: one time-based run, fio's JSON in $TB_OUT.
tb_run() {
    out=$TB_OUT/$1.$2.$3.json
    check "round $3: $1 $2" \
        fio --name="$1" --filename="$(tb_dev "$1")" --ioengine="$TB_ENGINE" --direct=1 --rw="$2" \
        --bs=4k --iodepth=64 --numjobs="$TB_JOBS" --group_reporting --time_based \
        --runtime="$TB_SECONDS" --ramp_time=1 --size="${TB_SIZE_MB}M" --norandommap \
        --randrepeat=0 --output-format=json --output="$out"
}

# The results for the host, on the virtio disk it attached: each file of $TB_OUT after a line
# "=== NAME", then "=== END" (the host reads the disk image after QEMU exits).
tb_export() {
    {
        for f in "$TB_OUT"/*; do
            echo "=== ${f##*/}"
            cat "$f"
        done
        echo "=== END"
    } >/dev/vda && sync && ok "results on /dev/vda" || fail "writing the results to /dev/vda"
}

scenario_tcp_bench() {
    mkdir -p "$TB_OUT"
    {
        echo "kernel=$(uname -r)"
        echo "vcpus=$(nproc)"
        echo "fio=$(fio --version)"
        echo "mode=$TB_MODE size_mb=$TB_SIZE_MB seconds=$TB_SECONDS rounds=$TB_ROUNDS jobs=$TB_JOBS engine=$TB_ENGINE"
    } >"$TB_OUT/guest.meta"
    tb_modules
    mount -t configfs configfs /sys/kernel/config || fail "mount configfs"
    ip link set lo up && ok "loopback up" || fail "ip link set lo up"
    tb_null_blk
    wait_for /dev/ram0 30 && ok "brd /dev/ram0: ${TB_SIZE_MB} MiB" || fail "no /dev/ram0 from brd"
    tb_nvmet
    tb_nvmemu
    for t in $TB_TARGETS; do [ "$FAILED" -eq 0 ] && tb_connect "$t"; done
    for t in $TB_TARGETS; do [ "$FAILED" -eq 0 ] && tb_verify "$t"; done
    if [ "$TB_MODE" = full ]; then
        round=1
        while [ "$round" -le "$TB_ROUNDS" ] && [ "$FAILED" -eq 0 ]; do
            for rw in randread randwrite; do
                for t in $TB_TARGETS; do [ "$FAILED" -eq 0 ] && tb_run "$t" "$rw" "$round"; done
            done
            round=$((round + 1))
        done
        wait_for /dev/vda 30 && tb_export || fail "no results disk /dev/vda"
    fi
    for t in $TB_TARGETS; do
        [ -f "$TB_OUT/$t.meta" ] && { nvme disconnect -n "$(tb_nqn "$t")" >/dev/null || fail "$t: nvme disconnect"; }
    done
    kill "$TB_SERVER" 2>/dev/null
    wait "$TB_SERVER"
    grep -E ' (ERROR|WARN) ' /tmp/nvmemu-tb.log | tail -20
    finish_phase tcp_bench
}
