// SPDX-License-Identifier: Apache-2.0
//! `--verify=crc32c` block format and checks.
//!
//! Every logical block written in verify mode starts with a 24-byte header,
//! followed by a pattern derived from (LBA, generation):
//!
//! | offset | size | field                                        |
//! |--------|------|----------------------------------------------|
//! | 0      | 4    | magic `0x756d_766e` ("nvmu")                 |
//! | 4      | 4    | crc32c of bytes 8..block_size                |
//! | 8      | 8    | LBA the block was written to                 |
//! | 16     | 4    | write generation of the I/O unit             |
//! | 20     | 4    | job number that wrote it                     |
//!
//! So a read detects more than bit flips: a block read from the wrong place
//! (LBA mismatch), an older copy (generation behind the job's table), and a
//! torn block (old and new halves: the crc no longer matches).

use thiserror::Error;

/// Header magic, "nvmu" in little-endian bytes.
pub const MAGIC: u32 = 0x756d_766e;
/// Bytes of header at the start of each block.
pub const HEADER_LEN: usize = 24;
/// Smallest block size verify supports.
pub const MIN_BLOCK: usize = 64;

/// What is wrong with one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum VerifyFailureKind {
    /// No header: never written by a verify job, or overwritten.
    #[error("bad magic {found:#010x}")]
    BadMagic {
        /// Magic read.
        found: u32,
    },
    /// Content does not match its checksum: bit flip or torn write.
    #[error("bad crc32c: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc {
        /// Checksum in the header.
        stored: u32,
        /// Checksum of the data read.
        computed: u32,
    },
    /// An intact block that belongs to another LBA.
    #[error("misplaced block: header says lba {found}")]
    WrongLba {
        /// LBA in the header.
        found: u64,
    },
    /// An intact block of another write generation (stale or lost write).
    #[error("generation {found}, expected {expected}")]
    Generation {
        /// Generation of the last completed write.
        expected: u32,
        /// Generation in the header.
        found: u32,
    },
}

/// A verify failure at one LBA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("verify failed at lba {lba}: {kind}")]
pub struct VerifyFailure {
    /// The LBA whose block failed.
    pub lba: u64,
    /// What was wrong.
    pub kind: VerifyFailureKind,
}

fn le32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

/// Fills one block (`buf.len()` = LBA size) for `lba` at `generation`.
pub fn fill_block(buf: &mut [u8], lba: u64, generation: u32, job: u32) {
    put(buf, 0, &MAGIC.to_le_bytes());
    put(buf, 8, &lba.to_le_bytes());
    put(buf, 16, &generation.to_le_bytes());
    put(buf, 20, &job.to_le_bytes());
    let mut x = lba.rotate_left(32) ^ u64::from(generation) ^ 0x9e37_79b9_7f4a_7c15;
    if let Some(rest) = buf.get_mut(HEADER_LEN..) {
        for chunk in rest.chunks_mut(8) {
            // xorshift64: cheap, deterministic, never stuck at 0 (seed mixed with a constant).
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes = x.to_le_bytes();
            let n = chunk.len();
            chunk.copy_from_slice(bytes.get(..n).unwrap_or(&bytes));
        }
    }
    let crc = crc32c::crc32c(buf.get(8..).unwrap_or(&[]));
    put(buf, 4, &crc.to_le_bytes());
}

/// Checks one block read from `lba` against the expected generation.
pub fn check_block(buf: &[u8], lba: u64, expected: u32) -> Result<(), VerifyFailureKind> {
    let magic = le32(buf, 0);
    if magic != MAGIC {
        return Err(VerifyFailureKind::BadMagic { found: magic });
    }
    let stored = le32(buf, 4);
    let computed = crc32c::crc32c(buf.get(8..).unwrap_or(&[]));
    if stored != computed {
        return Err(VerifyFailureKind::BadCrc { stored, computed });
    }
    let found_lba = le64(buf, 8);
    if found_lba != lba {
        return Err(VerifyFailureKind::WrongLba { found: found_lba });
    }
    let found = le32(buf, 16);
    if found != expected {
        return Err(VerifyFailureKind::Generation { expected, found });
    }
    Ok(())
}

/// Fills a multi-block I/O buffer starting at `first_lba`.
pub fn fill_io(buf: &mut [u8], first_lba: u64, block_size: usize, generation: u32, job: u32) {
    for (i, block) in (0u64..).zip(buf.chunks_mut(block_size.max(1))) {
        fill_block(block, first_lba + i, generation, job);
    }
}

/// Checks a multi-block I/O buffer; reports the first bad block.
pub fn check_io(
    buf: &[u8],
    first_lba: u64,
    block_size: usize,
    expected: u32,
) -> Result<(), VerifyFailure> {
    for (i, block) in (0u64..).zip(buf.chunks(block_size.max(1))) {
        let lba = first_lba + i;
        check_block(block, lba, expected).map_err(|kind| VerifyFailure { lba, kind })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: usize = 512;

    fn block(lba: u64, generation: u32) -> Vec<u8> {
        let mut b = vec![0u8; BS];
        fill_block(&mut b, lba, generation, 0);
        b
    }

    #[test]
    fn intact_block_passes() {
        assert_eq!(check_block(&block(42, 3), 42, 3), Ok(()));
    }

    #[test]
    fn bit_flip_is_detected() {
        let mut b = block(42, 3);
        b[300] ^= 0x10;
        assert!(matches!(
            check_block(&b, 42, 3),
            Err(VerifyFailureKind::BadCrc { .. })
        ));
        let mut b = block(42, 3);
        b[9] ^= 1; // inside the LBA field: still caught by the crc
        assert!(matches!(
            check_block(&b, 42, 3),
            Err(VerifyFailureKind::BadCrc { .. })
        ));
    }

    #[test]
    fn wrong_lba_is_detected() {
        assert_eq!(
            check_block(&block(41, 3), 42, 3),
            Err(VerifyFailureKind::WrongLba { found: 41 })
        );
    }

    #[test]
    fn stale_generation_is_detected() {
        assert_eq!(
            check_block(&block(42, 2), 42, 3),
            Err(VerifyFailureKind::Generation {
                expected: 3,
                found: 2
            })
        );
    }

    #[test]
    fn torn_block_is_detected() {
        let old = block(42, 2);
        let mut torn = block(42, 3);
        torn[BS / 2..].copy_from_slice(&old[BS / 2..]);
        assert!(matches!(
            check_block(&torn, 42, 3),
            Err(VerifyFailureKind::BadCrc { .. })
        ));
    }

    #[test]
    fn torn_multi_block_io_is_detected_at_the_stale_block() {
        let mut io = vec![0u8; BS * 4];
        fill_io(&mut io, 100, BS, 5, 0);
        let mut old = vec![0u8; BS * 4];
        fill_io(&mut old, 100, BS, 4, 0);
        io[BS * 2..].copy_from_slice(&old[BS * 2..]);
        assert_eq!(
            check_io(&io, 100, BS, 5),
            Err(VerifyFailure {
                lba: 102,
                kind: VerifyFailureKind::Generation {
                    expected: 5,
                    found: 4
                }
            })
        );
    }

    #[test]
    fn unwritten_block_has_bad_magic() {
        assert_eq!(
            check_block(&[0u8; BS], 7, 1),
            Err(VerifyFailureKind::BadMagic { found: 0 })
        );
    }

    #[test]
    fn pattern_differs_between_generations() {
        assert_ne!(block(1, 1)[HEADER_LEN..], block(1, 2)[HEADER_LEN..]);
    }
}
