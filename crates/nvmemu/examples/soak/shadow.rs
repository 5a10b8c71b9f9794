// SPDX-License-Identifier: Apache-2.0
//! What every block of the namespace must hold, and which blocks have a command in flight.
//!
//! A block holds zeroes (never written since the start-up Write Zeroes, zeroed, or
//! deallocated: the namespace reports DLFEAT "reads zeroes") or the pattern of the write that
//! last set it, named by a stamp. The pattern depends on the block's LBA and the stamp, so a
//! block written to the wrong place, a stale block and a torn block all fail the check.

/// Stamp of a block that must read as zeroes.
pub const ZEROES: u32 = 0;

/// The expected content of every block, and the blocks a command in flight owns.
#[derive(Debug)]
pub struct Shadow {
    stamps: Vec<u32>,
    busy: Vec<bool>,
    next_stamp: u32,
    block: usize,
}

/// The first block found wrong in a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Its LBA.
    pub lba: u64,
    /// The stamp it should carry (0: zeroes).
    pub expected: u32,
    /// Its first word as read: a pattern's first word is `lba << 32 | stamp`.
    pub found: u64,
}

impl Shadow {
    /// A namespace of `blocks` blocks of `block` bytes (a multiple of 8), all zeroes.
    pub fn new(blocks: u64, block: u32) -> Shadow {
        let n = usize::try_from(blocks).expect("namespace fits in memory");
        Shadow {
            stamps: vec![ZEROES; n],
            busy: vec![false; n],
            next_stamp: 1,
            block: block as usize,
        }
    }

    /// Blocks in the namespace.
    pub fn blocks(&self) -> u64 {
        self.stamps.len() as u64
    }

    /// Take `[slba, slba + n)` for one command if no command in flight owns any of it.
    pub fn try_claim(&mut self, slba: u64, n: u32) -> bool {
        let r = range(slba, n);
        if self.busy[r.clone()].iter().any(|&b| b) {
            return false;
        }
        self.busy[r].fill(true);
        true
    }

    /// Give `[slba, slba + n)` back when its command completes.
    pub fn release(&mut self, slba: u64, n: u32) {
        self.busy[range(slba, n)].fill(false);
    }

    /// A new stamp for a write (never [`ZEROES`]).
    pub fn new_stamp(&mut self) -> u32 {
        let s = self.next_stamp;
        self.next_stamp = self.next_stamp.checked_add(1).unwrap_or(1);
        s
    }

    /// Record that `[slba, slba + n)` now holds `stamp`'s pattern (or zeroes).
    pub fn set(&mut self, slba: u64, n: u32, stamp: u32) {
        self.stamps[range(slba, n)].fill(stamp);
    }

    /// Fill `buf` (`n` blocks) with what a write of `stamp` at `slba` stores.
    pub fn fill(&self, buf: &mut [u8], slba: u64, stamp: u32) {
        for (i, block) in buf.chunks_exact_mut(self.block).enumerate() {
            fill_block(block, slba + i as u64, stamp);
        }
    }

    /// Check `buf`, read from `[slba, slba + blocks in buf)`; returns the bad blocks' count
    /// and the first of them.
    pub fn check(&self, buf: &[u8], slba: u64) -> (u64, Option<Mismatch>) {
        let mut bad = 0;
        let mut first = None;
        for (i, block) in buf.chunks_exact(self.block).enumerate() {
            let lba = slba + i as u64;
            let expected = self.stamps[lba as usize];
            if !block_matches(block, lba, expected) {
                bad += 1;
                let found = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
                first.get_or_insert(Mismatch {
                    lba,
                    expected,
                    found,
                });
            }
        }
        (bad, first)
    }
}

fn range(slba: u64, n: u32) -> std::ops::Range<usize> {
    let start = slba as usize;
    start..start + n as usize
}

/// Word `i` of a block: the tag (LBA and stamp) for word 0, then the tag mixed with `i`, so
/// a shifted or partial copy differs too.
fn word(tag: u64, i: u64) -> u64 {
    tag ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn fill_block(block: &mut [u8], lba: u64, stamp: u32) {
    let tag = (lba << 32) | u64::from(stamp);
    for (i, w) in block.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&word(tag, i as u64).to_le_bytes());
    }
}

fn block_matches(block: &[u8], lba: u64, stamp: u32) -> bool {
    if stamp == ZEROES {
        return block.iter().all(|&b| b == 0);
    }
    let tag = (lba << 32) | u64::from(stamp);
    block
        .chunks_exact(8)
        .enumerate()
        .all(|(i, w)| w == word(tag, i as u64).to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_block_matches_only_its_own_lba_and_stamp() {
        let mut s = Shadow::new(8, 512);
        let stamp = s.new_stamp();
        let mut buf = vec![0u8; 1024];
        s.fill(&mut buf, 2, stamp);
        assert_eq!(s.check(&buf, 2).0, 2, "the shadow still says zeroes");
        s.set(2, 2, stamp);
        assert_eq!(s.check(&buf, 2), (0, None));
        assert_eq!(s.check(&buf, 3).0, 2, "data at the wrong LBA");
        buf[700] ^= 1;
        let (bad, first) = s.check(&buf, 2);
        assert_eq!((bad, first.map(|m| m.lba)), (1, Some(3)));
    }

    #[test]
    fn claimed_ranges_exclude_overlaps_until_released() {
        let mut s = Shadow::new(16, 512);
        assert!(s.try_claim(4, 4));
        assert!(!s.try_claim(7, 2));
        assert!(s.try_claim(8, 2));
        s.release(4, 4);
        assert!(s.try_claim(0, 8));
    }
}
