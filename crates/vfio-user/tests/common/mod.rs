// SPDX-License-Identifier: Apache-2.0
//! Shared fixtures: a fake device that records calls, a server thread on a socketpair, and
//! raw message helpers.
#![allow(dead_code, clippy::cast_possible_truncation, clippy::unwrap_used)]

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nvmemu_vfio_user::{
    ConnectionError, Device, DeviceInfo, DmaMap, DmaUnmap, Errno, Header, IrqData, IrqInfo,
    RegionInfo, SetIrqs, SparseArea, StopHandle, serve_connection,
};
use zerocopy::{FromBytes, IntoBytes};

/// Content at the start of the BAR0 fd, to prove the fd a client gets is the right file.
pub const BAR0_MAGIC: &[u8] = b"BAR0-FD";

/// What the fake device was asked to do.
#[derive(Debug)]
pub enum Call {
    Map {
        map: DmaMap,
        fd_head: Option<Vec<u8>>,
    },
    Unmap(DmaUnmap),
    SetIrqs {
        req: SetIrqs,
        kind: &'static str,
        n: usize,
    },
    Read {
        index: u32,
        offset: u64,
        len: usize,
    },
    Write {
        index: u32,
        offset: u64,
        data: Vec<u8>,
    },
    Reset,
    Disconnected,
}

pub type Calls = Arc<Mutex<Vec<Call>>>;

pub struct FakeDevice {
    calls: Calls,
    bar0_file: File,
    bar0: Vec<u8>,
    config: Vec<u8>,
}

impl FakeDevice {
    pub fn new(calls: Calls) -> Self {
        let mut bar0_file = tempfile::tempfile().unwrap();
        bar0_file.write_all(BAR0_MAGIC).unwrap();
        Self {
            calls,
            bar0_file,
            bar0: vec![0; 0x1000],
            config: vec![0; 4096],
        }
    }

    fn log(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    fn backing(&mut self, index: u32) -> Result<&mut Vec<u8>, Errno> {
        match index {
            0 => Ok(&mut self.bar0),
            7 => Ok(&mut self.config),
            _ => Err(Errno::INVAL),
        }
    }

    fn range(len: usize, offset: u64, n: usize) -> Result<std::ops::Range<usize>, Errno> {
        let start = usize::try_from(offset).map_err(|_| Errno::INVAL)?;
        let end = start
            .checked_add(n)
            .filter(|e| *e <= len)
            .ok_or(Errno::INVAL)?;
        Ok(start..end)
    }
}

impl Device for FakeDevice {
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            flags: DeviceInfo::FLAG_RESET | DeviceInfo::FLAG_PCI,
            num_regions: 9,
            num_irqs: 5,
        }
    }

    fn region_info(&self, index: u32) -> Result<RegionInfo<'_>, Errno> {
        let rw = RegionInfo::FLAG_READ | RegionInfo::FLAG_WRITE;
        match index {
            0 => Ok(RegionInfo {
                flags: rw | RegionInfo::FLAG_MMAP,
                size: 0x4000,
                file_offset: 0,
                sparse: vec![SparseArea {
                    offset: 0x1000,
                    size: 0x1000,
                }],
                fd: Some(self.bar0_file.as_fd()),
            }),
            2 => Ok(RegionInfo {
                flags: rw | RegionInfo::FLAG_MMAP,
                size: 0x1000,
                file_offset: 0x2000,
                sparse: vec![],
                fd: Some(self.bar0_file.as_fd()),
            }),
            7 => Ok(RegionInfo {
                flags: rw,
                size: 4096,
                file_offset: 0,
                sparse: vec![],
                fd: None,
            }),
            1 | 3..=6 | 8 => Ok(RegionInfo {
                flags: 0,
                size: 0,
                file_offset: 0,
                sparse: vec![],
                fd: None,
            }),
            _ => Err(Errno::INVAL),
        }
    }

    fn irq_info(&self, index: u32) -> Result<IrqInfo, Errno> {
        match index {
            2 => Ok(IrqInfo {
                flags: IrqInfo::FLAG_EVENTFD | IrqInfo::FLAG_NORESIZE,
                count: 8,
            }),
            0..=4 => Ok(IrqInfo {
                flags: IrqInfo::FLAG_EVENTFD,
                count: 1,
            }),
            _ => Err(Errno::INVAL),
        }
    }

    fn set_irqs(&mut self, req: &SetIrqs, data: IrqData) -> Result<(), Errno> {
        let (kind, n) = match &data {
            IrqData::None => ("none", 0),
            IrqData::Bool(b) => ("bool", b.len()),
            IrqData::Eventfds(fds) => {
                // Signal every eventfd once, so the test can see they are the ones it sent.
                for fd in fds {
                    rustix::io::write(fd, &1u64.to_ne_bytes()).map_err(|_| Errno::IO)?;
                }
                ("eventfd", fds.len())
            }
        };
        self.log(Call::SetIrqs { req: *req, kind, n });
        Ok(())
    }

    fn region_read(&mut self, index: u32, offset: u64, data: &mut [u8]) -> Result<(), Errno> {
        self.log(Call::Read {
            index,
            offset,
            len: data.len(),
        });
        let backing = self.backing(index)?;
        let r = Self::range(backing.len(), offset, data.len())?;
        data.copy_from_slice(&backing[r]);
        Ok(())
    }

    fn region_write(&mut self, index: u32, offset: u64, data: &[u8]) -> Result<(), Errno> {
        self.log(Call::Write {
            index,
            offset,
            data: data.to_vec(),
        });
        let backing = self.backing(index)?;
        let r = Self::range(backing.len(), offset, data.len())?;
        backing[r].copy_from_slice(data);
        Ok(())
    }

    fn dma_map(&mut self, map: &DmaMap, fd: Option<OwnedFd>) -> Result<(), Errno> {
        let fd_head = fd.map(|fd| {
            let mut f = File::from(fd);
            f.seek(SeekFrom::Start(map.offset)).unwrap();
            let mut head = vec![0u8; 8];
            let n = f.read(&mut head).unwrap();
            head.truncate(n);
            head
        });
        self.log(Call::Map { map: *map, fd_head });
        Ok(())
    }

    fn dma_unmap(&mut self, unmap: &DmaUnmap) -> Result<(), Errno> {
        self.log(Call::Unmap(*unmap));
        Ok(())
    }

    fn reset(&mut self) -> Result<(), Errno> {
        self.log(Call::Reset);
        Ok(())
    }

    fn disconnected(&mut self) {
        self.log(Call::Disconnected);
    }
}

/// A server thread serving a [`FakeDevice`] on one end of a socketpair.
pub struct Harness {
    pub calls: Calls,
    pub stop: StopHandle,
    thread: Option<JoinHandle<Result<(), ConnectionError>>>,
}

impl Harness {
    /// Starts the server; returns the client's end of the socket.
    pub fn start() -> (UnixStream, Harness) {
        let (client, server) = UnixStream::pair().unwrap();
        let calls: Calls = Arc::default();
        let stop = StopHandle::new().unwrap();
        let (c, s) = (calls.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut dev = FakeDevice::new(c);
            serve_connection(
                server,
                &mut dev,
                &s,
                &nvmemu_vfio_user::Deadlines::default(),
            )
        });
        (
            client,
            Harness {
                calls,
                stop,
                thread: Some(thread),
            },
        )
    }

    /// Waits for the server thread to return.
    pub fn join(mut self) -> Result<(), ConnectionError> {
        self.thread.take().unwrap().join().unwrap()
    }

    /// Waits for the server thread to return (consumes the harness).
    pub fn join_ref(self) -> Result<(), ConnectionError> {
        self.join()
    }

    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.stop();
            let _ = t.join();
        }
    }
}

/// Builds a message: header (msg_size computed) + payload.
pub fn message(msg_id: u16, command: u16, flags: u32, payload: &[u8]) -> Vec<u8> {
    let h = Header {
        msg_id,
        command,
        msg_size: 16 + payload.len() as u32,
        flags,
        error: 0,
    };
    let mut m = h.as_bytes().to_vec();
    m.extend_from_slice(payload);
    m
}

/// Reads one message with plain reads (no fds).
pub fn read_message(stream: &mut UnixStream) -> (Header, Vec<u8>) {
    let mut raw = [0u8; 16];
    stream.read_exact(&mut raw).unwrap();
    let h = Header::read_from_bytes(&raw).unwrap();
    let mut payload = vec![0u8; h.msg_size as usize - 16];
    stream.read_exact(&mut payload).unwrap();
    (h, payload)
}

/// The 4-byte VERSION payload SPDK's client sends (0.1, no JSON).
pub fn spdk_version() -> Vec<u8> {
    vec![0, 0, 1, 0]
}

/// Whether the peer of `end` was closed: reading it gives EOF instead of blocking.
pub fn peer_closed(end: &UnixStream) -> bool {
    end.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    matches!((&*end).read(&mut b), Ok(0))
}
