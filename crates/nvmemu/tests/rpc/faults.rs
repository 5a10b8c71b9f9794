// SPDX-License-Identifier: Apache-2.0
//! nvmemu's fault rules end to end: `nvmemu rpc nvmemu_bdev_inject_fault` on the real
//! server, the userspace driver over vfio-user meeting each action and trigger, and what
//! the host and the RPCs read back (Error Information and SMART logs, `bdev_get_iostat`,
//! the rules' counters).

use super::errors::abort;
use super::*;
use nvmemu_driver::{DmaBuf, IoQpair};
use nvmemu_spec::Sqe;

/// The reference set-up, a driver attached, and 16 blocks written.
fn start() -> (Server, AttachedController, IoQpair, DmaBuf) {
    let s = Server::start(&[]);
    s.reference_sequence();
    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().expect("an I/O queue pair");
    let buf = c.alloc_dma(8192).expect("a DMA buffer");
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 13) as u8).collect();
    buf.copy_from(0, &data).expect("fill the buffer");
    q.write_blocking(Nsid(1), Lba(0), 16, &buf)
        .expect("write 16 blocks");
    (s, c, q, buf)
}

/// `nvmemu rpc nvmemu_bdev_inject_fault Malloc0 ARGS...`: the rule's id.
fn inject(s: &Server, args: &[&str]) -> u32 {
    let out = s.ok(&[&["nvmemu_bdev_inject_fault", "Malloc0"][..], args].concat());
    out.trim().parse().expect("a rule id")
}

fn rules(s: &Server) -> Vec<Value> {
    let v = s
        .call("nvmemu_bdev_get_faults", json!({"name": "Malloc0"}))
        .expect("nvmemu_bdev_get_faults");
    v[0]["faults"].as_array().expect("a list of rules").clone()
}

fn status_of(q: &mut IoQpair, sqe: Sqe, buf: &DmaBuf) -> Status {
    let blocks = (sqe.cdw12 & 0xFFFF) + 1;
    let bytes = u64::from(blocks) * 512;
    q.execute_raw(sqe, Some((buf, bytes)))
        .expect("a completion")
        .status()
}

fn read(slba: u64, blocks: u32) -> Sqe {
    sqe::rw(IoOpcode::Read, Nsid(1), Lba(slba), blocks)
}

fn write(slba: u64, blocks: u32) -> Sqe {
    sqe::rw(IoOpcode::Write, Nsid(1), Lba(slba), blocks)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[test]
fn an_unrecovered_read_error_on_a_range_lands_in_the_logs_and_iostat() {
    let (s, mut c, mut q, buf) = start();
    let args = ["--io-type", "read", "--sct", "2", "--sc", "0x81"];
    let range = ["--lba-start", "8", "--lba-count", "4", "--count", "0"];
    inject(&s, &[&args[..], &range].concat());
    assert_eq!(status_of(&mut q, read(0, 8), &buf), Status::SUCCESS);
    assert_eq!(
        status_of(&mut q, read(6, 4), &buf),
        Status::UNRECOVERED_READ_ERROR,
        "overlaps the range"
    );
    assert_eq!(status_of(&mut q, read(12, 1), &buf), Status::SUCCESS);
    assert_eq!(status_of(&mut q, write(9, 1), &buf), Status::SUCCESS);
    assert_eq!(
        status_of(&mut q, read(9, 2), &buf),
        Status::UNRECOVERED_READ_ERROR
    );

    // Error Information: the newest entry names the command's LBA and namespace.
    let log = c.get_log_page(0x01, Nsid(0xFFFF_FFFF), 64, 0).unwrap();
    assert_eq!(le_u64(&log, 0), 2, "error count");
    let status_field = u16::from_le_bytes([log[12], log[13]]) >> 1;
    assert_eq!(status_field, Status::UNRECOVERED_READ_ERROR.to_field());
    assert_eq!(le_u64(&log, 16), 9, "LBA");
    assert_eq!(u32::from_le_bytes(log[24..28].try_into().unwrap()), 1);
    // SMART / Health: Media and Data Integrity Errors (byte 160), error log entries (176).
    let smart = c.get_log_page(0x02, Nsid(0xFFFF_FFFF), 512, 0).unwrap();
    assert_eq!(le_u64(&smart, 160), 2);
    assert_eq!(le_u64(&smart, 176), 2);

    let iostat = s
        .call("bdev_get_iostat", json!({"name": "Malloc0"}))
        .unwrap();
    assert_eq!(iostat["bdevs"][0]["io_error"], json!({"nvme_error": 2}));
    let r = &rules(&s)[0];
    assert_eq!(
        (r["action"].clone(), r["sc"].clone()),
        (json!("status"), json!(0x81))
    );
    assert_eq!(
        (r["matched"].clone(), r["injected"].clone()),
        (json!(2), json!(2))
    );
    // `nvmemu stat` shows the rule with its counters.
    let report: Value = serde_json::from_str(&s.stat(&["--output-format=json"])).unwrap();
    let f = &report["faults"][0];
    assert_eq!(
        (f["bdev"].clone(), f["injected"].clone()),
        (json!("Malloc0"), json!(2))
    );
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

#[test]
fn drop_waits_for_abort_delay_posts_late_and_corrupt_flips_a_byte() {
    let (s, mut c, mut q, buf) = start();
    inject(&s, &["--io-type", "read", "--action", "drop"]);
    q.submit_raw(read(0, 1), Some((&buf, 512)), 5).unwrap();
    q.ring().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut seen = Vec::new();
    let reap = |q: &mut IoQpair, seen: &mut Vec<(u64, Result<u32, String>)>| {
        q.poll_completions(8, |t, r| seen.push((t, r.map_err(|e| e.to_string()))))
            .unwrap();
    };
    reap(&mut q, &mut seen);
    assert!(seen.is_empty(), "a dropped command completed: {seen:?}");
    let sqid = q.qid().0;
    let aborted = (0..32u16).find(|&cid| c.admin_raw(abort(sqid, cid)).unwrap().dw0 & 1 == 0);
    assert!(aborted.is_some(), "no command was aborted");
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.is_empty() {
        reap(&mut q, &mut seen);
        assert!(
            Instant::now() < deadline,
            "the aborted command never completed"
        );
    }
    let abort_requested = format!("command failed with status {}", Status::ABORT_REQUESTED);
    assert_eq!(seen, [(5, Err(abort_requested))]);

    inject(
        &s,
        &[
            "--io-type",
            "write",
            "--action",
            "delay",
            "--delay-us",
            "300000",
        ],
    );
    let t0 = Instant::now();
    assert_eq!(status_of(&mut q, write(0, 1), &buf), Status::SUCCESS);
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );

    let mut before = vec![0u8; 512];
    buf.copy_to(0, &mut before).unwrap();
    let corrupt = [
        "--action",
        "corrupt",
        "--corrupt-offset",
        "3",
        "--corrupt-value",
        "0x0f",
    ];
    inject(&s, &[&["--io-type", "read"][..], &corrupt].concat());
    let back = c.alloc_dma(512).unwrap();
    assert_eq!(status_of(&mut q, read(0, 1), &back), Status::SUCCESS);
    let mut got = vec![0u8; 512];
    back.copy_to(0, &mut got).unwrap();
    let differ: Vec<usize> = (0..512).filter(|&i| got[i] != before[i]).collect();
    assert_eq!(differ, [3]);
    assert_eq!(got[3], before[3] ^ 0x0F);
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

#[test]
fn reorder_completes_a_burst_in_reverse() {
    let (s, mut c, mut q, buf) = start();
    let args = [
        "--io-type",
        "read",
        "--action",
        "reorder",
        "--delay-us",
        "100000",
    ];
    inject(&s, &[&args[..], &["--count", "4"]].concat());
    for token in 1..=4u64 {
        q.submit_raw(read(token, 1), Some((&buf, 512)), token)
            .expect("queued");
    }
    q.ring().expect("rung");
    let mut order = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while order.len() < 4 {
        q.poll_completions(8, |t, r| {
            assert!(r.is_ok(), "{r:?}");
            order.push(t);
        })
        .expect("reaped");
        assert!(Instant::now() < deadline, "only {order:?} completed");
    }
    assert_eq!(order, [4, 3, 2, 1]);
    drop(q);
    c.shutdown().expect("shut down");
    s.kill();
}

#[test]
fn every_count_queue_and_window_pick_the_commands() {
    let (s, mut c, mut q, buf) = start();
    inject(&s, &["--io-type", "write", "--every", "3", "--count", "2"]);
    let failed: Vec<usize> = (0..9)
        .filter(|_| status_of(&mut q, write(0, 1), &buf) != Status::SUCCESS)
        .collect();
    assert_eq!(failed, [2, 5], "the 3rd and 6th, then spent");
    s.ok(&["nvmemu_bdev_clear_faults", "Malloc0"]);

    // The driver's only I/O queue is 1: a rule for queue 2 matches nothing, and one whose
    // window opens in 100 s neither.
    inject(&s, &["--qid", "2", "--count", "0"]);
    inject(&s, &["--from-ms", "100000", "--count", "0"]);
    for _ in 0..4 {
        assert_eq!(status_of(&mut q, read(0, 1), &buf), Status::SUCCESS);
    }
    let counts: Vec<(Value, Value)> = rules(&s)
        .iter()
        .map(|r| (r["matched"].clone(), r["injected"].clone()))
        .collect();
    assert_eq!(counts, [(json!(0), json!(0)), (json!(0), json!(0))]);
    inject(
        &s,
        &["--qid", &q.qid().0.to_string(), "--opcode", "2", "--dnr"],
    );
    let dnr = Status {
        dnr: true,
        ..Status::INTERNAL_ERROR
    };
    assert_eq!(
        status_of(&mut q, write(0, 1), &buf),
        Status::SUCCESS,
        "opcode 1"
    );
    assert_eq!(status_of(&mut q, read(0, 1), &buf), dnr);
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

#[test]
fn the_same_seed_fails_the_same_reads() {
    let (s, mut c, mut q, buf) = start();
    let mut run = |seed: &str| -> Vec<usize> {
        s.ok(&["nvmemu_bdev_clear_faults", "Malloc0"]);
        let when = ["--probability", "0.3", "--seed", seed, "--count", "0"];
        inject(&s, &[&["--io-type", "read"][..], &when].concat());
        (0..60)
            .filter(|_| status_of(&mut q, read(0, 1), &buf) != Status::SUCCESS)
            .collect()
    };
    let first = run("42");
    assert!((5..35).contains(&first.len()), "{first:?}");
    assert_eq!(run("42"), first, "same seed, same reads");
    assert_ne!(run("43"), first);
    drop(q);
    c.shutdown().unwrap();
    s.kill();
}

#[test]
fn bad_rules_get_clear_errors_and_a_bdev_holds_sixteen() {
    let s = Server::start(&[]);
    s.ok(&["bdev_malloc_create", "8", "512", "-b", "Malloc0"]);
    let call = |p: Value| s.call("nvmemu_bdev_inject_fault", p);
    let code = |p: Value| rpc_code(call(p)).0;
    assert_eq!(code(json!({"name": "nope"})), -19);
    for bad in [
        json!({"sct": 5}),
        json!({"sct": 0, "sc": 0}),
        json!({"probability": 0.0}),
        json!({"probability": 1.5}),
        json!({"action": "delay"}),
        json!({"action": "reorder", "delay_us": 10, "count": 0}),
        json!({"action": "explode"}),
        json!({"io_type": "read", "opcode": 2}),
        json!({"io_type": "trim"}),
        json!({"lba_start": 4, "lba_count": 0}),
        json!({"every": 0}),
        json!({"from_ms": 10, "until_ms": 10}),
        json!({"action": "corrupt", "corrupt_value": 0}),
    ] {
        let mut p = bad.clone();
        p["name"] = json!("Malloc0");
        let (code, msg) = rpc_code(call(p));
        assert_eq!(code, -22, "{bad}: {msg}");
    }
    let ids: Vec<Value> = (0..16)
        .map(|_| call(json!({"name": "Malloc0"})).unwrap())
        .collect();
    assert_eq!(ids.first(), Some(&json!(1)));
    let (code, msg) = rpc_code(call(json!({"name": "Malloc0"})));
    assert_eq!(code, -28);
    assert!(msg.contains("nvmemu_bdev_clear_faults"), "{msg}");
    let clear = |p: Value| s.call("nvmemu_bdev_clear_faults", p);
    assert_eq!(rpc_code(clear(json!({"name": "Malloc0", "id": 99}))).0, -2);
    assert_eq!(
        clear(json!({"name": "Malloc0", "id": 3})).unwrap(),
        json!(true)
    );
    assert_eq!(call(json!({"name": "Malloc0"})).unwrap(), json!(17));
    assert_eq!(clear(json!({"name": "Malloc0"})).unwrap(), json!(true));
    let all = s.call("nvmemu_bdev_get_faults", json!({})).unwrap();
    assert_eq!(all, json!([]), "no bdev has rules");
    s.kill();
}

#[test]
fn serve_fault_arms_a_rule_on_its_namespace() {
    let fault = "ns=1,io-type=read,sct=2,sc=0x81,lba-start=4,lba-count=1,count=0,dnr";
    let (s, traddr) = Server::start_with_socket_dir(&["--ns", "malloc:size=1M", "--fault", fault]);
    let mut c = attach(&traddr);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    assert_eq!(status_of(&mut q, read(0, 4), &buf), Status::SUCCESS);
    let ure_dnr = Status {
        dnr: true,
        ..Status::UNRECOVERED_READ_ERROR
    };
    assert_eq!(status_of(&mut q, read(3, 2), &buf), ure_dnr);
    drop(q);
    c.shutdown().unwrap();
    s.kill();

    // A namespace that is not there: one line naming it, and serve does not start.
    let out = Command::new(BIN)
        .args([
            "serve",
            "--socket-dir",
            "/nonexistent",
            "--ns",
            "malloc:size=1M",
        ])
        .args(["--fault", "ns=2,io-type=read"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--fault ns=2: no such --ns namespace (there are 1)"),
        "{err}"
    );
}
