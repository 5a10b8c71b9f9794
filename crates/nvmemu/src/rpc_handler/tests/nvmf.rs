// SPDX-License-Identifier: Apache-2.0
//! The nvmf methods: claims, namespace IDs, listeners, subsystem parameters.

use super::*;

#[test]
fn claims_follow_namespaces() {
    let (h, _) = handler();
    let dir = tempfile::tempdir().unwrap();
    setup(&h, dir.path().to_str().unwrap());
    assert!(dir.path().join("cntrl").exists());
    let b = call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap();
    assert_eq!(b[0]["claimed"], json!(true));
    assert_eq!(b[0]["claim_type"], json!("exclusive_write"));
    // A claimed bdev cannot back a second namespace.
    assert_eq!(
        code(call(
            &h,
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": {"bdev_name": "Malloc0"}})
        )),
        -16
    );
    let rm = json!({"nqn": NQN, "nsid": 1});
    assert_eq!(
        call(&h, "nvmf_subsystem_remove_ns", rm.clone()),
        Ok(json!(true))
    );
    assert_eq!(code(call(&h, "nvmf_subsystem_remove_ns", rm)), -2);
    let b = call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap();
    assert_eq!(b[0]["claimed"], json!(false));
    assert_eq!(
        call(&h, "bdev_malloc_delete", json!({"name": "Malloc0"})),
        Ok(json!(true))
    );
    // Deleting the subsystem stops its controller and removes the socket.
    assert_eq!(
        call(&h, "nvmf_delete_subsystem", json!({"nqn": NQN})),
        Ok(json!(true))
    );
    assert!(!dir.path().join("cntrl").exists());
}

#[test]
fn namespace_ids_are_allocated_within_max_namespaces() {
    let (h, _) = handler();
    call(
        &h,
        "nvmf_create_subsystem",
        json!({"nqn": NQN, "max_namespaces": 2}),
    )
    .unwrap();
    for name in ["A", "B", "C"] {
        call(
            &h,
            "bdev_null_create",
            json!({"name": name, "num_blocks": 8, "block_size": 512}),
        )
        .unwrap();
    }
    let add = |b: &str, nsid: u32| {
        call(
            &h,
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": {"bdev_name": b, "nsid": nsid}}),
        )
    };
    assert_eq!(add("A", 2), Ok(json!(2)));
    assert_eq!(code(add("B", 3)), -32602);
    assert_eq!(add("B", 0), Ok(json!(1)));
    assert_eq!(code(add("C", 0)), -28);
    assert_eq!(code(add("Nope", 0)), -19);
    let bad_nguid = json!({"nqn": NQN, "namespace": {"bdev_name": "C", "nguid": "12"}});
    call(
        &h,
        "nvmf_subsystem_remove_ns",
        json!({"nqn": NQN, "nsid": 1}),
    )
    .unwrap();
    let (c, msg) = call(&h, "nvmf_subsystem_add_ns", bad_nguid).unwrap_err();
    assert_eq!(c, -32602);
    assert!(msg.contains("namespace.nguid"), "{msg}");
}

#[test]
fn listeners_need_the_transport_and_an_existing_directory() {
    let (h, _) = handler();
    call(&h, "nvmf_create_subsystem", json!({"nqn": NQN})).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let listen = |traddr: &str| {
        call(
            &h,
            "nvmf_subsystem_add_listener",
            json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER", "traddr": traddr}}),
        )
    };
    let d = dir.path().to_str().unwrap();
    assert_eq!(code(listen(d)), -22);
    assert_eq!(
        code(call(&h, "nvmf_create_transport", json!({"trtype": "RDMA"}))),
        -32602
    );
    call(
        &h,
        "nvmf_create_transport",
        json!({"trtype": "VFIOUSER", "max_io_size": 65536}),
    )
    .unwrap();
    assert_eq!(
        code(call(
            &h,
            "nvmf_create_transport",
            json!({"trtype": "VFIOUSER"})
        )),
        -32602
    );
    let t = call(&h, "nvmf_get_transports", json!({})).unwrap();
    assert_eq!(t[0]["max_io_size"], json!(65536));
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(code(listen(file.to_str().unwrap())), -2);
    assert_eq!(code(listen("")), -2);
    assert_eq!(listen(d), Ok(json!(true)));
    assert_eq!(code(listen(d)), -17);
    let s = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
    assert_eq!(s[0]["listen_addresses"][0]["traddr"], json!(d));
    let rm = json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER", "traddr": d}});
    assert_eq!(
        call(&h, "nvmf_subsystem_remove_listener", rm.clone()),
        Ok(json!(true))
    );
    assert!(!dir.path().join("cntrl").exists());
    assert_eq!(code(call(&h, "nvmf_subsystem_remove_listener", rm)), -2);
}

#[test]
fn subsystem_parameters_are_validated() {
    let (h, _) = handler();
    let create = |p: Value| call(&h, "nvmf_create_subsystem", p);
    assert_eq!(code(create(json!({"nqn": "cnode1"}))), -32602);
    assert_eq!(
        code(create(json!({"nqn": format!("nqn.{}", "x".repeat(250))}))),
        -32602
    );
    assert_eq!(
        code(create(json!({"nqn": NQN, "model_number": "m".repeat(41)}))),
        -32602
    );
    assert_eq!(
        code(create(json!({"nqn": NQN, "serial_number": "a\u{7}b"}))),
        -32602
    );
    assert_eq!(
        code(create(
            json!({"nqn": NQN, "min_cntlid": 9, "max_cntlid": 3})
        )),
        -32602
    );
    assert_eq!(
        code(create(json!({"nqn": NQN, "max_namespaces": 100_000}))),
        -32602
    );
    assert_eq!(create(json!({"nqn": NQN})), Ok(json!(true)));
    assert_eq!(code(create(json!({"nqn": NQN}))), -17);
    let s = call(&h, "nvmf_get_subsystems", json!({})).unwrap();
    assert_eq!(s[0]["subtype"], json!("Discovery"));
    assert_eq!(s[1]["serial_number"], json!("00000000000000000000"));
    assert_eq!(s[1]["model_number"], json!("SPDK bdev Controller"));
    assert_eq!(
        code(call(&h, "nvmf_get_subsystems", json!({"nqn": "nqn.x"}))),
        -19
    );
}

/// Whether something listens on `port` of 127.0.0.1: the poll group closes a socket on its
/// next pass, so a closed one is waited for (bounded), an open one is seen at once.
fn port_free_within(port: u16, tries: u32) -> bool {
    (0..tries).any(|_| {
        let free = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if !free {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        free
    })
}

#[test]
fn deleting_the_last_subsystem_on_a_tcp_address_closes_its_socket() {
    let (h, _) = handler();
    call(&h, "nvmf_create_transport", json!({"trtype": "TCP"})).unwrap();
    let other = "nqn.2016-06.io.spdk:other";
    for nqn in [NQN, other] {
        call(&h, "nvmf_create_subsystem", json!({"nqn": nqn})).unwrap();
    }
    let listen = |nqn: &str, port: &str| {
        call(
            &h,
            "nvmf_subsystem_add_listener",
            json!({"nqn": nqn, "listen_address":
                {"trtype": "TCP", "adrfam": "IPv4", "traddr": "127.0.0.1", "trsvcid": port}}),
        )
        .unwrap();
        let l = call(&h, "nvmf_subsystem_get_listeners", json!({"nqn": nqn})).unwrap();
        l[0]["address"]["trsvcid"].as_str().unwrap().to_owned()
    };
    let port = listen(NQN, "0");
    assert_eq!(listen(other, &port), port);
    let port: u16 = port.parse().unwrap();

    call(&h, "nvmf_delete_subsystem", json!({"nqn": NQN})).unwrap();
    assert!(
        !port_free_within(port, 1),
        "the socket stays while another subsystem listens there"
    );
    call(&h, "nvmf_delete_subsystem", json!({"nqn": other})).unwrap();
    assert!(
        port_free_within(port, 500),
        "the socket closes with the last subsystem listening there"
    );
}
