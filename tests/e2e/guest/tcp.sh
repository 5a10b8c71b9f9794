# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh disable=SC2015 # "cond && ok ... || fail ...": ok only echoes, never fails
#
# Scenario "tcp" (sourced by checks.sh when the host added it to the initramfs, with
# /usr/bin/nvmemu and the nvme-tcp modules): Linux's NVMe/TCP initiator against `nvmemu serve
# --tcp` on the guest's own loopback, as against nvmet: discover, connect, fio write + verify on
# the namespace's block device, disconnect, connect again and read the data back.

TCP_PORT=4420
TCP_NQN=nqn.2019-07.io.nvmemu:cnode1
TCP_HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6e766d65-6d75-4000-8000-000000000028
TCP_SIZE_MB=8
TCP_LOG=/tmp/nvmemu-tcp.log

tcp_region_md5() {
    dd if="$1" bs=1M count="$TCP_SIZE_MB" iflag=direct 2>/dev/null | md5sum | cut -d' ' -f1
}

# The block device of namespace 1 of a controller connected over TCP (the subsystem's
# nvmeXn1, not the per-path nvmeXcYn1 that native multipath hides).
tcp_namespace() {
    for c in /sys/class/nvme/nvme*; do
        [ "$(cat "$c/transport" 2>/dev/null)" = tcp ] || continue
        for b in /sys/block/nvme*n1; do
            case ${b##*/} in *c*) continue ;; esac
            [ -b "/dev/${b##*/}" ] && echo "/dev/${b##*/}" && return 0
        done
    done
    return 1
}

# tcp_connect WHAT: nvme connect, then waits for the namespace's block device (sets TCP_DEV).
tcp_connect() {
    check "$1: nvme connect -t tcp -a 127.0.0.1 -s $TCP_PORT -n $TCP_NQN" \
        nvme connect -t tcp -a 127.0.0.1 -s "$TCP_PORT" -n "$TCP_NQN" --hostnqn="$TCP_HOSTNQN"
    i=0
    until TCP_DEV=$(tcp_namespace) || [ "$i" -ge 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ -n "$TCP_DEV" ] && ok "$1: namespace over TCP at $TCP_DEV" || fail "$1: no block device after nvme connect"
}

# Idle for more than two Keep Alive Timeouts (the kernel's default KATO is 5 s): only Keep
# Alive keeps the controller, and every one must succeed.
tcp_idle() {
    ctrl=$(grep -l '^tcp$' /sys/class/nvme/nvme*/transport 2>/dev/null | head -1)
    sleep 12
    check_equal "controller state after 12 s idle (Keep Alive only)" live \
        "$(cat "${ctrl%/transport}/state" 2>/dev/null)"
    dmesg | grep -q 'keep_alive.*error\|starting error recovery' &&
        fail "the kernel logged a Keep Alive failure or an error recovery" ||
        ok "no Keep Alive failure or error recovery in the kernel log"
}

# Starts nvmemu serve --tcp on 127.0.0.1 and waits for its RPC socket (created once it serves).
tcp_serve() {
    nvmemu serve --tcp "127.0.0.1:$TCP_PORT" --ns malloc:size=64M,lba=512 -m 0x1 \
        -r /tmp/nvmemu-tcp.rpc >"$TCP_LOG" 2>&1 &
    TCP_SERVER=$!
    wait_for /tmp/nvmemu-tcp.rpc 60 && ok "nvmemu serve --tcp 127.0.0.1:$TCP_PORT in the guest" ||
        { tail -20 "$TCP_LOG"; fail "nvmemu serve --tcp did not start"; }
}

scenario_tcp() {
    t0=$(now)
    while read -r m; do
        # nvme-core came with the initramfs's nvme driver.
        [ -d "/sys/module/$(echo "${m%.ko}" | tr - _)" ] && continue
        insmod "/e2e/modules/$m" || echo "E2E: insmod $m failed"
    done </e2e/modules/order
    ip link set lo up && ok "loopback up" || fail "ip link set lo up"
    tcp_serve
    out=$(timeout 60 nvme discover -t tcp -a 127.0.0.1 -s "$TCP_PORT" --hostnqn="$TCP_HOSTNQN" 2>&1)
    echo "$out" | grep -q "subnqn: *$TCP_NQN" && ok "nvme discover lists $TCP_NQN" ||
        { echo "$out" | tail -30; fail "nvme discover does not list $TCP_NQN"; }

    tcp_connect "first connection"
    tcp_idle
    if [ -n "$TCP_DEV" ]; then
        check "fio write ${TCP_SIZE_MB}M + verify crc32c over TCP on $TCP_DEV" \
            fio --name=tcp --filename="$TCP_DEV" --ioengine=libaio --direct=1 --rw=write --bs=4k \
            --iodepth=16 --size="${TCP_SIZE_MB}M" --verify=crc32c --do_verify=1 --verify_fatal=1
        check "fio randwrite 512-64k + verify crc32c over TCP on $TCP_DEV" \
            fio --name=tcp-rand --filename="$TCP_DEV" --ioengine=io_uring --direct=1 --rw=randwrite \
            --bsrange=512-64k --iodepth=32 --offset=16M --size=16M --verify=crc32c --do_verify=1 \
            --verify_fatal=1
        written=$(tcp_region_md5 "$TCP_DEV")
        zeros=$(dd if=/dev/zero bs=1M count="$TCP_SIZE_MB" 2>/dev/null | md5sum | cut -d' ' -f1)
        [ "$written" != "$zeros" ] && ok "fio's data is on the namespace" || fail "the namespace reads zeros after fio"
    fi
    check "nvme disconnect -n $TCP_NQN" nvme disconnect -n "$TCP_NQN"
    i=0
    while [ -n "$TCP_DEV" ] && [ -e "$TCP_DEV" ] && [ "$i" -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ ! -e "${TCP_DEV:-/nonexistent}" ] && ok "block device gone after disconnect" || fail "$TCP_DEV still present"

    TCP_DEV=""
    tcp_connect "reconnection"
    [ -n "$TCP_DEV" ] && check_equal "data written before the disconnect, read back (md5)" \
        "$written" "$(tcp_region_md5 "$TCP_DEV")"
    check "nvme disconnect after the reconnection" nvme disconnect -n "$TCP_NQN"
    kill "$TCP_SERVER" 2>/dev/null
    wait "$TCP_SERVER"
    grep -E ' (ERROR|WARN) ' "$TCP_LOG" | tail -20
    echo "E2E-TCP seconds=$(echo "$(now) $t0" | awk '{ printf "%.1f", $1 - $2 }')"
    finish_phase tcp
}
