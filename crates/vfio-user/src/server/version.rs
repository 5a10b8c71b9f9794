// SPDX-License-Identifier: Apache-2.0
//! VFIO_USER_VERSION negotiation (vfio-user spec "VFIO_USER_VERSION").
//!
//! Accepted: major 0 with any minor, with a NUL-terminated JSON object (QEMU 0.0) or with no
//! JSON at all (SPDK's client, 0.1, 4-byte payload). The reply is always 0.0 plus
//! [`SERVER_CAPABILITIES`]: no migration, no `write_multiple` (QEMU's flag for it collides
//! with its queued-send flag), no twin socket.

use serde_json::Value;
use tracing::debug;
use zerocopy::{FromBytes, IntoBytes};

use super::Reply;
use crate::Errno;
use crate::wire::{MAX_FDS, VersionWire};

/// The capabilities JSON the server sends (without its NUL terminator).
pub const SERVER_CAPABILITIES: &str = r#"{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576,"pgsizes":4096,"max_dma_maps":65535}}"#;

/// Spec default of `max_msg_fds` when the client sends no capabilities.
const DEFAULT_CLIENT_MAX_FDS: u32 = 1;

/// Validates the client's VERSION and builds the reply. Returns the client's `max_msg_fds`.
pub(super) fn handle(payload: &[u8]) -> Result<(Reply<'static>, u32), Errno> {
    let (req, json) = VersionWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    if req.major != 0 {
        debug!(target: "guest", major = req.major, "vfio-user: unsupported major version");
        return Err(Errno::INVAL);
    }
    let client_max_fds = parse_client_caps(json)?;
    let mut reply = VersionWire { major: 0, minor: 0 }.as_bytes().to_vec();
    reply.extend_from_slice(SERVER_CAPABILITIES.as_bytes());
    reply.push(0);
    Ok((Reply::bytes(reply), client_max_fds))
}

/// Parses the optional NUL-terminated JSON after major/minor; returns `max_msg_fds`.
fn parse_client_caps(json: &[u8]) -> Result<u32, Errno> {
    let Some((&0, text)) = json.split_last() else {
        if json.is_empty() {
            return Ok(DEFAULT_CLIENT_MAX_FDS);
        }
        debug!(target: "guest", "vfio-user: VERSION JSON not NUL-terminated");
        return Err(Errno::INVAL);
    };
    if text.is_empty() {
        return Ok(DEFAULT_CLIENT_MAX_FDS);
    }
    if text.contains(&0) {
        debug!(target: "guest", "vfio-user: VERSION JSON has an embedded NUL");
        return Err(Errno::INVAL);
    }
    let text = std::str::from_utf8(text).map_err(|_| Errno::INVAL)?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        debug!(target: "guest", error = %e, "vfio-user: malformed VERSION JSON");
        Errno::INVAL
    })?;
    let Value::Object(root) = value else {
        return Err(Errno::INVAL);
    };
    let Some(caps) = root.get("capabilities") else {
        return Ok(DEFAULT_CLIENT_MAX_FDS);
    };
    let Value::Object(caps) = caps else {
        return Err(Errno::INVAL);
    };
    match caps.get("max_msg_fds") {
        None => Ok(DEFAULT_CLIENT_MAX_FDS),
        Some(v) => {
            let n = v.as_u64().ok_or(Errno::INVAL)?;
            // We never send more than one fd; clamping keeps the value meaningful.
            Ok(u32::try_from(n.min(MAX_FDS as u64)).unwrap_or(DEFAULT_CLIENT_MAX_FDS))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(major: u16, minor: u16, json: &[u8]) -> Vec<u8> {
        let mut p = VersionWire { major, minor }.as_bytes().to_vec();
        p.extend_from_slice(json);
        p
    }

    #[test]
    fn reply_is_0_0_plus_nul_terminated_caps() {
        let (reply, fds) = handle(&req(0, 1, b"")).unwrap();
        assert_eq!(fds, 1);
        let p = reply.payload;
        assert_eq!(&p[..4], &[0, 0, 0, 0]);
        assert_eq!(p.last(), Some(&0));
        assert_eq!(&p[4..p.len() - 1], SERVER_CAPABILITIES.as_bytes());
        let v: Value = serde_json::from_str(SERVER_CAPABILITIES).unwrap();
        assert_eq!(v["capabilities"]["max_msg_fds"], 16);
        assert!(v["capabilities"].get("write_multiple").is_none());
        assert!(v["capabilities"].get("migration").is_none());
    }

    #[test]
    fn client_caps_are_parsed() {
        let qemu = br#"{"capabilities": {"max_msg_fds": 16, "max_data_xfer_size": 1048576, "pgsizes": 4096, "max_dma_maps": 65535, "write_multiple": true, "migration": {"pgsize": 4096, "max_bitmap_size": 268435456}}}"#;
        let mut j = qemu.to_vec();
        j.push(0);
        assert_eq!(handle(&req(0, 0, &j)).unwrap().1, 16);
        assert_eq!(handle(&req(0, 0, b"{}\0")).unwrap().1, 1);
        assert_eq!(handle(&req(0, 0, b"\0")).unwrap().1, 1);
        assert_eq!(
            handle(&req(0, 0, br#"{"capabilities":{"max_msg_fds":1000}}"#.iter().chain(b"\0").copied().collect::<Vec<_>>().as_slice())).unwrap().1,
            16
        );
    }

    #[test]
    fn malformed_versions_are_einval() {
        for bad in [
            req(1, 0, b""),
            vec![0, 0, 0],
            req(0, 0, b"{}"),
            req(0, 0, b"{\0}\0"),
            req(0, 0, b"[1,2]\0"),
            req(0, 0, b"{\"capabilities\":3}\0"),
            req(0, 0, b"{\"capabilities\":{\"max_msg_fds\":-1}}\0"),
            req(0, 0, b"{not json\0"),
            req(0, 0, &[0xff, 0xfe, 0]),
        ] {
            assert_eq!(handle(&bad).err(), Some(Errno::INVAL), "{bad:?}");
        }
    }
}
