// SPDX-License-Identifier: Apache-2.0
//! Controller-level faults end to end: `nvmemu rpc nvmemu_controller_inject_fatal` and
//! `nvmemu_namespace_inject_not_ready` on the real server, and the userspace driver over
//! vfio-user meeting them: CSTS.CFS seen, a reset (CC.EN 1 -> 0) and a new attach bring
//! I/O back; Namespace Not Ready with and without DNR until cleared; what
//! `nvmemu_controller_get_faults` and `nvmemu stat` report of both.

use super::*;
use nvmemu_spec::regs::csts;

/// Submits reads of LBAs `0..n` (tokens 0..n) and collects what completes within `wait`.
fn reads_completed(
    q: &mut nvmemu_driver::IoQpair,
    buf: &nvmemu_driver::DmaBuf,
    n: u64,
    wait: Duration,
) -> Vec<(u64, Result<u32, String>)> {
    ring_reads(q, buf, n);
    let mut seen = Vec::new();
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        q.poll_completions(64, |t, r| seen.push((t, r.map_err(|e| e.to_string()))))
            .expect("poll the CQ");
        std::thread::sleep(Duration::from_millis(5));
    }
    seen
}

#[test]
fn an_injected_fatal_status_is_seen_in_csts_and_a_reset_brings_io_back() {
    let s = Server::start(&[]);
    s.reference_sequence();
    // Nobody has the controller enabled yet: failing it now is refused, and changes nothing.
    let (code, msg) = rpc_code(s.call("nvmemu_controller_inject_fatal", json!({"nqn": NQN})));
    assert_eq!(code, -16, "{msg}");
    assert!(msg.contains("not enabled"), "{msg}");
    let (code, msg) = rpc_code(s.call(
        "nvmemu_controller_inject_fatal",
        json!({"nqn": NQN, "cntlid": 99}),
    ));
    assert_eq!(code, -19, "{msg}");
    let (code, _) = rpc_code(s.call(
        "nvmemu_controller_inject_fatal",
        json!({"nqn": "nqn.x:none"}),
    ));
    assert_eq!(code, -32602);

    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
    buf.copy_from(0, &data).unwrap();
    q.write_blocking(Nsid(1), Lba(0), 8, &buf).unwrap();

    // Two more I/O commands run; the third finds the controller fatal and never completes.
    s.ok(&["nvmemu_controller_inject_fatal", NQN, "-a", "2"]);
    let seen = reads_completed(&mut q, &buf, 4, Duration::from_millis(500));
    assert_eq!(seen, [(0, Ok(0)), (1, Ok(0))]);
    assert_eq!(c.csts().unwrap(), csts::CFS | csts::RDY);
    // The host resets it (shutdown sees CFS and clears CC.EN) and attaches again.
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    let mut c = attach(&s.traddr());
    assert_eq!(c.csts().unwrap(), csts::RDY);
    let mut q = c.take_qpair().unwrap();
    let back = c.alloc_dma(4096).unwrap();
    q.read_blocking(Nsid(1), Lba(0), 8, &back).unwrap();
    let mut got = vec![0u8; 4096];
    back.copy_to(0, &mut got).unwrap();
    assert_eq!(got, data, "the namespace kept its data over the reset");

    // Now, by CNTLID (the reference listener's controller is 1).
    s.ok(&["nvmemu_controller_inject_fatal", NQN, "-c", "1"]);
    assert_eq!(c.csts().unwrap(), csts::CFS | csts::RDY);
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

#[test]
fn a_namespace_not_ready_fails_io_with_82h_and_the_dnr_asked_until_cleared() {
    let s = Server::start(&[]);
    s.reference_sequence();
    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    let read = || sqe::rw(IoOpcode::Read, Nsid(1), Lba(0), 1);
    for (args, dnr) in [(&[][..], false), (&["--dnr"][..], true)] {
        s.ok(&[&["nvmemu_namespace_inject_not_ready", NQN, "1"][..], args].concat());
        let r = q.execute_raw(read(), Some((&buf, 512))).unwrap();
        assert_eq!(r.status(), Status::NAMESPACE_NOT_READY.with_dnr(dnr));
        // Admin commands still answer.
        assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1)]);
    }
    s.ok(&["nvmemu_namespace_inject_not_ready", NQN, "1", "--clear"]);
    q.read_blocking(Nsid(1), Lba(0), 1, &buf).unwrap();
    let (code, msg) = rpc_code(s.call(
        "nvmemu_namespace_inject_not_ready",
        json!({"nqn": NQN, "nsid": 7}),
    ));
    assert_eq!(code, -2, "{msg}");
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

/// `nvmemu_controller_get_faults` for the reference subsystem: its one controller and
/// its one namespace.
fn ctrl_faults(s: &Server) -> (Value, Value) {
    let v = s
        .call("nvmemu_controller_get_faults", json!({"nqn": NQN}))
        .expect("nvmemu_controller_get_faults");
    assert_eq!(v[0]["nqn"], json!(NQN));
    (
        v[0]["controllers"][0].clone(),
        v[0]["namespaces"][0].clone(),
    )
}

fn unix_ms() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970");
    u64::try_from(d.as_millis()).expect("milliseconds fit 64 bits")
}

#[test]
fn injections_show_in_get_faults_and_stat_with_the_counts_the_driver_saw() {
    let s = Server::start(&[]);
    s.reference_sequence();
    let (ctrl, ns) = ctrl_faults(&s);
    assert_eq!(
        ctrl,
        json!({"cntlid": 1, "traddr": s.traddr().to_str().unwrap(),
               "fatal_armed_after_commands": null, "fatal_injected": 0,
               "fatal_last_injected_ms": null, "fatal_in_effect": false,
               "fatal_cleared_by_reset": 0})
    );
    assert_eq!(
        ns,
        json!({"nsid": 1, "bdev_name": "Malloc0", "not_ready": false, "dnr": false,
               "not_ready_commands": 0})
    );
    assert!(!s.stat(&[]).contains("not ready"), "nothing injected yet");
    let (code, _) = rpc_code(s.call("nvmemu_controller_get_faults", json!({"nqn": "nqn.x:none"})));
    assert_eq!(code, -32602);

    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    // Not ready, with DNR: each read the driver sends is answered with it, and counted.
    s.ok(&["nvmemu_namespace_inject_not_ready", NQN, "1", "--dnr"]);
    let read = || sqe::rw(IoOpcode::Read, Nsid(1), Lba(0), 1);
    let refused = (0..3)
        .filter(|_| {
            let r = q.execute_raw(read(), Some((&buf, 512))).unwrap();
            r.status() == Status::NAMESPACE_NOT_READY.with_dnr(true)
        })
        .count();
    assert_eq!(refused, 3);
    let (_, ns) = ctrl_faults(&s);
    assert_eq!(
        (&ns["not_ready"], &ns["dnr"], &ns["not_ready_commands"]),
        (&json!(true), &json!(true), &json!(3))
    );
    s.ok(&["nvmemu_namespace_inject_not_ready", NQN, "1", "--clear"]);
    q.read_blocking(Nsid(1), Lba(0), 1, &buf).unwrap();

    // Fatal after 2 more commands: armed, then fired on the third; the time is now.
    s.ok(&["nvmemu_controller_inject_fatal", NQN, "-a", "2"]);
    assert_eq!(ctrl_faults(&s).0["fatal_armed_after_commands"], json!(2));
    let before = unix_ms();
    let seen = reads_completed(&mut q, &buf, 3, Duration::from_millis(300));
    assert_eq!(seen.len(), 2);
    assert_eq!(c.csts().unwrap(), csts::CFS | csts::RDY);
    let (ctrl, ns) = ctrl_faults(&s);
    assert_eq!(ctrl["fatal_armed_after_commands"], json!(null));
    assert_eq!(
        (&ctrl["fatal_injected"], &ctrl["fatal_in_effect"]),
        (&json!(1), &json!(true))
    );
    let at = ctrl["fatal_last_injected_ms"].as_u64().unwrap();
    assert!(
        (before..=unix_ms()).contains(&at),
        "{at} not in [{before}, now]"
    );
    assert_eq!(
        ns["not_ready_commands"],
        json!(3),
        "the clear kept the count"
    );

    // `nvmemu stat` shows both, as JSON and as text.
    let report: Value = serde_json::from_str(&s.stat(&["--output-format=json"])).unwrap();
    let fatal = &report["controller_faults"][0];
    assert_eq!(
        (&fatal["cntlid"], &fatal["injected"], &fatal["in_effect"]),
        (&json!(1), &json!(1), &json!(true))
    );
    let nr = &report["namespace_faults"][0];
    assert_eq!(
        (&nr["nsid"], &nr["not_ready"], &nr["commands"]),
        (&json!(1), &json!(false), &json!(3))
    );
    let text = s.stat(&[]);
    assert!(text.contains("CSTS.CFS set 1 times"), "{text}");
    assert!(
        text.contains("now set until the host resets the controller"),
        "{text}"
    );
    assert!(
        text.contains("nsid 1 (Malloc0): ready again, 3 commands answered Not Ready"),
        "{text}"
    );

    // The host resets the controller: the record says a reset cleared it.
    drop(q);
    c.shutdown().unwrap();
    let (ctrl, _) = ctrl_faults(&s);
    assert_eq!(
        (&ctrl["fatal_in_effect"], &ctrl["fatal_cleared_by_reset"]),
        (&json!(false), &json!(1))
    );
    assert!(
        s.stat(&[])
            .contains("now not set; cleared by reset 1 times")
    );
    s.kill();
}

#[test]
fn a_namespace_removed_under_io_finishes_what_it_took_and_refuses_the_rest() {
    let s = Server::start(&[]);
    s.reference_sequence();
    // Reads take 2 s, so those submitted before the removal are still held in the
    // controller when it happens.
    s.ok(&[
        "nvmemu_bdev_set_model",
        "Malloc0",
        "--avg-read-latency",
        "2000000",
        "--p99-read-latency",
        "2000000",
    ]);
    let mut c = attach(&s.traddr());
    c.set_features(0x0B, 1 << 8).unwrap();
    c.submit_async_event_request().unwrap();
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    let read = || sqe::rw(IoOpcode::Read, Nsid(1), Lba(0), 1);
    for token in 0..8 {
        q.submit_raw(read(), Some((&buf, 512)), token).unwrap();
    }
    q.ring().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut seen = Vec::new();
    q.poll_completions(64, |t, r| seen.push((t, r.map_err(|e| e.to_string()))))
        .unwrap();
    assert!(seen.is_empty(), "the model holds them: {seen:?}");
    s.ok(&["nvmf_subsystem_remove_ns", NQN, "1"]);
    for token in 8..12 {
        q.submit_raw(read(), Some((&buf, 512)), token).unwrap();
    }
    q.ring().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 12 {
        q.poll_completions(64, |t, r| seen.push((t, r.map_err(|e| e.to_string()))))
            .unwrap();
        assert!(Instant::now() < deadline, "reads lost: {seen:?}");
    }
    seen.sort_by_key(|(t, _)| *t);
    let invalid_ns = format!("command failed with status {}", Status::INVALID_NAMESPACE);
    for (t, r) in &seen {
        if *t < 8 {
            assert_eq!(r, &Ok(0), "read {t}, taken before the removal, finishes");
        } else {
            assert_eq!(r.as_ref().err(), Some(&invalid_ns), "read {t}");
        }
    }
    // Namespace Attribute Changed, and the Changed Namespace List names NSID 1.
    let deadline = Instant::now() + Duration::from_secs(30);
    let event = loop {
        if let Some(cqe) = c.poll_async_events().unwrap().first() {
            break cqe.dw0;
        }
        assert!(Instant::now() < deadline, "no asynchronous event");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(event, 0x04_00_02);
    let page = c.get_log_page(0x04, Nsid(0xFFFF_FFFF), 8, 0).unwrap();
    assert_eq!(page, [1, 0, 0, 0, 0, 0, 0, 0]);
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}
