#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Provision everything the QEMU end-to-end test needs into a cache directory:
#   - a Debian trixie tree (debootstrap minbase) with QEMU >= 10.1.1 from trixie-backports,
#     busybox-static, fio, nvme-cli and kmod;
#   - the guest kernel: trixie's linux-image-amd64, unpacked with dpkg -x (never installed),
#     plus the uncompressed vmlinux cut out of the bzImage (PVH boot is faster), and its vfio
#     module rebuilt with no-IOMMU mode (see build_noiommu_vfio);
#   - base.cpio: an uncompressed initramfs with busybox, fio, nvme-cli (and the shared libraries
#     they need) and the decompressed nvme / virtio-blk modules. The test scripts themselves are
#     not in it: tests/e2e/lib.sh appends a small second cpio archive on every run.
#
# The result lives in $NVMEMU_E2E_CACHE/<recipe>, where <recipe> is a hash of this file: edit
# the recipe and the next run rebuilds; otherwise the cache is reused (about 1 minute to build).
# Prints the directory on stdout. Needs root (debootstrap, chroot, mount).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
CACHE=${NVMEMU_E2E_CACHE:-${HOME:-/root}/.cache/nvmemu-e2e}
# The Debian archive this host's apt already uses (deb822 .sources or one-line .list
# entries), so provisioning works wherever apt works; NVMEMU_E2E_MIRROR overrides it.
host_mirror() {
    {
        grep -shE '^URIs:' /etc/apt/sources.list.d/*.sources |
            awk '{ for (i = 2; i <= NF; i++) print $i }'
        grep -shE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
            awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }'
    } | grep -E '/debian/?$' | head -n 1 | sed 's:/*$::' || true  # no such file: no line
}
MIRROR=${NVMEMU_E2E_MIRROR:-$(host_mirror)}
SUITE=trixie
HOST_PKGS=(debootstrap cpio xz-utils zstd kmod)
TREE_PKGS=(busybox-static fio nvme-cli kmod xz-utils zstd util-linux)
QEMU_PKGS=(qemu-system-x86 qemu-system-data)

log() { printf '[provision] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

RECIPE=$(sha256sum "$SELF" | cut -c1-16)
OUT="$CACHE/$RECIPE"

if [[ -f "$OUT/READY" ]]; then
    echo "$OUT"
    exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap, chroot, mount)"
[[ -n $MIRROR ]] || die "no Debian archive in this host's apt sources: set NVMEMU_E2E_MIRROR to one"
mkdir -p "$CACHE"
# One provisioner at a time; a second caller waits and then finds READY.
exec 9>"$CACHE/lock"
flock 9
if [[ -f "$OUT/READY" ]]; then
    echo "$OUT"
    exit 0
fi

missing=()
for p in "${HOST_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing on the host: ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

WORK="$CACHE/$RECIPE.tmp"
TREE="$WORK/tree"
MOUNTS=()

unmount_all() {
    local i
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" 2>/dev/null || true
    done
    MOUNTS=()
}

# Refuse to delete a directory while anything is still mounted beneath it.
safe_rm() {
    local dir=$1
    [[ -e "$dir" ]] || return 0
    dir=$(readlink -f "$dir")
    if awk -v d="$dir/" 'index($2 "/", d) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
        log "refusing to remove $dir: something is mounted under it"
        return 1
    fi
    rm -rf --one-file-system "$dir"
}

trap 'unmount_all' EXIT INT TERM

mount_for_apt() {
    mount -t proc proc "$TREE/proc" && MOUNTS+=("$TREE/proc")
    mount -t sysfs sysfs "$TREE/sys" && MOUNTS+=("$TREE/sys")
    mount --bind /dev "$TREE/dev" && MOUNTS+=("$TREE/dev")
}

in_tree() { chroot "$TREE" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

t0=$(date +%s)
safe_rm "$WORK" || die "cannot clear $WORK"
mkdir -p "$WORK"

log "debootstrap $SUITE into $TREE"
debootstrap --variant=minbase --components=main "$SUITE" "$TREE" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -30 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }

cat >"$TREE/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-backports main
EOF
cat >"$TREE/etc/apt/apt.conf.d/90nvmemu-e2e" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
printf '#!/bin/sh\nexit 101\n' >"$TREE/usr/sbin/policy-rc.d"
chmod +x "$TREE/usr/sbin/policy-rc.d"

mount_for_apt
log "apt: ${QEMU_PKGS[*]} from $SUITE-backports; ${TREE_PKGS[*]}"
{
    in_tree apt-get update -qq &&
        in_tree apt-get install -y -qq -t "$SUITE-backports" "${QEMU_PKGS[@]}" &&
        in_tree apt-get install -y -qq "${TREE_PKGS[@]}"
} >"$WORK/apt.log" 2>&1 || { tail -30 "$WORK/apt.log" >&2; die "apt-get failed"; }

KPKG=$(in_tree apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[[ -n "$KPKG" ]] || die "cannot resolve linux-image-amd64"
log "guest kernel package: $KPKG"
rm -rf "$TREE/tmp/kernel-deb" && mkdir -p "$TREE/tmp/kernel-deb"
in_tree sh -c "cd /tmp/kernel-deb && apt-get download -qq '$KPKG'" >>"$WORK/apt.log" 2>&1 ||
    die "apt-get download $KPKG failed"
KPKG_VER=$(dpkg-deb -f "$TREE"/tmp/kernel-deb/*.deb Version)
in_tree apt-get clean
unmount_all

mkdir -p "$WORK/kernel"
dpkg-deb -x "$TREE"/tmp/kernel-deb/*.deb "$WORK/kernel"
rm -rf "$TREE/tmp/kernel-deb"

LOADER=$(in_tree readlink -f /lib64/ld-linux-x86-64.so.2)
QEMU_VER=$("$TREE$LOADER" \
    --library-path "$TREE/lib/x86_64-linux-gnu:$TREE/usr/lib/x86_64-linux-gnu" \
    "$TREE/usr/bin/qemu-system-x86_64" --version | head -1)
log "QEMU: $QEMU_VER"

# --- vfio.ko with no-IOMMU mode -------------------------------------------------------------
# Debian builds vfio without CONFIG_VFIO_NOIOMMU, the mode a userspace driver uses on a machine
# (or guest) without an IOMMU. Rebuild only the vfio module, from this kernel's own source
# package against its own headers, with that option on: no exported symbol's type changes, so
# the packaged vfio-pci and vfio_iommu_type1 load on top of it (modversions agree). Unsigned:
# the kernel only taints itself (no CONFIG_MODULE_SIG_FORCE). The build tools go into the tree
# and out again; the module replaces vfio.ko.xz in the unpacked kernel.
build_noiommu_vfio() {
    local config="$WORK/kernel/boot/config-$KVER" deps hdr common kbuild cc srcpkg ko
    local src=/tmp/vfio-noiommu debs=/tmp/vfio-debs
    if grep -q '^CONFIG_VFIO_NOIOMMU=y' "$config"; then
        log "vfio: the kernel has no-IOMMU mode"
        return 0
    fi
    grep -q '^CONFIG_VFIO=m' "$config" || die "vfio is not a module in $KVER: cannot add no-IOMMU mode"
    hdr=linux-headers-$KVER
    srcpkg=linux-source-$(echo "$KVER" | cut -d. -f1,2)
    mount_for_apt
    deps=$(in_tree apt-cache depends "$hdr=$KPKG_VER" | awk '$1 == "Depends:" { print $2 }')
    common=$(grep -m1 -- '-common$' <<<"$deps") kbuild=$(grep -m1 '^linux-kbuild-' <<<"$deps")
    cc=$(grep -m1 '^gcc-' <<<"$deps")
    [[ -n $common && -n $kbuild && -n $cc ]] || die "cannot resolve what $hdr needs (got: $deps)"
    log "vfio: building with no-IOMMU mode from $srcpkg $KPKG_VER ($cc)"
    rm -rf "$TREE$src" "$TREE$debs" && mkdir -p "$TREE$src" "$TREE$debs"
    {
        in_tree apt-get install -y -qq --no-install-recommends make "$cc" &&
            in_tree sh -c "cd $debs && apt-get download -qq '$hdr=$KPKG_VER' '$common=$KPKG_VER' \
                '$kbuild=$KPKG_VER' '$srcpkg=$KPKG_VER'"
    } >>"$WORK/apt.log" 2>&1 || { tail -30 "$WORK/apt.log" >&2; die "apt-get for the vfio build failed"; }
    # The headers' symlinks are absolute: unpack them where the chroot sees them.
    for deb in "$TREE$debs"/linux-headers-*.deb "$TREE$debs"/linux-kbuild-*.deb; do
        dpkg-deb -x "$deb" "$TREE"
    done
    dpkg-deb --fsys-tarfile "$TREE$debs/${srcpkg}_"*.deb | tar -xO "./usr/src/$srcpkg.tar.xz" |
        tar -xJ -C "$TREE$src" --strip-components=3 --wildcards --no-wildcards-match-slash \
            "$srcpkg/drivers/vfio/*.[ch]" "$srcpkg/drivers/vfio/Makefile" ||
        die "cannot unpack drivers/vfio from $srcpkg"
    # vfio.ko's objects as the kernel's Makefile lists them (the headers' config picks them).
    { echo 'ccflags-y += -DCONFIG_VFIO_NOIOMMU=1'; echo 'obj-m += vfio.o'
      grep -E '^vfio-' "$TREE$src/Makefile"; } >"$TREE$src/Kbuild"
    # No BTF for the module: that needs pahole, and loading does not.
    in_tree make -C "/usr/src/$hdr" M="$src" CONFIG_DEBUG_INFO_BTF_MODULES= modules \
        >"$WORK/vfio-build.log" 2>&1 || { tail -30 "$WORK/vfio-build.log" >&2; die "building vfio.ko failed"; }
    ko=$(find "$MODDIR/kernel/drivers/vfio" -maxdepth 1 -name 'vfio.ko*' | head -1)
    [[ -n $ko ]] || die "no vfio.ko in $MODDIR/kernel/drivers/vfio"
    rm -f "$ko"
    xz -c --check=crc32 "$TREE$src/vfio.ko" >"$MODDIR/kernel/drivers/vfio/vfio.ko.xz"
    in_tree apt-get purge -y -qq --autoremove make "$cc" >>"$WORK/apt.log" 2>&1 || true
    in_tree apt-get clean
    rm -rf "$TREE$src" "$TREE$debs" "$TREE/usr/src/$hdr" "$TREE/usr/src/$common" \
        "$TREE/usr/src/$kbuild" "$TREE/usr/lib/$kbuild"
    unmount_all
    modinfo -F parm "$MODDIR/kernel/drivers/vfio/vfio.ko.xz" | grep -q '^enable_unsafe_noiommu_mode:' ||
        die "the rebuilt vfio.ko has no enable_unsafe_noiommu_mode parameter"
    log "vfio: no-IOMMU mode built"
}

# --- kernel: bzImage and the uncompressed vmlinux inside it ---------------------------------
BZ=$(ls "$WORK"/kernel/boot/vmlinuz-* | head -1)
KVER=${BZ##*/vmlinuz-}
MODDIR="$WORK/kernel/usr/lib/modules/$KVER"
[[ -d "$MODDIR" ]] || MODDIR="$WORK/kernel/lib/modules/$KVER"
[[ -d "$MODDIR" ]] || die "no modules for $KVER"
build_noiommu_vfio
# The package ships no modules.dep (depmod runs at install time): generate it.
[[ -e "$WORK/kernel/lib" ]] || ln -s usr/lib "$WORK/kernel/lib"
depmod -b "$WORK/kernel" "$KVER" || die "depmod failed"
cp "$BZ" "$WORK/bzImage"

is_elf() { [[ $(head -c4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]; }
extract_vmlinux() {
    local magic cmd off
    for pair in $'\xfd7zXZ\x00|xz -dc --single-stream' $'\x28\xb5\x2f\xfd|zstd -dcq' \
        $'\x1f\x8b\x08|gzip -dcq'; do
        magic=${pair%%|*} cmd=${pair#*|}
        for off in $(LC_ALL=C grep -obaF -- "$magic" "$BZ" | cut -d: -f1 | head -5); do
            tail -c "+$((off + 1))" "$BZ" | $cmd >"$WORK/vmlinux" 2>/dev/null || true
            if [[ -s "$WORK/vmlinux" ]] && is_elf "$WORK/vmlinux"; then return 0; fi
        done
    done
    rm -f "$WORK/vmlinux"
    return 1
}
if extract_vmlinux; then
    log "vmlinux extracted ($(stat -c %s "$WORK/vmlinux") bytes)"
else
    log "could not extract vmlinux; guests will boot the bzImage"
fi

# --- base initramfs -----------------------------------------------------------------------
STAGE="$WORK/initramfs"
mkdir -p "$STAGE"/{bin,dev,proc,sys,tmp,run,etc,modules,usr/bin,usr/sbin,usr/lib64,usr/lib/x86_64-linux-gnu}
ln -s usr/lib "$STAGE/lib"
ln -s usr/lib64 "$STAGE/lib64"
cp "$TREE/usr/bin/busybox" "$STAGE/bin/busybox"
ln -s busybox "$STAGE/bin/sh"

# Symlinks in the tree may be absolute: resolve them inside the tree, not on the host.
tree_realpath() { in_tree readlink -f "$1"; }

# Copy a tree binary plus every shared object ldd (run inside the tree) says it loads.
copy_with_libs() {
    local bin=$1 lib
    cp "$TREE$(tree_realpath "$bin")" "$STAGE$bin"
    for lib in $(in_tree ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
        [[ -e "$STAGE$lib" ]] && continue
        mkdir -p "$(dirname "$STAGE$lib")"
        cp "$TREE$(tree_realpath "$lib")" "$STAGE$lib"
    done
}
copy_with_libs /usr/bin/fio
copy_with_libs /usr/sbin/nvme
echo "$QEMU_VER" >"$STAGE/etc/qemu-version"
echo "$KVER" >"$STAGE/etc/kernel-version"

# Modules: nvme and virtio_blk with their dependencies, decompressed, in load order.
declare -A SEEN=()
ORDER=()
add_module() { # $1: path relative to MODDIR as written in modules.dep
    local rel=$1 dep
    [[ -n "${SEEN[$rel]:-}" ]] && return 0
    SEEN[$rel]=1
    for dep in $(awk -F': *' -v m="$rel" '$1 == m { print $2 }' "$MODDIR/modules.dep"); do
        add_module "$dep"
    done
    ORDER+=("$rel")
}
for name in nvme virtio_blk; do
    rel=$(awk -F: -v n="$name" '{ f = $1; sub(/.*\//, "", f); sub(/\.ko(\.(xz|zst|gz))?$/, "", f)
        if (f == n) { print $1; exit } }' "$MODDIR/modules.dep")
    if [[ -z "$rel" ]]; then
        grep -q "/$name.ko" "$MODDIR/modules.builtin" || die "module $name neither loadable nor built in"
        log "$name is built in"
        continue
    fi
    add_module "$rel"
done
: >"$STAGE/modules/order"
for rel in "${ORDER[@]}"; do
    base=${rel##*/}
    base=${base%.xz} base=${base%.zst} base=${base%.gz}
    case $rel in
    *.xz) xz -dc "$MODDIR/$rel" >"$STAGE/modules/$base" ;;
    *.zst) zstd -dcq "$MODDIR/$rel" >"$STAGE/modules/$base" ;;
    *.gz) gzip -dc "$MODDIR/$rel" >"$STAGE/modules/$base" ;;
    *) cp "$MODDIR/$rel" "$STAGE/modules/$base" ;;
    esac
    echo "$base" >>"$STAGE/modules/order"
done
log "modules: $(tr '\n' ' ' <"$STAGE/modules/order")"

(cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$WORK/base.cpio"
log "base.cpio: $(($(stat -c %s "$WORK/base.cpio") / 1024 / 1024)) MiB"

cat >"$WORK/env" <<EOF
KVER='$KVER'
KPKG='$KPKG'
QEMU_VER='$QEMU_VER'
LOADER='$LOADER'
HAVE_VMLINUX=$([[ -f "$WORK/vmlinux" ]] && echo 1 || echo 0)
EOF
touch "$WORK/READY"

# Publish atomically, then drop older recipes (never while anything is mounted in them).
safe_rm "$OUT" || die "cannot replace $OUT"
mv "$WORK" "$OUT"
for old in "$CACHE"/*/; do
    old=${old%/}
    [[ "$old" == "$OUT" ]] && continue
    safe_rm "$old" || true
done
log "ready in $(($(date +%s) - t0)) s: $OUT"
echo "$OUT"
