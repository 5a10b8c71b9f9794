// SPDX-License-Identifier: Apache-2.0
//! A controller's static identity and limits, as the target configures it.

/// Static identity and limits of a controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// Serial Number (SN), up to 20 ASCII characters.
    pub serial: String,
    /// Model Number (MN), up to 40 ASCII characters.
    pub model: String,
    /// Firmware Revision (FR), up to 8 ASCII characters.
    pub firmware: String,
    /// NVM Subsystem NQN (SUBNQN), up to 255 bytes.
    pub subnqn: String,
    /// I/O queue pairs the controller offers (capped by the doorbell page).
    pub max_io_queues: u16,
    /// Largest queue size (CAP.MQES + 1), at least 2.
    pub max_queue_entries: u16,
    /// Maximum Data Transfer Size as a power of two of 4 KiB pages (0 = no limit).
    pub mdts: u8,
    /// MSI-X vectors of the PCI function (valid IVs are `0..msix_vectors`).
    pub msix_vectors: u16,
    /// Controller ID (CNTLID).
    pub cntlid: u16,
    /// PCI Vendor ID reported as VID and SSVID.
    pub vendor_id: u16,
    /// Number of namespaces (NN): valid NSIDs are `1..=max_namespaces`.
    pub max_namespaces: u32,
    /// Advertise Doorbell Buffer Config (OACS bit 8). The target turns it off when the
    /// client maps the doorbell page (no exits to save).
    pub shadow_doorbells: bool,
    /// The NVMe over Fabrics fields of Identify Controller; None for a PCIe controller.
    pub fabrics: Option<crate::fabrics::FabricsIdentity>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            serial: "NVMEMU0001".into(),
            model: "nvmemu NVMe controller".into(),
            firmware: "0.1".into(),
            subnqn: "nqn.2019-07.io.nvmemu:cnode1".into(),
            max_io_queues: 127,
            max_queue_entries: 1024,
            mdts: 8,
            msix_vectors: 64,
            cntlid: 1,
            vendor_id: 0x4e58,
            max_namespaces: 32,
            shadow_doorbells: true,
            fabrics: None,
        }
    }
}
