# SPDX-License-Identifier: Apache-2.0
#
# Host-side helpers for the QEMU e2e test, sourced by tests/e2e/qemu.sh:
# provisioning, the QEMU wrapper (the trixie-backports binary run through the tree's own
# loader, so it works on an older host), the per-run initramfs, booting a guest under timeout
# while watching its console, and reading the PASS/FAIL markers the guest prints.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # used by qemu.sh
REPO_ROOT=$(cd "$E2E_DIR/../.." && pwd)

log() { printf '[e2e %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

# Sets PROV (cache dir), TREE, KERNEL and the variables of $PROV/env.
e2e_provision() {
    local t0=$SECONDS
    PROV=$("$E2E_DIR/provision.sh") || die "provisioning failed"
    # shellcheck source=/dev/null
    . "$PROV/env"
    TREE=$PROV/tree
    if [[ "${HAVE_VMLINUX:-0}" == 1 && "${NVMEMU_E2E_BZIMAGE:-0}" != 1 ]]; then
        KERNEL=$PROV/vmlinux # PVH entry: faster than decompressing the bzImage under TCG
    else
        KERNEL=$PROV/bzImage
    fi
    log "provisioned in $((SECONDS - t0)) s: $PROV ($QEMU_VER, kernel $KVER)"
}

qemu() {
    QEMU_MODULE_DIR="$TREE/usr/lib/x86_64-linux-gnu/qemu" "$TREE$LOADER" \
        --library-path "$TREE/lib/x86_64-linux-gnu:$TREE/usr/lib/x86_64-linux-gnu" \
        "$TREE/usr/bin/qemu-system-x86_64" -L "$TREE/usr/share/qemu" -L "$TREE/usr/share/seabios" "$@"
}

# make_initrd OUT CONFIG_TEXT: base.cpio + a second archive with /init, the checks and config.
# Dies on any failure itself: callers run inside `if`, where `set -e` does not apply.
make_initrd() {
    local out=$1 config=$2 stage
    stage=$(mktemp -d "$RUN/overlay.XXXXXX") || die "cannot make a directory in $RUN"
    {
        mkdir -p "$stage/e2e" &&
            install -m 0755 "$E2E_DIR/guest/init" "$stage/init" &&
            install -m 0644 "$E2E_DIR/guest/checks.sh" "$stage/e2e/checks.sh" &&
            install -m 0644 "$E2E_DIR/guest/latency.sh" "$stage/e2e/latency.sh" &&
            printf '%s\n' "$config" >"$stage/e2e/config" &&
            cp "$PROV/base.cpio" "$out" &&
            (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >>"$out"
    } || die "cannot build the initramfs $out"
    rm -rf "$stage"
}

# guest_args INITRD: sets GUEST_ARGS, the QEMU options every e2e guest shares (console aside);
# E2E_MEM sizes the guest's RAM (default 1G).
guest_args() {
    local mem=${E2E_MEM:-1G}
    # shellcheck disable=SC2054 # commas belong to QEMU option values
    GUEST_ARGS=(-nodefaults -no-user-config -display none
        -accel tcg,thread=multi -cpu max -smp "${E2E_SMP:-2}" -m "$mem"
        -object "memory-backend-memfd,id=mem,size=$mem,share=on" -machine q35,memory-backend=mem
        -kernel "$KERNEL" -initrd "$1"
        -append "console=ttyS0 loglevel=4 mitigations=off panic=0 ${E2E_APPEND:-}")
}

# run_guest NAME TIMEOUT_S INITRD [qemu args...]: boots one QEMU process, console to
# $RUN/NAME.console. Returns QEMU's exit status (124 on timeout, 125 after a guest panic).
run_guest() {
    local name=$1 limit=$2 initrd=$3 console pid rc t0=$SECONDS
    shift 3
    console=$RUN/$name.console
    : >"$console"
    guest_args "$initrd"
    # shellcheck disable=SC2086 # NVMEMU_E2E_QEMU_ARGS is a list of words on purpose
    timeout -k 10 "$limit" "$TREE$LOADER" \
        --library-path "$TREE/lib/x86_64-linux-gnu:$TREE/usr/lib/x86_64-linux-gnu" \
        "$TREE/usr/bin/qemu-system-x86_64" -L "$TREE/usr/share/qemu" -L "$TREE/usr/share/seabios" \
        "${GUEST_ARGS[@]}" -monitor none -serial "file:$console" \
        ${NVMEMU_E2E_QEMU_ARGS:-} "$@" >"$RUN/$name.qemu.log" 2>&1 &
    pid=$!
    # A panicked guest would sit there until the timeout: stop it as soon as it says so.
    while kill -0 "$pid" 2>/dev/null; do
        if grep -q 'Kernel panic' "$console"; then
            log "$name: guest kernel panic"
            kill "$pid" 2>/dev/null
            wait "$pid"
            return 125
        fi
        sleep 0.5
    done
    wait "$pid" && rc=0 || rc=$?
    log "$name: QEMU exited with $rc after $((SECONDS - t0)) s"
    if [[ -s "$RUN/$name.qemu.log" ]]; then sed 's/^/    qemu: /' "$RUN/$name.qemu.log" >&2; fi
    return "$rc"
}

show_console() {
    log "----- console of $1 -----"
    sed 's/^/    | /' "$RUN/$1.console" >&2
    log "----- end of console of $1 -----"
}

# expect_phases NAME RC PHASE...: QEMU exited cleanly, no check failed and every listed phase
# printed PASS, in order. Prints the console and returns 1 otherwise.
expect_phases() {
    local name=$1 rc=$2 console=$RUN/$1.console got
    shift 2
    local bad=""
    [[ "$rc" == 0 ]] || bad="QEMU exit status $rc"
    grep -q 'E2E-CHECK FAIL' "$console" && bad="${bad:+$bad; }a check failed"
    got=$(sed -n 's/.*E2E-RESULT phase=\([^ ]*\) PASS.*/\1/p' "$console" | tr -d '\r' | tr '\n' ' ')
    [[ "$got" == "$* " ]] || bad="${bad:+$bad; }phases passed: '${got% }', expected '$*'"
    if [[ -n "$bad" ]]; then
        show_console "$name"
        log "FAIL $name: $bad"
        grep 'E2E-CHECK FAIL' "$console" | sed 's/^/    /' >&2
        return 1
    fi
    log "PASS $name: phases $* ($(grep -c 'E2E-CHECK ok' "$console") checks ok)"
}

# files_cpio OUT SRC=DEST...: an archive of host files at guest paths (DEST relative to /),
# executables 0755 and the rest 0644, to append to an initramfs after make_initrd's.
files_cpio() {
    local out=$1 stage pair mode
    shift
    stage=$(mktemp -d "$RUN/files.XXXXXX") || die "cannot make a directory in $RUN"
    for pair in "$@"; do
        mode=0644
        [[ -x "${pair%%=*}" ]] && mode=0755
        install -D -m "$mode" "${pair%%=*}" "$stage/${pair#*=}" || die "cannot stage ${pair%%=*}"
    done
    (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out" ||
        die "cannot pack $out"
    rm -rf "$stage"
}
