# SPDX-License-Identifier: Apache-2.0
#
# Host side of the e2e "userspace" scenario, sourced by tests/e2e/qemu.sh: nvmemu's own
# driver inside the guest on the emulated function, then the kernel nvme driver again;
# guest/userspace.sh runs the checks. Two boots:
#   - no IOMMU (the reference set-up): uio_pci_generic, then vfio-pci in no-IOMMU mode (the
#     guest's vfio module is rebuilt with CONFIG_VFIO_NOIOMMU by provision.sh: Debian's lacks it);
#   - an Intel vIOMMU (intel_iommu=on iommu=pt: the kernel's own drivers keep identity
#     mappings, a vfio-pci group gets a real DMA domain): vfio-pci through VFIO's type1 path.

US_MODULES="uio_pci_generic vfio_iommu_type1 vfio_pci"

# us_modules_cpio OUT [MODULE...]: an archive adding /e2e/modules/* (the MODULEs, default
# US_MODULES, with their dependencies; decompressed, in load order).
us_modules_cpio() {
    local out=$1 stage moddir rel name
    shift
    # shellcheck disable=SC2086 # US_MODULES is a list of words
    (($#)) || set -- $US_MODULES
    moddir=$(ls -d "$PROV"/kernel/usr/lib/modules/*/ | head -1)
    stage=$(mktemp -d "$RUN/usmod.XXXXXX")
    mkdir -p "$stage/e2e/modules"
    : >"$stage/e2e/modules/order"
    declare -A seen=()
    us_add() { # $1: path relative to moddir as modules.dep writes it
        local dep base
        [[ -n "${seen[$1]:-}" ]] && return 0
        seen[$1]=1
        for dep in $(awk -F': *' -v m="$1" '$1 == m { print $2 }' "$moddir/modules.dep"); do
            us_add "$dep"
        done
        base=${1##*/}
        base=${base%.xz}
        xz -dc "$moddir/$1" >"$stage/e2e/modules/$base" || die "cannot unpack $1"
        echo "$base" >>"$stage/e2e/modules/order"
    }
    for name in "$@"; do
        rel=$(awk -F: -v n="$name" '{ f = $1; sub(/.*\//, "", f); sub(/\.ko(\.xz)?$/, "", f)
            gsub(/-/, "_", f); if (f == n) { print $1; exit } }' "$moddir/modules.dep")
        [[ -n "$rel" ]] || die "module $name not in the guest kernel's modules.dep"
        us_add "$rel"
    done
    log "guest modules: $(tr '\n' ' ' <"$stage/e2e/modules/order")"
    (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out" ||
        die "cannot pack the userspace modules"
    rm -rf "$stage"
}

# userspace_boot NAME IOMMU [qemu args...]: one guest boot of the scenario (US_IOMMU=IOMMU, see
# guest/userspace.sh) with the files and modules run_userspace staged; logs the guest's IOPS.
userspace_boot() {
    local name=$1 iommu=$2 rc=0
    shift 2
    make_initrd "$RUN/initrd-$name" "E2E_SCENARIO=userspace
E2E_RUN=$RUN_ID
EXP_MODEL='$MODEL'
EXP_SERIAL='$SERIAL'
EXP_VID=$VID
US_IOMMU=$iommu
US_SECONDS=${NVMEMU_US_SECONDS:-5}"
    cat "$RUN/us-files.cpio" "$RUN/us-modules.cpio" >>"$RUN/initrd-$name" ||
        die "cannot append the userspace files to $RUN/initrd-$name"
    # An IOMMU device must come before the PCI devices it translates for.
    run_guest "$name" "$LIMIT" "$RUN/initrd-$name" -no-reboot "$@" -device "$(nvmemu_device)" || rc=$?
    server_alive "during the $name guest" || return 1
    expect_phases "$name" "$rc" userspace || { show_server_log; return 1; }
    # Every vfio-user request succeeded (a virtual IOMMU makes QEMU unmap ranges it never
    # mapped, up to the top of the address space: the kernel's VFIO accepts those, so must we).
    if grep -q 'error reply' "$RUN/$name.qemu.log"; then
        log "FAIL $name: QEMU got vfio-user error replies (above)"
        return 1
    fi
    sed -n 's/.*E2E-US-IOPS driver=\([^ ]*\) iops=\([0-9]*\).*/\1 \2/p' "$RUN/$name.console" |
        tr -d '\r' | while read -r drv iops; do
        log "guest 4k randread iodepth 16 IOPS (TCG): $drv $iops"
    done
}

# run_userspace: the two guest boots against a fresh nvmemu serve.
run_userspace() {
    local bin stage
    bin=$(nvmemu_bin)
    [[ -n "$SERVER_PID" ]] || start_server "$bin"
    # Job J from the host, through the socket: the bytes the guest must reproduce.
    "$bin" bench --socket "$RUN/sock" --rw=write --bs=4k --iodepth=16 --size=4M --offset=64M \
        --verify=crc32c >"$RUN/host-job-j.txt" 2>&1 || {
        cat "$RUN/host-job-j.txt" >&2
        die "host-side job J through $RUN/sock failed"
    }
    stage=$(mktemp -d "$RUN/us.XXXXXX")
    mkdir -p "$stage/usr/bin" "$stage/e2e"
    install -m 0755 "$bin" "$stage/usr/bin/nvmemu" || die "cannot stage $bin"
    install -m 0644 "$E2E_DIR/guest/userspace.sh" "$stage/e2e/userspace.sh" || die "cannot stage guest/userspace.sh"
    (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$RUN/us-files.cpio" ||
        die "cannot pack the userspace files"
    rm -rf "$stage"
    us_modules_cpio "$RUN/us-modules.cpio"

    log "guest 3: nvmemu's driver in guest userspace without an IOMMU (uio_pci_generic, vfio-pci no-IOMMU), then nvme again"
    userspace_boot userspace none || return 1
    log "guest 4: nvmemu's driver through vfio-pci behind a virtual Intel IOMMU, then nvme again"
    # no_timer_check: under a loaded TCG host the kernel's boot-time timer check can miss its
    # window, and with interrupt remapping (which VFIO's type1 wants) that is a panic.
    E2E_APPEND="intel_iommu=on iommu=pt no_timer_check ${E2E_APPEND:-}" \
        userspace_boot userspace-viommu intel -device intel-iommu,caching-mode=on || return 1
    # Job J's blocks as our driver wrote them from guest userspace, read back on the host:
    # --verify_only replays the job without writing and checks every block.
    "$bin" bench --socket "$RUN/sock" --rw=write --bs=4k --iodepth=16 --size=4M --offset=64M \
        --verify=crc32c --verify_only >"$RUN/host-job-j2.txt" 2>&1 || {
        cat "$RUN/host-job-j2.txt" >&2
        log "FAIL: job J, written by nvmemu's driver in the guest, does not verify on the host"
        return 1
    }
    log "PASS: job J as the guest's userspace driver wrote it verifies on the host (--verify_only)"
}
