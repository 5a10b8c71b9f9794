# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh disable=SC2015 # "cond && ok ... || fail ...": ok only echoes, never fails
#
# Scenario "xnvme" (sourced by checks.sh when the host added it to the initramfs, with the peer
# binaries under /opt/xnvme and the uio module): the reference set-up's own guest client, fio's
# xnvme ioengine with xNVMe's uPCIe driver, drives the function from guest userspace. No nvmemu
# code runs in this guest: the function is bound through sysfs, as the set-up's scripts do.
# XN_TARGET names the target behind the function (for the log lines only); XN_SECONDS is the
# length of each random-read job; XN_HUGEPAGES the 2 MiB pages reserved for uPCIe's DMA heap (1 GiB).

XN_BIN=/opt/xnvme/bin

# xn_bind ADDR: unbind the kernel driver, bind uio_pci_generic through driver_override.
xn_bind() {
    [ -e "/sys/bus/pci/devices/$1/driver" ] && echo "$1" >"/sys/bus/pci/devices/$1/driver/unbind"
    echo uio_pci_generic >"/sys/bus/pci/devices/$1/driver_override"
    echo "$1" >/sys/bus/pci/drivers_probe
    [ "$(basename "$(readlink "/sys/bus/pci/devices/$1/driver")")" = uio_pci_generic ]
}

# xn_fio NAME FIO_ARGS...: one fio job through the xnvme engine on $ADDR, terse output in
# /tmp/NAME.out; fails the check on a non-zero exit (I/O or verify errors included).
xn_fio() {
    name=$1
    shift
    t0=$(now)
    if timeout "${CHECK_TIMEOUT:-180}" env LD_LIBRARY_PATH=/opt/xnvme/lib "$XN_BIN/fio" \
        --name="$name" --ioengine=xnvme --xnvme_be=upcie --xnvme_dev_nsid=0x1 --thread=1 \
        --direct=1 --filename="$XN_FILE" --output-format=terse --terse-version=3 "$@" \
        >"/tmp/$name.out" 2>&1; then
        ok "fio xnvme/upcie $name on $XN_TARGET: $* (from t=$t0)"
    else
        rc=$?
        tail -20 "/tmp/$name.out"
        fail "fio xnvme/upcie $name on $XN_TARGET: $* (exit $rc)"
        return 1
    fi
}

# xn_randread NAME BS IODEPTH: a timed random read; prints its IOPS for the host.
xn_randread() {
    xn_fio "$1" --rw=randread --bs="$2" --iodepth="$3" --runtime="$XN_SECONDS" --time_based || return
    echo "E2E-XN-IOPS target=$XN_TARGET job=$1 iops=$(tail -1 "/tmp/$1.out" | cut -d';' -f8)"
}

scenario_xnvme() {
    while read -r m; do
        insmod "/e2e/modules/$m" || echo "E2E: insmod $m failed"
    done </e2e/modules/order
    ADDR=$(vendor_function) && ok "function of vendor $EXP_VID at $ADDR (nvmemu and SPDK's vfio-user target share it)" || fail "no PCI function with vendor $EXP_VID"
    xn_bind "$ADDR" && ok "$ADDR bound to uio_pci_generic" || fail "cannot bind $ADDR to uio_pci_generic"
    echo "$XN_HUGEPAGES" >/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
    got=$(sed -n 's/^HugePages_Total: *//p' /proc/meminfo)
    [ "$got" -ge "$XN_HUGEPAGES" ] && ok "$got huge pages of 2 MiB" || fail "only $got of $XN_HUGEPAGES huge pages"
    if [ "$FAILED" -eq 0 ]; then
        # fio splits file names at ':'.
        XN_FILE=$(echo "$ADDR" | sed 's/:/\\:/g')
        # Each fio run opens the device anew (controller reset, 1 GiB DMA heap): 10-30 s under
        # TCG, so one random-read job and one verified write job.
        xn_randread rr512_qd16 512 16
        xn_fio wverify --rw=randwrite --bs=4k --iodepth=16 --size=16M --offset=128M \
            --verify=crc32c --do_verify=1 --verify_fatal=1
    fi
    finish_phase xnvme
}
