// SPDX-License-Identifier: Apache-2.0
//! Client-side parsing of the server's VERSION capabilities and region-info capabilities.

use serde_json::Value;
use zerocopy::FromBytes;

use crate::types::{OwnedRegionInfo, SparseArea};
use crate::wire::{
    CAP_SPARSE_MMAP, CapHeaderWire, MAX_FDS, REGION_FLAG_CAPS, RegionInfoWire, SparseAreaWire,
    SparseCapWire, VersionWire,
};

/// Capabilities the server advertised in its VERSION reply (spec defaults when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCaps {
    /// Minor version the server replied with.
    pub minor: u16,
    /// Most fds the server accepts per message (default 1).
    pub max_msg_fds: u32,
    /// Largest REGION_READ/WRITE count the server accepts (default 1 MiB).
    pub max_data_xfer_size: u64,
}

impl Default for ServerCaps {
    fn default() -> Self {
        Self {
            minor: 0,
            max_msg_fds: 1,
            max_data_xfer_size: 1024 * 1024,
        }
    }
}

impl ServerCaps {
    pub(super) fn max_msg_fds_usize(&self) -> usize {
        usize::try_from(self.max_msg_fds).unwrap_or(0).min(MAX_FDS)
    }

    /// Parses a VERSION reply payload.
    pub(super) fn parse(payload: &[u8]) -> Result<Self, &'static str> {
        let (v, json) =
            VersionWire::read_from_prefix(payload).map_err(|_| "short VERSION reply")?;
        if v.major != 0 || v.minor != 0 {
            return Err("server chose a version we did not offer");
        }
        let mut caps = ServerCaps {
            minor: v.minor,
            ..Default::default()
        };
        let Some((&0, text)) = json.split_last() else {
            return if json.is_empty() {
                Ok(caps)
            } else {
                Err("JSON not NUL-terminated")
            };
        };
        if text.is_empty() {
            return Ok(caps);
        }
        let text = std::str::from_utf8(text).map_err(|_| "JSON not UTF-8")?;
        let value: Value = serde_json::from_str(text).map_err(|_| "malformed JSON")?;
        let root = value.as_object().ok_or("JSON is not an object")?;
        let Some(c) = root.get("capabilities") else {
            return Ok(caps);
        };
        let c = c.as_object().ok_or("capabilities is not an object")?;
        if let Some(v) = c.get("max_msg_fds") {
            let n = v.as_u64().ok_or("max_msg_fds is not a number")?;
            caps.max_msg_fds = u32::try_from(n).map_err(|_| "max_msg_fds too large")?;
        }
        if let Some(v) = c.get("max_data_xfer_size") {
            caps.max_data_xfer_size = v.as_u64().ok_or("max_data_xfer_size is not a number")?;
        }
        Ok(caps)
    }
}

/// Most capabilities followed in one chain.
const MAX_CAPS: usize = 16;

/// Parses a full region-info reply, following the capability chain inside the payload.
pub(super) fn parse_region_info(payload: &[u8]) -> Result<OwnedRegionInfo, &'static str> {
    let (head, _) = RegionInfoWire::read_from_prefix(payload).map_err(|_| "short region info")?;
    let mut info = OwnedRegionInfo {
        flags: head.flags,
        size: head.size,
        file_offset: head.offset,
        sparse: Vec::new(),
    };
    if head.flags & REGION_FLAG_CAPS == 0 {
        return Ok(info);
    }
    let mut offset = usize::try_from(head.cap_offset).map_err(|_| "bad cap_offset")?;
    for _ in 0..MAX_CAPS {
        if offset < size_of::<RegionInfoWire>() {
            return Err("capability inside the fixed header");
        }
        let at = payload.get(offset..).ok_or("capability beyond the reply")?;
        let (cap, _) = CapHeaderWire::read_from_prefix(at).map_err(|_| "truncated capability")?;
        if cap.id == CAP_SPARSE_MMAP {
            let (sparse, mut areas) =
                SparseCapWire::read_from_prefix(at).map_err(|_| "truncated sparse capability")?;
            for _ in 0..sparse.nr_areas {
                let (area, rest) =
                    SparseAreaWire::read_from_prefix(areas).map_err(|_| "truncated sparse area")?;
                info.sparse.push(SparseArea {
                    offset: area.offset,
                    size: area.size,
                });
                areas = rest;
            }
        }
        let next = usize::try_from(cap.next).map_err(|_| "bad next")?;
        if next == 0 {
            return Ok(info);
        }
        if next <= offset {
            return Err("capability chain goes backwards");
        }
        offset = next;
    }
    Err("capability chain too long")
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn version_reply_defaults_and_values() {
        let mut p = VersionWire { major: 0, minor: 0 }.as_bytes().to_vec();
        assert_eq!(ServerCaps::parse(&p).unwrap(), ServerCaps::default());
        p.extend_from_slice(br#"{"capabilities":{"max_msg_fds":8,"max_data_xfer_size":4096}}"#);
        p.push(0);
        let c = ServerCaps::parse(&p).unwrap();
        assert_eq!((c.max_msg_fds, c.max_data_xfer_size), (8, 4096));
        p.pop();
        assert!(ServerCaps::parse(&p).is_err());
    }

    #[test]
    fn looping_or_truncated_caps_are_rejected() {
        let head = RegionInfoWire {
            argsz: 48,
            flags: REGION_FLAG_CAPS,
            index: 0,
            cap_offset: 32,
            size: 0,
            offset: 0,
        };
        let mut p = head.as_bytes().to_vec();
        p.extend_from_slice(
            CapHeaderWire {
                id: 9,
                version: 1,
                next: 32,
            }
            .as_bytes(),
        );
        assert_eq!(
            parse_region_info(&p).err(),
            Some("capability chain goes backwards")
        );
        let cap = SparseCapWire {
            header: CapHeaderWire {
                id: 1,
                version: 1,
                next: 0,
            },
            nr_areas: 1000,
            reserved: 0,
        };
        let mut p = head.as_bytes().to_vec();
        p.extend_from_slice(cap.as_bytes());
        assert_eq!(parse_region_info(&p).err(), Some("truncated sparse area"));
    }
}
