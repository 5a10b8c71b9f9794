# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Host side of the e2e "tcp_bench" scenario, sourced by tests/e2e/qemu.sh (`qemu.sh tcp-bench`,
# which scripts/guest-tcp-bench.sh runs): one guest with Linux's nvmet-tcp (on null_blk and on
# brd) and nvmemu serve --tcp on its own loopback, the kernel's nvme-tcp connected to all three;
# guest/tcp_bench.sh runs fio on them. Nothing is attached from the host but a small virtio
# disk that carries fio's JSON results back.
#
# Sizes and times (the guest's config): TB_SIZE_MB (128 MiB namespaces; 32 in check mode),
# TB_VERIFY_MB (8), TB_SECONDS (8), TB_ROUNDS (5), TB_JOBS (2), TB_ENGINE (io_uring).

TB_MODULES="nvme_tcp nvmet_tcp null_blk brd"

# run_tcp_bench MODE [OUT]: MODE "check" (connect all three, verify each namespace) or "full"
# (then the interleaved rounds; fio's results go to the file OUT, "=== NAME" before each).
run_tcp_bench() {
    local mode=${1:-check} out=${2:-} bin timeout_s rc=0 rounds=${TB_ROUNDS:-5} seconds=${TB_SECONDS:-8}
    local size=${TB_SIZE_MB:-128}
    case $mode in
    check) size=${TB_SIZE_MB:-32} ;;
    full) [[ -n "$out" ]] || die "tcp-bench full needs a file for the results" ;;
    *) die "tcp-bench: unknown mode '$mode' (check or full)" ;;
    esac
    bin=$(nvmemu_bin)
    make_initrd "$RUN/initrd-tcpb" "E2E_SCENARIO=tcp_bench
TB_MODE=$mode
TB_SIZE_MB=$size
TB_VERIFY_MB=${TB_VERIFY_MB:-8}
TB_SECONDS=$seconds
TB_ROUNDS=$rounds
TB_JOBS=${TB_JOBS:-2}
TB_ENGINE=${TB_ENGINE:-io_uring}"
    files_cpio "$RUN/tcpb-files.cpio" "$bin=usr/bin/nvmemu" "$E2E_DIR/guest/tcp_bench.sh=e2e/tcp_bench.sh"
    # shellcheck disable=SC2086 # TB_MODULES is a list of words
    us_modules_cpio "$RUN/tcpb-modules.cpio" $TB_MODULES
    cat "$RUN/tcpb-files.cpio" "$RUN/tcpb-modules.cpio" >>"$RUN/initrd-tcpb" ||
        die "cannot append the tcp_bench files to $RUN/initrd-tcpb"
    truncate -s 16M "$RUN/tcpb-results.img"
    # Boot and set-up, then six runs a round of the run time plus ramp and fio's start.
    timeout_s=$LIMIT
    [[ $mode == full ]] && timeout_s=$((LIMIT + rounds * 6 * (seconds + 6)))
    log "guest tcp-bench ($mode): nvmet-tcp on null_blk and brd, nvmemu serve --tcp, Linux nvme-tcp against each"
    # shellcheck disable=SC2054 # commas belong to QEMU option values
    E2E_MEM=${E2E_MEM:-2G} run_guest tcp-bench "$timeout_s" "$RUN/initrd-tcpb" -no-reboot \
        -drive "file=$RUN/tcpb-results.img,if=none,id=tbres,format=raw" \
        -device virtio-blk-pci,drive=tbres || rc=$?
    expect_phases tcp-bench "$rc" tcp_bench || return 1
    [[ $mode == full ]] || return 0
    tr -d '\000' <"$RUN/tcpb-results.img" >"$out" || die "cannot write $out"
    grep -qx '=== END' "$out" || die "the guest's results in $out are incomplete (no '=== END')"
}
