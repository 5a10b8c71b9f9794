// SPDX-License-Identifier: Apache-2.0
//! A connected queue on the way out: the controller's completions become C2HData and
//! response PDUs, read data spliced from where it lies, and what a short send leaves of a
//! namespace's memory moves to the commands' slots before the controllers run again.

use nvmemu_ctrl::Controller;
use nvmemu_mem::MmapRegion;
use nvmemu_spec::Cid;

use super::{Conn, ConnState, QueueIo, Slot};
use crate::pdu;

impl Conn {
    /// Turn the controller's completions into C2HData and response PDUs while the send
    /// buffer has room; returns how many were sent. `ctrl` is the queue's controller: a
    /// Read it served in place is sent from the namespace's memory.
    pub(crate) fn reap(&mut self, ctrl: &mut Controller, doorbells: &MmapRegion) -> usize {
        let neg = self.neg;
        let ConnState::Queue { q, .. } = &mut self.state else {
            return 0;
        };
        let QueueIo {
            mem,
            slots,
            free,
            sq_head,
            c2h_success,
            sendq,
            ..
        } = &mut **q;
        let mut next = mem.peek_cqe();
        if next.is_none() {
            return 0;
        }
        let hdrs = pdu::ReadHeaders::new(&neg, *c2h_success);
        let resp_len = hdrs.resp_plen();
        let mut done = 0;
        while let Some(mut cqe) = next {
            let i = cqe.cid;
            // The slot is matched in place: copying it out copied its whole SQE variant.
            let Some(slot) = slots.get_mut(usize::from(i)) else {
                // Not ours (cannot happen: every SQE we post names a submitted slot).
                mem.pop_cqe();
                next = mem.peek_cqe();
                continue;
            };
            let Slot::Submitted { cccid, len, read } = *slot else {
                mem.pop_cqe();
                next = mem.peek_cqe();
                continue;
            };
            let ok = cqe.status().is_success();
            let send_data = read && ok && len > 0;
            let success_flag = send_data && *c2h_success;
            let need = if send_data {
                hdrs.data_plen(len as usize)
            } else {
                0
            } + if success_flag { 0 } else { resp_len };
            // Without a data digest the data goes out from where it lies (spliced between
            // the C2HData header and what follows); with one, it is copied to be digested.
            let splice = send_data && !neg.ddgst;
            let bytes = need - if splice { len as usize } else { 0 };
            let Some(out) = self.tx.reserve(bytes) else {
                break;
            };
            // Taken for every Read, so no record outlives its command.
            let in_place = if read {
                ctrl.take_read_in_place(mem.qid, Cid(i))
                    .filter(|r| r.len() == u64::from(len))
            } else {
                None
            };
            let mut at = 0;
            if send_data {
                hdrs.data(out, cccid, len);
                at = hdrs.data_pdo();
                if !splice {
                    let l = hdrs.data_layout(len as usize);
                    let data = &mut out[l.pdo..l.pdo + len as usize];
                    let copied = match &in_place {
                        Some(r) => r.region().copy_to(r.offset(), data),
                        None => mem.read_slot(i, data),
                    };
                    if copied.is_err() {
                        data.fill(0);
                    }
                    pdu::finish_c2h_data(out, &l, &neg);
                    at = l.plen;
                }
            }
            if !success_flag {
                cqe.cid = cccid;
                hdrs.resp(&mut out[at..], &cqe);
            }
            *sq_head = cqe.sq_head;
            mem.pop_cqe();
            if splice {
                // The data goes between the header and what follows it.
                let slot_data = (mem.slot_off(i), u64::from(len));
                sendq.push(self.tx.len() + at, i, slot_data, in_place);
                *slot = Slot::Sending;
            } else {
                super::release_slot(slots, free, i);
            }
            self.tx.commit(bytes);
            done += 1;
            next = mem.peek_cqe();
        }
        if done > 0 {
            mem.ring_cq_head(doorbells);
        }
        done
    }

    /// Copy what is left unsent of read data still in a namespace's memory into the
    /// commands' slots (`SendQueue::settle`), and give the records copied back to the
    /// queue's controller (`ctrl`; None: it is gone, they are dropped). Called
    /// after each send, before the group's controllers run again. False: some data could
    /// not be copied, and the connection must be closed (`SendQueue::settle` says why).
    pub(crate) fn settle(&mut self, ctrl: Option<&mut Controller>) -> bool {
        let q = match &mut self.state {
            ConnState::Queue { q, .. }
            | ConnState::Closing {
                queue: Some((_, q)),
                ..
            } => q,
            _ => return true,
        };
        let QueueIo { mem, sendq, .. } = &mut **q;
        let qid = mem.qid;
        let mut ctrl = ctrl;
        let settled = sendq.settle(
            mem.region(),
            |slot| mem.slot_off(slot),
            |slot, record| {
                if let Some(c) = ctrl.as_deref_mut() {
                    c.give_back_read_in_place(qid, Cid(slot), record);
                }
            },
        );
        if let Err(e) = &settled {
            tracing::error!(peer = %self.peer, %e, "NVMe/TCP: unsent read data could not be copied out of the namespace; connection closed so the host sees no torn data");
        }
        settled.is_ok()
    }
}
