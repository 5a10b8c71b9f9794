// SPDX-License-Identifier: Apache-2.0
//! Fuzzing entry point: runs the server's decoder and dispatcher over arbitrary bytes.

use std::os::fd::OwnedFd;

use zerocopy::FromBytes;

use crate::Errno;
use crate::device::Device;
use crate::server::{Session, dispatch};
use crate::types::{
    DeviceInfo, DmaMap, DmaUnmap, IrqData, IrqInfo, RegionInfo, SetIrqs, SparseArea,
};
use crate::wire::{HEADER_SIZE, Header, MAX_PAYLOAD};

/// A device that accepts everything, so the fuzzer reaches every reply builder.
#[derive(Debug, Default)]
pub(crate) struct AcceptAll;

impl Device for AcceptAll {
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            flags: 3,
            num_regions: 9,
            num_irqs: 5,
        }
    }
    fn region_info(&self, index: u32) -> Result<RegionInfo<'_>, Errno> {
        let sparse = if index == 0 {
            vec![SparseArea {
                offset: 0x1000,
                size: 0x1000,
            }]
        } else {
            vec![]
        };
        Ok(RegionInfo {
            flags: 7,
            size: 0x4000,
            file_offset: 0,
            sparse,
            fd: None,
        })
    }
    fn irq_info(&self, _index: u32) -> Result<IrqInfo, Errno> {
        Ok(IrqInfo { flags: 1, count: 1 })
    }
    fn set_irqs(&mut self, _req: &SetIrqs, _data: IrqData) -> Result<(), Errno> {
        Ok(())
    }
    fn region_read(&mut self, _i: u32, _o: u64, data: &mut [u8]) -> Result<(), Errno> {
        data.fill(0xA5);
        Ok(())
    }
    fn region_write(&mut self, _i: u32, _o: u64, _data: &[u8]) -> Result<(), Errno> {
        Ok(())
    }
    fn dma_map(&mut self, _map: &DmaMap, _fd: Option<OwnedFd>) -> Result<(), Errno> {
        Ok(())
    }
    fn dma_unmap(&mut self, _unmap: &DmaUnmap) -> Result<(), Errno> {
        Ok(())
    }
    fn reset(&mut self) -> Result<(), Errno> {
        Ok(())
    }
    fn disconnected(&mut self) {}
}

/// Splits `data` into messages the way the socket reader does (16-byte header, `msg_size`
/// bounds) and feeds each complete one to the server's dispatcher, starting un-negotiated.
/// Returns how many messages were dispatched. Never panics on any input; a cargo-fuzz target
/// is `fuzz_target!(|data: &[u8]| { nvmemu_vfio_user::fuzz_server_input(data); })`.
pub fn fuzz_server_input(data: &[u8]) -> usize {
    let mut session = Session::AwaitingVersion;
    let mut device = AcceptAll;
    let mut rest = data;
    let mut dispatched = 0;
    while let Ok((header, after)) = Header::read_from_prefix(rest) {
        let Some(len) = usize::try_from(header.msg_size)
            .ok()
            .and_then(|s| s.checked_sub(HEADER_SIZE))
        else {
            rest = after;
            continue;
        };
        let Some((payload, next)) = after.split_at_checked(len) else {
            break;
        };
        rest = next;
        if len > MAX_PAYLOAD {
            continue;
        }
        let _ = dispatch(&mut session, &mut device, &header, payload, Vec::new());
        dispatched += 1;
    }
    dispatched
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn garbage_and_valid_sequences_do_not_panic() {
        assert_eq!(fuzz_server_input(&[]), 0);
        assert_eq!(fuzz_server_input(&[0xff; 15]), 0);
        let mut seq = Vec::new();
        for (cmd, payload) in [
            (1u16, vec![0u8, 0, 1, 0]),
            (5, vec![0u8; 40]),
            (9, vec![0u8; 16]),
            (99, vec![1; 3]),
        ] {
            let h = Header {
                msg_id: 1,
                command: cmd,
                msg_size: 16 + payload.len() as u32,
                flags: 0,
                error: 0,
            };
            seq.extend_from_slice(h.as_bytes());
            seq.extend_from_slice(&payload);
        }
        assert_eq!(fuzz_server_input(&seq), 4);
        // A deterministic pseudo-random sweep.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            let mut buf = seq.clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % buf.len();
                buf[i] = (x >> 32) as u8;
            }
            fuzz_server_input(&buf);
        }
    }
}
