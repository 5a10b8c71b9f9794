// SPDX-License-Identifier: Apache-2.0
//! Interrupts: the SET_IRQS state kept by the control thread, and the MSI-X sink a poller
//! signals when it posts completions (vfio-user `VFIO_USER_DEVICE_SET_IRQS`, VFIO's
//! `VFIO_DEVICE_SET_IRQS` semantics).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::OFlags;

use nvmemu_ctrl::InterruptSink;
use nvmemu_vfio_user::{Errno, IrqAction, IrqData, IrqInfo, SetIrqs};

/// VFIO PCI interrupt indexes.
pub const INTX: u32 = 0;
/// MSI index (not implemented: count 0).
pub const MSI: u32 = 1;
/// MSI-X index.
pub const MSIX: u32 = 2;
/// Error notification index.
pub const ERR: u32 = 3;
/// Device request index.
pub const REQ: u32 = 4;
/// Number of interrupt indexes reported in DEVICE_GET_INFO.
pub const NUM_IRQS: u32 = 5;

type Fd = Arc<OwnedFd>;

/// The eventfds a client assigned, per index.
#[derive(Debug)]
pub struct IrqState {
    msix: Vec<Option<Fd>>,
    intx: Option<Fd>,
    err: Option<Fd>,
    req: Option<Fd>,
}

impl IrqState {
    /// No eventfds, `msix_vectors` MSI-X vectors.
    pub fn new(msix_vectors: u16) -> IrqState {
        IrqState {
            msix: vec![None; usize::from(msix_vectors)],
            intx: None,
            err: None,
            req: None,
        }
    }

    /// DEVICE_GET_IRQ_INFO.
    pub fn info(&self, index: u32) -> Result<IrqInfo, Errno> {
        let count = match index {
            INTX | ERR | REQ => 1,
            MSI => 0,
            MSIX => u32::try_from(self.msix.len()).map_err(|_| Errno::INVAL)?,
            _ => return Err(Errno::INVAL),
        };
        Ok(IrqInfo {
            flags: IrqInfo::FLAG_EVENTFD,
            count,
        })
    }

    /// DEVICE_SET_IRQS. Returns true when the MSI-X eventfd table changed (the poller's copy
    /// must be refreshed).
    pub fn set(&mut self, req: &SetIrqs, data: IrqData) -> Result<bool, Errno> {
        let count = self.info(req.index)?.count;
        let end = req.start.checked_add(req.count).ok_or(Errno::INVAL)?;
        if end > count && !(req.count == 0 && req.start == 0) {
            return Err(Errno::INVAL);
        }
        if req.action() != Some(IrqAction::Trigger) {
            // MASK/UNMASK: we advertise no MASKABLE index; QEMU only sends these for INTx
            // with KVM resampling. Accept them as no-ops for INTx, refuse them elsewhere.
            return if req.index == INTX {
                Ok(false)
            } else {
                Err(Errno::INVAL)
            };
        }
        let range = usize::try_from(req.start).map_err(|_| Errno::INVAL)?
            ..usize::try_from(end).map_err(|_| Errno::INVAL)?;
        match data {
            IrqData::None if req.count == 0 => {
                // Disable the whole index.
                self.slots(req.index).iter_mut().for_each(|s| *s = None);
                Ok(req.index == MSIX)
            }
            IrqData::None => {
                for slot in self.slots(req.index).get(range).unwrap_or(&[]) {
                    signal(slot.as_ref());
                }
                Ok(false)
            }
            IrqData::Bool(flags) => {
                let slots = self.slots(req.index).get_mut(range).unwrap_or(&mut []);
                for (slot, fire) in slots.iter().zip(flags) {
                    if fire {
                        signal(slot.as_ref());
                    }
                }
                Ok(false)
            }
            IrqData::Eventfds(fds) => {
                let slots = self.slots(req.index).get_mut(range).ok_or(Errno::INVAL)?;
                if fds.is_empty() {
                    slots.iter_mut().for_each(|s| *s = None);
                } else if fds.len() == slots.len() {
                    // All or nothing: check every fd before assigning any.
                    let fds = fds
                        .into_iter()
                        .map(adopt_eventfd)
                        .collect::<Result<Vec<_>, _>>()?;
                    for (slot, fd) in slots.iter_mut().zip(fds) {
                        *slot = Some(Arc::new(fd));
                    }
                } else {
                    return Err(Errno::INVAL);
                }
                Ok(req.index == MSIX)
            }
        }
    }

    /// Drop every eventfd (client disconnected).
    pub fn clear(&mut self) {
        self.msix.iter_mut().for_each(|s| *s = None);
        self.intx = None;
        self.err = None;
        self.req = None;
    }

    /// A sink for the poller with the current MSI-X eventfds.
    pub fn msix_sink(&self, active: bool) -> MsixSink {
        MsixSink {
            active,
            fds: self.msix.clone(),
        }
    }

    fn slots(&mut self, index: u32) -> &mut [Option<Fd>] {
        match index {
            MSIX => &mut self.msix,
            INTX => std::slice::from_mut(&mut self.intx),
            ERR => std::slice::from_mut(&mut self.err),
            REQ => std::slice::from_mut(&mut self.req),
            _ => &mut [],
        }
    }
}

/// Accept `fd` as an interrupt eventfd: it must be an eventfd (anything else, e.g. a pipe
/// the client never drains, could block the writer), and it is made non-blocking, so a
/// write to a counter the client let grow to its maximum fails with EAGAIN instead of
/// blocking the poller or control thread (`signal` counts that as already signalled).
///
/// O_NONBLOCK is a flag of the open file description, which the client shares: its own
/// reads of the eventfd become non-blocking too. QEMU and KVM create their eventfds
/// non-blocking and poll them, so they see no difference.
fn adopt_eventfd(fd: OwnedFd) -> Result<OwnedFd, Errno> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let target = rustix::fs::readlink(link.as_str(), Vec::new()).map_err(|e| {
        tracing::warn!("SET_IRQS: cannot inspect the fd passed as an eventfd: {e}");
        Errno::INVAL
    })?;
    if target.as_bytes() != b"anon_inode:[eventfd]" {
        tracing::debug!(target: "guest", fd = ?target, "SET_IRQS: refused an fd that is not an eventfd");
        return Err(Errno::INVAL);
    }
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, flags | OFlags::NONBLOCK)?;
    Ok(fd)
}

fn signal(fd: Option<&Fd>) {
    if let Some(fd) = fd {
        // The fd is a non-blocking eventfd (`adopt_eventfd`): a write of 1 fails only with
        // EAGAIN, when the counter is at its maximum because the client never reads it; the
        // interrupt is then pending anyway.
        let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
    }
}

/// The poller's view of MSI-X: whether it is enabled and unmasked, and each vector's eventfd.
#[derive(Debug, Clone, Default)]
pub struct MsixSink {
    active: bool,
    fds: Vec<Option<Fd>>,
}

impl InterruptSink for MsixSink {
    fn raise(&mut self, vector: u16) {
        if self.active {
            signal(self.fds.get(usize::from(vector)).and_then(Option::as_ref));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::{EventfdFlags, eventfd};

    fn efd() -> OwnedFd {
        eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).unwrap()
    }

    fn count(fd: &OwnedFd) -> u64 {
        let mut b = [0u8; 8];
        match rustix::io::read(fd, &mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }

    const DATA_NONE: u32 = SetIrqs::DATA_NONE;
    const DATA_EVENTFD: u32 = SetIrqs::DATA_EVENTFD;
    const ACTION_UNMASK: u32 = SetIrqs::ACTION_UNMASK;
    const ACTION_TRIGGER: u32 = SetIrqs::ACTION_TRIGGER;

    fn req(index: u32, flags: u32, start: u32, count: u32) -> SetIrqs {
        SetIrqs {
            flags,
            index,
            start,
            count,
        }
    }

    #[test]
    fn msix_eventfds_are_assigned_and_signalled() {
        let mut st = IrqState::new(4);
        let a = efd();
        let b = efd();
        let a2 = a.try_clone().unwrap();
        let b2 = b.try_clone().unwrap();
        let changed = st
            .set(
                &req(MSIX, DATA_EVENTFD | ACTION_TRIGGER, 1, 2),
                IrqData::Eventfds(vec![a, b]),
            )
            .unwrap();
        assert!(changed);
        let mut sink = st.msix_sink(true);
        sink.raise(2);
        sink.raise(2);
        sink.raise(0); // no fd: nothing
        sink.raise(900); // out of range: nothing
        assert_eq!(count(&b2), 2);
        assert_eq!(count(&a2), 0);
        let mut off = st.msix_sink(false);
        off.raise(1);
        assert_eq!(count(&a2), 0, "disabled MSI-X raises nothing");
        // Loopback trigger through DATA_NONE.
        st.set(&req(MSIX, DATA_NONE | ACTION_TRIGGER, 1, 1), IrqData::None)
            .unwrap();
        assert_eq!(count(&a2), 1);
        // Disable the index.
        st.set(&req(MSIX, DATA_NONE | ACTION_TRIGGER, 0, 0), IrqData::None)
            .unwrap();
        st.msix_sink(true).raise(2);
        assert_eq!(count(&b2), 0);
    }

    #[test]
    fn bad_ranges_and_counts_are_refused() {
        let mut st = IrqState::new(4);
        let trig = DATA_EVENTFD | ACTION_TRIGGER;
        assert_eq!(
            st.set(
                &req(MSIX, trig, 3, 2),
                IrqData::Eventfds(vec![efd(), efd()])
            ),
            Err(Errno::INVAL)
        );
        assert_eq!(
            st.set(&req(MSIX, trig, 0, 2), IrqData::Eventfds(vec![efd()])),
            Err(Errno::INVAL)
        );
        assert_eq!(
            st.set(&req(MSIX, trig, u32::MAX, 2), IrqData::None),
            Err(Errno::INVAL)
        );
        assert_eq!(
            st.set(&req(MSI, trig, 0, 1), IrqData::Eventfds(vec![efd()])),
            Err(Errno::INVAL)
        );
        assert_eq!(
            st.set(&req(9, trig, 0, 1), IrqData::None),
            Err(Errno::INVAL)
        );
        assert_eq!(
            st.set(&req(INTX, DATA_NONE | ACTION_UNMASK, 0, 1), IrqData::None),
            Ok(false)
        );
        assert!(
            st.set(&req(ERR, trig, 0, 1), IrqData::Eventfds(vec![efd()]))
                .is_ok()
        );
    }

    #[test]
    fn only_eventfds_are_accepted_and_they_never_block() {
        let mut st = IrqState::new(2);
        let trig = DATA_EVENTFD | ACTION_TRIGGER;
        let (rd, wr) = rustix::pipe::pipe().unwrap();
        let file = tempfile::tempfile().unwrap();
        for index in [MSIX, ERR, REQ, INTX] {
            let (p, f) = (
                wr.try_clone().unwrap(),
                OwnedFd::from(file.try_clone().unwrap()),
            );
            assert_eq!(
                st.set(&req(index, trig, 0, 1), IrqData::Eventfds(vec![p])),
                Err(Errno::INVAL),
                "pipe on index {index}"
            );
            assert_eq!(
                st.set(&req(index, trig, 0, 1), IrqData::Eventfds(vec![f])),
                Err(Errno::INVAL),
                "file on index {index}"
            );
        }
        // One bad fd refuses the whole request: vector 0 keeps no fd.
        let good = efd();
        let good2 = good.try_clone().unwrap();
        assert_eq!(
            st.set(
                &req(MSIX, trig, 0, 2),
                IrqData::Eventfds(vec![good, wr.try_clone().unwrap()])
            ),
            Err(Errno::INVAL)
        );
        st.msix_sink(true).raise(0);
        assert_eq!(count(&good2), 0);
        drop(rd);
        // A blocking eventfd at its maximum count: signalling returns at once.
        let full = eventfd(0, EventfdFlags::CLOEXEC).unwrap();
        rustix::io::write(&full, &(u64::MAX - 1).to_ne_bytes()).unwrap();
        let full2 = full.try_clone().unwrap();
        st.set(&req(ERR, trig, 0, 1), IrqData::Eventfds(vec![full]))
            .unwrap();
        st.set(&req(ERR, DATA_NONE | ACTION_TRIGGER, 0, 1), IrqData::None)
            .unwrap();
        assert_eq!(count(&full2), u64::MAX - 1, "already signalled, unchanged");
    }
}
