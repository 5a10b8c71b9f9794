// SPDX-License-Identifier: Apache-2.0
//! A hostile host driving a real controller: arbitrary SQEs (their PRP and SGL pointers land
//! inside and outside client memory), arbitrary doorbell and register writes, arbitrary bytes
//! anywhere in client memory (PRP lists, SGL segments, queue rings), polls in between.
//!
//! Invariants checked, beyond "no panic": a BAR0 access the controller refuses is an error,
//! never a crash; and while the host has rung only its own doorbells, written no register,
//! left the rings alone and sent no queue-management command, every completion on CQ 1 names
//! SQ 1 with an SQ head inside the ring, and CQ 1 never holds more entries than were submitted.
#![no_main]

use nvmemu_ctrl::test_utils::{TestHost, layout};
use nvmemu_spec::Cqe;

/// Entries of I/O queue pair 1.
const QSIZE: u32 = 16;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut h = TestHost::lazy();
    if h.enable() & 1 != 1 {
        return;
    }
    h.create_io_pair(1, QSIZE);
    let mut sane = true; // no arbitrary doorbell or register write yet
    let mut submitted = 0u64;
    let mut reaped = 0u64;
    let mut ops = data;
    while let Some((&op, rest)) = ops.split_first() {
        ops = rest;
        match op % 6 {
            // A raw 64-byte SQE on the admin (even op) or I/O queue, then its doorbell.
            0 | 1 => {
                let Some((bytes, rest)) = ops.split_at_checked(64) else {
                    return;
                };
                ops = rest;
                let qid = u16::from(op % 2 == 1);
                // Queue management on the admin queue can re-create queue 1 under the
                // host's ring positions: the completion count is no longer bounded.
                if qid == 0 && matches!(bytes[0], 0x00 | 0x01 | 0x04 | 0x05) {
                    sane = false;
                }
                let q = h.queues[usize::from(qid)].as_mut().expect("queue");
                let at = q.sq_off + u64::from(q.sq_tail) * 64;
                h.mem.write(at, bytes);
                q.sq_tail = (q.sq_tail + 1) % q.size;
                let tail = q.sq_tail;
                let _ = h.doorbells.store_release_u32(u64::from(qid) * 8, tail);
                if qid == 1 {
                    submitted += 1;
                }
            }
            // An arbitrary doorbell write (any queue, any value) through BAR0.
            2 => {
                let Some((b, rest)) = ops.split_at_checked(6) else {
                    return;
                };
                ops = rest;
                let off = 0x1000 + u64::from(u16::from_le_bytes([b[0], b[1]]) & 0x0FFC);
                let _ = h.ctrl.mmio_write(off, &b[2..6]);
                sane = false;
            }
            // Arbitrary bytes anywhere in client memory (lists, rings, data).
            3 => {
                let Some((b, rest)) = ops.split_at_checked(5) else {
                    return;
                };
                ops = rest;
                let len = usize::from(b[4] % 64);
                let Some((bytes, rest)) = ops.split_at_checked(len) else {
                    return;
                };
                ops = rest;
                let at =
                    u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) % (layout::SIZE - 64);
                h.mem.write(at, bytes);
                if (layout::IO_SQ..layout::DATA).contains(&at) {
                    sane = false; // a ring (or the list area) rewritten under the controller
                }
            }
            // An arbitrary register access below the doorbells (CC, AQA, INTMS, ...).
            4 => {
                let Some((b, rest)) = ops.split_at_checked(6) else {
                    return;
                };
                ops = rest;
                let off = u64::from(u16::from_le_bytes([b[0], b[1]]) % 0x1000);
                let _ = h.ctrl.mmio_write(off, &b[2..6]);
                let mut back = [0u8; 4];
                let _ = h.ctrl.mmio_read(off, &mut back);
                sane = false;
            }
            // Poll, then take what CQ 1 shows as new.
            _ => {
                h.poll();
                while let Some(c) = take_cq1(&mut h) {
                    let _ = c.status();
                    if sane {
                        check(&c);
                    }
                    reaped += 1;
                    assert!(
                        !sane || reaped <= submitted,
                        "{reaped} completions for {submitted} submissions"
                    );
                }
            }
        }
    }
});

/// Reap one new CQE of CQ 1 (phase tag matches), as a driver would, without `TestHost::reap`'s
/// assumption that queue 1 still exists in the same shape.
fn take_cq1(h: &mut TestHost) -> Option<Cqe> {
    let q = h.queues[1].as_ref()?;
    let cqe: Cqe = h.mem.read_obj(q.cq_off + u64::from(q.cq_head) * 16);
    if cqe.phase() != q.phase {
        return None;
    }
    h.reap(1)
}

/// What a completion on CQ 1 must look like while the host has only submitted sane work.
fn check(c: &Cqe) {
    assert_eq!(c.sq_id, 1, "a CQ 1 entry names SQ {}", c.sq_id);
    assert!(
        u32::from(c.sq_head) < QSIZE,
        "SQ head {} outside the ring",
        c.sq_head
    );
}
