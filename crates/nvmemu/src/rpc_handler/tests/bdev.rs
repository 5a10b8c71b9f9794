// SPDX-License-Identifier: Apache-2.0
//! The bdev methods: names, waits for a name, hot removal, malloc backing.

use super::*;

#[test]
fn malloc_names_are_generated_and_unique() {
    let (h, _) = handler();
    let p = json!({"num_blocks": 8, "block_size": 4096});
    assert_eq!(
        call(&h, "bdev_malloc_create", p.clone()),
        Ok(json!("Malloc0"))
    );
    assert_eq!(
        call(&h, "bdev_malloc_create", p.clone()),
        Ok(json!("Malloc1"))
    );
    assert_eq!(
        call(&h, "bdev_malloc_delete", json!({"name": "Malloc0"})),
        Ok(json!(true))
    );
    assert_eq!(call(&h, "bdev_malloc_create", p), Ok(json!("Malloc0")));
    // Deleting with the wrong method's kind is "No such device".
    assert_eq!(
        code(call(&h, "bdev_null_delete", json!({"name": "Malloc0"}))),
        -19
    );
    let bad_uuid = json!({"num_blocks": 8, "block_size": 512, "uuid": "xyz"});
    let (c, msg) = call(&h, "bdev_malloc_create", bad_uuid).unwrap_err();
    assert_eq!(c, -32602);
    assert!(msg.contains("uuid"));
    let md = json!({"num_blocks": 8, "block_size": 512, "md_size": 8});
    assert_eq!(code(call(&h, "bdev_malloc_create", md)), -95);
}

#[test]
fn get_bdevs_waits_up_to_timeout_for_the_name() {
    let (h, _) = handler();
    let h = Arc::new(h);
    assert_eq!(
        code(call(
            &h,
            "bdev_get_bdevs",
            json!({"name": "Late", "timeout": 20})
        )),
        -110,
        "SPDK answers a wait that timed out with -ETIMEDOUT"
    );
    let creator = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            call(
                &h,
                "bdev_null_create",
                json!({"name": "Late", "num_blocks": 8, "block_size": 512}),
            )
        })
    };
    // Generous timeout: the wait ends when the bdev appears, not when the timeout expires.
    let found = call(
        &h,
        "bdev_get_bdevs",
        json!({"name": "Late", "timeout": 60_000}),
    )
    .unwrap();
    assert_eq!(found[0]["name"], json!("Late"));
    assert_eq!(creator.join().unwrap(), Ok(json!("Late")));
}

#[test]
fn get_bdevs_stops_waiting_when_its_caller_leaves() {
    let (h, stop) = handler();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let leaver = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(theirs);
    });
    let caller = nvmemu_rpc::Caller::connection(std::os::fd::AsFd::as_fd(&ours), &stop);
    let t0 = std::time::Instant::now();
    let req = Request::decode(
        "bdev_get_bdevs",
        Some(json!({"name": "Never", "timeout": 60_000})),
    )
    .unwrap();
    let r = nvmemu_rpc::dispatch_for(&h, req, &caller);
    assert_eq!(r.unwrap_err().code, -19);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    leaver.join().unwrap();
}

#[test]
fn deleting_a_claimed_bdev_hot_removes_its_namespace() {
    let (h, _) = handler();
    let dir = tempfile::tempdir().unwrap();
    setup(&h, dir.path().to_str().unwrap());
    // The wrong kind is no such device, and nothing changes.
    assert_eq!(
        code(call(&h, "bdev_null_delete", json!({"name": "Malloc0"}))),
        -19
    );
    assert_eq!(
        call(&h, "bdev_malloc_delete", json!({"name": "Malloc0"})),
        Ok(json!(true))
    );
    let subs = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
    assert_eq!(subs[0]["namespaces"], json!([]));
    assert_eq!(
        code(call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"}))),
        -19
    );
    // The listener stays, and the NSID can be used again.
    assert!(dir.path().join("cntrl").exists());
    call(
        &h,
        "bdev_null_create",
        json!({"name": "N", "num_blocks": 8, "block_size": 512}),
    )
    .unwrap();
    assert_eq!(
        call(
            &h,
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": {"bdev_name": "N"}})
        ),
        Ok(json!(1))
    );
}

#[test]
fn malloc_backing_is_reported_and_round_trips_through_save_config() {
    let (a, _) = handler();
    let create = |h: &NvmemuHandler, name: &str, extra: Value| {
        let mut p = json!({"name": name, "num_blocks": 1024, "block_size": 4096});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        call(h, "bdev_malloc_create", p)
    };
    create(&a, "Backed", json!({})).unwrap();
    create(&a, "Lazy", json!({"lazy": true})).unwrap();
    let (c, msg) = create(&a, "Both", json!({"lazy": true, "hugepages": true})).unwrap_err();
    assert_eq!(c, -32602, "{msg}");
    let saved = dispatch(&a, Request::SaveConfig).unwrap();
    let bdev_config = saved["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["subsystem"] == json!("bdev"))
        .unwrap()["config"]
        .clone();
    let params = |name: &str| {
        bdev_config
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["params"]["name"] == json!(name))
            .unwrap()["params"]
            .clone()
    };
    // Only the non-default flag is written (SPDK refuses parameters it does not know).
    assert_eq!(params("Lazy")["lazy"], json!(true));
    assert!(params("Backed").get("lazy").is_none());
    assert!(params("Backed").get("hugepages").is_none());
    drop(a);
    let (b, _) = handler();
    load_config(&b, &saved).unwrap();
    let malloc = |name: &str| {
        call(&b, "bdev_get_bdevs", json!({"name": name})).unwrap()[0]["driver_specific"]["malloc"]
            .clone()
    };
    let (backed, lazy) = (malloc("Backed"), malloc("Lazy"));
    assert_eq!(
        (&backed["lazy"], &lazy["lazy"]),
        (&json!(false), &json!(true))
    );
    assert!(
        backed["resident_bytes"].as_u64().unwrap() >= 4 << 20,
        "{backed}"
    );
    assert!(lazy["resident_bytes"].as_u64().unwrap() < 4 << 20, "{lazy}");
    assert_eq!(dispatch(&b, Request::SaveConfig).unwrap(), saved);
}

#[test]
fn a_malloc_bdev_being_backed_blocks_no_other_method_and_keeps_its_name() {
    let (h, _) = handler();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // 256 MiB, backed page by page at creation: long enough to be seen in progress.
            let made = call(
                &h,
                "bdev_malloc_create",
                json!({"name": "Big", "num_blocks": 1u64 << 19, "block_size": 512}),
            );
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(made, Ok(json!("Big")));
        });
        // A probe that creates nothing either way: the name check comes before the
        // geometry check, which refuses zero blocks after the name was free.
        let probe = json!({"name": "Big", "num_blocks": 0, "block_size": 512});
        let mut seen_in_progress = false;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            match call(&h, "bdev_null_create", probe.clone()) {
                Err((code, msg)) if msg.contains("already exists") => {
                    assert_eq!(code, -17, "{msg}");
                    // Taken but, just after, still not registered: the name was reserved by a
                    // create in progress, and the probe was answered meanwhile (no lock held).
                    seen_in_progress |= get_code(&h, "Big") == Some(-19);
                }
                Err((code, msg)) => assert_eq!(code, -22, "{msg}"),
                Ok(v) => panic!("the probe created a bdev: {v}"),
            }
        }
        assert!(
            seen_in_progress,
            "no method was answered while the bdev was being backed"
        );
    });
    let got = call(&h, "bdev_get_bdevs", json!({"name": "Big"})).unwrap();
    assert_eq!(got[0]["num_blocks"], json!(1u64 << 19));
    // The reservation is gone with the create: the name is now the bdev's, not a placeholder.
    assert_eq!(code(call(&h, "bdev_null_create", probe_named("Big"))), -17);
    call(&h, "bdev_malloc_delete", json!({"name": "Big"})).unwrap();
    assert_eq!(code(call(&h, "bdev_null_create", probe_named("Big"))), -22);
}

#[test]
fn a_bdev_wait_is_capped_at_a_minute() {
    use std::time::Duration;
    assert_eq!(crate::rpc_handler::bdev_wait(2_000), Duration::from_secs(2));
    assert_eq!(
        crate::rpc_handler::bdev_wait(600_000),
        Duration::from_secs(60)
    );
    assert_eq!(
        crate::rpc_handler::bdev_wait(u64::MAX),
        crate::rpc_handler::MAX_BDEV_WAIT
    );
}
