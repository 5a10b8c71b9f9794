// SPDX-License-Identifier: Apache-2.0
//! SPDK's error bdev end to end: `nvmemu rpc bdev_error_*` on the real server, and the
//! userspace driver over vfio-user meeting what was injected.

use super::*;
use nvmemu_spec::Sqe;

/// The reference set-up with the namespace on `EE_Malloc0` instead of `Malloc0`.
fn start_on_error_bdev() -> Server {
    let s = Server::start(&[]);
    s.ok(&["bdev_malloc_create", "64", "512", "-b", "Malloc0"]);
    assert_eq!(s.ok(&["bdev_error_create", "Malloc0"]), "true\n");
    let traddr = s.traddr();
    let traddr = traddr.to_str().expect("utf-8 path");
    s.ok(&["nvmf_create_transport", "-t", "VFIOUSER"]);
    s.ok(&["nvmf_create_subsystem", NQN, "-a"]);
    s.ok(&["nvmf_subsystem_add_ns", NQN, "EE_Malloc0"]);
    let listener = [
        "nvmf_subsystem_add_listener",
        NQN,
        "-t",
        "VFIOUSER",
        "-a",
        traddr,
    ];
    s.ok(&[&listener[..], &["-s", "0"]].concat());
    s
}

/// Abort (admin opcode 08h) of command `cid` on SQ `sqid`.
pub(super) fn abort(sqid: u16, cid: u16) -> Sqe {
    Sqe {
        cdw0: 0x08,
        cdw10: u32::from(sqid) | (u32::from(cid) << 16),
        ..Sqe::default()
    }
}

#[test]
fn a_driver_meets_failures_corrupt_reads_and_a_pending_command_it_aborts() {
    let s = start_on_error_bdev();
    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    buf.copy_from(0, &data).unwrap();
    q.write_blocking(Nsid(1), Lba(0), 8, &buf).unwrap();

    // failure: Internal Error, DNR clear, once.
    s.ok(&["bdev_error_inject_error", "EE_Malloc0", "write", "failure"]);
    let w = q
        .execute_raw(
            sqe::rw(IoOpcode::Write, Nsid(1), Lba(8), 1),
            Some((&buf, 512)),
        )
        .unwrap();
    assert_eq!(w.status(), Status::INTERNAL_ERROR, "DNR clear too");
    q.write_blocking(Nsid(1), Lba(8), 1, &buf).unwrap();
    // bdev_get_iostat: SPDK's FAILED on the error bdev; its base failed nothing, and has
    // the object all the same.
    let iostat = s.call("bdev_get_iostat", json!({})).unwrap();
    let io_error = |name: &str| {
        let b = iostat["bdevs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name);
        b.unwrap()["io_error"].clone()
    };
    assert_eq!(io_error("EE_Malloc0"), json!({"failed": 1}));
    assert_eq!(io_error("Malloc0"), json!({}));

    // corrupt_data: the read succeeds with one byte changed; reading again is right.
    let args = [
        "EE_Malloc0",
        "read",
        "corrupt_data",
        "-o",
        "100",
        "-v",
        "255",
    ];
    s.ok(&[&["bdev_error_inject_error"][..], &args].concat());
    let back = c.alloc_dma(4096).unwrap();
    q.read_blocking(Nsid(1), Lba(0), 8, &back).unwrap();
    let mut got = vec![0u8; 4096];
    back.copy_to(0, &mut got).unwrap();
    let differ: Vec<usize> = (0..4096).filter(|&i| got[i] != data[i]).collect();
    assert_eq!(differ, [100]);
    assert_eq!(got[100], data[100] ^ 0xFF);
    q.read_blocking(Nsid(1), Lba(0), 8, &back).unwrap();
    back.copy_to(0, &mut got).unwrap();
    assert_eq!(got, data, "the stored data is intact");

    // pending: never completes; the host's Abort ends it with Command Abort Requested.
    s.ok(&["bdev_error_inject_error", "EE_Malloc0", "read", "pending"]);
    let rd = sqe::rw(IoOpcode::Read, Nsid(1), Lba(0), 1);
    q.submit_raw(rd, Some((&back, 512)), 77).unwrap();
    q.ring().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut seen = Vec::new();
    q.poll_completions(8, |t, r| seen.push((t, r.map_err(|e| e.to_string()))))
        .unwrap();
    assert!(seen.is_empty(), "a pending command completed: {seen:?}");
    // The driver picks the CID: abort each until one was outstanding (DW0 bit 0 clear).
    let sqid = q.qid().0;
    let aborted = (0..32u16).find(|&cid| c.admin_raw(abort(sqid, cid)).unwrap().dw0 & 1 == 0);
    assert!(aborted.is_some(), "no command was aborted");
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.is_empty() {
        q.poll_completions(8, |t, r| seen.push((t, r.map_err(|e| e.to_string()))))
            .unwrap();
        assert!(
            Instant::now() < deadline,
            "the aborted command never completed"
        );
    }
    let abort_requested = format!("command failed with status {}", Status::ABORT_REQUESTED);
    assert_eq!(seen, [(77, Err(abort_requested))]);
    q.read_blocking(Nsid(1), Lba(0), 8, &back).unwrap();

    // The failure is in the Error Information log (count 1).
    let log = c.get_log_page(0x01, Nsid(0xFFFF_FFFF), 64, 0).unwrap();
    assert_eq!(u64::from_le_bytes(log[0..8].try_into().unwrap()), 1);
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

/// Reads of LBAs `0..n` (tokens 0..n) submitted with one doorbell write, and their
/// results, by token, once all have completed.
fn read_burst(
    q: &mut nvmemu_driver::IoQpair,
    buf: &nvmemu_driver::DmaBuf,
    n: u64,
) -> Vec<Result<u32, String>> {
    ring_reads(q, buf, n);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while (seen.len() as u64) < n {
        q.poll_completions(64, |t, r| seen.push((t, r.map_err(|e| e.to_string()))))
            .expect("poll the CQ");
        assert!(Instant::now() < deadline, "reads lost: {seen:?}");
    }
    seen.sort_by_key(|(t, _)| *t);
    seen.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn a_compare_that_differs_counts_as_spdks_miscompare() {
    let s = Server::start(&[]);
    s.reference_sequence();
    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &[0x5A; 512]).unwrap();
    q.write_blocking(Nsid(1), Lba(3), 1, &buf).unwrap();
    let compare = || sqe::rw(IoOpcode::Compare, Nsid(1), Lba(3), 1);
    let same = q.execute_raw(compare(), Some((&buf, 512))).unwrap();
    assert_eq!(same.status(), Status::SUCCESS);
    buf.copy_from(100, &[0xA5]).unwrap();
    let differs = q.execute_raw(compare(), Some((&buf, 512))).unwrap();
    assert_eq!(differs.status(), Status::COMPARE_FAILURE);
    let iostat = s
        .call("bdev_get_iostat", json!({"name": "Malloc0"}))
        .unwrap();
    assert_eq!(iostat["bdevs"][0]["io_error"], json!({"miscompare": 1}));
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

#[test]
fn queue_depth_hits_only_commands_taken_with_that_many_others_outstanding() {
    let s = start_on_error_bdev();
    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    // As SPDK's: the error hits while the I/O in flight beside the command is at least
    // queue_depth. Here a burst's first read is taken with the rest of it behind it.
    let args = ["EE_Malloc0", "read", "failure", "-n", "1", "-q", "4"];
    s.ok(&[&["bdev_error_inject_error"][..], &args].concat());
    let ok = Ok(0);
    assert_eq!(
        read_burst(&mut q, &buf, 4),
        vec![ok.clone(); 4],
        "3 others at most"
    );
    let failed = format!("command failed with status {}", Status::INTERNAL_ERROR);
    let five = read_burst(&mut q, &buf, 5);
    assert_eq!(five[0], Err(failed), "taken with 4 behind it");
    assert_eq!(five[1..], vec![ok.clone(); 4], "num 1 is spent");
    assert_eq!(read_burst(&mut q, &buf, 5), vec![ok; 5]);
    let rules = s
        .call("nvmemu_bdev_get_faults", json!({"name": "EE_Malloc0"}))
        .unwrap();
    let rule = &rules[0]["faults"][0];
    assert_eq!(
        (&rule["queue_depth"], &rule["matched"], &rule["injected"]),
        (&json!(4), &json!(1), &json!(1)),
        "only the one read taken at depth matched"
    );
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}
