# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh disable=SC2015 # "cond && ok ... || fail ...": ok only echoes, never fails
#
# Scenario "faults" (sourced by checks.sh when the host packed it; host side tests/e2e/faults.sh):
# Linux's nvme driver meets injected faults on a controller of its own, a namespace on an
# SPDK-style error bdev. Each step prints "E2E-FAULT step=NAME"; the host, watching the console,
# arms the fault over RPC within FAULT_ARM_WAIT seconds, then the guest reads and checks what
# the driver did (its kernel log, the read's result):
#   drop     one read never completes: the driver's timeout fires, it aborts the command, the
#            retry succeeds;
#   fatal    the controller enters Controller Fatal Status: the next read times out, the driver
#            sees CSTS.CFS, resets the controller, and the read succeeds;
#   media    the next read of an LBA range (nvmemu_bdev_inject_fault) fails with
#            Unrecovered Read Error and DNR: the read fails with a medium error, the next one
#            succeeds;
#   notready the namespace answers Namespace Not Ready with DNR: the read fails; "ready" clears it.
# Then fio writes and verifies the namespace: I/O resumed after everything.

FAULT_IO_TIMEOUT_MS=5000

# The kernel log since the step began (FAULT_MARK lines of dmesg were there before).
fault_log() { dmesg | tail -n "+$((FAULT_MARK + 1))"; }

# fault_step NAME: tell the host to arm NAME, wait until it has.
fault_step() {
    FAULT_MARK=$(dmesg | wc -l)
    echo "E2E-FAULT step=$1"
    sleep "${FAULT_ARM_WAIT:-3}"
}

# fault_read LBA: one 4 KiB direct read at 4 KiB block LBA; sets READ_RC and READ_S (seconds).
fault_read() {
    r0=$(now)
    timeout 120 dd if="$FAULT_NS" of=/dev/null bs=4096 count=1 skip="$1" iflag=direct 2>/tmp/dd.err
    READ_RC=$?
    READ_S=$(echo "$(now) $r0" | awk '{ printf "%.1f", $1 - $2 }')
}

# expect_log WHAT PATTERN: the kernel log since the step has a line matching PATTERN.
expect_log() {
    line=$(fault_log | grep -E "$2" | head -1)
    [ -n "$line" ] && ok "$1: kernel log: $line" ||
        { fault_log | tail -20; fail "$1: no '$2' in the kernel log"; }
}

fault_setup() {
    wait_for /dev/nvme0n1 60 && ok "/dev/nvme0n1 present" || fail "/dev/nvme0n1 did not appear"
    FAULT_NS=/dev/nvme0n1
    # The request queue that times commands out: the namespace's own, or under native
    # multipath (nvmemu's namespaces are shared) its path device's.
    for q in /sys/block/nvme0c*n1/queue/io_timeout /sys/block/nvme0n1/queue/io_timeout; do
        [ -w "$q" ] && echo "$FAULT_IO_TIMEOUT_MS" >"$q" && FAULT_TIMEOUT_Q=$q
    done
    check_equal "I/O timeout (ms) of ${FAULT_TIMEOUT_Q:-no queue}" "$FAULT_IO_TIMEOUT_MS" \
        "$(cat "${FAULT_TIMEOUT_Q:-/dev/null}")"
}

fault_drop() {
    fault_step drop
    fault_read 100
    check_equal "drop: the read succeeds after the abort (dd exit status)" 0 "$READ_RC"
    awk -v s="$READ_S" 'BEGIN { exit !(s >= 4) }' && ok "drop: the read waited for the timeout (${READ_S} s)" ||
        fail "drop: the read took ${READ_S} s: was the command dropped?"
    expect_log drop 'timeout, aborting'
    expect_log drop 'Abort status: 0x0'
    check_equal "drop: controller state" live "$(cat /sys/class/nvme/nvme0/state)"
}

fault_fatal() {
    fault_step fatal
    fault_read 200
    check_equal "fatal: the read succeeds after the reset (dd exit status)" 0 "$READ_RC"
    expect_log fatal 'controller is down; will reset: CSTS=0x3'
    i=0
    until [ "$(cat /sys/class/nvme/nvme0/state)" = live ] || [ "$i" -ge 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    check_equal "fatal: controller state after the reset" live "$(cat /sys/class/nvme/nvme0/state)"
}

fault_media() {
    fault_step media
    fault_read 300
    [ "$READ_RC" -ne 0 ] && ok "media: the read of LBA 300 fails ($(head -1 /tmp/dd.err))" ||
        fail "media: the read of LBA 300 succeeded"
    expect_log media 'critical medium error'
    expect_log media 'Unrecovered Read Error|sct 0x2 / sc 0x81'
    fault_read 400
    check_equal "media: a read outside the range succeeds" 0 "$READ_RC"
    fault_read 300
    check_equal "media: the rule hit once (--count 1): LBA 300 reads again" 0 "$READ_RC"
}

fault_notready() {
    fault_step notready
    fault_read 500
    [ "$READ_RC" -ne 0 ] && ok "notready: the read fails" || fail "notready: the read succeeded"
    expect_log notready 'Namespace Not Ready|sct 0x0 / sc 0x82'
    fault_step ready
    fault_read 500
    check_equal "ready: the read succeeds again" 0 "$READ_RC"
}

scenario_faults() {
    fault_setup
    t0=$(now)
    fault_drop
    fault_fatal
    fault_media
    fault_notready
    fio_verify after-faults "$FAULT_NS" io_uring 4k 16
    echo "E2E-FAULT seconds=$(echo "$(now) $t0" | awk '{ printf "%.1f", $1 - $2 }')"
    finish_phase faults
}
