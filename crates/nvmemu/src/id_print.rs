// SPDX-License-Identifier: Apache-2.0
//! Identify Controller and Identify Namespace pages printed as nvme-cli prints
//! them (`nvme id-ctrl`, `nvme id-ns`): same field names, order and number
//! formats in the normal output, same key names in JSON.
//!
//! Fields are read from the raw 4096-byte page by byte offset (NVMe Base 2.0,
//! Figures 275 and 276); the page comes from the device and is untrusted, so a
//! short page reads as zeroes and text fields are stripped of control bytes.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

/// A raw Identify page.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a>(pub &'a [u8]);

impl Page<'_> {
    fn bytes<const N: usize>(&self, off: usize) -> [u8; N] {
        off.checked_add(N)
            .and_then(|end| self.0.get(off..end))
            .and_then(|s| s.try_into().ok())
            .unwrap_or([0; N])
    }
    fn u8(&self, off: usize) -> u8 {
        self.0.get(off).copied().unwrap_or(0)
    }
    fn u16(&self, off: usize) -> u16 {
        u16::from_le_bytes(self.bytes(off))
    }
    fn u32(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.bytes(off))
    }
    fn u64(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.bytes(off))
    }
    fn u128(&self, off: usize) -> u128 {
        u128::from_le_bytes(self.bytes(off))
    }
    /// `%-.*s`: up to `len` bytes, ending at the first NUL; control bytes become '.'.
    fn text(&self, off: usize, len: usize) -> String {
        let raw = off
            .checked_add(len)
            .and_then(|end| self.0.get(off..end))
            .unwrap_or(&[]);
        raw.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| {
                if c == b' ' || c.is_ascii_graphic() {
                    char::from(c)
                } else {
                    '.'
                }
            })
            .collect()
    }
    fn hex(&self, off: usize, len: usize) -> String {
        (0..len).fold(String::new(), |mut s, i| {
            let _ = write!(s, "{:02x}", self.u8(off + i));
            s
        })
    }
}

/// C's `%#x`: `0` for zero, `0x..` otherwise.
fn hx(v: impl Into<u128>) -> String {
    match v.into() {
        0 => "0".to_owned(),
        v => format!("{v:#x}"),
    }
}

/// A 128-bit count as JSON: exact when it fits 64 bits.
fn big(v: u128) -> Value {
    match u64::try_from(v) {
        Ok(v) => json!(v),
        Err(_) => json!(v as f64),
    }
}

/// `util_uuid_to_string`: 8-4-4-4-12 lowercase hex.
fn uuid(p: Page<'_>, off: usize) -> String {
    let h = p.hex(off, 16);
    let part = |a: usize, b: usize| h.get(a..b).unwrap_or("");
    format!(
        "{}-{}-{}-{}-{}",
        part(0, 8),
        part(8, 12),
        part(12, 16),
        part(16, 20),
        part(20, 32)
    )
}

/// How a field prints in the normal output.
#[derive(Debug, Clone, Copy)]
enum Fmt {
    /// `%d` / `%u`.
    Dec,
    /// `%#x`.
    Hex,
}

/// Identify Controller fields in nvme-cli's order: (name, offset, width in bytes, format).
const CTRL_HEAD: &[(&str, usize, usize, Fmt)] =
    &[("vid", 0, 2, Fmt::Hex), ("ssvid", 2, 2, Fmt::Hex)];
const CTRL_MID: &[(&str, usize, usize, Fmt)] = &[("rab", 72, 1, Fmt::Dec)];
const CTRL_AFTER_IEEE: &[(&str, usize, usize, Fmt)] = &[
    ("cmic", 76, 1, Fmt::Hex),
    ("mdts", 77, 1, Fmt::Dec),
    ("cntlid", 78, 2, Fmt::Hex),
    ("ver", 80, 4, Fmt::Hex),
    ("rtd3r", 84, 4, Fmt::Hex),
    ("rtd3e", 88, 4, Fmt::Hex),
    ("oaes", 92, 4, Fmt::Hex),
    ("ctratt", 96, 4, Fmt::Hex),
    ("rrls", 100, 2, Fmt::Hex),
    ("cntrltype", 111, 1, Fmt::Dec),
];
const CTRL_AFTER_FGUID: &[(&str, usize, usize, Fmt)] = &[
    ("crdt1", 128, 2, Fmt::Dec),
    ("crdt2", 130, 2, Fmt::Dec),
    ("crdt3", 132, 2, Fmt::Dec),
    ("nvmsr", 253, 1, Fmt::Dec),
    ("vwci", 254, 1, Fmt::Dec),
    ("mec", 255, 1, Fmt::Dec),
    ("oacs", 256, 2, Fmt::Hex),
    ("acl", 258, 1, Fmt::Dec),
    ("aerl", 259, 1, Fmt::Dec),
    ("frmw", 260, 1, Fmt::Hex),
    ("lpa", 261, 1, Fmt::Hex),
    ("elpe", 262, 1, Fmt::Dec),
    ("npss", 263, 1, Fmt::Dec),
    ("avscc", 264, 1, Fmt::Hex),
    ("apsta", 265, 1, Fmt::Hex),
    ("wctemp", 266, 2, Fmt::Dec),
    ("cctemp", 268, 2, Fmt::Dec),
    ("mtfa", 270, 2, Fmt::Dec),
    ("hmpre", 272, 4, Fmt::Dec),
    ("hmmin", 276, 4, Fmt::Dec),
    ("tnvmcap", 280, 16, Fmt::Dec),
    ("unvmcap", 296, 16, Fmt::Dec),
    ("rpmbs", 312, 4, Fmt::Hex),
    ("edstt", 316, 2, Fmt::Dec),
    ("dsto", 318, 1, Fmt::Dec),
    ("fwug", 319, 1, Fmt::Dec),
    ("kas", 320, 2, Fmt::Dec),
    ("hctma", 322, 2, Fmt::Hex),
    ("mntmt", 324, 2, Fmt::Dec),
    ("mxtmt", 326, 2, Fmt::Dec),
    ("sanicap", 328, 4, Fmt::Hex),
    ("hmminds", 332, 4, Fmt::Dec),
    ("hmmaxd", 336, 2, Fmt::Dec),
    ("nsetidmax", 338, 2, Fmt::Dec),
    ("endgidmax", 340, 2, Fmt::Dec),
    ("anatt", 342, 1, Fmt::Dec),
    ("anacap", 343, 1, Fmt::Dec),
    ("anagrpmax", 344, 4, Fmt::Dec),
    ("nanagrpid", 348, 4, Fmt::Dec),
    ("pels", 352, 4, Fmt::Dec),
    ("domainid", 356, 2, Fmt::Dec),
    ("megcap", 368, 16, Fmt::Dec),
    ("sqes", 512, 1, Fmt::Hex),
    ("cqes", 513, 1, Fmt::Hex),
    ("maxcmd", 514, 2, Fmt::Dec),
    ("nn", 516, 4, Fmt::Dec),
    ("oncs", 520, 2, Fmt::Hex),
    ("fuses", 522, 2, Fmt::Hex),
    ("fna", 524, 1, Fmt::Hex),
    ("vwc", 525, 1, Fmt::Hex),
    ("awun", 526, 2, Fmt::Dec),
    ("awupf", 528, 2, Fmt::Dec),
    ("icsvscc", 530, 1, Fmt::Dec),
    ("nwpc", 531, 1, Fmt::Dec),
    ("acwu", 532, 2, Fmt::Dec),
    ("ocfs", 534, 2, Fmt::Hex),
    ("sgls", 536, 4, Fmt::Hex),
    ("mnan", 540, 4, Fmt::Dec),
    ("maxdna", 544, 16, Fmt::Dec),
    ("maxcna", 560, 4, Fmt::Dec),
];
const CTRL_TAIL: &[(&str, usize, usize, Fmt)] = &[
    ("ioccsz", 1792, 4, Fmt::Dec),
    ("iorcsz", 1796, 4, Fmt::Dec),
    ("icdoff", 1800, 2, Fmt::Dec),
    ("fcatt", 1802, 1, Fmt::Hex),
    ("msdbd", 1803, 1, Fmt::Dec),
    ("ofcs", 1804, 2, Fmt::Hex),
];

/// Offset of the Power State Descriptors and the size of one.
const PSD_OFFSET: usize = 2048;
const PSD_BYTES: usize = 32;

fn field(p: Page<'_>, off: usize, width: usize) -> u128 {
    match width {
        1 => p.u8(off).into(),
        2 => p.u16(off).into(),
        4 => p.u32(off).into(),
        8 => p.u64(off).into(),
        _ => p.u128(off),
    }
}

fn line(out: &mut String, width: usize, name: &str, value: &str) {
    // nvme-cli prints this one label with a tab instead of padding (`"nsattr\t: %u"`).
    if name == "nsattr" {
        let _ = writeln!(out, "nsattr\t: {value}");
        return;
    }
    let _ = writeln!(out, "{name:<width$}: {value}");
}

fn numeric(out: &mut String, width: usize, p: Page<'_>, fields: &[(&str, usize, usize, Fmt)]) {
    for &(name, off, w, f) in fields {
        let v = field(p, off, w);
        let s = match f {
            Fmt::Dec => v.to_string(),
            Fmt::Hex => hx(v),
        };
        line(out, width, name, &s);
    }
}

fn numeric_json(o: &mut Map<String, Value>, p: Page<'_>, fields: &[(&str, usize, usize, Fmt)]) {
    for &(name, off, w, _) in fields {
        o.insert(name.into(), big(field(p, off, w)));
    }
}

/// `print_ps_power_and_scale`.
fn power(value: u16, scale: u8) -> String {
    match scale & 0x3 {
        0 => "-".into(),
        1 => format!("{}.{:04}W", value / 10000, value % 10000),
        2 => format!("{}.{:02}W", value / 100, value % 100),
        _ => "reserved".into(),
    }
}

fn workload(apw: u8) -> &'static str {
    match apw & 0x7 {
        0 => "-",
        1 => "1MiB 32 RW, 30s idle",
        2 => "80K 128KiB SW",
        _ => "reserved",
    }
}

/// `nvme id-ctrl` normal output.
pub fn ctrl_text(p: Page<'_>) -> String {
    let w = 10;
    let mut out = String::from("NVME Identify Controller:\n");
    numeric(&mut out, w, p, CTRL_HEAD);
    line(&mut out, w, "sn", &p.text(4, 20));
    line(&mut out, w, "mn", &p.text(24, 40));
    line(&mut out, w, "fr", &p.text(64, 8));
    numeric(&mut out, w, p, CTRL_MID);
    let ieee = format!("{:02x}{:02x}{:02x}", p.u8(75), p.u8(74), p.u8(73));
    line(&mut out, w, "ieee", &ieee);
    numeric(&mut out, w, p, CTRL_AFTER_IEEE);
    line(&mut out, w, "fguid", &uuid(p, 112));
    numeric(&mut out, w, p, CTRL_AFTER_FGUID);
    line(&mut out, w, "subnqn", &p.text(768, 256));
    numeric(&mut out, w, p, CTRL_TAIL);
    for i in 0..=usize::from(p.u8(263)) {
        let d = PSD_OFFSET + i * PSD_BYTES;
        let mp = p.u16(d);
        let flags = p.u8(d + 3);
        let mp = if flags & 1 != 0 {
            format!("{}.{:04}W", mp / 10000, mp % 10000)
        } else {
            format!("{}.{:02}W", mp / 100, mp % 100)
        };
        let nonop = if flags & 2 != 0 { "non-" } else { "" };
        let _ = writeln!(
            out,
            "ps {i:4} : mp:{mp} {nonop}operational enlat:{} exlat:{} rrt:{} rrl:{}\n          \
             rwt:{} rwl:{} idle_power:{} active_power:{}\n          active_power_workload:{}",
            p.u32(d + 4),
            p.u32(d + 8),
            p.u8(d + 12),
            p.u8(d + 13),
            p.u8(d + 14),
            p.u8(d + 15),
            power(p.u16(d + 16), p.u8(d + 18) >> 6),
            power(p.u16(d + 20), p.u8(d + 22) >> 6),
            workload(p.u8(d + 22)),
        );
    }
    out
}

/// `nvme id-ctrl -o json`.
pub fn ctrl_json(p: Page<'_>) -> Value {
    let mut o = Map::new();
    numeric_json(&mut o, p, CTRL_HEAD);
    o.insert("sn".into(), json!(p.text(4, 20)));
    o.insert("mn".into(), json!(p.text(24, 40)));
    o.insert("fr".into(), json!(p.text(64, 8)));
    numeric_json(&mut o, p, CTRL_MID);
    let ieee = u32::from(p.u8(75)) << 16 | u32::from(p.u8(74)) << 8 | u32::from(p.u8(73));
    o.insert("ieee".into(), json!(ieee));
    numeric_json(&mut o, p, CTRL_AFTER_IEEE);
    o.insert("fguid".into(), json!(uuid(p, 112)));
    numeric_json(&mut o, p, CTRL_AFTER_FGUID);
    o.insert("subnqn".into(), json!(p.text(768, 256)));
    numeric_json(&mut o, p, CTRL_TAIL);
    let psds: Vec<Value> = (0..=usize::from(p.u8(263)))
        .map(|i| {
            let d = PSD_OFFSET + i * PSD_BYTES;
            let flags = p.u8(d + 3);
            json!({
                "max_power": p.u16(d),
                "max_power_scale": flags & 1,
                "non-operational_state": (flags >> 1) & 1,
                "entry_lat": p.u32(d + 4),
                "exit_lat": p.u32(d + 8),
                "read_tput": p.u8(d + 12),
                "read_lat": p.u8(d + 13),
                "write_tput": p.u8(d + 14),
                "write_lat": p.u8(d + 15),
                "idle_power": p.u16(d + 16),
                "idle_scale": p.u8(d + 18) >> 6,
                "active_power": p.u16(d + 20),
                "active_power_work": p.u8(d + 22) & 0x7,
                "active_scale": p.u8(d + 22) >> 6,
            })
        })
        .collect();
    o.insert("psds".into(), Value::Array(psds));
    Value::Object(o)
}

const NS_HEAD: &[(&str, usize, usize, Fmt)] = &[
    ("nsze", 0, 8, Fmt::Hex),
    ("ncap", 8, 8, Fmt::Hex),
    ("nuse", 16, 8, Fmt::Hex),
    ("nsfeat", 24, 1, Fmt::Hex),
    ("nlbaf", 25, 1, Fmt::Dec),
    ("flbas", 26, 1, Fmt::Hex),
    ("mc", 27, 1, Fmt::Hex),
    ("dpc", 28, 1, Fmt::Hex),
    ("dps", 29, 1, Fmt::Hex),
    ("nmic", 30, 1, Fmt::Hex),
    ("rescap", 31, 1, Fmt::Hex),
    ("fpi", 32, 1, Fmt::Hex),
    ("dlfeat", 33, 1, Fmt::Dec),
    ("nawun", 34, 2, Fmt::Dec),
    ("nawupf", 36, 2, Fmt::Dec),
    ("nacwu", 38, 2, Fmt::Dec),
    ("nabsn", 40, 2, Fmt::Dec),
    ("nabo", 42, 2, Fmt::Dec),
    ("nabspf", 44, 2, Fmt::Dec),
    ("noiob", 46, 2, Fmt::Dec),
    ("nvmcap", 48, 16, Fmt::Dec),
];
/// Shown only when NSFEAT bit 4 (OPTPERF) is set.
const NS_OPTPERF: &[(&str, usize, usize, Fmt)] = &[
    ("npwg", 64, 2, Fmt::Dec),
    ("npwa", 66, 2, Fmt::Dec),
    ("npdg", 68, 2, Fmt::Dec),
    ("npda", 70, 2, Fmt::Dec),
    ("nows", 72, 2, Fmt::Dec),
];
const NS_TAIL: &[(&str, usize, usize, Fmt)] = &[
    ("mssrl", 74, 2, Fmt::Dec),
    ("mcl", 76, 4, Fmt::Dec),
    ("msrc", 80, 1, Fmt::Dec),
    ("nulbaf", 82, 1, Fmt::Dec),
    ("anagrpid", 92, 4, Fmt::Dec),
    ("nsattr", 99, 1, Fmt::Dec),
    ("nvmsetid", 100, 2, Fmt::Dec),
    ("endgid", 102, 2, Fmt::Dec),
];
/// LBA Format descriptors: offset and how many there can be.
const LBAF_OFFSET: usize = 128;
const LBAF_MAX: usize = 64;

/// `(ms, lbads, rp)` of each LBA format the namespace reports (NLBAF + NULBAF, zero-based).
fn lbafs(p: Page<'_>) -> Vec<(u16, u8, u8)> {
    let n = (usize::from(p.u8(25)) + usize::from(p.u8(82)) + 1).min(LBAF_MAX);
    (0..n)
        .map(|i| {
            let off = LBAF_OFFSET + 4 * i;
            (p.u16(off), p.u8(off + 2), p.u8(off + 3) & 0x3)
        })
        .collect()
}

/// The LBA format in use (FLBAS bits 3:0, bits 6:5 extend it past 16 formats).
fn flbas_index(flbas: u8) -> usize {
    usize::from(flbas & 0xF) | usize::from((flbas >> 5) & 0x3) << 4
}

/// `nvme id-ns` normal output for namespace `nsid`.
pub fn ns_text(nsid: u32, p: Page<'_>) -> String {
    let w = 8;
    let mut out = format!("NVME Identify Namespace {nsid}:\n");
    numeric(&mut out, w, p, NS_HEAD);
    if p.u8(24) & 0x10 != 0 {
        numeric(&mut out, w, p, NS_OPTPERF);
    }
    numeric(&mut out, w, p, NS_TAIL);
    line(&mut out, w, "nguid", &p.hex(104, 16));
    line(&mut out, w, "eui64", &p.hex(120, 8));
    let in_use = flbas_index(p.u8(26));
    for (i, (ms, lbads, rp)) in lbafs(p).into_iter().enumerate() {
        let mark = if i == in_use { "(in use)" } else { "" };
        let _ = writeln!(
            out,
            "lbaf {i:2} : ms:{ms:<3} lbads:{lbads:<2} rp:{} {mark}",
            hx(rp)
        );
    }
    out
}

/// `nvme id-ns -o json` for namespace `nsid` (plus an `nsid` key).
pub fn ns_json(nsid: u32, p: Page<'_>) -> Value {
    let mut o = Map::new();
    o.insert("nsid".into(), json!(nsid));
    numeric_json(&mut o, p, NS_HEAD);
    if p.u8(24) & 0x10 != 0 {
        numeric_json(&mut o, p, NS_OPTPERF);
    }
    numeric_json(&mut o, p, NS_TAIL);
    o.insert("nguid".into(), json!(p.hex(104, 16)));
    o.insert("eui64".into(), json!(p.hex(120, 8)));
    let lbafs: Vec<Value> = lbafs(p)
        .into_iter()
        .map(|(ms, ds, rp)| json!({ "ms": ms, "ds": ds, "rp": rp }))
        .collect();
    o.insert("lbafs".into(), Value::Array(lbafs));
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl_page() -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0..2].copy_from_slice(&0x4e58u16.to_le_bytes());
        b[2..4].copy_from_slice(&0x4e58u16.to_le_bytes());
        b[4..24].copy_from_slice(b"SN123               ");
        b[24..64].copy_from_slice(&[b' '; 40]);
        b[24..29].copy_from_slice(b"Model");
        b[64..72].copy_from_slice(b"0.1     ");
        b[73..76].copy_from_slice(&[0x56, 0x34, 0x12]);
        b[77] = 8;
        b[78..80].copy_from_slice(&1u16.to_le_bytes());
        b[80..84].copy_from_slice(&0x10400u32.to_le_bytes());
        b[280] = 0x00;
        b[281] = 0x04; // tnvmcap 1024
        b[512] = 0x66;
        b[513] = 0x44;
        b[516] = 1;
        b[768..772].copy_from_slice(b"nqn\x1b");
        b[2048..2050].copy_from_slice(&2500u16.to_le_bytes());
        b
    }

    #[test]
    fn ctrl_text_uses_nvme_cli_names_and_formats() {
        let t = ctrl_text(Page(&ctrl_page()));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "NVME Identify Controller:");
        assert_eq!(lines[1], "vid       : 0x4e58");
        assert_eq!(lines[2], "ssvid     : 0x4e58");
        assert_eq!(lines[3], "sn        : SN123               ");
        assert_eq!(lines[4], format!("mn        : Model{}", " ".repeat(35)));
        assert_eq!(lines[5], "fr        : 0.1     ");
        assert_eq!(lines[6], "rab       : 0");
        assert_eq!(lines[7], "ieee      : 123456");
        assert_eq!(lines[8], "cmic      : 0");
        assert_eq!(lines[9], "mdts      : 8");
        assert_eq!(lines[10], "cntlid    : 0x1");
        assert_eq!(lines[11], "ver       : 0x10400");
        assert!(t.contains("\nfguid     : 00000000-0000-0000-0000-000000000000\n"));
        assert!(t.contains("\ntnvmcap   : 1024\n"));
        assert!(t.contains("\nsqes      : 0x66\ncqes      : 0x44\n"));
        assert!(t.contains("\nnn        : 1\n"));
        assert!(t.contains("\nsubnqn    : nqn.\n"), "control byte replaced");
        assert!(t.contains(
            "\nps    0 : mp:25.00W operational enlat:0 exlat:0 rrt:0 rrl:0\n          \
             rwt:0 rwl:0 idle_power:- active_power:-\n          active_power_workload:-\n"
        ));
        let order: Vec<&str> = t.lines().filter_map(|l| l.split(" :").next()).collect();
        let pos = |k: &str| order.iter().position(|n| n.trim_end() == k).unwrap();
        assert!(pos("vid") < pos("mdts") && pos("mdts") < pos("oacs"));
        assert!(pos("oacs") < pos("sqes") && pos("sqes") < pos("subnqn"));
    }

    #[test]
    fn ctrl_json_has_nvme_cli_keys() {
        let v = ctrl_json(Page(&ctrl_page()));
        assert_eq!(v["vid"], 0x4e58);
        assert_eq!(v["sn"], "SN123               ");
        assert_eq!(v["ieee"], 0x123456);
        assert_eq!(v["mdts"], 8);
        assert_eq!(v["tnvmcap"], 1024);
        assert_eq!(v["psds"][0]["max_power"], 2500);
        for k in [
            "oacs", "oncs", "sgls", "nn", "ver", "cntlid", "subnqn", "fguid",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
    }

    fn ns_page() -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0..8].copy_from_slice(&0x20_0000u64.to_le_bytes());
        b[8..16].copy_from_slice(&0x20_0000u64.to_le_bytes());
        b[25] = 1; // two formats
        b[26] = 0;
        b[130] = 9;
        b[134] = 12;
        b
    }

    #[test]
    fn ns_text_matches_nvme_cli() {
        let t = ns_text(1, Page(&ns_page()));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "NVME Identify Namespace 1:");
        assert_eq!(lines[1], "nsze    : 0x200000");
        assert_eq!(lines[2], "ncap    : 0x200000");
        assert_eq!(lines[3], "nuse    : 0");
        assert_eq!(lines[4], "nsfeat  : 0");
        assert_eq!(lines[5], "nlbaf   : 1");
        assert!(t.contains("\nanagrpid: 0\nnsattr\t: 0\nnvmsetid: 0\nendgid  : 0\n"));
        assert!(!t.contains("npwg"));
        assert!(t.contains("\nnguid   : 00000000000000000000000000000000\n"));
        assert!(t.contains("\neui64   : 0000000000000000\n"));
        assert!(t.contains("\nlbaf  0 : ms:0   lbads:9  rp:0 (in use)\n"));
        assert!(t.ends_with("\nlbaf  1 : ms:0   lbads:12 rp:0 \n"));
    }

    #[test]
    fn ns_json_and_short_pages() {
        let v = ns_json(3, Page(&ns_page()));
        assert_eq!(v["nsid"], 3);
        assert_eq!(v["nsze"], 0x20_0000);
        assert_eq!(v["lbafs"][1]["ds"], 12);
        // A truncated page reads as zeroes instead of panicking.
        let t = ns_text(1, Page(&[0xFF; 30]));
        assert!(t.contains("nlbaf   : 255"));
        let _ = ctrl_text(Page(&[]));
        assert_eq!(flbas_index(0x21), 0x11);
    }
}
