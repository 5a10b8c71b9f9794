// SPDX-License-Identifier: Apache-2.0
//! Property: over a real socket, whatever messages a client pipelines (any command, any
//! header flags, NO_REPLY, replies and unknown types, sizes below the header's own), the
//! server answers exactly the ones that want an answer, in order, each with its msg_id and
//! command, and keeps the connection open.

use std::os::unix::net::UnixStream;
use std::time::Duration;

use proptest::prelude::*;
use zerocopy::IntoBytes;

use crate::fuzz::AcceptAll;
use crate::wire::{Header, msg_flags};
use crate::{Client, Deadlines, StopHandle, serve_connection};

#[derive(Debug, Clone)]
struct Msg {
    command: u16,
    flags: u32,
    payload: Vec<u8>,
    /// Claim a `msg_size` below 16 (and send the header alone).
    short: bool,
}

fn msg() -> impl Strategy<Value = Msg> {
    let flags = prop_oneof![
        4 => Just(msg_flags::TYPE_COMMAND),
        1 => Just(msg_flags::NO_REPLY),
        1 => Just(msg_flags::TYPE_REPLY),
        1 => Just(2u32),
        1 => any::<u32>(),
    ];
    (
        prop_oneof![0u16..20, any::<u16>()],
        flags,
        prop::collection::vec(any::<u8>(), 0..64),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(command, flags, payload, short)| Msg {
            command,
            flags,
            payload,
            short,
        })
}

fn wants_reply(flags: u32) -> bool {
    flags & msg_flags::TYPE_MASK != msg_flags::TYPE_REPLY && flags & msg_flags::NO_REPLY == 0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_message_that_wants_a_reply_gets_exactly_one_in_order(
        msgs in prop::collection::vec(msg(), 0..24),
    ) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let stop = StopHandle::new().unwrap();
            serve_connection(theirs, &mut AcceptAll, &stop, &Deadlines::default())
        });
        let mut client = Client::unnegotiated(ours, Duration::from_secs(10)).unwrap();
        let mut expected = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            let msg_id = u16::try_from(i).unwrap();
            let len = u32::try_from(m.payload.len()).unwrap();
            let size = if m.short { len % 16 } else { 16 + len };
            let header = Header { msg_id, command: m.command, msg_size: size, flags: m.flags, error: 0 };
            let mut bytes = header.as_bytes().to_vec();
            if !m.short {
                bytes.extend_from_slice(&m.payload);
            }
            client.raw_send(&bytes, &[]).unwrap();
            if wants_reply(m.flags) {
                expected.push((msg_id, m.command));
            }
        }
        // A ping (DEVICE_GET_INFO) last: its answer proves nothing else is still coming.
        let ping = u16::try_from(msgs.len()).unwrap();
        let header = Header { msg_id: ping, command: 4, msg_size: 32, flags: 0, error: 0 };
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(&[16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        client.raw_send(&bytes, &[]).unwrap();
        expected.push((ping, 4));
        for (msg_id, command) in expected {
            let r = client.raw_recv().unwrap();
            prop_assert_eq!((r.header.msg_id, r.header.command), (msg_id, command));
            prop_assert_eq!(r.header.msg_type(), msg_flags::TYPE_REPLY);
        }
        drop(client);
        prop_assert!(server.join().unwrap().is_ok());
    }
}
