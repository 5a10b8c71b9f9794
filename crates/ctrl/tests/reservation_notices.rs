// SPDX-License-Identifier: Apache-2.0
//! Reservation notifications between two controllers sharing one namespace: the
//! Reservation Notification log page (80h), the "Reservation Log Page Available"
//! asynchronous event, and the Reservation Notification Mask and Reservation Persistence
//! features (82h, 83h).

use nvmemu_ctrl::test_utils::{TestHost, bare, get_feature, get_log, layout, set_feature};
use nvmemu_spec::{Cid, Sqe, Status};

mod resv_common;

use resv_common::*;

/// CQE DW0 of "I/O command specific: Reservation Log Page Available, LID 80h".
const RESERVATION_EVENT: u32 = 0x0080_0006;
const REGISTRATION_PREEMPTED: u8 = 1;
const RESERVATION_RELEASED: u8 = 2;
const RESERVATION_PREEMPTED: u8 = 3;
const WRITE_EXCLUSIVE_REGISTRANTS_ONLY: u8 = 3;

/// One Reservation Notification page: (log page count, type, available after it, NSID).
fn notice_page(h: &mut TestHost, rae: bool) -> (u64, u8, u8, u32) {
    h.mem.write(layout::ADMIN_DATA, &[0xEE; 64]);
    let mut s = get_log(h, 0x80, 16, 0, 0);
    s.cdw10 |= u32::from(rae) << 15;
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    let d = h.mem.read_vec(layout::ADMIN_DATA, 64);
    assert!(d[16..].iter().all(|&b| b == 0), "reserved bytes are zero");
    (
        u64::from_le_bytes(d[0..8].try_into().expect("8 bytes")),
        d[8],
        d[9],
        u32::from_le_bytes(d[12..16].try_into().expect("4 bytes")),
    )
}

/// Hold one Asynchronous Event Request on `h`.
fn arm(h: &mut TestHost) -> Cid {
    let cid = h.submit(0, bare(0x0C));
    assert_eq!(h.poll(), 0, "the request is held");
    cid
}

/// The event that completed a held request, if one did.
fn event(h: &mut TestHost) -> Option<(u16, u32)> {
    h.poll();
    h.reap(0).map(|c| (c.cid, c.dw0))
}

/// A registered with key 0xA, B with 0xB.
fn registered_pair() -> (TestHost, TestHost) {
    let (mut a, mut b) = pair();
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    (a, b)
}

#[test]
fn a_preempt_notifies_the_preempted_controller_and_not_the_preempting_one() {
    let (mut a, mut b) = registered_pair();
    assert_eq!(acquire(&mut b, 0, WRITE_EXCLUSIVE, 0xB, 0), Status::SUCCESS);
    arm(&mut a);
    let b_cid = arm(&mut b);
    assert_eq!(
        acquire(&mut a, 1, WRITE_EXCLUSIVE, 0xA, 0xB),
        Status::SUCCESS
    );

    assert_eq!(event(&mut b), Some((b_cid.0, RESERVATION_EVENT)));
    assert_eq!(event(&mut a), None, "the preempting host hears nothing");
    assert_eq!(
        notice_page(&mut b, false),
        (1, REGISTRATION_PREEMPTED, 0, 1)
    );
    assert_eq!(
        notice_page(&mut b, false),
        (0, 0, 0, 0),
        "read pages are gone"
    );
    assert_eq!(notice_page(&mut a, false), (0, 0, 0, 0));
}

#[test]
fn releasing_a_registrants_only_reservation_tells_the_other_registrants() {
    let (mut a, mut b) = registered_pair();
    assert_eq!(
        acquire(&mut a, 0, WRITE_EXCLUSIVE_REGISTRANTS_ONLY, 0xA, 0),
        Status::SUCCESS
    );
    let cid = arm(&mut b);
    assert_eq!(
        release(&mut a, 0, WRITE_EXCLUSIVE_REGISTRANTS_ONLY, 0xA),
        Status::SUCCESS
    );
    assert_eq!(event(&mut b), Some((cid.0, RESERVATION_EVENT)));
    assert_eq!(notice_page(&mut b, false), (1, RESERVATION_RELEASED, 0, 1));

    // Write Exclusive gives the others no access: releasing it tells nobody (as SPDK).
    assert_eq!(acquire(&mut a, 0, WRITE_EXCLUSIVE, 0xA, 0), Status::SUCCESS);
    assert_eq!(release(&mut a, 0, WRITE_EXCLUSIVE, 0xA), Status::SUCCESS);
    b.poll();
    assert_eq!(notice_page(&mut b, false), (0, 0, 0, 0));
}

#[test]
fn a_masked_notification_makes_no_page_and_no_event() {
    let (mut a, mut b) = registered_pair();
    let mask = Sqe {
        nsid: 1,
        ..set_feature(0x82, 1 << REGISTRATION_PREEMPTED)
    };
    assert_eq!(b.admin(mask).status(), Status::SUCCESS);
    let get = Sqe {
        nsid: 1,
        ..get_feature(0x82, 0, 0)
    };
    assert_eq!(b.admin(get).dw0, 1 << REGISTRATION_PREEMPTED);
    arm(&mut b);
    assert_eq!(
        acquire(&mut a, 1, WRITE_EXCLUSIVE, 0xA, 0xB),
        Status::SUCCESS
    );
    assert_eq!(event(&mut b), None);
    assert_eq!(notice_page(&mut b, false), (0, 0, 0, 0));

    // Another type still gets through.
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    assert_eq!(release(&mut a, 1, 0, 0xA), Status::SUCCESS);
    assert!(event(&mut b).is_some());
    assert_eq!(notice_page(&mut b, false), (1, RESERVATION_PREEMPTED, 0, 1));
}

#[test]
fn pages_queue_with_rising_counts_and_the_event_rearms_when_the_log_is_read() {
    let (mut a, mut b) = pair();
    let first = arm(&mut b);
    let second = arm(&mut b);
    for _ in 0..2 {
        assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
        assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
        assert_eq!(release(&mut a, 1, 0, 0xA), Status::SUCCESS);
    }
    assert_eq!(event(&mut b), Some((first.0, RESERVATION_EVENT)));
    assert_eq!(event(&mut b), None, "masked until the log is read");
    // RAE keeps the event masked even though the page is taken.
    assert_eq!(notice_page(&mut b, true), (1, RESERVATION_PREEMPTED, 1, 1));
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(release(&mut a, 1, 0, 0xA), Status::SUCCESS);
    assert_eq!(event(&mut b), None);
    assert_eq!(notice_page(&mut b, false), (2, RESERVATION_PREEMPTED, 1, 1));
    assert_eq!(notice_page(&mut b, false), (3, RESERVATION_PREEMPTED, 0, 1));
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(release(&mut a, 1, 0, 0xA), Status::SUCCESS);
    assert_eq!(event(&mut b), Some((second.0, RESERVATION_EVENT)));
}

#[test]
fn a_full_log_loses_pages_and_the_count_shows_how_many() {
    let (mut a, mut b) = pair();
    const ROUNDS: u64 = 300;
    for _ in 0..ROUNDS {
        assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
        assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
        assert_eq!(release(&mut a, 1, 0, 0xA), Status::SUCCESS);
    }
    let (count, _, left, _) = notice_page(&mut b, false);
    assert_eq!((count, left), (1, 254), "255 pages kept");
    let mut last = (count, left);
    while last.1 > 0 {
        let (count, _, left, _) = notice_page(&mut b, false);
        last = (count, left);
    }
    assert_eq!(last.0, ROUNDS, "the newest page carries the latest count");
    assert_eq!(notice_page(&mut b, false).0, 0);
}

#[test]
fn reservation_features_check_the_namespace_and_refuse_ptpl() {
    let (mut a, _b) = pair();
    let with_ns = |nsid: u32, s: Sqe| Sqe { nsid, ..s };
    for fid in [0x82, 0x83] {
        let s = with_ns(0xFFFF_FFFF, get_feature(fid, 0, 0));
        assert_eq!(a.admin(s).status(), Status::INVALID_FIELD);
        for nsid in [0, 9] {
            let s = with_ns(nsid, get_feature(fid, 0, 0));
            assert_eq!(a.admin(s).status(), Status::INVALID_NAMESPACE);
            let s = with_ns(nsid, set_feature(fid, 0));
            assert_eq!(a.admin(s).status(), Status::INVALID_NAMESPACE);
        }
        let caps = a.admin(with_ns(1, get_feature(fid, 3, 0)));
        assert_eq!((caps.status(), caps.dw0), (Status::SUCCESS, 0b110));
    }
    let ptpl_on = with_ns(1, set_feature(0x83, 1));
    assert_eq!(a.admin(ptpl_on).status(), Status::INVALID_FIELD);
    let ptpl = a.admin(with_ns(1, get_feature(0x83, 0, 0)));
    assert_eq!((ptpl.status(), ptpl.dw0), (Status::SUCCESS, 0));
    let all = with_ns(0xFFFF_FFFF, set_feature(0x82, 0xFFFF_FFFF));
    assert_eq!(a.admin(all).status(), Status::SUCCESS);
    let mask = a.admin(with_ns(1, get_feature(0x82, 0, 0)));
    assert_eq!(mask.dw0, 0b1110, "only the three defined bits are kept");
}
