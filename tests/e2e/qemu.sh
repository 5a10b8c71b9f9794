#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# End-to-end test: a QEMU guest's Linux nvme driver uses the emulated SSD over vfio-user.
#
#   tests/e2e/qemu.sh            full test against `nvmemu serve` (what CI runs)
#   tests/e2e/qemu.sh reference  the same checks against QEMU's built-in nvme device
#                                (validates the harness itself; needs no nvmemu)
#   tests/e2e/qemu.sh shell [nvmemu|qemu-nvme]
#                                an interactive guest (serial console on this terminal)
#   tests/e2e/qemu.sh userspace  only the userspace-driver guests (tests/e2e/userspace.sh)
#   tests/e2e/qemu.sh tcp        only the guest running nvmemu serve --tcp on its own loopback
#                                with Linux's nvme-tcp initiator against it (guest/tcp.sh)
#   tests/e2e/qemu.sh tcp-bench check|full [OUT]
#                                nvmet-tcp (null_blk, brd) and nvmemu serve --tcp in one guest,
#                                Linux nvme-tcp against each (tcp_bench.sh; the table:
#                                scripts/guest-tcp-bench.sh)
#   tests/e2e/qemu.sh xnvme      only the guests running fio with xNVMe's uPCIe driver
#                                (tests/e2e/xnvme.sh)
#   tests/e2e/qemu.sh faults     only the guest whose nvme driver meets injected faults
#                                (tests/e2e/faults.sh)
#   tests/e2e/qemu.sh bench [nvmemu|qemu-nvme|virtio-blk]...
#                                fio 4k randread iodepth 16 in the guest, for docs/qemu-guest.md
#   tests/e2e/qemu.sh latency [SVG]
#                                the QD1 per-layer latency table (guest trace events plus the
#                                target's histograms; docs/latency.md), and its plot
#
# The full test boots one QEMU (2 vCPUs, shared memfd RAM, vfio-user-pci) that runs phase 1
# (identify, queues and MSI-X, fio verify with io_uring and libaio, second namespace,
# controller reset, write data), reboots the guest and runs phase 2 (data reads back); then a
# second QEMU process against the same, still running server runs phase 3 (data still there,
# fio verify); then two more QEMU processes run nvmemu's own driver inside the guest
# (uio_pci_generic and vfio-pci no-IOMMU without an IOMMU, vfio-pci type1 behind a virtual
# Intel IOMMU) and hand the function back to nvme (tests/e2e/userspace.sh); then the reference
# set-up's own client, fio with xNVMe's uPCIe driver, runs randread and randwrite + verify in the
# guest against nvmemu serve and against SPDK's nvmf_tgt in interrupt mode (tests/e2e/xnvme.sh;
# skipped in one line outside CI when the peer binaries are absent); then a last guest runs
# nvmemu serve --tcp on its own loopback and Linux's nvme-tcp initiator against it (discover,
# connect, fio verify, disconnect, reconnect and read back: tests/e2e/guest/tcp.sh); then a guest
# whose nvme driver meets injected faults on a subsystem of its own: a dropped read (timeout,
# abort), a fatal controller (reset), a media error, a namespace not ready, then fio verify
# (tests/e2e/faults.sh). Any failure exits non-zero with the guest console in the log.
#
# Environment:
#   NVMEMU_BIN          nvmemu binary (default: cargo build --release -p nvmemu)
#   NVMEMU_MODEL        expected/served model number  (default "nvmemu Virtual NVMe")
#   NVMEMU_SERIAL       expected/served serial number (default "NVMEMU0001")
#   NVMEMU_VID          expected PCI vendor id in Identify Controller (default 0x4e58)
#   NVMEMU_E2E_CACHE    provisioning cache (default ~/.cache/nvmemu-e2e)
#   NVMEMU_E2E_TIMEOUT  seconds allowed per QEMU process (default 420)
#   NVMEMU_E2E_KEEP=1   keep the run directory (consoles, server log) even on success
#   NVMEMU_E2E_SKIP     space-separated guest checks to skip while diagnosing ("reset"); the
#                       run then says SKIPPED on the console. Never set in CI.
#   NVMEMU_SKIP_E2E=1   is honoured by .ci/run for quick local loops, never in CI
set -euo pipefail

# shellcheck source=tests/e2e/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/lib/serve.sh
. "$REPO_ROOT/scripts/lib/serve.sh"
# shellcheck source=tests/e2e/userspace.sh
. "$(dirname "${BASH_SOURCE[0]}")/userspace.sh"
# shellcheck source=tests/e2e/xnvme.sh
. "$(dirname "${BASH_SOURCE[0]}")/xnvme.sh"
# shellcheck source=tests/e2e/tcp_bench.sh
. "$(dirname "${BASH_SOURCE[0]}")/tcp_bench.sh"
# shellcheck source=tests/e2e/faults.sh
. "$(dirname "${BASH_SOURCE[0]}")/faults.sh"

MODEL=${NVMEMU_MODEL:-nvmemu Virtual NVMe}
SERIAL=${NVMEMU_SERIAL:-NVMEMU0001}
VID=${NVMEMU_VID:-0x4e58}
LIMIT=${NVMEMU_E2E_TIMEOUT:-420}
NS1_BYTES=$((256 << 20))
NS2_BYTES=$((64 << 20))
SERVER_PID=""
BIN=""
T_START=$SECONDS

cleanup() {
    local rc=$?
    [[ -z "$SERVER_PID" ]] || serve_stop "$SERVER_PID"
    xn_spdk_stop
    if [[ -n "${RUN:-}" && -d "$RUN" ]]; then
        if [[ $rc -eq 0 && "${NVMEMU_E2E_KEEP:-0}" != 1 ]]; then
            rm -rf "$RUN"
        else
            log "run directory kept: $RUN"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Guest configuration for the "flow" scenario; $1 model, $2 serial, $3 vendor id.
flow_config() {
    cat <<EOF
E2E_SCENARIO=flow
E2E_RUN=$RUN_ID
EXP_MODEL='$1'
EXP_SERIAL='$2'
EXP_VID=$3
EXP_NS1_BYTES=$NS1_BYTES
EXP_NS1_LBADS=9
EXP_NS1_FMT='512   B'
EXP_NS2_BYTES=$NS2_BYTES
EXP_NS2_LBADS=12
EXP_NS2_FMT='4 KiB'
EXP_QUEUES=${E2E_SMP:-2}
E2E_SKIP='${NVMEMU_E2E_SKIP:-}'
E2E_LATENCY=${LATENCY:-0}
LAT_SECONDS=${NVMEMU_LAT_SECONDS:-2}
EOF
}

nvmemu_bin() {
    if [[ -n "${NVMEMU_BIN:-}" ]]; then
        [[ -x "$NVMEMU_BIN" ]] || die "NVMEMU_BIN=$NVMEMU_BIN is not executable"
        echo "$NVMEMU_BIN"
        return
    fi
    log "building nvmemu (cargo build --release -p nvmemu)"
    (cd "$REPO_ROOT" && cargo build --release -p nvmemu >&2) || die "cargo build failed"
    echo "${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/nvmemu"
}

start_server() {
    local bin=$1
    mkdir -p "$RUN/sock"
    log "starting: $bin serve --socket-dir $RUN/sock --ns malloc:size=256M,lba=512 --ns malloc:size=64M,lba=4096 -m 0x2"
    serve_start "$RUN/nvmemu.log" "$RUN/sock/cntrl" "$RUN/rpc.sock" -- \
        env RUST_LOG="${RUST_LOG:-info}" "$bin" serve --socket-dir "$RUN/sock" \
        --ns malloc:size=256M,lba=512 --ns malloc:size=64M,lba=4096 -m 0x2 \
        --serial "$SERIAL" --model "$MODEL" -r "$RUN/rpc.sock" || die "nvmemu serve did not start"
    SERVER_PID=$SERVE_PID
}

show_server_log() {
    serve_log_tail "$RUN/nvmemu.log" 80
}

server_alive() {
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        wait "$SERVER_PID" && rc=0 || rc=$?
        SERVER_PID=""
        SERVE_PID=""
        show_server_log
        log "FAIL: nvmemu serve exited ($rc) $1"
        return 1
    fi
}

nvmemu_device() {
    echo '{"driver":"vfio-user-pci","socket":{"type":"unix","path":"'"$RUN/sock/cntrl"'"}}'
}

# lat_watch CONSOLE: the target's breakdown at the guest's "E2E-LAT mark=start|stop" lines.
lat_watch() {
    local mark
    for mark in start stop; do
        until grep -q "E2E-LAT mark=$mark" "$1" 2>/dev/null; do sleep 0.1; done
        "$BIN" rpc -s "$RUN/rpc.sock" nvmemu_get_latency_breakdown >"$RUN/lat-$mark.json"
    done
}

# lat_value LINE KEY: the number after " KEY=" in LINE.
lat_value() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" <<<"$1"; }

# lat_table NAME [SVG]: the table of guest NAME's QD1 run (its console's E2E-LAT line and
# the two breakdowns lat_watch took); fails unless every row is there.
lat_table() {
    local line row rows out
    line=$(grep -a '^E2E-LAT fio_lat_ns=' "$RUN/$1.console" | tail -1 | tr -d '\r')
    if [[ -z "$line" || ! -s "$RUN/lat-stop.json" ]]; then
        log "FAIL: no latency measurement from $1"
        return 1
    fi
    rows=("guest benchmark (fio lat)=$(lat_value "$line" fio_lat_ns)"
        "guest block layer=$(lat_value "$line" block_ns)"
        "guest nvme driver=$(lat_value "$line" nvme_ns)"
        "transport (+ driver submit)=$(lat_value "$line" setup_to_irq_ns)")
    out=$(python3 "$REPO_ROOT/scripts/latency_table.py" --before "$RUN/lat-start.json" \
        --after "$RUN/lat-stop.json" --title "QEMU guest: Linux nvme, fio libaio QD1 4k randread" \
        ${2:+--plot "$2"} "${rows[@]}") || return 1
    printf '%s\n' "$out"
    for row in "guest benchmark" "guest block layer" "guest nvme driver" transport target backend; do
        if ! grep -q "^  $row" <<<"$out"; then
            log "FAIL: latency table lacks the row '$row'"
            return 1
        fi
    done
    log "guest trace: $line"
}

# run_latency [SVG]: a guest that only runs the QD1 latency measurement.
run_latency() {
    local rc=0 watch
    BIN=$(nvmemu_bin)
    start_server "$BIN"
    "$BIN" rpc -s "$RUN/rpc.sock" bdev_enable_histogram ns0n1 || die "bdev_enable_histogram failed"
    make_initrd "$RUN/initrd-lat" "E2E_SCENARIO=latency
LAT_SECONDS=${NVMEMU_LAT_SECONDS:-3}"
    lat_watch "$RUN/latency.console" &
    watch=$!
    run_guest latency "$LIMIT" "$RUN/initrd-lat" -no-reboot -device "$(nvmemu_device)" || rc=$?
    kill "$watch" 2>/dev/null || true
    wait "$watch" 2>/dev/null || true
    expect_phases latency "$rc" latency || return 1
    lat_table latency "${1:-}"
}

# QEMU's own nvme with the same two namespaces, backed by images in the run directory.
qemu_nvme_args() {
    [[ -f "$RUN/ns1.img" ]] || truncate -s "$NS1_BYTES" "$RUN/ns1.img"
    [[ -f "$RUN/ns2.img" ]] || truncate -s "$NS2_BYTES" "$RUN/ns2.img"
    echo -drive "file=$RUN/ns1.img,if=none,id=d1,format=raw,cache=writeback" \
        -drive "file=$RUN/ns2.img,if=none,id=d2,format=raw,cache=writeback" \
        -device "nvme,id=nvme0,serial=$1" \
        -device "nvme-ns,drive=d1,bus=nvme0,nsid=1,logical_block_size=512,physical_block_size=512" \
        -device "nvme-ns,drive=d2,bus=nvme0,nsid=2,logical_block_size=4096,physical_block_size=4096"
}

# run_flow KIND: the three-phase flow against "nvmemu" or "qemu-nvme".
run_flow() {
    local kind=$1 model=$MODEL serial=$SERIAL vid=$VID rc failed=0 dev=()
    if [[ $kind == qemu-nvme ]]; then
        model="QEMU NVMe Ctrl" serial=nvmemu-ref-1 vid=0x1b36
        # shellcheck disable=SC2207 # paths in $RUN have no blanks (mktemp)
        dev=($(qemu_nvme_args "$serial"))
    else
        BIN=$(nvmemu_bin)
        start_server "$BIN"
        dev=(-device "$(nvmemu_device)")
    fi
    make_initrd "$RUN/initrd" "$(flow_config "$model" "$serial" "$vid")"

    log "guest 1: phase 1, guest reboot, phase 2 (timeout ${LIMIT}s)"
    rc=0
    run_guest guest1 "$LIMIT" "$RUN/initrd" "${dev[@]}" || rc=$?
    expect_phases guest1 "$rc" 1 2 || failed=1
    if [[ $kind == nvmemu ]]; then
        server_alive "during guest 1" || return 1
        ((failed == 0)) || show_server_log
    fi
    ((failed == 0)) || return 1

    log "guest 2: a fresh QEMU process against the same device: phase 3"
    local watch=""
    if [[ $kind == nvmemu ]]; then
        # Phase 3 ends with the QD1 latency table's measurement (a few seconds of fio).
        "$BIN" rpc -s "$RUN/rpc.sock" bdev_enable_histogram ns0n1 || return 1
        make_initrd "$RUN/initrd" "$(LATENCY=1 flow_config "$model" "$serial" "$vid")"
        lat_watch "$RUN/guest2.console" &
        watch=$!
    fi
    rc=0
    run_guest guest2 "$LIMIT" "$RUN/initrd" -no-reboot "${dev[@]}" || rc=$?
    if [[ -n "$watch" ]]; then
        kill "$watch" 2>/dev/null || true
        wait "$watch" 2>/dev/null || true
    fi
    expect_phases guest2 "$rc" 3 || failed=1
    if [[ $kind == nvmemu ]]; then
        server_alive "during guest 2" || return 1
        ((failed == 0)) || show_server_log
        if ((failed == 0)) && ! lat_table guest2; then failed=1; fi
    fi
    ((failed == 0)) || return 1
}

# run_bench KIND...: prints one "IOPS" line per device kind.
run_bench() {
    local kind rc dev iops bench_dev
    for kind in "$@"; do
        case $kind in
        nvmemu)
            [[ -n "$SERVER_PID" ]] || start_server "$(nvmemu_bin)"
            dev=(-device "$(nvmemu_device)") bench_dev=nsid1
            ;;
        qemu-nvme)
            # shellcheck disable=SC2207
            dev=($(qemu_nvme_args bench)) bench_dev=nsid1
            ;;
        virtio-blk)
            [[ -f "$RUN/ns1.img" ]] || truncate -s "$NS1_BYTES" "$RUN/ns1.img"
            # shellcheck disable=SC2054
            dev=(-drive "file=$RUN/ns1.img,if=none,id=d1,format=raw,cache=writeback"
                -device virtio-blk-pci,drive=d1) bench_dev=/dev/vda
            ;;
        *) die "unknown bench device '$kind' (nvmemu, qemu-nvme, virtio-blk)" ;;
        esac
        make_initrd "$RUN/initrd-$kind" "E2E_SCENARIO=bench
BENCH_DEV=$bench_dev
BENCH_ENGINE=${NVMEMU_BENCH_ENGINE:-io_uring}
BENCH_SECONDS=${NVMEMU_BENCH_SECONDS:-30}"
        rc=0
        run_guest "bench-$kind" "$LIMIT" "$RUN/initrd-$kind" -no-reboot "${dev[@]}" || rc=$?
        iops=$(sed -n 's/.*E2E-BENCH .* iops=\([0-9]*\).*/\1/p' "$RUN/bench-$kind.console")
        if [[ $rc -ne 0 || -z "$iops" ]]; then
            show_console "bench-$kind"
            die "bench on $kind failed"
        fi
        printf 'IOPS %-10s %s\n' "$kind" "$iops"
    done
}

# run_tcp: a guest running `nvmemu serve --tcp` on its own loopback and Linux's nvme-tcp
# initiator against it (guest/tcp.sh); no device from the host.
run_tcp() {
    local bin stage rc=0 t0=$SECONDS
    bin=$(nvmemu_bin)
    stage=$(mktemp -d "$RUN/tcp.XXXXXX")
    mkdir -p "$stage/usr/bin" "$stage/e2e"
    install -m 0755 "$bin" "$stage/usr/bin/nvmemu" || die "cannot stage $bin"
    install -m 0644 "$E2E_DIR/guest/tcp.sh" "$stage/e2e/tcp.sh" || die "cannot stage guest/tcp.sh"
    make_initrd "$RUN/initrd-tcp" "E2E_SCENARIO=tcp"
    (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >>"$RUN/initrd-tcp" ||
        die "cannot pack the tcp scenario's files"
    rm -rf "$stage"
    us_modules_cpio "$RUN/tcp-modules.cpio" nvme_tcp
    cat "$RUN/tcp-modules.cpio" >>"$RUN/initrd-tcp" || die "cannot append the nvme-tcp modules"
    log "guest tcp: nvmemu serve --tcp on the guest's loopback, Linux nvme-tcp against it"
    run_guest tcp "$LIMIT" "$RUN/initrd-tcp" -no-reboot || rc=$?
    expect_phases tcp "$rc" tcp || return 1
    log "guest tcp: $(grep -a 'E2E-TCP seconds=' "$RUN/tcp.console" | tr -d '\r') in the guest, $((SECONDS - t0)) s with the boot"
}

# run_shell KIND: the guest's console on this terminal (Ctrl-a x quits QEMU).
run_shell() {
    local kind=${1:-nvmemu} dev=()
    if [[ $kind == qemu-nvme ]]; then
        # shellcheck disable=SC2207
        dev=($(qemu_nvme_args nvmemu-ref-1))
    else
        start_server "$(nvmemu_bin)"
        dev=(-device "$(nvmemu_device)")
    fi
    make_initrd "$RUN/initrd" "E2E_SCENARIO=shell"
    guest_args "$RUN/initrd"
    # shellcheck disable=SC2086
    qemu "${GUEST_ARGS[@]}" -no-reboot -serial mon:stdio ${NVMEMU_E2E_QEMU_ARGS:-} "${dev[@]}"
}

main() {
    local mode=${1:-nvmemu}
    e2e_provision
    RUN=$(mktemp -d "${TMPDIR:-/tmp}/nvmemu-e2e.XXXXXX")
    RUN_ID=$(basename "$RUN" | cut -d. -f2)$$
    case $mode in
    nvmemu | reference)
        [[ $mode == reference ]] && mode=qemu-nvme
        if run_flow "$mode" && { [[ $mode != nvmemu ]] || { run_userspace && run_xnvme && run_tcp && run_faults; }; }; then
            log "PASS: e2e against $mode in $((SECONDS - T_START)) s"
        else
            log "FAIL: e2e against $mode after $((SECONDS - T_START)) s"
            exit 1
        fi
        ;;
    userspace)
        if run_userspace; then
            log "PASS: userspace driver in the guest in $((SECONDS - T_START)) s"
        else
            log "FAIL: userspace driver in the guest after $((SECONDS - T_START)) s"
            exit 1
        fi
        ;;
    tcp)
        if run_tcp; then
            log "PASS: Linux nvme-tcp against nvmemu serve --tcp in the guest in $((SECONDS - T_START)) s"
        else
            log "FAIL: Linux nvme-tcp against nvmemu serve --tcp in the guest after $((SECONDS - T_START)) s"
            exit 1
        fi
        ;;
    tcp-bench)
        shift
        run_tcp_bench "$@" || exit 1
        ;;
    faults)
        if run_faults; then
            log "PASS: Linux nvme meets injected faults in the guest in $((SECONDS - T_START)) s"
        else
            log "FAIL: Linux nvme meets injected faults in the guest after $((SECONDS - T_START)) s"
            exit 1
        fi
        ;;
    xnvme)
        if run_xnvme; then
            log "PASS: fio with xNVMe's uPCIe driver in the guest in $((SECONDS - T_START)) s"
        else
            log "FAIL: fio with xNVMe's uPCIe driver in the guest after $((SECONDS - T_START)) s"
            exit 1
        fi
        ;;
    bench)
        shift
        (($#)) || set -- qemu-nvme virtio-blk nvmemu
        run_bench "$@"
        ;;
    shell)
        shift
        run_shell "$@"
        ;;
    latency)
        shift
        run_latency "$@" || exit 1
        ;;
    *) die "usage: $0 [reference | userspace | xnvme | tcp | tcp-bench check|full [OUT] | faults | shell [nvmemu|qemu-nvme] | bench [nvmemu|qemu-nvme|virtio-blk]... | latency [SVG]]" ;;
    esac
}

main "$@"
