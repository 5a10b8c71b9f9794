// SPDX-License-Identifier: Apache-2.0
//! Namespaces added and removed under an attached driver, and SIGTERM with one attached.

use super::*;

/// Polls until the controller completes an outstanding AER.
fn wait_event(c: &mut AttachedController) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = c.poll_async_events().expect("poll AERs");
        if let Some(cqe) = events.first() {
            assert_eq!(events.len(), 1);
            assert!(cqe.status().is_success(), "{:?}", cqe.status());
            return cqe.dw0;
        }
        assert!(Instant::now() < deadline, "no asynchronous event");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Changed Namespace List (LID 04h): the NSIDs it lists.
fn changed_namespaces(c: &mut AttachedController) -> Vec<u32> {
    let page = c
        .get_log_page(0x04, Nsid(0xFFFF_FFFF), 4096, 0)
        .expect("Changed Namespace List");
    page.chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .take_while(|&n| n != 0)
        .collect()
}

/// Namespace Attribute Changed: Notice (type 2), information 00h, log page 04h.
const NS_ATTR_CHANGED_DW0: u32 = 0x04_00_02;

#[test]
fn namespace_hot_add_and_remove_reach_an_attached_driver_by_async_event() {
    let s = Server::start(&[]);
    s.reference_sequence();
    let mut c = attach(&s.traddr());
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1)]);
    // Namespace Attribute Notices on (Asynchronous Event Configuration, FID 0Bh, bit 8).
    c.set_features(0x0B, 1 << 8).unwrap();
    c.submit_async_event_request().unwrap();

    assert_eq!(
        s.ok(&["bdev_malloc_create", "8", "4096", "-b", "Malloc1"]),
        "Malloc1\n"
    );
    assert_eq!(
        c.poll_async_events().unwrap(),
        vec![],
        "creating a bdev is no event"
    );
    assert_eq!(s.ok(&["nvmf_subsystem_add_ns", NQN, "Malloc1"]), "");
    assert_eq!(wait_event(&mut c), NS_ATTR_CHANGED_DW0);
    assert_eq!(changed_namespaces(&mut c), vec![2]);
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1), Nsid(2)]);
    let id = c.identify_namespace(Nsid(2)).unwrap();
    assert_eq!((id.nsze, id.lba_size()), (8 * 256, Some(4096)));

    // The new namespace takes I/O.
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &[0x5A; 4096]).unwrap();
    let w = q
        .execute_raw(
            sqe::rw(IoOpcode::Write, Nsid(2), Lba(3), 1),
            Some((&buf, 4096)),
        )
        .unwrap();
    assert!(w.status().is_success());

    // Hot remove with reads in flight, by deleting the bdev as SPDK users do: each read
    // completes (successfully, or with Invalid Namespace if it was fetched after the
    // removal); none is lost. Then another event, the log lists the NSID again, and I/O to
    // it fails while namespace 1 is untouched.
    c.submit_async_event_request().unwrap();
    let inflight = 24u64;
    for i in 0..inflight {
        let rd = sqe::rw(IoOpcode::Read, Nsid(2), Lba(i % 8), 1);
        q.submit_raw(rd, Some((&buf, 4096)), i).unwrap();
    }
    q.ring().unwrap();
    s.ok(&["bdev_malloc_delete", "Malloc1"]);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while (seen.len() as u64) < inflight {
        q.poll_completions(64, |token, r| {
            seen.push((token, r.map_err(|e| e.to_string())))
        })
        .unwrap();
        assert!(Instant::now() < deadline, "in-flight reads lost: {seen:?}");
    }
    let invalid_ns = format!("command failed with status {}", Status::INVALID_NAMESPACE);
    for (token, r) in &seen {
        assert!(
            r.is_ok() || r.as_ref().err() == Some(&invalid_ns),
            "read {token}: {r:?}"
        );
    }
    let mut tokens: Vec<u64> = seen.iter().map(|(t, _)| *t).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, (0..inflight).collect::<Vec<_>>());
    assert_eq!(wait_event(&mut c), NS_ATTR_CHANGED_DW0);
    assert_eq!(changed_namespaces(&mut c), vec![2]);
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1)]);
    let r = q
        .execute_raw(
            sqe::rw(IoOpcode::Read, Nsid(2), Lba(3), 1),
            Some((&buf, 4096)),
        )
        .unwrap();
    assert_eq!(
        r.status().with_dnr(false),
        Status::INVALID_NAMESPACE.with_dnr(false)
    );
    q.write_blocking(Nsid(1), Lba(0), 8, &buf).unwrap();
    // The bdev went with its namespace.
    assert_eq!(
        rpc_code(s.call("bdev_get_bdevs", json!({"name": "Malloc1"}))).0,
        -19
    );
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

#[test]
fn sigterm_with_a_driver_attached_shuts_down_cleanly() {
    let mut s = Server::start(&[]);
    s.reference_sequence();
    let c = attach(&s.traddr());
    let pid = s.child.as_ref().expect("child").id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
    let status = s.child.take().expect("child").wait().unwrap();
    assert!(status.success(), "nvmemu serve exited with {status}");
    assert!(!s.sock().exists(), "RPC socket removed");
    assert!(
        !s.traddr().join("cntrl").exists(),
        "controller socket removed"
    );
    // The driver finds the device gone; dropping it must not hang or panic.
    drop(c);
}
