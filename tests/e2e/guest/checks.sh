# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh disable=SC2015 # "cond && ok ... || fail ...": ok only echoes, never fails
#
# Checks run inside the e2e guest (busybox sh), sourced by /init after /e2e/config.
# Every check prints one line "E2E-CHECK ok: ..." or "E2E-CHECK FAIL: ..."; a scenario ends with
# "E2E-RESULT phase=N PASS|FAIL", which the host (tests/e2e/lib.sh) looks for on the console.
#
# Scenario "flow" runs in up to three boots against one controller; the phase is decided by a
# marker block on the namespace itself, so a guest reboot (same QEMU) and a fresh QEMU process
# both find out what the previous boot did:
#   phase 1 (no marker of this run): identify, queues, fio verify, reset, write data, reboot;
#   phase 2 (marker "1"): data written in phase 1 reads back; poweroff;
#   phase 3 (marker "2", a new QEMU process): data still reads back; fio verify; poweroff.

FAILED=0
NS1=/dev/nvme0n1
NS2=/dev/nvme0n2
CTRL=/dev/nvme0
MARK_OFFSET_MB=255   # last MiB of namespace 1: the phase marker
DATA_OFFSET_MB=192   # [192M, 224M) of namespace 1: data that must survive reboots
DATA_SIZE_MB=32
DATA2_OFFSET_MB=32   # [32M, 48M) of namespace 2
DATA2_SIZE_MB=16

now() { cut -d' ' -f1 /proc/uptime; }
ok() { echo "E2E-CHECK ok: $* [t=$(now)]"; }
fail() {
    echo "E2E-CHECK FAIL: $* [t=$(now)]"
    FAILED=1
}
# check "description" command...: runs the command (bounded by CHECK_TIMEOUT seconds), output to
# the console only on failure.
check() {
    desc=$1
    shift
    if out=$(timeout "${CHECK_TIMEOUT:-180}" "$@" 2>&1); then
        ok "$desc"
    else
        rc=$?
        echo "$out" | tail -40
        fail "$desc (exit $rc)"
    fi
}

guest_halt() {
    sync
    if [ "$E2E_NEXT" = reboot ]; then
        echo "E2E: rebooting"
        reboot -f
    else
        echo "E2E: powering off"
        poweroff -f
    fi
    echo o >/proc/sysrq-trigger
    sleep 60
}

finish_phase() {
    phase=$1
    if [ "$FAILED" -ne 0 ]; then
        echo "E2E: dmesg tail:"
        dmesg | tail -60
        echo "E2E-RESULT phase=$phase FAIL"
        E2E_NEXT=poweroff
    else
        echo "E2E-RESULT phase=$phase PASS"
    fi
}

# The first PCI function of vendor EXP_VID (its address, as sysfs names it).
vendor_function() {
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor")" = "$EXP_VID" ] && { echo "${d##*/}"; return 0; }
    done
    return 1
}

# wait_for PATH [seconds]
wait_for() {
    i=0
    while [ ! -e "$1" ] && [ "$i" -lt "$((${2:-30} * 10))" ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ -e "$1" ]
}

# Strip "field : value" from nvme-cli's human output, trailing blanks removed.
field() { sed -n "s/^$1 *: *//p" | sed 's/ *$//' | head -1; }

check_equal() { # description expected actual
    if [ "$2" = "$3" ]; then ok "$1 = '$3'"; else fail "$1: expected '$2', got '$3'"; fi
}

# fio_verify NAME DEV ENGINE BS SIZE_MB [extra fio args]: random write then crc32c verify.
fio_verify() {
    name=$1 dev=$2 engine=$3 bs=$4 size=$5
    shift 5
    case $bs in *-*) bsopt=--bsrange=$bs ;; *) bsopt=--bs=$bs ;; esac
    check "fio $name ($engine, $bs, ${size}M, randwrite+verify crc32c, iodepth 16) on $dev" \
        fio --name="$name" --filename="$dev" --ioengine="$engine" --direct=1 --rw=randwrite \
        "$bsopt" --iodepth=16 --size="${size}M" --verify=crc32c --do_verify=1 \
        --verify_fatal=1 --exitall_on_error --error_dump=1 "$@"
}

# persist write|verify DEV OFFSET_MB SIZE_MB: data that must survive across boots.
persist() {
    mode=$1 dev=$2 off=$3 size=$4
    extra=--do_verify=0
    [ "$mode" = verify ] && extra=--verify_only
    check "persistent data $mode on $dev [${off}M, +${size}M)" \
        fio --name=persist --filename="$dev" --ioengine=io_uring --direct=1 --rw=write --bs=64k \
        --iodepth=8 --offset="${off}M" --size="${size}M" --verify=crc32c --verify_fatal=1 \
        "$extra"
}

read_marker() {
    dd if="$NS1" bs=1M skip="$MARK_OFFSET_MB" count=1 iflag=direct 2>/dev/null | head -c 64 |
        tr -d '\000' | sed -n "s/^NVMEMU-E2E run=$E2E_RUN phase=\([0-9]\).*/\1/p"
}

write_marker() {
    { printf 'NVMEMU-E2E run=%s phase=%s\n' "$E2E_RUN" "$1"; dd if=/dev/zero bs=4096 count=1 2>/dev/null; } |
        head -c 4096 >/tmp/marker
    check "phase marker $1 written" dd if=/tmp/marker of="$NS1" bs=4096 seek=$((MARK_OFFSET_MB * 256)) \
        count=1 oflag=direct conv=fsync
}

# Sum of one interrupt line over all CPUs in /proc/interrupts (empty if the line is absent).
irq_count() {
    awk -v name="$1" 'NR == 1 { ncpu = NF; next }
        $NF == name { s = 0; for (i = 2; i <= ncpu + 1; i++) s += $i; print s }' /proc/interrupts
}

# Linux numbers nvme0nY in scan order, which is not always NSID order: NS1/NS2 are the block
# devices of NSID 1 and 2, looked up in sysfs on every boot.
resolve_namespaces() {
    wait_for /dev/nvme0n1 60 && ok "/dev/nvme0n1 present" || fail "/dev/nvme0n1 did not appear"
    wait_for /dev/nvme0n2 10 && ok "/dev/nvme0n2 present (second namespace)" ||
        fail "/dev/nvme0n2 did not appear"
    for b in /sys/block/nvme0n*; do
        [ -e "$b/nsid" ] || continue
        case $(cat "$b/nsid") in
        1) NS1=/dev/${b##*/} ;;
        2) NS2=/dev/${b##*/} ;;
        esac
    done
    echo "E2E: NSID 1 is $NS1, NSID 2 is $NS2"
}

check_identify() {

    list=$(nvme list 2>&1) && ok "nvme list" || fail "nvme list"
    echo "$list"
    echo "$list" | grep -qF -- "$EXP_MODEL" && ok "nvme list shows model '$EXP_MODEL'" ||
        fail "nvme list lacks model '$EXP_MODEL'"
    echo "$list" | grep -qF -- "$EXP_SERIAL" && ok "nvme list shows serial '$EXP_SERIAL'" ||
        fail "nvme list lacks serial '$EXP_SERIAL'"
    echo "$list" | grep "^$NS1 " | grep -qF -- "$EXP_NS1_FMT" &&
        ok "nvme list: $NS1 format '$EXP_NS1_FMT'" || fail "nvme list: $NS1 format is not '$EXP_NS1_FMT'"
    echo "$list" | grep "^$NS2 " | grep -qF -- "$EXP_NS2_FMT" &&
        ok "nvme list: $NS2 format '$EXP_NS2_FMT'" || fail "nvme list: $NS2 format is not '$EXP_NS2_FMT'"

    if idc=$(nvme id-ctrl "$CTRL" 2>&1); then
        ok "nvme id-ctrl $CTRL"
        check_equal "id-ctrl vid" "$EXP_VID" "$(echo "$idc" | field vid)"
        check_equal "id-ctrl mn" "$EXP_MODEL" "$(echo "$idc" | field mn)"
        check_equal "id-ctrl sn" "$EXP_SERIAL" "$(echo "$idc" | field sn)"
    else
        echo "$idc"
        fail "nvme id-ctrl $CTRL"
    fi

    for n in 1 2; do
        eval dev=\$NS$n bytes=\$EXP_NS${n}_BYTES lbads=\$EXP_NS${n}_LBADS
        if idn=$(nvme id-ns "$dev" 2>&1); then
            ok "nvme id-ns $dev"
            # shellcheck disable=SC2154 # bytes and lbads are set by the eval above
            blocks=$((bytes >> lbads))
            check_equal "$dev id-ns nsze" "$(printf '%#x' "$blocks")" "$(echo "$idn" | field nsze)"
            inuse=$(echo "$idn" | grep '(in use)' | sed -n 's/.*lbads:\([0-9]*\).*/\1/p')
            check_equal "$dev in-use LBA format lbads" "$lbads" "$inuse"
        else
            echo "$idn"
            fail "nvme id-ns $dev"
        fi
        check_equal "$dev size (bytes)" "$bytes" "$(blockdev --getsize64 "$dev")"
        check_equal "$dev logical block size" "$((1 << lbads))" "$(blockdev --getss "$dev")"
    done
}

# The driver must create EXP_QUEUES I/O queues, each with its own MSI-X vector, and a job
# pinned to each vCPU must raise that CPU's queue interrupt count.
check_queues() {
    # nvmemu's namespaces are shared (NMIC, as SPDK's target reports them), so Linux's
    # multipath makes /dev/nvme0nN a head node without queues of its own; its path device
    # nvme0cCnN has them.
    local blk=${NS1#/dev/} mq
    mq=$(ls -d /sys/block/"$blk"/mq /sys/block/"${blk%n*}"c*n"${blk##*n}"/mq 2>/dev/null | head -n 1)
    hw=$(ls -d "$mq"/* 2>/dev/null | wc -l)
    check_equal "blk-mq hardware queues of $NS1" "$EXP_QUEUES" "$hw"
    dmesg | grep -q "nvme0: $EXP_QUEUES/0/0 default/read/poll queues" &&
        ok "driver reports $EXP_QUEUES/0/0 default/read/poll queues" ||
        fail "driver did not report $EXP_QUEUES/0/0 queues: $(dmesg | grep 'nvme0:.*queues')"
    grep -E 'nvme0q[0-9]+' /proc/interrupts
    cpu=0
    while [ "$cpu" -lt "$EXP_QUEUES" ]; do
        q=nvme0q$((cpu + 1))
        before=$(irq_count "$q")
        if [ -z "$before" ]; then
            fail "no interrupt line $q in /proc/interrupts"
        else
            fio --name=queue$cpu --filename="$NS1" --ioengine=io_uring --direct=1 --rw=randread \
                --bs=4k --iodepth=16 --size=64M --number_ios=2000 --cpus_allowed="$cpu" >/dev/null 2>&1 ||
                fail "fio pinned to CPU $cpu"
            after=$(irq_count "$q")
            if [ "$after" -gt "$before" ]; then
                ok "I/O from CPU $cpu completes on $q ($before -> $after interrupts)"
            else
                fail "I/O from CPU $cpu raised no interrupt on $q ($before -> $after)"
            fi
        fi
        cpu=$((cpu + 1))
    done
}

check_reset() {
    check "nvme reset $CTRL" nvme reset "$CTRL"
    wait_for "$NS1" 30 && ok "$NS1 back after reset" || fail "$NS1 gone after reset"
    check_equal "controller state after reset" live "$(cat /sys/class/nvme/nvme0/state)"
    fio_verify after-reset "$NS1" io_uring 4k 16
    check "nvme id-ctrl after reset" nvme id-ctrl "$CTRL"
}

scenario_flow() {
    resolve_namespaces
    phase=$(read_marker)
    case $phase in
    "") phase=1 ;;
    1) phase=2 ;;
    2) phase=3 ;;
    *)
        fail "unexpected marker phase '$phase'"
        phase=x
        ;;
    esac
    echo "E2E-PHASE $phase"
    case $phase in
    1)
        check_identify
        check_queues
        fio_verify ns1-uring "$NS1" io_uring 4k 64
        fio_verify ns1-libaio "$NS1" libaio 4k-256k 64 --offset=64M
        fio_verify ns2-uring "$NS2" io_uring 4k-128k 32
        fio_verify ns1-512b "$NS1" libaio 512-8k 8 --offset=128M
        case " ${E2E_SKIP:-} " in
        *" reset "*) echo "E2E: controller reset check SKIPPED (NVMEMU_E2E_SKIP)" ;;
        *) check_reset ;;
        esac
        persist write "$NS1" "$DATA_OFFSET_MB" "$DATA_SIZE_MB"
        persist write "$NS2" "$DATA2_OFFSET_MB" "$DATA2_SIZE_MB"
        persist verify "$NS1" "$DATA_OFFSET_MB" "$DATA_SIZE_MB"
        [ "$FAILED" -eq 0 ] && write_marker 1
        E2E_NEXT=reboot
        ;;
    2)
        check_identify
        persist verify "$NS1" "$DATA_OFFSET_MB" "$DATA_SIZE_MB"
        persist verify "$NS2" "$DATA2_OFFSET_MB" "$DATA2_SIZE_MB"
        [ "$FAILED" -eq 0 ] && write_marker 2
        ;;
    3)
        check_identify
        persist verify "$NS1" "$DATA_OFFSET_MB" "$DATA_SIZE_MB"
        persist verify "$NS2" "$DATA2_OFFSET_MB" "$DATA2_SIZE_MB"
        fio_verify fresh-guest "$NS1" io_uring 4k 32
        fio_verify fresh-guest-libaio "$NS1" libaio 4k-64k 32 --offset=64M
        [ "${E2E_LATENCY:-0}" = 1 ] && measure_latency
        ;;
    esac
    finish_phase "$phase"
}

# The QD1 latency table alone (tests/e2e/qemu.sh latency): see latency.sh.
scenario_latency() {
    resolve_namespaces >/dev/null
    measure_latency
    finish_phase latency
}

# fio 4k random read, iodepth 16, on BENCH_DEV: the number for docs/qemu-guest.md.
scenario_bench() {
    if [ "$BENCH_DEV" = nsid1 ]; then
        wait_for /dev/nvme0n1 60
        resolve_namespaces >/dev/null
        BENCH_DEV=$NS1
    fi
    wait_for "$BENCH_DEV" 60 || fail "$BENCH_DEV did not appear"
    if out=$(fio --name=bench --filename="$BENCH_DEV" --ioengine="$BENCH_ENGINE" --direct=1 \
        --rw=randread --bs=4k --iodepth=16 --numjobs=1 --time_based --runtime="$BENCH_SECONDS" \
        --ramp_time=2 --size=200M --output-format=terse --terse-version=3 2>&1); then
        iops=$(echo "$out" | tail -1 | cut -d';' -f8)
        echo "E2E-BENCH dev=$BENCH_DEV engine=$BENCH_ENGINE iops=$iops"
    else
        echo "$out"
        fail "fio bench on $BENCH_DEV"
    fi
    finish_phase bench
}

# Interactive: a shell on the serial console (tests/e2e/qemu.sh shell); exit powers off.
scenario_shell() {
    resolve_namespaces
    echo "E2E: shell on the console; fio, nvme, busybox are here. 'exit' powers off."
    setsid cttyhack sh
}

# The userspace-driver scenario, when the host packed it (tests/e2e/userspace.sh).
[ -f /e2e/userspace.sh ] && . /e2e/userspace.sh
# fio with xNVMe's uPCIe driver, when the host packed it (tests/e2e/xnvme.sh).
[ -f /e2e/xnvme.sh ] && . /e2e/xnvme.sh
# Linux's NVMe/TCP initiator against nvmemu serve --tcp in the guest (tcp.sh, host run_tcp).
[ -f /e2e/tcp.sh ] && . /e2e/tcp.sh
# The kernel study's seed table: nvmet-tcp (null_blk, brd) vs nvmemu serve --tcp (tcp_bench.sh).
[ -f /e2e/tcp_bench.sh ] && . /e2e/tcp_bench.sh
# Linux's nvme driver meeting injected faults (faults.sh, host run_faults).
[ -f /e2e/faults.sh ] && . /e2e/faults.sh
