// SPDX-License-Identifier: Apache-2.0
//! VFIO_USER_DEVICE_GET_IRQ_INFO and VFIO_USER_DEVICE_SET_IRQS.

use std::os::fd::OwnedFd;

use tracing::debug;
use zerocopy::{FromBytes, IntoBytes};

use super::Reply;
use crate::Errno;
use crate::device::Device;
use crate::types::{IrqData, IrqDataType, SetIrqs};
use crate::wire::{IRQ_INFO_SIZE, IrqInfoWire, SetIrqsWire};

const INFO_SIZE: u32 = IRQ_INFO_SIZE;
const SET_SIZE: usize = size_of::<SetIrqsWire>();

/// GET_IRQ_INFO: reply `{argsz 16, flags, index, count}`.
pub(super) fn info(device: &dyn Device, payload: &[u8]) -> Result<Reply<'static>, Errno> {
    let (req, _) = IrqInfoWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    if req.argsz < INFO_SIZE {
        return Err(Errno::INVAL);
    }
    let info = device.irq_info(req.index)?;
    let reply = IrqInfoWire {
        argsz: INFO_SIZE,
        flags: info.flags,
        index: req.index,
        count: info.count,
    };
    Ok(Reply::bytes(reply.as_bytes().to_vec()))
}

/// Validates a SET_IRQS request and its data; the device gets a well-formed request.
pub(crate) fn decode_set(payload: &[u8], fds: Vec<OwnedFd>) -> Result<(SetIrqs, IrqData), Errno> {
    let (wire, rest) = SetIrqsWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    if usize::try_from(wire.argsz).map_or(true, |a| a < SET_SIZE) {
        return Err(Errno::INVAL);
    }
    let req = SetIrqs {
        flags: wire.flags,
        index: wire.index,
        start: wire.start,
        count: wire.count,
    };
    let (Some(_), Some(data_type), true) = (req.action(), req.data(), req.flags_known()) else {
        debug!(target: "guest", flags = req.flags, "vfio-user: SET_IRQS needs one action and one data type");
        return Err(Errno::INVAL);
    };
    if req.start.checked_add(req.count).is_none() {
        return Err(Errno::INVAL);
    }
    let count = usize::try_from(req.count).map_err(|_| Errno::INVAL)?;
    let data = match data_type {
        IrqDataType::None if rest.is_empty() && fds.is_empty() => IrqData::None,
        IrqDataType::Bool if rest.len() == count && fds.is_empty() => {
            IrqData::Bool(rest.iter().map(|b| *b != 0).collect())
        }
        // QEMU sends eventfds in chunks with argsz 20 and no fd array in the payload; a run of
        // unused vectors comes with no fds (de-assign).
        IrqDataType::Eventfd if rest.is_empty() && (fds.is_empty() || fds.len() == count) => {
            IrqData::Eventfds(fds)
        }
        _ => {
            debug!(target: "guest", flags = req.flags, count, data_len = rest.len(), "vfio-user: SET_IRQS data does not match");
            return Err(Errno::INVAL);
        }
    };
    Ok((req, data))
}

/// SET_IRQS: reply has no payload.
pub(super) fn set(
    device: &mut dyn Device,
    payload: &[u8],
    fds: Vec<OwnedFd>,
) -> Result<Reply<'static>, Errno> {
    let (req, data) = decode_set(payload, fds)?;
    device.set_irqs(&req, data)?;
    Ok(Reply::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn wire(flags: u32, start: u32, count: u32) -> Vec<u8> {
        SetIrqsWire {
            argsz: 20,
            flags,
            index: 2,
            start,
            count,
        }
        .as_bytes()
        .to_vec()
    }

    fn fds(n: usize) -> Vec<OwnedFd> {
        (0..n)
            .map(|_| OwnedFd::from(UnixStream::pair().unwrap().0))
            .collect()
    }

    const EV_TRIG: u32 = SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER;

    #[test]
    fn eventfd_counts() {
        assert!(
            matches!(decode_set(&wire(EV_TRIG, 0, 3), fds(3)), Ok((_, IrqData::Eventfds(v))) if v.len() == 3)
        );
        assert!(
            matches!(decode_set(&wire(EV_TRIG, 3, 5), fds(0)), Ok((_, IrqData::Eventfds(v))) if v.is_empty())
        );
        assert_eq!(
            decode_set(&wire(EV_TRIG, 0, 3), fds(2)).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(
            decode_set(&wire(EV_TRIG, u32::MAX, 2), fds(0)).err(),
            Some(Errno::INVAL)
        );
    }

    #[test]
    fn bool_data_length_must_match_count() {
        let flags = SetIrqs::DATA_BOOL | SetIrqs::ACTION_MASK;
        let mut p = wire(flags, 1, 3);
        p.extend_from_slice(&[1, 0, 7]);
        assert!(
            matches!(decode_set(&p, fds(0)), Ok((_, IrqData::Bool(v))) if v == [true, false, true])
        );
        p.pop();
        assert_eq!(decode_set(&p, fds(0)).err(), Some(Errno::INVAL));
    }

    #[test]
    fn flag_combinations() {
        let none_trig = SetIrqs::DATA_NONE | SetIrqs::ACTION_TRIGGER;
        assert!(matches!(
            decode_set(&wire(none_trig, 0, 0), fds(0)),
            Ok((_, IrqData::None))
        ));
        assert_eq!(
            decode_set(&wire(none_trig, 0, 1), fds(1)).err(),
            Some(Errno::INVAL)
        );
        for bad in [
            0,
            SetIrqs::DATA_NONE,
            SetIrqs::ACTION_TRIGGER,
            EV_TRIG | SetIrqs::DATA_NONE,
            EV_TRIG | SetIrqs::ACTION_MASK,
            EV_TRIG | 0x100,
        ] {
            assert_eq!(
                decode_set(&wire(bad, 0, 0), fds(0)).err(),
                Some(Errno::INVAL),
                "{bad:#x}"
            );
        }
        let short = SetIrqsWire {
            argsz: 16,
            flags: EV_TRIG,
            index: 0,
            start: 0,
            count: 0,
        };
        assert_eq!(
            decode_set(short.as_bytes(), fds(0)).err(),
            Some(Errno::INVAL)
        );
    }
}
