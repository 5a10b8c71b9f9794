// SPDX-License-Identifier: Apache-2.0
//! Tests of the command encodings and their decoders.

use super::*;
use crate::sgl::SglKind;

fn sqe(op: u8, psdt: Psdt) -> Sqe {
    Sqe {
        cdw0: Sqe::make_cdw0(op, psdt, Cid(9)),
        ..Sqe::default()
    }
}

#[test]
fn read_is_one_based_and_keeps_the_sgl() {
    let d = SglDescriptor::new(SglKind::DataBlock {
        addr: 0x4000,
        len: 8192,
    });
    let (p1, p2) = d.to_dptr();
    let s = Sqe {
        nsid: 1,
        cdw10: 0x10,
        cdw11: 0x1,
        cdw12: 1 | (1 << 30),
        dptr1: p1,
        dptr2: p2,
        ..sqe(0x02, Psdt::SglMptrContiguous)
    };
    assert_eq!(
        IoCommand::decode(&s),
        Ok(IoCommand::ReadWrite(ReadWrite {
            write: false,
            nsid: Nsid(1),
            slba: Lba(0x1_0000_0010),
            blocks: 2,
            fua: true,
            dptr: DataPtr::Sgl(d)
        }))
    );
}

#[test]
fn read_write_takes_exactly_reads_and_writes_and_refuses_fused_and_reserved_psdt() {
    for op in 0..=u8::MAX {
        for psdt in [Psdt::Prp, Psdt::SglMptrContiguous, Psdt::Reserved] {
            for fuse in [0u32, 1] {
                let s = Sqe {
                    cdw0: Sqe::make_cdw0(op, psdt, Cid(9)) | (fuse << 8),
                    nsid: 3,
                    cdw10: 0xdead_beef,
                    cdw11: 0x7,
                    cdw12: 0x4000_00ff,
                    dptr1: 0x1000,
                    dptr2: 0x2008,
                    ..Sqe::default()
                };
                let got = ReadWrite::decode(&s);
                if op != 0x01 && op != 0x02 {
                    assert_eq!(got, None, "opcode {op:#x}");
                    continue;
                }
                if fuse != 0 || psdt == Psdt::Reserved {
                    assert_eq!(got, Some(Err(Status::INVALID_FIELD)), "opcode {op:#x}");
                    continue;
                }
                let rw = got.and_then(Result::ok).expect("a read or write");
                assert_eq!(
                    (rw.write, rw.nsid, rw.slba, rw.blocks, rw.fua),
                    (op == 0x01, Nsid(3), Lba(0x7_dead_beef), 256, true)
                );
                assert_eq!(IoCommand::decode(&s), Ok(IoCommand::ReadWrite(rw)));
            }
        }
    }
}

#[test]
fn every_opcode_decodes_without_panic() {
    for op in 0..=u8::MAX {
        for psdt in [Psdt::Prp, Psdt::SglMptrContiguous, Psdt::Reserved] {
            let s = Sqe {
                cdw10: u32::MAX,
                cdw11: u32::MAX,
                cdw12: u32::MAX,
                ..sqe(op, psdt)
            };
            let _ = IoCommand::decode(&s);
            let _ = AdminCommand::decode(&s);
        }
    }
}

#[test]
fn reserved_psdt_and_fused_are_invalid_field() {
    assert_eq!(
        IoCommand::decode(&sqe(0x02, Psdt::Reserved)),
        Err(Status::INVALID_FIELD)
    );
    let mut s = sqe(0x01, Psdt::Prp);
    s.cdw0 |= 1 << 8;
    assert_eq!(IoCommand::decode(&s), Err(Status::INVALID_FIELD));
    assert_eq!(
        AdminCommand::decode(&sqe(0x06, Psdt::SglMptrContiguous)),
        Err(Status::INVALID_FIELD)
    );
}

#[test]
fn queue_creation_fields() {
    let s = Sqe {
        cdw10: 3 | (1023 << 16),
        cdw11: 0b11 | (5 << 16),
        dptr1: 0x10_0000,
        ..sqe(0x05, Psdt::Prp)
    };
    assert_eq!(
        AdminCommand::decode(&s),
        Ok(AdminCommand::CreateIoCq {
            qid: Qid(3),
            size: 1024,
            pc: true,
            ien: true,
            iv: 5,
            base: 0x10_0000
        })
    );
    let s = Sqe {
        cdw10: 0xFFFF << 16,
        cdw11: 1 | (2 << 16),
        ..sqe(0x01, Psdt::Prp)
    };
    assert!(matches!(
        AdminCommand::decode(&s),
        Ok(AdminCommand::CreateIoSq {
            size: 65536,
            cqid: Qid(2),
            pc: true,
            ..
        })
    ));
}

#[test]
fn get_log_page_dwords_and_offset() {
    let s = Sqe {
        cdw10: 0x02 | (1 << 15) | (0x7F << 16),
        cdw11: 0x1,
        cdw12: 0x200,
        cdw13: 0x1,
        ..sqe(0x02, Psdt::Prp)
    };
    assert!(matches!(
        AdminCommand::decode(&s),
        Ok(AdminCommand::GetLogPage {
            lid: LogPageId::SmartHealth,
            rae: true,
            dwords: 0x1_0080,
            offset: 0x1_0000_0200,
            ..
        })
    ));
}
