// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bind ADDR DRIVER`: hand a PCI function to `uio_pci_generic` or `vfio-pci` (for
//! `bench --device` / `identify --device`) or back to `nvme`, through sysfs
//! (`driver_override`, then `drivers_probe`), and reserve the huge pages the userspace
//! driver's DMA memory needs. Prints each change and the command that undoes it.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use nvmemu_driver::PciAddress;

/// Options of `nvmemu bind`.
#[derive(Debug, clap::Args)]
pub struct BindArgs {
    /// The PCI function, as `lspci -D` prints it (e.g. 0000:01:00.0).
    pub device: PciAddress,
    /// The driver to bind it to.
    #[arg(value_enum)]
    pub driver: BindDriver,
    /// 2 MiB huge pages to have reserved (for uio_pci_generic and vfio-pci; 0 leaves the
    /// reservation alone). Never lowers an existing reservation.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub hugepages: u64,
    /// Switch on VFIO's no-IOMMU mode first (vfio-pci on a machine without an IOMMU; needs
    /// a kernel built with CONFIG_VFIO_NOIOMMU). Unsafe: the device can reach all memory.
    #[arg(long)]
    pub noiommu: bool,
}

/// Drivers `nvmemu bind` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BindDriver {
    /// Generic userspace I/O: BAR0 through sysfs, DMA at physical addresses.
    #[value(name = "uio_pci_generic")]
    UioPciGeneric,
    /// VFIO: BAR0 and DMA through /dev/vfio (IOMMU, or no-IOMMU mode).
    #[value(name = "vfio-pci")]
    VfioPci,
    /// The kernel's NVMe driver.
    #[value(name = "nvme")]
    Nvme,
}

impl BindDriver {
    fn name(self) -> &'static str {
        match self {
            BindDriver::UioPciGeneric => "uio_pci_generic",
            BindDriver::VfioPci => "vfio-pci",
            BindDriver::Nvme => "nvme",
        }
    }
}

/// The parts of sysfs `bind` touches, under `root` (`/sys`, or a directory in tests).
#[derive(Debug)]
pub struct Sysfs {
    root: PathBuf,
}

const HUGEPAGES_2M: &str = "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
const NOIOMMU: &str = "module/vfio/parameters/enable_unsafe_noiommu_mode";

impl Sysfs {
    /// Sysfs at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    fn dev(&self, addr: PciAddress) -> PathBuf {
        self.root.join("bus/pci/devices").join(addr.to_string())
    }

    fn write(&self, rel: &Path, value: &str) -> Result<()> {
        let path = self.root.join(rel);
        fs::write(&path, value).with_context(|| {
            format!(
                "cannot write '{}' to {} (run as root)",
                value.trim(),
                path.display()
            )
        })
    }

    fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.root.join(rel))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The driver bound to `addr`, if any.
    pub fn driver(&self, addr: PciAddress) -> Option<String> {
        let link = fs::read_link(self.dev(addr).join("driver")).ok()?;
        Some(link.file_name()?.to_string_lossy().into_owned())
    }

    /// Unbind `addr` from its driver and probe it again with `driver` as its override
    /// (an empty override: whatever driver matches its ids). Returns the old driver.
    pub fn rebind(&self, addr: PciAddress, driver: Option<&str>) -> Result<Option<String>> {
        let dev = self.dev(addr);
        if !dev.exists() {
            bail!(
                "no PCI function {addr} in {} (lspci -D lists them)",
                dev.parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
        }
        if let Some(d) = driver
            && !self.root.join("bus/pci/drivers").join(d).exists()
        {
            bail!("the {d} driver is not loaded: modprobe {d}");
        }
        let old = self.driver(addr);
        let rel = |f: &str| Path::new("bus/pci/devices").join(addr.to_string()).join(f);
        if old.is_some() {
            self.write(&rel("driver/unbind"), &addr.to_string())?;
        }
        self.write(
            &rel("driver_override"),
            &format!("{}\n", driver.unwrap_or("")),
        )?;
        self.write(Path::new("bus/pci/drivers_probe"), &addr.to_string())?;
        Ok(old)
    }

    /// Make at least `pages` 2 MiB huge pages reserved; returns the count before, if changed.
    pub fn reserve_hugepages(&self, pages: u64) -> Result<Option<u64>> {
        let now: u64 = self
            .read(HUGEPAGES_2M)
            .and_then(|s| s.parse().ok())
            .with_context(|| {
                format!("cannot read /sys/{HUGEPAGES_2M}: no 2 MiB huge pages in this kernel")
            })?;
        if pages == 0 || now >= pages {
            return Ok(None);
        }
        self.write(Path::new(HUGEPAGES_2M), &pages.to_string())?;
        let got: u64 = self
            .read(HUGEPAGES_2M)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if got < pages {
            bail!(
                "asked the kernel for {pages} huge pages of 2 MiB, it reserved {got} (memory too fragmented or too small: ask for fewer, or reserve at boot with hugepages={pages})"
            );
        }
        Ok(Some(now))
    }
}

/// `nvmemu bind`.
pub fn run(args: &BindArgs) -> Result<()> {
    run_in(&Sysfs::at("/sys"), args)
}

fn run_in(sys: &Sysfs, args: &BindArgs) -> Result<()> {
    let addr = args.device;
    let want = args.driver.name();
    if args.driver != BindDriver::Nvme
        && let Some(before) = sys.reserve_hugepages(args.hugepages)?
    {
        nvmemu::console::print(&format!(
            "reserved {} huge pages of 2 MiB (undo: echo {before} > /sys/{HUGEPAGES_2M})\n",
            args.hugepages
        ))?;
    }
    if args.noiommu {
        sys.write(Path::new(NOIOMMU), "Y").with_context(|| {
            format!("no-IOMMU mode needs a kernel with CONFIG_VFIO_NOIOMMU and the vfio module loaded (/sys/{NOIOMMU})")
        })?;
        nvmemu::console::print(&format!(
            "enabled VFIO no-IOMMU mode (undo: echo N > /sys/{NOIOMMU})\n"
        ))?;
    }
    let current = sys.driver(addr);
    if current.as_deref() == Some(want) {
        return nvmemu::console::print(&format!("{addr} is already bound to {want}\n"));
    }
    // Back to nvme: clear the override so the id table decides.
    let target = (args.driver != BindDriver::Nvme).then_some(want);
    let old = sys.rebind(addr, target)?;
    let now = sys.driver(addr);
    if now.as_deref() != Some(want) {
        bail!(
            "{addr} is bound to {} after probing with {want} (dmesg says why; for vfio-pci \
             without an IOMMU, add --noiommu)",
            now.as_deref().unwrap_or("no driver")
        );
    }
    let undo = old.as_deref().unwrap_or("nvme");
    nvmemu::console::print(&format!(
        "{addr}: {} -> {want} (undo: nvmemu bind {addr} {undo})\n",
        old.as_deref().unwrap_or("no driver")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sysfs(addr: &str, driver: &str) -> (tempfile::TempDir, Sysfs) {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("bus/pci/devices").join(addr);
        let drv = d.path().join("bus/pci/drivers").join(driver);
        fs::create_dir_all(&dev).unwrap();
        fs::create_dir_all(&drv).unwrap();
        fs::create_dir_all(d.path().join("bus/pci/drivers/uio_pci_generic")).unwrap();
        std::os::unix::fs::symlink(&drv, dev.join("driver")).unwrap();
        fs::write(drv.join("unbind"), "").unwrap();
        let hp = d.path().join(HUGEPAGES_2M);
        fs::create_dir_all(hp.parent().unwrap()).unwrap();
        fs::write(hp, "8\n").unwrap();
        let sys = Sysfs::at(d.path());
        (d, sys)
    }

    #[test]
    fn rebind_unbinds_sets_the_override_and_probes() {
        let (d, sys) = fake_sysfs("0000:01:00.0", "nvme");
        let addr: PciAddress = "0000:01:00.0".parse().unwrap();
        let old = sys.rebind(addr, Some("uio_pci_generic")).unwrap();
        assert_eq!(old.as_deref(), Some("nvme"));
        let dev = d.path().join("bus/pci/devices/0000:01:00.0");
        assert_eq!(
            fs::read_to_string(dev.join("driver/unbind")).unwrap(),
            "0000:01:00.0"
        );
        assert_eq!(
            fs::read_to_string(dev.join("driver_override")).unwrap(),
            "uio_pci_generic\n"
        );
        assert_eq!(
            fs::read_to_string(d.path().join("bus/pci/drivers_probe")).unwrap(),
            "0000:01:00.0"
        );
        // A driver that is not loaded is refused before anything is written.
        let e = sys.rebind(addr, Some("vfio-pci")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the vfio-pci driver is not loaded: modprobe vfio-pci"
        );
    }

    #[test]
    fn missing_function_is_named() {
        let (_d, sys) = fake_sysfs("0000:01:00.0", "nvme");
        let e = sys
            .rebind("0000:02:00.0".parse().unwrap(), None)
            .unwrap_err();
        assert!(
            e.to_string().starts_with("no PCI function 0000:02:00.0"),
            "{e}"
        );
    }

    #[test]
    fn hugepages_are_raised_never_lowered() {
        let (d, sys) = fake_sysfs("0000:01:00.0", "nvme");
        assert_eq!(sys.reserve_hugepages(4).unwrap(), None);
        assert_eq!(sys.reserve_hugepages(16).unwrap(), Some(8));
        assert_eq!(
            fs::read_to_string(d.path().join(HUGEPAGES_2M)).unwrap(),
            "16"
        );
    }

    #[test]
    fn bind_fails_when_the_kernel_did_not_take_the_function() {
        // A fake sysfs never rebinds by itself: the command must notice and say so.
        let (_d, sys) = fake_sysfs("0000:01:00.0", "nvme");
        let args = BindArgs {
            device: "0000:01:00.0".parse().unwrap(),
            driver: BindDriver::UioPciGeneric,
            hugepages: 0,
            noiommu: false,
        };
        let e = run_in(&sys, &args).unwrap_err();
        assert!(
            e.to_string().contains("is bound to nvme after probing"),
            "{e}"
        );
    }
}
