// SPDX-License-Identifier: Apache-2.0
//! Identifier text as SPDK writes it: UUIDs (`8-4-4-4-12` hex), NGUIDs (32 hex digits) and
//! EUI-64s (16 hex digits), parsed strictly and generated for new bdevs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Parses a UUID in `8-4-4-4-12` form (either case).
pub(crate) fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = text.split('-').collect();
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lens != [8, 4, 4, 4, 12] {
        return None;
    }
    parse_hex::<16>(&groups.concat())
}

/// Parses exactly `N` bytes of hex digits (no separators).
pub(crate) fn parse_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 || !text.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        let pair = text.get(i * 2..i * 2 + 2)?;
        *b = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// Formats 16 bytes as a lower-case UUID.
pub(crate) fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Formats bytes as upper-case hex (SPDK's NGUID / EUI-64 text).
pub(crate) fn format_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// A fresh version-4 style UUID: time, process id and a counter mixed by a 128-bit FNV-1a.
/// Unique enough for bdev identities; not a security token.
pub(crate) fn new_uuid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h: u128 = 0x6C62_272E_07BB_0142_62B8_2175_6295_C58D;
    for b in now
        .to_le_bytes()
        .iter()
        .chain(std::process::id().to_le_bytes().iter())
        .chain(n.to_le_bytes().iter())
    {
        h ^= u128::from(*b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013B);
    }
    let mut bytes = h.to_be_bytes();
    bytes[6] = (bytes[6] & 0x0F) | 0x40;
    bytes[8] = (bytes[8] & 0x3F) | 0x80;
    format_uuid(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips_and_rejects_malformed_text() {
        let u = new_uuid();
        let b = parse_uuid(&u).unwrap();
        assert_eq!(format_uuid(&b), u);
        assert_eq!(b[6] >> 4, 4);
        assert_ne!(new_uuid(), u);
        assert!(parse_uuid("not-a-uuid").is_none());
        assert!(parse_uuid("0000000-00000-0000-0000-000000000000").is_none());
        assert!(parse_uuid("zzzzzzzz-0000-0000-0000-000000000000").is_none());
        assert!(parse_uuid("ééééé").is_none());
        assert_eq!(
            parse_uuid("00112233-4455-6677-8899-AABBCCDDEEFF").unwrap()[15],
            0xFF
        );
    }

    #[test]
    fn hex_ids_need_exact_length() {
        assert_eq!(parse_hex::<2>("0aFF"), Some([0x0A, 0xFF]));
        assert_eq!(parse_hex::<2>("0aF"), None);
        assert_eq!(parse_hex::<2>("+aFF"), None);
        assert_eq!(format_hex(&[0x0A, 0xFF]), "0AFF");
    }
}
