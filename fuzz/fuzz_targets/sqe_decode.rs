// SPDX-License-Identifier: Apache-2.0
//! Arbitrary 64-byte SQEs through the typed admin and I/O decoders: they must never panic.
#![no_main]

use nvmemu_spec::Sqe;
use nvmemu_spec::command::{AdminCommand, IoCommand};
use zerocopy::FromBytes;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok((sqe, _)) = Sqe::read_from_prefix(data) {
        let _ = AdminCommand::decode(&sqe);
        let _ = IoCommand::decode(&sqe);
    }
});
