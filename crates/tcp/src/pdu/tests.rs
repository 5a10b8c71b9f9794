// SPDX-License-Identifier: Apache-2.0
//! Decoding and encoding checks of the PDU module.
#![allow(clippy::cast_possible_truncation)]

use super::*;

fn neg(hdgst: bool, ddgst: bool) -> Negotiated {
    Negotiated {
        hdgst,
        ddgst,
        hpda: 0,
        cpda: 0,
        icd_max: 4096,
        maxh2cdata: 8192,
    }
}

/// An H2CData PDU as a host builds it.
fn h2c(n: &Negotiated, datao: u32, data: &[u8]) -> Vec<u8> {
    let hd = if n.hdgst { 4 } else { 0 };
    let dd = if n.ddgst { 4 } else { 0 };
    let pdo = DATA_HLEN + hd;
    let plen = pdo + data.len() + dd;
    let mut p = vec![pdu_type::H2C_DATA, 0, DATA_HLEN as u8, pdo as u8];
    p[1] |= flags::LAST_PDU
        | if n.hdgst { flags::HDGSTF } else { 0 }
        | if n.ddgst { flags::DDGSTF } else { 0 };
    p.extend_from_slice(&(plen as u32).to_le_bytes());
    p.extend_from_slice(&5u16.to_le_bytes());
    p.extend_from_slice(&6u16.to_le_bytes());
    p.extend_from_slice(&datao.to_le_bytes());
    p.extend_from_slice(&(data.len() as u32).to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    if n.hdgst {
        let c = crc32c::crc32c(&p);
        p.extend_from_slice(&c.to_le_bytes());
    }
    p.extend_from_slice(data);
    if n.ddgst {
        p.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
    }
    p
}

#[test]
fn h2c_data_decodes_with_and_without_digests() {
    for (h, d) in [(false, false), (true, false), (false, true), (true, true)] {
        let n = neg(h, d);
        let p = h2c(&n, 512, &[7; 100]);
        let got = decode(&p, Phase::Established, &n).unwrap();
        assert_eq!(
            got,
            H2cPdu::Data {
                cccid: 5,
                ttag: 6,
                datao: 512,
                last: true,
                data: &[7; 100]
            }
        );
    }
}

#[test]
fn corrupted_digests_and_lengths_carry_their_fes_and_fei() {
    let n = neg(true, true);
    let mut p = h2c(&n, 0, &[1; 64]);
    p[12] ^= 1;
    assert_eq!(
        decode(&p, Phase::Established, &n).unwrap_err().fes,
        Fes::HeaderDigestError
    );
    let mut p = h2c(&n, 0, &[1; 64]);
    let last = p.len() - 1;
    p[last] ^= 1;
    assert_eq!(
        decode(&p, Phase::Established, &n).unwrap_err().fes,
        Fes::InvalidHeaderField
    );
    // DATAL that disagrees with PLEN.
    let n = neg(false, false);
    let mut p = h2c(&n, 0, &[1; 64]);
    p[16] = 65;
    let e = decode(&p, Phase::Established, &n).unwrap_err();
    assert_eq!((e.fes, e.fei), (Fes::InvalidHeaderField, 16));
    // More than MAXH2CDATA.
    let p = h2c(&n, 0, &vec![0; 8193]);
    let e = decode(&p, Phase::Established, &n).unwrap_err();
    assert_eq!(e.fes, Fes::DataTransferLimitExceeded);
    // PDO inside the header.
    let mut p = h2c(&n, 0, &[1; 64]);
    p[3] = 8;
    assert_eq!(decode(&p, Phase::Established, &n).unwrap_err().fei, 3);
}

#[test]
fn pdu_order_is_enforced_by_the_common_header() {
    let n = neg(false, false);
    let ch = |ty, hlen, plen| CommonHeader {
        pdu_type: ty,
        flags: 0,
        hlen,
        pdo: 0,
        plen,
    };
    let e = check_header(&ch(pdu_type::CAPSULE_CMD, 72, 72), Phase::Initializing, &n).unwrap_err();
    assert_eq!(e.fes, Fes::PduSequenceError);
    let e = check_header(&ch(pdu_type::IC_REQ, 128, 128), Phase::Established, &n).unwrap_err();
    assert_eq!(e.fes, Fes::PduSequenceError);
    let e = check_header(&ch(pdu_type::C2H_DATA, 24, 24), Phase::Established, &n).unwrap_err();
    assert_eq!(
        (e.fes, e.fei),
        (Fes::InvalidHeaderField, 0),
        "controller PDU type from a host"
    );
    let e = check_header(&ch(pdu_type::IC_REQ, 128, 129), Phase::Initializing, &n).unwrap_err();
    assert_eq!(e.fei, 4, "ICReq PLEN");
    assert_eq!(
        check_header(&ch(pdu_type::IC_REQ, 128, 128), Phase::Initializing, &n),
        Ok(128)
    );
}

#[test]
fn plain_capsule_takes_only_what_decode_takes_as_a_bare_command() {
    let mut base = vec![
        pdu_type::CAPSULE_CMD,
        0,
        CMD_HLEN as u8,
        0,
        CMD_HLEN as u8,
        0,
        0,
        0,
    ];
    base.extend((0..64u8).map(|b| b.wrapping_mul(37)));
    // Every single-byte change of the common header (and a longer PDU), under each
    // digest setting: the fast path either agrees with decode or declines.
    let mut cases = vec![base.clone()];
    for at in 0..CH_LEN {
        for v in [0u8, 1, 2, 3, 4, 8, 0x10, 0x48, 0x49, 0x80, 0xFF] {
            let mut p = base.clone();
            p[at] = v;
            cases.push(p);
        }
    }
    let mut long = base.clone();
    long[4] = 76;
    long.extend_from_slice(&[0; 4]);
    cases.push(long);
    for (h, d) in [(false, false), (true, false), (false, true), (true, true)] {
        let n = neg(h, d);
        for p in &cases {
            let plen = u32::from_le_bytes([p[4], p[5], p[6], p[7]]) as usize;
            let general = p
                .get(..plen)
                .and_then(|whole| decode(whole, Phase::Established, &n).ok());
            match plain_capsule(p, &n) {
                Some(sqe) => assert_eq!(general, Some(H2cPdu::Command { sqe, data: &[] })),
                None => assert!(
                    !matches!(general, Some(H2cPdu::Command { data: &[], .. })) || plen != 72,
                    "declined a bare capsule: {:?}",
                    &p[..8]
                ),
            }
        }
    }
    assert!(plain_capsule(&base[..71], &neg(false, false)).is_none());
}

#[test]
fn c2h_data_honours_the_host_alignment_and_digests() {
    let mut n = neg(true, true);
    n.hpda = 7; // 32-byte alignment
    let mut buf = vec![0u8; 256];
    let l = encode_c2h_data_header(&mut buf, 3, 0, 100, false, &n);
    assert_eq!(
        l.pdo, 32,
        "24-byte header + 4-byte digest, rounded up to 32"
    );
    assert_eq!(l.plen, 32 + 100 + 4);
    buf[l.pdo..l.pdo + 100].fill(9);
    finish_c2h_data(&mut buf, &l, &n);
    assert_eq!(buf[1], flags::HDGSTF | flags::DDGSTF | flags::LAST_PDU);
    assert_eq!(&buf[24..28], &crc32c::crc32c(&buf[..24]).to_le_bytes());
    assert_eq!(&buf[132..136], &crc32c::crc32c(&[9; 100]).to_le_bytes());
    assert!(buf[28..32].iter().all(|&b| b == 0), "padding is zero");
}
