# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Host side of the e2e "faults" scenario, sourced by tests/e2e/qemu.sh: a guest whose Linux
# nvme driver meets injected faults (guest/faults.sh). The server gets a second subsystem,
# FAULT_NQN, whose one namespace is on an error bdev (EE_FaultMalloc) and whose controller only
# this guest uses; fault_watch arms each fault over RPC when the guest asks for it on its
# console, so the other guests never see one.

FAULT_NQN=nqn.2019-07.io.nvmemu:faults
FAULT_BDEV=FaultMalloc

# fault_rpc ARGS...: one `nvmemu rpc` call on the server, logged; fails the test if it fails.
fault_rpc() {
    printf '+ nvmemu rpc %s\n' "$*" >>"$RUN/faults-rpc.log"
    "$BIN" rpc -s "$RUN/rpc.sock" "$@" >>"$RUN/faults-rpc.log" 2>&1
}

# The RPC calls that arm the guest's step $1.
fault_arm() {
    case $1 in
    drop) fault_rpc bdev_error_inject_error "EE_$FAULT_BDEV" read pending -n 1 ;;
    fatal) fault_rpc nvmemu_controller_inject_fatal "$FAULT_NQN" ;;
    media) fault_rpc nvmemu_bdev_inject_fault "EE_$FAULT_BDEV" --io-type read --sct 2 --sc 0x81 \
        --dnr --lba-start 2400 --lba-count 8 --count 1 ;;
    notready) fault_rpc nvmemu_namespace_inject_not_ready "$FAULT_NQN" 1 --dnr ;;
    ready) fault_rpc nvmemu_namespace_inject_not_ready "$FAULT_NQN" 1 --clear ;;
    *) return 1 ;;
    esac
}

# fault_watch CONSOLE: arms each step the guest announces, in order, until the guest stops;
# a step that could not be armed is written to $RUN/faults-failed.
fault_watch() {
    local step armed=" "
    while sleep 0.2; do
        for step in $(sed -n 's/.*E2E-FAULT step=\([a-z]*\).*/\1/p' "$1" | tr -d '\r'); do
            [[ $armed == *" $step "* ]] && continue
            armed+="$step "
            fault_arm "$step" || echo "$step" >>"$RUN/faults-failed"
        done
    done
}

fault_setup_subsystem() {
    mkdir -p "$RUN/faults-sock"
    fault_rpc bdev_malloc_create 64 512 -b "$FAULT_BDEV" &&
        fault_rpc bdev_error_create "$FAULT_BDEV" &&
        fault_rpc nvmf_create_subsystem "$FAULT_NQN" -a -s NVMEMUFAULTS01 &&
        fault_rpc nvmf_subsystem_add_ns "$FAULT_NQN" "EE_$FAULT_BDEV" &&
        fault_rpc nvmf_subsystem_add_listener "$FAULT_NQN" -t VFIOUSER -a "$RUN/faults-sock" -s 0
}

# run_faults: one guest boot against the fault subsystem of the running (or a new) server.
run_faults() {
    local rc=0 watch stage t0=$SECONDS
    BIN=$(nvmemu_bin)
    [[ -n "$SERVER_PID" ]] || start_server "$BIN"
    : >"$RUN/faults-rpc.log"
    if ! fault_setup_subsystem; then
        sed 's/^/    /' "$RUN/faults-rpc.log" >&2
        log "FAIL: cannot set up $FAULT_NQN"
        return 1
    fi
    stage=$(mktemp -d "$RUN/faults.XXXXXX")
    mkdir -p "$stage/e2e"
    install -m 0644 "$E2E_DIR/guest/faults.sh" "$stage/e2e/faults.sh" || die "cannot stage guest/faults.sh"
    make_initrd "$RUN/initrd-faults" "E2E_SCENARIO=faults"
    (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >>"$RUN/initrd-faults" ||
        die "cannot pack the faults scenario's files"
    rm -rf "$stage"
    log "guest faults: Linux nvme meets a dropped read, a fatal controller, a media error, a namespace not ready"
    fault_watch "$RUN/faults.console" &
    watch=$!
    run_guest faults "$LIMIT" "$RUN/initrd-faults" -no-reboot \
        -device '{"driver":"vfio-user-pci","socket":{"type":"unix","path":"'"$RUN/faults-sock/cntrl"'"}}' || rc=$?
    kill "$watch" 2>/dev/null || true
    wait "$watch" 2>/dev/null || true
    server_alive "during the faults guest" || return 1
    if [[ -s "$RUN/faults-failed" ]]; then
        sed 's/^/    /' "$RUN/faults-rpc.log" >&2
        log "FAIL: could not arm: $(tr '\n' ' ' <"$RUN/faults-failed")"
        return 1
    fi
    expect_phases faults "$rc" faults || { show_server_log; return 1; }
    log "guest faults: $(grep -a 'E2E-FAULT seconds=' "$RUN/faults.console" | tr -d '\r') in the guest, $((SECONDS - t0)) s with the boot"
}
