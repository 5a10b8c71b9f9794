// SPDX-License-Identifier: Apache-2.0
//! Arbitrary bytes as host-to-controller NVMe/TCP PDUs, under every negotiated digest and
//! alignment setting the first byte picks, and as Fabrics commands with Connect data: the
//! parsers must never panic, a PDU that decodes must lie within the bytes given, and the
//! fast path for the common command capsule (`plain_capsule`) takes only what the general
//! path takes, with the same SQE.
#![no_main]

use nvmemu_spec::Sqe;
use nvmemu_tcp::fabrics::{ConnectData, FabricsCommand};
use nvmemu_tcp::pdu::{self, CommonHeader, H2cPdu, Negotiated, Phase};
use zerocopy::FromBytes;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&knobs, rest)) = data.split_first() else {
        return;
    };
    let n = Negotiated {
        hdgst: knobs & 1 != 0,
        ddgst: knobs & 2 != 0,
        hpda: 0,
        cpda: (knobs >> 2) & 3,
        icd_max: 4096,
        maxh2cdata: 8192,
    };
    let phase = if knobs & 0x80 != 0 {
        Phase::Initializing
    } else {
        Phase::Established
    };
    if let Some(head) = rest.get(..pdu::CH_LEN) {
        let ch = CommonHeader::parse(head.try_into().unwrap_or(&[0; 8]));
        if let Ok(plen) = pdu::check_header(&ch, phase, &n) {
            assert!(plen <= n.max_h2c_pdu().max(pdu::IC_HLEN));
            if let Some(whole) = rest.get(..plen)
                && let Ok(H2cPdu::Command { data, .. } | H2cPdu::Data { data, .. }) =
                    pdu::decode(whole, phase, &n)
            {
                assert!(data.len() <= plen);
            }
        }
    }
    if phase == Phase::Established
        && let Some(fast) = pdu::plain_capsule(rest, &n)
    {
        let head = rest.get(..pdu::CH_LEN).and_then(|h| h.try_into().ok());
        let ch = CommonHeader::parse(head.unwrap_or(&[0; 8]));
        assert_eq!(pdu::check_header(&ch, phase, &n), Ok(pdu::CMD_HLEN));
        let general = pdu::decode(&rest[..pdu::CMD_HLEN], phase, &n);
        assert!(
            matches!(general, Ok(H2cPdu::Command { sqe, data: [] }) if sqe == fast),
            "plain_capsule took what decode gives as {general:?}"
        );
    }
    if let Ok((sqe, tail)) = Sqe::read_from_prefix(rest) {
        let _ = FabricsCommand::decode(&sqe);
        let _ = ConnectData::parse(tail);
    }
});
