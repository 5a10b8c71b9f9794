# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh disable=SC2015 # "cond && ok ... || fail ...": ok only echoes, never fails
#
# Scenario "userspace" (sourced by checks.sh when the host added it to the initramfs, with
# /usr/bin/nvmemu and the uio / vfio modules): nvmemu's own driver drives the emulated
# function from guest userspace, then the kernel's nvme driver takes the function back.
# US_IOMMU says which guest this is:
#   none:  no IOMMU, as in the uio_pci_generic + hugepages set-up the device is built for:
#          uio_pci_generic, then vfio-pci in no-IOMMU mode (both DMA to physical addresses);
#   intel: the guest has a virtual Intel IOMMU: vfio-pci with type1 DMA mappings.
#
# Data check across drivers: the host wrote job J (nvmemu bench --rw=write --verify=crc32c,
# bs 4k, 4 MiB at US_J_OFFSET_MB) through the socket before this boot. Its bytes depend
# only on the LBAs and the job, so: the kernel driver hashes them, wipes them, our driver
# writes job J again from here, and the kernel driver must read back the host's hash.

US_J_OFFSET_MB=${US_J_OFFSET_MB:-64}
US_J_SIZE_MB=4

region_md5() {
    dd if="$NS1" bs=1M skip="$US_J_OFFSET_MB" count="$US_J_SIZE_MB" iflag=direct 2>/dev/null |
        md5sum | cut -d' ' -f1
}

# iops_of JSON_OUTPUT: the first job's read or write IOPS, whichever ran, as an integer.
iops_of() {
    sed -n 's/.*"iops": *\([0-9][0-9]*\).*/\1/p' | sort -n | tail -1
}

# Our driver on the function, bound to $1: identify, random write + verify, job J.
userspace_round() {
    drv=$1 off=$2
    out=$(timeout 120 nvmemu identify --device "$ADDR" 2>&1)
    echo "$out" | grep -q "^mn *: *$EXP_MODEL" && ok "identify --device $ADDR via $drv: mn '$EXP_MODEL'" ||
        { echo "$out" | tail -20; fail "identify --device via $drv"; }
    check "bench --device via $drv: randwrite 4k iodepth 16, 8 MiB at ${off}M, verify crc32c" \
        nvmemu bench --device "$ADDR" --rw=randwrite --bs=4k --iodepth=16 --size=8M \
        --offset="${off}M" --verify=crc32c
}

# userspace_iops NAME: our driver's 4k random-read IOPS, reported as driver=nvmemu-NAME.
userspace_iops() {
    if out=$(nvmemu bench --device "$ADDR" --rw=randread --bs=4k --iodepth=16 --size=64M \
        --runtime="${US_SECONDS}s" --time_based --output-format=json 2>&1); then
        echo "E2E-US-IOPS driver=nvmemu-$1 iops=$(echo "$out" | iops_of)"
    else
        echo "$out" | tail -5
        fail "bench --device randread via $1"
    fi
}

scenario_userspace() {
    for m in $(cat /e2e/modules/order); do
        insmod "/e2e/modules/$m" || echo "E2E: insmod $m failed"
    done
    resolve_namespaces >/dev/null
    ADDR=$(vendor_function) && ok "nvmemu function at $ADDR" || fail "no PCI function with vendor $EXP_VID"
    case $US_IOMMU in
    none) userspace_without_iommu ;;
    intel) userspace_with_iommu ;;
    *) fail "US_IOMMU='$US_IOMMU': expected none or intel" ;;
    esac

    check "nvmemu bind $ADDR nvme" nvmemu bind "$ADDR" nvme
    wait_for /dev/nvme0n1 60 && ok "nvme driver attached again" || fail "no /dev/nvme0n1 after rebinding to nvme"
    resolve_namespaces >/dev/null
    [ "$US_IOMMU" = none ] &&
        check_equal "job J read by the kernel driver after our driver wrote it" "$host_md5" "$(region_md5)"
    check "kernel driver: fio randwrite+verify after the userspace rounds" \
        fio --name=after --filename="$NS1" --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
        --iodepth=16 --size=8M --offset=96M --verify=crc32c --do_verify=1 --verify_fatal=1
    finish_phase userspace
}

# No IOMMU: the kernel driver's IOPS and job J, then uio_pci_generic (which writes job J
# again), then vfio-pci in no-IOMMU mode.
userspace_without_iommu() {
    if out=$(fio --name=kernel --filename="$NS1" --ioengine=io_uring --direct=1 --rw=randread \
        --bs=4k --iodepth=16 --time_based --runtime="$US_SECONDS" --size=64M \
        --output-format=terse --terse-version=3 2>&1); then
        echo "E2E-US-IOPS driver=kernel-nvme iops=$(echo "$out" | tail -1 | cut -d';' -f8)"
    else
        echo "$out" | tail -5
        fail "fio on $NS1 (kernel driver)"
    fi
    host_md5=$(region_md5)
    echo "E2E: job J as the host wrote it: md5 $host_md5"
    check "wipe job J's range with the kernel driver" dd if=/dev/zero of="$NS1" bs=1M \
        seek="$US_J_OFFSET_MB" count="$US_J_SIZE_MB" oflag=direct conv=fsync
    [ "$(region_md5)" != "$host_md5" ] && ok "job J's range wiped" || fail "wipe did not change job J's range"

    check "nvmemu bind $ADDR uio_pci_generic" nvmemu bind "$ADDR" uio_pci_generic --hugepages 32
    [ ! -e "$NS1" ] && ok "$NS1 gone with the kernel driver" || fail "$NS1 still present"
    userspace_round uio_pci_generic 16
    check "bench --device via uio_pci_generic: job J (write, verify crc32c) from guest userspace" \
        nvmemu bench --device "$ADDR" --rw=write --bs=4k --iodepth=16 --size="${US_J_SIZE_MB}M" \
        --offset="${US_J_OFFSET_MB}M" --verify=crc32c
    userspace_iops uio

    [ -z "$(ls /sys/kernel/iommu_groups 2>/dev/null)" ] && ok "no IOMMU groups in this guest" ||
        fail "IOMMU groups in a guest without an IOMMU: no-IOMMU mode would not be used"
    check "nvmemu bind $ADDR vfio-pci --noiommu" nvmemu bind "$ADDR" vfio-pci --noiommu --hugepages 32
    [ -e /dev/vfio/noiommu-0 ] && ok "/dev/vfio/noiommu-0 exists" || fail "no /dev/vfio/noiommu-0 after binding"
    userspace_round vfio-pci-noiommu 32
    userspace_iops vfio-noiommu
}

# A virtual Intel IOMMU: vfio-pci with a type1 container (DMA to IOVAs the IOMMU maps).
userspace_with_iommu() {
    if [ -n "$(ls /sys/kernel/iommu_groups 2>/dev/null)" ]; then
        check "nvmemu bind $ADDR vfio-pci" nvmemu bind "$ADDR" vfio-pci --hugepages 32
        userspace_round vfio-pci 48
        userspace_iops vfio
    else
        fail "no IOMMU groups in the guest: vfio-pci was not tried"
    fi
}
