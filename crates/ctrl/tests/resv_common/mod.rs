// SPDX-License-Identifier: Apache-2.0
//! Two controllers sharing one namespace, and the reservation commands, for the
//! reservation test files.
#![allow(dead_code)]

use nvmemu_ctrl::ControllerConfig;
use nvmemu_ctrl::test_utils::{TestHost, layout, sqe};
use nvmemu_spec::{DataPtr, Nsid, Sqe, Status};

pub const WRITE_EXCLUSIVE: u8 = 1;
pub const EXCLUSIVE_ACCESS: u8 = 2;
pub const EXCLUSIVE_ACCESS_REGISTRANTS_ONLY: u8 = 4;
pub const WRITE_EXCLUSIVE_ALL_REGISTRANTS: u8 = 5;

/// Two enabled controllers (IDs 1 and 2) with I/O queue 1, sharing namespace 1, each
/// with its own 16-byte Host Identifier.
pub fn pair() -> (TestHost, TestHost) {
    let mut a = TestHost::with_config(ControllerConfig {
        cntlid: 1,
        ..ControllerConfig::default()
    });
    let mut b = TestHost::with_config(ControllerConfig {
        cntlid: 2,
        ..ControllerConfig::default()
    });
    let shared = a.ctrl.namespaces().next().expect("namespace 1").clone();
    b.ctrl.detach_namespace(Nsid(1)).expect("detach");
    b.ctrl
        .attach_namespace(shared)
        .expect("attach the shared namespace");
    for (h, id) in [(&mut a, 0xA1), (&mut b, 0xB2)] {
        h.enable();
        h.create_io_pair(1, 16);
        assert_eq!(set_host_id(h, [id; 16]), Status::SUCCESS);
    }
    (a, b)
}

pub fn data(h: &TestHost, bytes: &[u8]) -> DataPtr {
    h.mem.write(layout::LISTS, bytes);
    DataPtr::Prp {
        prp1: h.mem.iova(layout::LISTS),
        prp2: 0,
    }
}

pub fn set_host_id(h: &mut TestHost, id: [u8; 16]) -> Status {
    h.mem.write(layout::ADMIN_DATA, &id);
    let dptr = DataPtr::Prp {
        prp1: h.mem.iova(layout::ADMIN_DATA),
        prp2: 0,
    };
    let s = Sqe {
        cdw10: 0x81,
        cdw11: 1,
        ..sqe(0x09, dptr)
    };
    h.admin(s).status()
}

pub fn resv(h: &mut TestHost, opcode: u8, cdw10: u32, keys: &[u64]) -> Status {
    let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
    let s = Sqe {
        nsid: 1,
        cdw10,
        ..sqe(opcode, data(h, &bytes))
    };
    h.cmd(1, s).status()
}

pub fn register(h: &mut TestHost, crkey: u64, nrkey: u64) -> Status {
    resv(h, 0x0D, 0, &[crkey, nrkey])
}

pub fn acquire(h: &mut TestHost, action: u32, rtype: u8, crkey: u64, prkey: u64) -> Status {
    resv(h, 0x11, action | (u32::from(rtype) << 8), &[crkey, prkey])
}

pub fn release(h: &mut TestHost, action: u32, rtype: u8, crkey: u64) -> Status {
    resv(h, 0x15, action | (u32::from(rtype) << 8), &[crkey])
}
