# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Host side of the e2e "xnvme" scenario, sourced by tests/e2e/qemu.sh: the reference set-up's own
# guest client (fio's xnvme ioengine with xNVMe's uPCIe driver, prebuilt peer binaries described
# in ../shared/peers/xnvme/README.md) drives the function from guest userspace, first against
# `nvmemu serve`, then against SPDK's nvmf_tgt in interrupt mode; guest/xnvme.sh runs the jobs.
#
#   NVMEMU_XNVME_PEERS  fio and libxnvme for the guest (default: ../shared/peers/xnvme beside the
#                       checkout); missing: skipped in one line, except under CI=true
#   NVMEMU_SPDK_PEERS   SPDK's tools for the nvmf_tgt boot (default: ../shared/peers/spdk);
#                       missing: that boot is skipped in one line, except under CI=true

# uPCIe's DMA heap is 1 GiB of huge pages (fio's engine offers no option to shrink it), so these
# guests get 2 GiB of RAM instead of 1 GiB.
XN_HUGEPAGES=${NVMEMU_XN_HUGEPAGES:-600}
XN_MEM=2G
XN_NQN=nqn.2016-06.io.spdk:cnode1
XN_SPDK_PID="" XN_HUGE=""

# xn_peer_dir VAR DEFAULT_NAME PROBE: the peer directory from $VAR or ../shared/peers/NAME, if
# PROBE (a path under it) is executable there; empty otherwise.
xn_peer_dir() {
    local dir=${!1:-$REPO_ROOT/../shared/peers/$2}
    [[ -x "$dir/$3" ]] && (cd "$dir" && pwd)
}

# xn_missing WHAT DIR: CI fails, elsewhere one line says what was skipped.
xn_missing() {
    if [[ "${CI:-}" == true ]]; then
        log "FAIL: no $1 at $2 (CI never skips it)"
        return 1
    fi
    log "skipped: $1 (none at $2)"
}

# xn_stage_cpio PEERS OUT: fio and libxnvme under /opt/xnvme, the glibc piece the base lacks,
# the guest scenario and the uio module, as one archive to append to an initramfs.
xn_stage_cpio() {
    local peers=$1 out=$2 stage lib=usr/lib/x86_64-linux-gnu
    stage=$(mktemp -d "$RUN/xn.XXXXXX")
    mkdir -p "$stage/opt/xnvme/bin" "$stage/opt/xnvme/lib" "$stage/e2e" "$stage/$lib"
    {
        install -m 0755 "$peers/bin/fio" "$stage/opt/xnvme/bin/" &&
            install -m 0644 "$peers/lib/libxnvme.so.0" "$stage/opt/xnvme/lib/" &&
            install -m 0644 "$E2E_DIR/guest/xnvme.sh" "$stage/e2e/xnvme.sh"
    } || die "cannot stage the xNVMe peer binaries from $peers"
    # This fio links libmvec, which the trixie fio in base.cpio does not need.
    cp -L "$TREE/$lib/libmvec.so.1" "$stage/$lib/libmvec.so.1" ||
        die "no libmvec.so.1 in $TREE/$lib"
    (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out" ||
        die "cannot pack the xNVMe peer files"
    rm -rf "$stage"
    US_MODULES=uio_pci_generic us_modules_cpio "$RUN/xn-modules.cpio"
    cat "$RUN/xn-modules.cpio" >>"$out" || die "cannot append the uio module"
}

# xnvme_boot NAME TARGET SOCKET: one guest running the xnvme scenario on the function served at
# SOCKET (TARGET names it in the log); logs the IOPS the guest measured.
xnvme_boot() {
    local name=$1 target=$2 socket=$3 rc=0 t0=$SECONDS
    make_initrd "$RUN/initrd-$name" "E2E_SCENARIO=xnvme
EXP_VID=$VID
XN_TARGET=$target
XN_HUGEPAGES=$XN_HUGEPAGES
XN_SECONDS=${NVMEMU_XN_SECONDS:-3}"
    cat "$RUN/xn-files.cpio" >>"$RUN/initrd-$name" || die "cannot append the xNVMe files"
    E2E_MEM=$XN_MEM run_guest "$name" "$LIMIT" "$RUN/initrd-$name" -no-reboot \
        -device '{"driver":"vfio-user-pci","socket":{"type":"unix","path":"'"$socket"'"}}' || rc=$?
    expect_phases "$name" "$rc" xnvme || return 1
    sed -n 's/.*E2E-XN-IOPS target=\([^ ]*\) job=\([^ ]*\) iops=\([0-9]*\).*/\1 \2 \3/p' \
        "$RUN/$name.console" | tr -d '\r' | while read -r tgt job iops; do
        log "guest fio xnvme/upcie $job IOPS (TCG) against $tgt: $iops"
    done
    log "xNVMe guest against $target: $((SECONDS - t0)) s"
}

# xn_write_ops: namespace 1's completed writes, as nvmemu's bdev_get_iostat counts them.
xn_write_ops() {
    "$BIN" rpc -s "$RUN/rpc.sock" bdev_get_iostat -b ns0n1 |
        sed -n 's/.*"num_write_ops": *\([0-9]*\).*/\1/p' | head -1
}

# xnvme_nvmemu: the guest against `nvmemu serve`; its verified writes must reach the server.
xnvme_nvmemu() {
    local before after
    BIN=${BIN:-$(nvmemu_bin)}
    [[ -n "$SERVER_PID" ]] || start_server "$BIN"
    before=$(xn_write_ops)
    xnvme_boot xnvme-nvmemu nvmemu "$RUN/sock/cntrl" || { show_server_log; return 1; }
    server_alive "during the xnvme-nvmemu guest" || return 1
    after=$(xn_write_ops)
    # 16 MiB of 4 KiB writes (guest/xnvme.sh's wverify job).
    if [[ -z "$before" || -z "$after" ]] || ((after - before < 4096)); then
        log "FAIL: nvmemu counted $((after - before)) writes during the xNVMe guest, expected >= 4096"
        return 1
    fi
    log "PASS: nvmemu completed $((after - before)) writes from fio's xnvme engine in the guest"
}

xn_spdk_rpc() { python3 "$1/scripts/rpc.py" -s "$RUN/spdk.sock" "${@:2}"; }

# xn_spdk_stop: stops nvmf_tgt, if running, and removes the hugepage files DPDK leaves behind.
xn_spdk_stop() {
    [[ -n "$XN_SPDK_PID" ]] || return 0
    kill -TERM "$XN_SPDK_PID" 2>/dev/null &&
        { timeout 10 tail -s 0.1 --pid="$XN_SPDK_PID" -f /dev/null || kill -KILL "$XN_SPDK_PID" 2>/dev/null; }
    wait "$XN_SPDK_PID" 2>/dev/null || true
    rm -rf "${XN_HUGE:-/nonexistent}/spdk_pid${XN_SPDK_PID}map_"* "/var/run/dpdk/spdk_pid$XN_SPDK_PID"
    XN_SPDK_PID=""
}

# xnvme_spdk SPDK_PEERS: the same guest against nvmf_tgt in interrupt mode (with its reactor
# polling, it would spin a host CPU the TCG guest needs: docs/userspace-driver-in-guest.md).
xnvme_spdk() {
    local peers=$1 rc=0 i
    XN_HUGE=$("$peers/setup.sh" | tail -n 1) || { log "FAIL: $peers/setup.sh (libraries, hugepages)"; return 1; }
    "$peers/bin/nvmf_tgt" -m 0x2 --interrupt-mode -r "$RUN/spdk.sock" --huge-dir "$XN_HUGE" \
        >"$RUN/nvmf_tgt.log" 2>&1 &
    XN_SPDK_PID=$!
    for ((i = 0; i < 200; i++)); do
        [[ -S "$RUN/spdk.sock" ]] && break
        sleep 0.1
    done
    mkdir -p "$RUN/spdk-vfu"
    # -M: no mappable BAR0, so doorbell writes reach the interrupt-mode target as messages.
    if ! { xn_spdk_rpc "$peers" framework_wait_init &&
        xn_spdk_rpc "$peers" bdev_malloc_create 256 512 -b Malloc0 &&
        xn_spdk_rpc "$peers" nvmf_create_transport -t VFIOUSER -M &&
        xn_spdk_rpc "$peers" nvmf_create_subsystem "$XN_NQN" -a -s SPDK00 &&
        xn_spdk_rpc "$peers" nvmf_subsystem_add_ns "$XN_NQN" Malloc0 &&
        xn_spdk_rpc "$peers" nvmf_subsystem_add_listener "$XN_NQN" -t VFIOUSER -a "$RUN/spdk-vfu" -s 0
    } >>"$RUN/nvmf_tgt-rpc.log" 2>&1; then
        tail -20 "$RUN/nvmf_tgt-rpc.log" "$RUN/nvmf_tgt.log" >&2
        xn_spdk_stop
        log "FAIL: nvmf_tgt set-up (logs above)"
        return 1
    fi
    xnvme_boot xnvme-spdk nvmf_tgt-interrupt "$RUN/spdk-vfu/cntrl" || rc=$?
    ((rc == 0)) || tail -40 "$RUN/nvmf_tgt.log" | sed 's/^/    nvmf_tgt: /' >&2
    xn_spdk_stop
    return "$rc"
}

# run_xnvme: both guests, each phase timed; the peers' absence is a skip outside CI.
run_xnvme() {
    local xn spdk t0=$SECONDS
    xn=$(xn_peer_dir NVMEMU_XNVME_PEERS xnvme bin/fio) ||
        { xn_missing "xNVMe peer binaries (fio, libxnvme)" "${NVMEMU_XNVME_PEERS:-../shared/peers/xnvme}"; return; }
    xn_stage_cpio "$xn" "$RUN/xn-files.cpio"
    log "guest 5: fio with xNVMe's uPCIe driver (uio_pci_generic) against nvmemu serve"
    xnvme_nvmemu || return 1
    spdk=$(xn_peer_dir NVMEMU_SPDK_PEERS spdk bin/nvmf_tgt) || {
        xn_missing "SPDK's nvmf_tgt for the xNVMe guest" "${NVMEMU_SPDK_PEERS:-../shared/peers/spdk}"
        return
    }
    log "guest 6: the same against SPDK's nvmf_tgt in interrupt mode"
    xnvme_spdk "$spdk" || return 1
    log "xNVMe guests: $((SECONDS - t0)) s"
}
