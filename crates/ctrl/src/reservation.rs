// SPDX-License-Identifier: Apache-2.0
//! A namespace's reservation state (NVMe Base 1.4, 8.8), shared by every controller the
//! namespace is attached to, and the access check I/O commands pass.
//!
//! Hosts are told apart by the Host Identifier each controller was given (Set Features
//! 81h); controllers with the same non-zero identifier are one host. A controller that set
//! none is a host of its own, known by its controller ID. The rules follow SPDK's target
//! (`lib/nvmf/ctrlr.c`): who may register, acquire, preempt and release, and which reads
//! and writes conflict with each reservation type.
//!
//! A change that takes away another host's registration or reservation sends that host's
//! controllers a notice (`resv_notify.rs`), as SPDK's target decides them.
//!
//! The state sits behind a mutex: reservation commands are rare and take it briefly. Reads
//! and writes only load one atomic flag while no reservation is held (the usual case) and
//! take the mutex only when one is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nvmemu_spec::Status;
use nvmemu_spec::reservation::notice::NoticeKind;
use nvmemu_spec::reservation::{
    AcquireAction, RegisterAction, ReleaseAction, ReservationType, report,
};

use crate::resv_notify::{Inbox, Subscribers};

/// Most hosts registered with one namespace: bounds what a client can make the server keep
/// (a controller may register, change its host identifier after a reset, and register
/// again), and keeps the report within one page.
pub const MAX_REGISTRANTS: usize = 32;

/// Largest Reservation Status data structure this controller builds.
pub(crate) const REPORT_MAX: usize =
    report::HEADER_EXTENDED + MAX_REGISTRANTS * report::ENTRY_EXTENDED;

/// Who issues a command: the controller's Host Identifier (zero if never set) and its ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Host {
    pub(crate) id: [u8; 16],
    pub(crate) cntlid: u16,
}

impl Host {
    /// Whether `self` and `other` are the same host.
    pub(crate) fn is(&self, other: &Host) -> bool {
        if self.id == [0; 16] || other.id == [0; 16] {
            self.id == other.id && self.cntlid == other.cntlid
        } else {
            self.id == other.id
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Registrant {
    host: Host,
    key: u64,
}

#[derive(Debug, Default)]
struct State {
    generation: u32,
    /// The reservation and, for the types with a single holder, who holds it.
    held: Option<(ReservationType, Host)>,
    registrants: Vec<Registrant>,
}

/// The reservation state of one namespace.
#[derive(Debug, Default)]
pub struct Reservations {
    /// Whether a reservation is held: the only thing a read or write looks at otherwise.
    /// Stored with Release after the state changed under the mutex, loaded with Acquire.
    active: AtomicBool,
    state: Mutex<State>,
    /// The controllers to notify; taken after `state` is released.
    subscribers: Subscribers,
}

/// Notices one command sends: to each host, what happened to it.
type Notices = Vec<(Host, NoticeKind)>;

impl State {
    fn find(&self, host: &Host) -> Option<usize> {
        self.registrants.iter().position(|r| r.host.is(host))
    }

    fn holds(&self, host: &Host) -> bool {
        match self.held {
            Some((t, _)) if t.all_registrants() => self.find(host).is_some(),
            Some((_, holder)) => holder.is(host),
            None => false,
        }
    }

    /// The registrant for `host` whose key is `crkey` (or any key with IEKEY); Reservation
    /// Conflict otherwise.
    fn checked(&self, host: &Host, iekey: bool, crkey: u64) -> Result<usize, Status> {
        match self.find(host) {
            Some(i) if iekey || self.registrants.get(i).is_some_and(|r| r.key == crkey) => Ok(i),
            _ => Err(Status::RESERVATION_CONFLICT),
        }
    }

    fn add(&mut self, host: Host, key: u64) -> Result<(), Status> {
        if self.registrants.len() >= MAX_REGISTRANTS {
            tracing::debug!(target: "guest", "reservation registrant table full");
            return Err(Status::INTERNAL_ERROR);
        }
        self.registrants.push(Registrant { host, key });
        Ok(())
    }

    /// Unregisters every other host whose key is `key`; how many went.
    fn remove_others_with_key(&mut self, host: &Host, key: u64) -> usize {
        let before = self.registrants.len();
        self.registrants.retain(|r| r.host.is(host) || r.key != key);
        before - self.registrants.len()
    }

    /// After registrants left: a single holder that left, or the last of all registrants,
    /// releases the reservation.
    fn drop_orphaned_reservation(&mut self) {
        let orphaned = match self.held {
            Some((t, _)) if t.all_registrants() => self.registrants.is_empty(),
            Some((_, holder)) => self.find(&holder).is_none(),
            None => false,
        };
        if orphaned {
            self.held = None;
        }
    }

    /// The registered hosts other than `host`.
    fn others(&self, host: &Host) -> Vec<Host> {
        self.registrants
            .iter()
            .map(|r| r.host)
            .filter(|h| !h.is(host))
            .collect()
    }

    fn bump(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }
}

impl Reservations {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it cannot leave the state half-changed in a way that
        // matters more than losing the namespace: carry on with what is there.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, st: &State) {
        self.active.store(st.held.is_some(), Ordering::Release);
    }

    /// Whether the host `host()` names may read (`write` false) or write the namespace
    /// now; `host` is called only while a reservation is held.
    #[inline(always)]
    pub(crate) fn check(&self, write: bool, host: impl FnOnce() -> Host) -> Result<(), Status> {
        if !self.active.load(Ordering::Acquire) {
            return Ok(());
        }
        self.check_held(host(), write)
    }

    #[cold]
    fn check_held(&self, host: Host, write: bool) -> Result<(), Status> {
        let st = self.lock();
        let Some((t, _)) = st.held else {
            return Ok(());
        };
        let allowed = st.holds(&host)
            || (t.registrants_have_access() && st.find(&host).is_some())
            || (!write && !t.limits_reads());
        if allowed {
            Ok(())
        } else {
            tracing::debug!(target: "guest", cntlid = host.cntlid, write, "reservation conflict");
            Err(Status::RESERVATION_CONFLICT)
        }
    }

    /// Whether `host` is registered (its Host Identifier may not change then).
    pub(crate) fn is_registered(&self, host: Host) -> bool {
        self.lock().find(&host).is_some()
    }

    /// Reservation Register.
    pub(crate) fn register(
        &self,
        host: Host,
        action: RegisterAction,
        iekey: bool,
        (crkey, nrkey): (u64, u64),
    ) -> Result<(), Status> {
        let mut st = self.lock();
        let mut notices = Notices::new();
        let found = st.find(&host);
        match (action, found) {
            (RegisterAction::Register, Some(i)) => {
                // Registering again with the same key changes nothing.
                return match st.registrants.get(i) {
                    Some(r) if r.key == nrkey => Ok(()),
                    _ => Err(Status::RESERVATION_CONFLICT),
                };
            }
            (RegisterAction::Register, None) => st.add(host, nrkey)?,
            (RegisterAction::Unregister, _) => {
                let i = st.checked(&host, iekey, crkey)?;
                let held = st.held.map(|(t, _)| t);
                st.registrants.remove(i);
                st.drop_orphaned_reservation();
                // The holder of a registrants-only reservation left: the others lose it.
                if st.held.is_none() && held.is_some_and(single_holder_registrants_only) {
                    notices = tell(st.others(&host), NoticeKind::ReservationReleased);
                }
            }
            (RegisterAction::Replace, Some(_)) => {
                let i = st.checked(&host, iekey, crkey)?;
                if let Some(r) = st.registrants.get_mut(i) {
                    r.key = nrkey;
                }
            }
            (RegisterAction::Replace, None) if iekey => st.add(host, nrkey)?,
            (RegisterAction::Replace, None) => return Err(Status::RESERVATION_CONFLICT),
        }
        st.bump();
        self.publish(&st);
        drop(st);
        self.subscribers.send(&notices);
        Ok(())
    }

    /// Reservation Acquire.
    pub(crate) fn acquire(
        &self,
        host: Host,
        action: AcquireAction,
        iekey: bool,
        rtype: u8,
        (crkey, prkey): (u64, u64),
    ) -> Result<(), Status> {
        let mut st = self.lock();
        st.checked(&host, iekey, crkey)?;
        let rtype = ReservationType::from_raw(rtype).ok_or(Status::INVALID_FIELD)?;
        let mut notices = Notices::new();
        match action {
            AcquireAction::Acquire => match st.held {
                None => st.held = Some((rtype, host)),
                Some((t, _)) if t == rtype && st.holds(&host) => {}
                Some(_) => return Err(Status::RESERVATION_CONFLICT),
            },
            // Commands complete within the poll that takes them: none is left to abort.
            AcquireAction::Preempt | AcquireAction::PreemptAndAbort => {
                let before = st.others(&host);
                let released = preempt(&mut st, host, rtype, prkey)?;
                st.bump();
                let after = st.others(&host);
                let gone = before
                    .into_iter()
                    .filter(|h| !after.iter().any(|a| a.is(h)));
                notices = tell(gone, NoticeKind::RegistrationPreempted);
                if released {
                    notices.extend(tell(after, NoticeKind::ReservationReleased));
                }
            }
        }
        self.publish(&st);
        drop(st);
        self.subscribers.send(&notices);
        Ok(())
    }

    /// Reservation Release.
    pub(crate) fn release(
        &self,
        host: Host,
        action: ReleaseAction,
        iekey: bool,
        rtype: u8,
        crkey: u64,
    ) -> Result<(), Status> {
        let mut st = self.lock();
        st.checked(&host, iekey, crkey)?;
        let mut notices = Notices::new();
        match action {
            ReleaseAction::Release => match st.held {
                // Releasing what one does not hold succeeds and changes nothing.
                Some((t, _)) if st.holds(&host) => {
                    if t.raw() != rtype {
                        return Err(Status::INVALID_FIELD);
                    }
                    st.held = None;
                    // Only the types that give other registrants access tell them.
                    if t.registrants_have_access() {
                        notices = tell(st.others(&host), NoticeKind::ReservationReleased);
                    }
                }
                _ => {}
            },
            ReleaseAction::Clear => {
                notices = tell(st.others(&host), NoticeKind::ReservationPreempted);
                st.held = None;
                st.registrants.clear();
                st.bump();
            }
        }
        self.publish(&st);
        drop(st);
        self.subscribers.send(&notices);
        Ok(())
    }

    /// Send this namespace's notices, as `nsid`, to `inbox` from now on.
    pub(crate) fn subscribe(&self, nsid: u32, inbox: &Arc<Inbox>) {
        self.subscribers.add(nsid, inbox);
    }

    /// Stop sending notices to `inbox`.
    pub(crate) fn unsubscribe(&self, inbox: &Arc<Inbox>) {
        self.subscribers.remove(inbox);
    }

    /// The Reservation Status data structure into `buf` (at least [`REPORT_MAX`] bytes);
    /// returns its length. `eds` selects the extended form (128-bit host identifiers).
    pub(crate) fn report(&self, eds: bool, buf: &mut [u8]) -> usize {
        let st = self.lock();
        let (header, entry) = if eds {
            (report::HEADER_EXTENDED, report::ENTRY_EXTENDED)
        } else {
            (report::HEADER, report::ENTRY)
        };
        put(buf, 0, &st.generation.to_le_bytes());
        put(buf, 4, &[st.held.map_or(0, |(t, _)| t.raw())]);
        let count = u16::try_from(st.registrants.len()).unwrap_or(u16::MAX);
        put(buf, 5, &count.to_le_bytes());
        let mut at = header;
        for r in &st.registrants {
            put(buf, at, &r.host.cntlid.to_le_bytes());
            let holds = if st.holds(&r.host) {
                report::RCSTS_HOLDS
            } else {
                0
            };
            put(buf, at + 2, &[holds]);
            if eds {
                put(buf, at + 8, &r.key.to_le_bytes());
                put(buf, at + 16, &r.host.id);
            } else {
                put(buf, at + 8, r.host.id.get(..8).unwrap_or(&[]));
                put(buf, at + 16, &r.key.to_le_bytes());
            }
            at += entry;
        }
        at
    }

    /// Whether any registered host gave a 128-bit identifier that an 8-byte report entry
    /// cannot carry.
    pub(crate) fn has_wide_host_ids(&self) -> bool {
        self.lock().registrants.iter().any(|r| {
            r.host
                .id
                .get(8..)
                .is_some_and(|hi| hi.iter().any(|&b| b != 0))
        })
    }
}

/// Each host in `hosts`, told `kind`.
fn tell(hosts: impl IntoIterator<Item = Host>, kind: NoticeKind) -> Notices {
    hosts.into_iter().map(|h| (h, kind)).collect()
}

/// Types 3h and 4h: one registrant holds the reservation, every registrant has access.
fn single_holder_registrants_only(t: ReservationType) -> bool {
    t.registrants_have_access() && !t.all_registrants()
}

/// Preempt (NVMe Base 1.4, 8.8.4.2): unregister the hosts with key `prkey` and, when they
/// held the reservation (or PRKEY is 0 under an all-registrants type), take it as `rtype`.
/// Returns whether a single holder's reservation was taken over (the remaining
/// registrants are told it was released).
fn preempt(st: &mut State, host: Host, rtype: ReservationType, prkey: u64) -> Result<bool, Status> {
    match st.held {
        None => {
            if st.remove_others_with_key(&host, prkey) == 0 {
                return Err(Status::RESERVATION_CONFLICT);
            }
        }
        Some((t, _)) if t.all_registrants() => {
            if prkey == 0 {
                st.registrants.retain(|r| r.host.is(&host));
                st.held = Some((rtype, host));
            } else if st.remove_others_with_key(&host, prkey) == 0 {
                return Err(Status::RESERVATION_CONFLICT);
            }
        }
        Some((_, holder)) => {
            let holder_key = st
                .find(&holder)
                .and_then(|i| st.registrants.get(i))
                .map(|r| r.key);
            if holder_key == Some(prkey) {
                st.remove_others_with_key(&host, prkey);
                st.held = Some((rtype, host));
                return Ok(true);
            } else if prkey == 0 {
                return Err(Status::INVALID_FIELD);
            } else if st.remove_others_with_key(&host, prkey) == 0 {
                return Err(Status::RESERVATION_CONFLICT);
            }
        }
    }
    Ok(false)
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(d) = buf.get_mut(at..at + bytes.len()) {
        d.copy_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u8) -> Host {
        Host {
            id: [n; 16],
            cntlid: u16::from(n),
        }
    }

    #[test]
    fn controllers_without_host_ids_are_separate_hosts() {
        let a = Host {
            id: [0; 16],
            cntlid: 1,
        };
        let b = Host { cntlid: 2, ..a };
        assert!(a.is(&a) && !a.is(&b));
        let same = Host {
            id: [7; 16],
            cntlid: 2,
        };
        assert!(host(7).is(&same));
    }

    #[test]
    fn the_registrant_table_is_bounded() {
        let r = Reservations::default();
        for n in 1..=MAX_REGISTRANTS {
            let h = Host {
                id: [0; 16],
                cntlid: u16::try_from(n).unwrap(),
            };
            r.register(h, RegisterAction::Register, false, (0, 1))
                .unwrap();
        }
        let one_more = Host {
            id: [0; 16],
            cntlid: 999,
        };
        assert_eq!(
            r.register(one_more, RegisterAction::Register, false, (0, 1)),
            Err(Status::INTERNAL_ERROR)
        );
        let mut buf = [0u8; REPORT_MAX];
        assert_eq!(r.report(true, &mut buf), REPORT_MAX);
    }
}
