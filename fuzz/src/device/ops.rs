// SPDX-License-Identifier: Apache-2.0
//! What a hostile client can do, decoded from the fuzz input with `arbitrary`: whole
//! vfio-user messages (well-formed, malformed, with or without fds), changes to its own
//! memory behind the server's back, and NVMe commands on a queue it set up properly.
//! The steps themselves are declared in `input`; here the client carries them out.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nvmemu_vfio_user::wire::{
    DmaMapWire, DmaUnmapWire, IrqInfoWire, MAX_PAYLOAD, RegionAccessWire, RegionInfoWire,
    SetIrqsWire, VersionWire, msg_flags,
};
use nvmemu_vfio_user::{Command, RawReply};
use rustix::event::{EventfdFlags, eventfd};
use zerocopy::IntoBytes;

use super::good_host::{self, GoodHost};
use super::harness::Harness;
use super::memory::ClientMem;

mod input;

pub use input::{Caps, Fds, Flags, Iova, Op};

/// Where fuzzed DMA maps land: 256 pages from here, so maps overlap, abut and split.
const FUZZ_IOVA: u64 = 0x1_0000_0000;
const PAGE: u64 = 4096;
/// DMA_MAP flag: the server may write the region.
const DMA_WRITE: u32 = 2;
/// Most client memfds per input, and their largest size in pages.
const MAX_MEMS: usize = 4;
const MAX_PAGES: u64 = 16;
/// Most bytes of a fuzzed payload (beyond its fixed struct).
const MAX_DATA: usize = 512;
/// Most doorbell pages of earlier sessions a client keeps mapped.
const MAX_STALE: usize = 4;

/// Everything the hostile client holds between steps.
pub struct Client {
    pub mems: Vec<ClientMem>,
    pub good: GoodHost,
    /// The BAR0 doorbell page, once REGION_INFO handed out its fd.
    doorbells: Option<nvmemu_mem::MmapRegion>,
    /// Doorbell pages of earlier sessions, still mapped.
    stale: Vec<nvmemu_mem::MmapRegion>,
    /// The well-behaved queues are up on this connection.
    up: bool,
}

impl Default for Client {
    fn default() -> Self {
        Client {
            mems: vec![ClientMem::new(4 * PAGE)],
            good: GoodHost::default(),
            doorbells: None,
            stale: Vec::new(),
            up: false,
        }
    }
}

fn payload_with(head: &[u8], data: &[u8]) -> Vec<u8> {
    let mut p = head.to_vec();
    p.extend_from_slice(&data[..data.len().min(MAX_DATA)]);
    p
}

fn caps(c: &Caps) -> Vec<u8> {
    let text = match c {
        Caps::Qemu => return good_host::version_payload()[4..].to_vec(),
        Caps::None => return Vec::new(),
        Caps::Json {
            max_fds,
            xfer,
            pgsizes,
            migration,
        } => {
            let mig = if *migration {
                r#","migration":{"pgsize":4096}"#
            } else {
                ""
            };
            format!(
                r#"{{"capabilities":{{"max_msg_fds":{max_fds},"max_data_xfer_size":{xfer},"pgsizes":{pgsizes}{mig}}}}}"#
            )
            .into_bytes()
        }
        Caps::Text(t) => t[..t.len().min(MAX_DATA)].to_vec(),
    };
    let mut t = text;
    t.push(0);
    t
}

impl Client {
    fn mem(&mut self, i: u8) -> &mut ClientMem {
        let n = self.mems.len();
        &mut self.mems[usize::from(i) % n]
    }

    /// The fds an op sends (owned here; borrowed for the send).
    fn make_fds(&self, fds: Fds, h: &Harness) -> Vec<OwnedFd> {
        match fds {
            Fds::None => Vec::new(),
            Fds::Eventfds(n) => (0..n % 17)
                .map(|_| eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd"))
                .collect(),
            Fds::Memfd(i) => vec![
                self.mems[usize::from(i) % self.mems.len()]
                    .fd()
                    .try_clone_to_owned()
                    .expect("dup"),
            ],
            Fds::Socket => h
                .client_fd()
                .map(|fd| fd.try_clone_to_owned().expect("dup"))
                .into_iter()
                .collect(),
        }
    }

    /// Perform one step.
    pub fn apply(&mut self, h: &mut Harness, op: &Op) {
        match op {
            Op::Version {
                major,
                minor,
                caps: c,
                flags,
            } => {
                let mut p = VersionWire {
                    major: *major,
                    minor: *minor,
                }
                .as_bytes()
                .to_vec();
                p.extend_from_slice(&caps(c));
                h.request(Command::Version, flags.get(), &p, &[]);
            }
            Op::NewMemfd { pages } => {
                if self.mems.len() < MAX_MEMS {
                    let pages = u64::from(*pages) % MAX_PAGES + 1;
                    self.mems.push(ClientMem::new(pages * PAGE));
                }
            }
            Op::DmaMap {
                mem,
                iova,
                offset,
                pages,
                tail,
                map_flags,
                argsz,
                flags,
            } => {
                let size = u64::from(*pages) % (MAX_PAGES + 1) * PAGE + u64::from(*tail % 8192);
                let offset = u64::from(*offset);
                let map = DmaMapWire {
                    argsz: argsz.unwrap_or(32),
                    flags: *map_flags,
                    offset,
                    addr: iova.get(),
                    size,
                };
                let index = mem.map(|m| usize::from(m) % self.mems.len());
                let fd = index.map(|i| self.mems[i].fd());
                let fds: Vec<BorrowedFd<'_>> = fd.into_iter().collect();
                let reply = h.request(Command::DmaMap, flags.get(), map.as_bytes(), &fds);
                if let Some(i) = index {
                    let file = self.mems[i].len();
                    let accepted = reply.as_ref().is_none_or(succeeded);
                    // A map past the end of its file would fault on first touch.
                    if reply.as_ref().is_some_and(succeeded) {
                        assert!(
                            offset.checked_add(size).is_some_and(|e| e <= file),
                            "DMA_MAP of {offset:#x}+{size:#x} accepted on a {file:#x}-byte fd"
                        );
                    }
                    // NO_REPLY: the map may have been made, so the server may write there.
                    if accepted && map_flags & DMA_WRITE != 0 {
                        self.mems[i].allow_server_writes(offset, size);
                    }
                }
            }
            Op::DmaUnmap {
                iova,
                pages,
                unmap_flags,
                flags,
            } => {
                let unmap = DmaUnmapWire {
                    argsz: 24,
                    flags: *unmap_flags,
                    addr: iova.get(),
                    size: u64::from(*pages) * PAGE,
                };
                h.request(Command::DmaUnmap, flags.get(), unmap.as_bytes(), &[]);
            }
            Op::Truncate { mem, bytes } => {
                let size = u64::from(*bytes) % ((MAX_PAGES + 1) * PAGE);
                self.mem(*mem).resize(size);
            }
            Op::WriteMem { mem, offset, bytes } => {
                let m = self.mem(*mem);
                m.write(u64::from(*offset), &bytes[..bytes.len().min(MAX_DATA)]);
            }
            Op::RegionInfo {
                index,
                argsz,
                flags,
            } => {
                let req = RegionInfoWire {
                    argsz: *argsz,
                    index: *index,
                    ..Default::default()
                };
                let reply = h.request(
                    Command::DeviceGetRegionInfo,
                    flags.get(),
                    req.as_bytes(),
                    &[],
                );
                if let Some(r) = reply {
                    self.adopt_doorbells(r);
                }
            }
            Op::IrqInfo {
                index,
                argsz,
                flags,
            } => {
                let req = IrqInfoWire {
                    argsz: *argsz,
                    index: *index,
                    ..Default::default()
                };
                h.request(Command::DeviceGetIrqInfo, flags.get(), req.as_bytes(), &[]);
            }
            Op::RegionRead {
                region,
                offset,
                count,
                flags,
            } => {
                let count = u32::from(*count % 4100);
                let req = RegionAccessWire {
                    offset: u64::from(*offset),
                    region: u32::from(*region % 10),
                    count,
                };
                if let Some(r) = h.request(Command::RegionRead, flags.get(), req.as_bytes(), &[])
                    && succeeded(&r)
                {
                    assert_eq!(
                        r.payload.len(),
                        16 + count as usize,
                        "REGION_READ reply size"
                    );
                }
            }
            Op::RegionWrite {
                region,
                offset,
                data,
                flags,
            } => {
                let req = RegionAccessWire {
                    offset: u64::from(*offset),
                    region: u32::from(*region % 10),
                    count: data.len().min(MAX_DATA) as u32,
                };
                let p = payload_with(req.as_bytes(), data);
                h.request(Command::RegionWrite, flags.get(), &p, &[]);
            }
            Op::Register {
                offset,
                value,
                wide,
            } => {
                let offset = u64::from(*offset % 0x1000);
                let bytes = value.to_le_bytes();
                let value = if *wide { &bytes[..] } else { &bytes[..4] };
                let _ = good_host::write_reg(h, offset, value);
            }
            Op::Doorbell {
                index,
                value,
                mapped,
            } => {
                let offset = u64::from(*index % 1024) * 4;
                match (&self.doorbells, mapped) {
                    (Some(page), true) => {
                        let _ = page.store_release_u32(offset, *value);
                    }
                    _ => {
                        let _ = good_host::write_reg(h, 0x1000 + offset, &value.to_le_bytes());
                    }
                }
            }
            Op::SetIrqs {
                index,
                irq_flags,
                start,
                count,
                fds,
                data,
                flags,
            } => {
                let owned = self.make_fds(*fds, h);
                let borrowed: Vec<BorrowedFd<'_>> = owned.iter().map(AsFd::as_fd).collect();
                let data = &data[..data.len().min(MAX_DATA)];
                let req = SetIrqsWire {
                    argsz: 20 + data.len() as u32,
                    flags: *irq_flags,
                    index: *index,
                    start: *start,
                    count: *count,
                };
                let p = payload_with(req.as_bytes(), data);
                h.request(Command::DeviceSetIrqs, flags.get(), &p, &borrowed);
            }
            Op::Reset { flags } => {
                h.request(Command::DeviceReset, flags.get(), &[], &[]);
            }
            Op::Garbage {
                command,
                flags,
                payload,
                fds,
            } => {
                // Garbage can be a valid DMA_MAP of a client memfd: then the server may write
                // anywhere in that file.
                if let (Fds::Memfd(i), true) = (fds, *command == Command::DmaMap.raw()) {
                    self.mem(*i).allow_server_writes(0, u64::MAX);
                }
                let owned = self.make_fds(*fds, h);
                let borrowed: Vec<BorrowedFd<'_>> = owned.iter().map(AsFd::as_fd).collect();
                let payload = &payload[..payload.len().min(MAX_DATA)];
                let header = h.header(*command, 16 + payload.len() as u32, *flags);
                let bytes = payload_with(header.as_bytes(), payload);
                h.send(&bytes, &borrowed);
            }
            Op::ShortSize {
                command,
                flags,
                msg_size,
            } => {
                let header = h.header(*command, u32::from(*msg_size % 16), *flags);
                h.send(header.as_bytes(), &[]);
            }
            Op::Oversized { command, flags } => {
                let size = 16 + MAX_PAYLOAD + 1;
                let header = h.header(*command, size as u32, flags.get());
                let mut bytes = vec![0u8; size];
                bytes[..16].copy_from_slice(header.as_bytes());
                h.send(&bytes, &[]);
            }
            Op::BringUp => {
                self.up = self.good.bring_up(h).is_ok();
            }
            Op::Io {
                write,
                lba,
                prp1,
                prp2,
            } => {
                if self.up {
                    let opcode = if *write { 0x01 } else { 0x02 };
                    let _ = self
                        .good
                        .io(h, opcode, u64::from(*lba), prp1.get(), prp2.get());
                }
            }
            Op::Poll => {
                h.poll();
            }
            Op::Reconnect => self.reconnect(h),
            Op::StaleDoorbell { page, index, value } => {
                if !self.stale.is_empty() {
                    let page = &self.stale[usize::from(*page) % self.stale.len()];
                    let _ = page.store_release_u32(u64::from(*index % 1024) * 4, *value);
                }
            }
        }
        // The poller runs between any two client steps.
        h.poll();
    }

    /// Close the connection and open a new one, keeping this session's doorbell mapping
    /// (it is stale from now on) and client memory.
    pub fn reconnect(&mut self, h: &mut Harness) {
        if let Some(page) = self.doorbells.take()
            && self.stale.len() < MAX_STALE
        {
            self.stale.push(page);
        }
        self.up = false;
        h.connect();
    }

    /// Move every queue's tail and head in every stale doorbell page to `value`, then let
    /// the poller run: stores the current session must never see (a new page per session).
    pub fn scribble_stale(&self, h: &mut Harness, value: u32) {
        for page in &self.stale {
            for offset in (0..64).step_by(4) {
                let _ = page.store_release_u32(offset, value);
            }
        }
        h.poll();
    }

    /// Keep the BAR0 fd a REGION_INFO reply carried, mapped as a client would.
    fn adopt_doorbells(&mut self, reply: RawReply) {
        let Some(fd) = reply.fds.into_iter().next() else {
            return;
        };
        if self.doorbells.is_none() {
            self.doorbells = nvmemu_mem::MmapRegion::map_shared(
                fd.as_fd(),
                0x1000,
                0x1000,
                nvmemu_mem::Protection::ReadWrite,
            )
            .ok();
        }
    }

    /// Every byte of client memory the server was never allowed to write is intact.
    pub fn check_memory(&self) {
        for m in &self.mems {
            m.check_untouched();
        }
        self.good.mem.check_untouched();
    }
}

fn succeeded(r: &RawReply) -> bool {
    r.header.flags & msg_flags::ERROR == 0
}
