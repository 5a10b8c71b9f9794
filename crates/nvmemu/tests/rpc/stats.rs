// SPDX-License-Identifier: Apache-2.0
//! The statistics methods while a client does I/O.

use super::*;

/// `nvmf_get_stats` qpair counts summed over the poll groups: (admin_qpairs, io_qpairs,
/// current_admin_qpairs, current_io_qpairs).
fn qpair_counts(s: &Server) -> (u64, u64, u64, u64) {
    let stats = s.call("nvmf_get_stats", json!({})).expect("nvmf_get_stats");
    let groups = stats["poll_groups"].as_array().expect("poll_groups");
    let sum = |k: &str| groups.iter().map(|g| g[k].as_u64().expect(k)).sum::<u64>();
    (
        sum("admin_qpairs"),
        sum("io_qpairs"),
        sum("current_admin_qpairs"),
        sum("current_io_qpairs"),
    )
}

#[test]
fn iostat_latency_ticks_and_nvmf_qpair_counts_follow_a_clients_io() {
    let s = Server::start(&[]);
    s.reference_sequence();
    assert_eq!(qpair_counts(&s), (0, 0, 0, 0));
    let opts = AttachOptions {
        io_queues: 2,
        queue_depth: 32,
        dma_pool_bytes: 8 << 20,
        ..AttachOptions::default()
    };
    let mut c = AttachedController::attach(&s.traddr(), opts).expect("driver attaches");
    let n = c.io_queue_count() as u64;
    assert!(n >= 1);
    assert_eq!(qpair_counts(&s), (1, n, 1, n));

    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &[0x5a; 4096]).unwrap();
    let io = |q: &mut nvmemu_driver::IoQpair| {
        for i in 0..64 {
            q.write_blocking(Nsid(1), Lba(i * 8), 8, &buf).unwrap();
            q.read_blocking(Nsid(1), Lba(i * 8), 8, &buf).unwrap();
        }
    };
    // Untimed (the default): counted, but no clock read, so no latency.
    io(&mut q);
    let iostat = || {
        s.call("bdev_get_iostat", json!({"name": "Malloc0"}))
            .unwrap()
    };
    let b = iostat()["bdevs"][0].clone();
    assert_eq!(b["num_read_ops"], json!(64), "{b}");
    for k in [
        "read_latency_ticks",
        "write_latency_ticks",
        "max_read_latency_ticks",
    ] {
        assert_eq!(b[k], json!(0), "{k}: {b}");
    }
    // The histogram switch times the bdev's operations too.
    s.call(
        "bdev_enable_histogram",
        json!({"name": "Malloc0", "enable": true}),
    )
    .unwrap();
    io(&mut q);
    drop(q);
    c.shutdown().unwrap();
    // The I/O queues are deleted; the totals keep them.
    let (admin, io, _, current_io) = qpair_counts(&s);
    assert_eq!((admin, io, current_io), (1, n, 0));

    let stat = iostat();
    assert_eq!(stat["tick_rate"], json!(1_000_000_000u64));
    let b = &stat["bdevs"][0];
    let get = |k: &str| b[k].as_u64().expect(k);
    for (op, count) in [
        ("read", get("num_read_ops")),
        ("write", get("num_write_ops")),
    ] {
        let (sum, min, max) = (
            get(&format!("{op}_latency_ticks")),
            get(&format!("min_{op}_latency_ticks")),
            get(&format!("max_{op}_latency_ticks")),
        );
        assert_eq!(count, 128, "{op}");
        // Only the second 64 were timed.
        assert!(min > 0 && min <= max && max <= sum, "{op}: {b}");
        assert!(sum >= 64 * min && sum <= 64 * max, "{op}: {b}");
    }
    // No Deallocate ran: its latency is all zero.
    let unmap = [
        "unmap_latency_ticks",
        "min_unmap_latency_ticks",
        "max_unmap_latency_ticks",
    ];
    assert!(unmap.iter().all(|k| get(k) == 0), "{b}");

    // A second client adds its own queues to the totals.
    drop(c);
    let mut c = AttachedController::attach(&s.traddr(), opts).expect("driver attaches again");
    let m = c.io_queue_count() as u64;
    assert_eq!(qpair_counts(&s), (2, n + m, 1, m));
    c.shutdown().unwrap();
    s.kill();
}
