// SPDX-License-Identifier: Apache-2.0
//! How malloc bdevs are backed with memory.

use super::*;

/// What backs a bdev, from `bdev_get_bdevs`' `driver_specific.malloc`.
fn backing(s: &Server, name: &str) -> Value {
    let b = s
        .call("bdev_get_bdevs", json!({"name": name}))
        .expect("bdev_get_bdevs");
    b[0]["driver_specific"]["malloc"].clone()
}

fn resident(s: &Server, name: &str) -> u64 {
    backing(s, name)["resident_bytes"]
        .as_u64()
        .expect("resident_bytes")
}

/// A malloc namespace is real memory from creation (RSS at least its size),
/// `lazy=on` stays sparse, Deallocate and Write Zeroes read back zeroes in both modes
/// without giving a backed namespace's pages back, and a namespace larger than the machine
/// is refused with one line while the others keep serving.
#[test]
fn malloc_memory_is_backed_at_creation_and_an_oversized_one_is_refused() {
    const SIZE: u64 = 256 << 20;
    let (s, traddr) = Server::start_with_socket_dir(&[
        "--ns",
        "malloc:size=256M,lba=4096",
        "--ns",
        "malloc:size=256M,lba=4096,lazy=on",
    ]);
    let rss = s.rss();
    assert!(
        (SIZE..SIZE + SIZE / 2).contains(&rss),
        "RSS {rss} with one backed and one lazy namespace of {SIZE}"
    );
    let (backed, lazy) = (backing(&s, "ns0n1"), backing(&s, "ns0n2"));
    assert_eq!(
        (&backed["lazy"], &lazy["lazy"]),
        (&json!(false), &json!(true))
    );
    assert!(
        backed["resident_bytes"].as_u64().unwrap() >= SIZE,
        "{backed}"
    );
    assert!(
        lazy["resident_bytes"].as_u64().unwrap() < SIZE / 16,
        "{lazy}"
    );
    assert_eq!(backed["page_size"], json!(4096));

    // More than the machine has (MemTotal + 1 GiB), through the RPC and rpc.py's CLI.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let too_big = kb_field(&meminfo, "MemTotal") + (1 << 30);
    let (code, msg) = rpc_code(s.call(
        "bdev_malloc_create",
        json!({"name": "Huge", "num_blocks": too_big / 4096, "block_size": 4096}),
    ));
    assert_eq!(code, -12, "{msg}");
    for part in ["Huge", "asked", "available", "MemAvailable", "lazy=on"] {
        assert!(msg.contains(part), "{part} missing in: {msg}");
    }
    assert!(!msg.contains('\n'), "not one line: {msg}");
    let out = s.cli(&["bdev_malloc_create", &(too_big >> 20).to_string(), "4096"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("available"), "{text}");
    assert!(s.call("bdev_get_bdevs", json!({"name": "Huge"})).is_err());
    assert!(s.rss() < SIZE + SIZE / 2, "the refused bdev took memory");

    // The server still serves both namespaces: write, zero, deallocate, read back.
    let mut c = attach(&traddr);
    let mut q = c.take_qpair().unwrap();
    let len = 1u64 << 20;
    let blocks = u32::try_from(len / 4096).unwrap();
    let wbuf = c.alloc_dma(len).unwrap();
    let rbuf = c.alloc_dma(len).unwrap();
    let ranges = c.alloc_dma(4096).unwrap();
    let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8 | 1).collect();
    wbuf.copy_from(0, &pattern).unwrap();
    let mut back = vec![0u8; len as usize];
    for nsid in [Nsid(1), Nsid(2)] {
        for slba in [Lba(0), Lba(4096)] {
            q.write_blocking(nsid, slba, blocks, &wbuf).unwrap();
            q.read_blocking(nsid, slba, blocks, &rbuf).unwrap();
            rbuf.copy_to(0, &mut back).unwrap();
            assert!(back == pattern, "{nsid:?} data read back differs");
        }
        q.write_zeroes_blocking(nsid, Lba(0), blocks).unwrap();
        q.deallocate_blocking(nsid, &[(Lba(4096), blocks)], &ranges)
            .unwrap();
        for slba in [Lba(0), Lba(4096)] {
            q.read_blocking(nsid, slba, blocks, &rbuf).unwrap();
            rbuf.copy_to(0, &mut back).unwrap();
            assert!(back.iter().all(|&b| b == 0), "{nsid:?} {slba:?} not zero");
        }
    }
    drop(q);
    c.shutdown().unwrap();
    assert!(
        resident(&s, "ns0n1") >= SIZE,
        "zeroing gave backed pages back"
    );
    assert!(
        resident(&s, "ns0n2") < SIZE / 16,
        "lazy namespace filled up"
    );
    s.kill();
}

/// `--numa-node 0` (the node every machine has): the pollers and a namespace's memory go on
/// it, which the start-up log, `bdev_get_bdevs` and the kernel's `numa_maps` all say; a
/// `numa_id` the machine lacks is refused with its nodes named, and one that exists is
/// kept by `save_config`.
#[test]
fn numa_node_binds_namespace_memory_and_a_missing_node_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, traddr) = (dir.path().join("rpc.sock"), dir.path().join("ctrl0"));
    std::fs::create_dir(&traddr).unwrap();
    let args = ["--numa-node", "0", "--socket-dir", traddr.to_str().unwrap()];
    let args = args.map(std::ffi::OsStr::new);
    let mut extra = args.to_vec();
    extra.extend(["--ns", "malloc:size=16M"].map(std::ffi::OsStr::new));
    let child = common::spawn_logged_serve(&sock, &extra);
    common::wait_for_rpc_socket(&sock);
    let rpc = |method: &str, params: Value| nvmemu_rpc::call(&sock, method, params);
    let malloc =
        rpc("bdev_get_bdevs", json!({"name": "ns0n1"})).unwrap()[0]["driver_specific"]["malloc"]
            .clone();
    assert_eq!(malloc["numa_node"], json!(0), "{malloc}");
    let maps = std::fs::read_to_string(format!("/proc/{}/numa_maps", child.id()));
    if let Ok(maps) = maps {
        // The kernel's view: the namespace's mapping carries the bind policy.
        let bound = maps.lines().filter(|l| l.contains(" bind:0 "));
        assert!(bound.count() >= 1, "no mapping bound to node 0:\n{maps}");
    }

    let (code, msg) = rpc_code(rpc(
        "bdev_malloc_create",
        json!({"name": "Far", "num_blocks": 1024, "block_size": 512, "numa_id": 999}),
    ));
    assert_eq!(code, -22, "{msg}");
    assert!(msg.contains("NUMA node 999 does not exist") && msg.contains("node 0 (CPUs "));
    let (code, msg) = rpc_code(rpc(
        "bdev_malloc_create",
        json!({"name": "Odd", "num_blocks": 1024, "block_size": 512, "numa_id": -2}),
    ));
    assert_eq!(code, -32602, "{msg}");
    rpc(
        "bdev_malloc_create",
        json!({"name": "Near", "num_blocks": 1024, "block_size": 512, "numa_id": 0}),
    )
    .unwrap();
    let saved = rpc("save_config", json!(null)).unwrap().to_string();
    assert!(
        saved.contains(r#""name":"Near","#) && saved.contains(r#""numa_id":0"#),
        "{saved}"
    );

    rpc("spdk_kill_instance", json!({"sig_name": "SIGTERM"})).unwrap();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("pollers on CPU 0 (NUMA node 0); namespace memory bound to node 0"),
        "{log}"
    );
    assert!(log.contains("bound to NUMA node 0"), "{log}");
}

/// A node the machine does not have stops `nvmemu serve` with one line naming its nodes.
#[test]
fn serve_refuses_a_numa_node_the_machine_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--numa-node", "999", "-r"])
        .arg(dir.path().join("rpc.sock"))
        .output()
        .unwrap();
    let err = common::one_line_failure(&out);
    assert!(
        err.contains("NUMA node 999 does not exist or has no memory; this machine has node 0"),
        "{err}"
    );
    assert!(!dir.path().join("rpc.sock").exists());
}
