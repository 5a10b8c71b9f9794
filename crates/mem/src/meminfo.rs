// SPDX-License-Identifier: Apache-2.0
//! What the kernel says about memory: `/proc/meminfo` (how much can still be backed) and
//! `/proc/self/smaps` (how much of one mapping is resident). Plain text parsing, no `unsafe`.

use std::fmt;
use std::io::BufRead;

/// The figures of `/proc/meminfo` that decide whether a mapping can be backed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemInfo {
    /// `MemAvailable`: bytes the kernel can hand out without swapping, in bytes.
    pub available: u64,
    /// `HugePages_Free - HugePages_Rsvd`: pool pages nobody has claimed yet.
    pub huge_pages_free: u64,
    /// `Hugepagesize`: the default huge page size, in bytes (0 when the kernel has none).
    pub huge_page_size: u64,
}

impl MemInfo {
    /// Read `/proc/meminfo`; `None` when it cannot be read or lacks `MemAvailable` (the
    /// caller then skips its checks and lets the kernel decide).
    pub fn read() -> Option<MemInfo> {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        MemInfo::parse(&text)
    }

    /// Parse the text of `/proc/meminfo` (values in kB, page counts bare).
    pub fn parse(text: &str) -> Option<MemInfo> {
        let mut available = None;
        let (mut free, mut rsvd, mut size) = (0u64, 0u64, 0u64);
        for line in text.lines() {
            let Some((key, rest)) = line.split_once(':') else {
                continue;
            };
            let value = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            match (key, value) {
                ("MemAvailable", Some(kb)) => available = Some(kib(kb)),
                ("HugePages_Free", Some(n)) => free = n,
                ("HugePages_Rsvd", Some(n)) => rsvd = n,
                ("Hugepagesize", Some(kb)) => size = kib(kb),
                _ => {}
            }
        }
        Some(MemInfo {
            available: available?,
            huge_pages_free: free.saturating_sub(rsvd),
            huge_page_size: size,
        })
    }
}

/// kB as `/proc` prints them, in bytes (saturating: the text is the kernel's, but a parser
/// should not overflow on anything).
fn kib(kb: u64) -> u64 {
    kb.saturating_mul(1024)
}

/// How much of a mapping is backed by memory right now (`/proc/self/smaps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Residency {
    /// Bytes resident: `Rss` plus hugetlbfs pages (`Private_Hugetlb`, `Shared_Hugetlb`).
    /// Pages that map the kernel's shared zero page are not counted.
    pub resident_bytes: u64,
    /// Of those, bytes in transparent huge pages (`AnonHugePages`).
    pub transparent_huge_bytes: u64,
}

/// Sum the smaps entries of the VMAs that overlap `[start, end)`: a mapping may have been
/// split into several VMAs. The caller makes sure no VMA of another mapping overlaps the
/// range (guard areas keep the kernel from merging neighbours into it).
pub(crate) fn parse_smaps(text: impl BufRead, start: usize, end: usize) -> Residency {
    let mut r = Residency::default();
    let mut inside = false;
    for line in text.lines().map_while(Result::ok) {
        if let Some((lo, hi)) = vma_range(&line) {
            inside = lo < end && hi > start;
            continue;
        }
        if !inside {
            continue;
        }
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(kb) = rest.split_whitespace().next().and_then(|v| v.parse().ok()) else {
            continue;
        };
        match key {
            "Rss" | "Private_Hugetlb" | "Shared_Hugetlb" => {
                r.resident_bytes = r.resident_bytes.saturating_add(kib(kb));
            }
            "AnonHugePages" => {
                r.transparent_huge_bytes = r.transparent_huge_bytes.saturating_add(kib(kb));
            }
            _ => {}
        }
    }
    r
}

/// The address range of a smaps header line (`7f00-7f80 rw-p 00000000 00:00 0 ...`).
fn vma_range(line: &str) -> Option<(usize, usize)> {
    let first = line.split_whitespace().next()?;
    let (lo, hi) = first.split_once('-')?;
    Some((
        usize::from_str_radix(lo, 16).ok()?,
        usize::from_str_radix(hi, 16).ok()?,
    ))
}

/// A byte count for people: `16.0 GiB`, `512.0 MiB`, `4.0 KiB`, `100 B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
        for (unit, shift) in UNITS {
            if self.0 >= 1 << shift {
                // Display only: the rounding of the f64 is what people read.
                #[allow(clippy::cast_precision_loss)]
                let v = self.0 as f64 / (1u64 << shift) as f64;
                return write!(f, "{v:.1} {unit}");
            }
        }
        write!(f, "{} B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       24684092 kB\nMemFree:        20000000 kB\n\
        MemAvailable:   21840768 kB\nHugePages_Total:    1024\nHugePages_Free:     1023\n\
        HugePages_Rsvd:        3\nHugePages_Surp:        0\nHugepagesize:       2048 kB\n";

    #[test]
    fn meminfo_gives_available_and_unclaimed_huge_pages() {
        let m = MemInfo::parse(MEMINFO).unwrap();
        assert_eq!(m.available, 21_840_768 * 1024);
        assert_eq!(m.huge_pages_free, 1020);
        assert_eq!(m.huge_page_size, 2 << 20);
        // No MemAvailable (kernels before 3.14): no figure to check against.
        assert_eq!(MemInfo::parse("MemTotal: 1 kB\n"), None);
        // Garbage never panics.
        assert_eq!(MemInfo::parse("MemAvailable: x kB\n::\n\n"), None);
        assert!(MemInfo::read().is_some_and(|m| m.available > 0));
    }

    #[test]
    fn smaps_sums_only_the_vmas_inside_the_range() {
        let text = "\
00400000-00500000 r-xp 00000000 08:01 123 /bin/x
Rss:                 100 kB
AnonHugePages:         0 kB
7f0000000000-7f0000200000 rw-p 00000000 00:00 0
Rss:                2048 kB
AnonHugePages:      2048 kB
Private_Hugetlb:       0 kB
7f0000200000-7f0000400000 rw-p 00000000 00:00 0
Rss:                   8 kB
AnonHugePages:         0 kB
Private_Hugetlb:    2048 kB
Shared_Hugetlb:        0 kB
7f0000400000-7f0000600000 rw-p 00000000 00:00 0
Rss:                 999 kB
AnonHugePages:      2048 kB
bad line
";
        let r = parse_smaps(text.as_bytes(), 0x7f00_0000_0000, 0x7f00_0030_0000);
        assert_eq!(
            r,
            Residency {
                resident_bytes: (2048 + 8 + 2048) * 1024,
                transparent_huge_bytes: 2048 * 1024,
            }
        );
        assert_eq!(parse_smaps(text.as_bytes(), 1, 2), Residency::default());
    }

    #[test]
    fn byte_sizes_read_like_people_write_them() {
        assert_eq!(ByteSize(16 << 30).to_string(), "16.0 GiB");
        assert_eq!(ByteSize(1536 << 20).to_string(), "1.5 GiB");
        assert_eq!(ByteSize(256 << 20).to_string(), "256.0 MiB");
        assert_eq!(ByteSize(4096).to_string(), "4.0 KiB");
        assert_eq!(ByteSize(100).to_string(), "100 B");
        assert_eq!(ByteSize(3 << 40).to_string(), "3.0 TiB");
    }
}
