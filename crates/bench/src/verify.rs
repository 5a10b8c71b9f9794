// SPDX-License-Identifier: Apache-2.0
//! Verify block formats and checks: `verify=crc32c|md5|sha256|xxhash` (a header per
//! logical block) and `verify=pattern` (`verify_pattern` repeated, no header).
//!
//! A header block starts with 56 bytes, followed by data derived from (LBA, generation):
//!
//! | offset | size | field                                                  |
//! |--------|------|--------------------------------------------------------|
//! | 0      | 4    | magic `0x756d_766e` ("nvmu")                           |
//! | 4      | 4    | write generation of the block                          |
//! | 8      | 8    | LBA the block was written to                           |
//! | 16     | 4    | job number that wrote it                               |
//! | 20     | 4    | checksum kind (1 crc32c, 2 md5, 3 sha256, 4 xxhash64)  |
//! | 24     | 32   | digest of bytes 0..24 and 56.., zero-padded            |
//!
//! So a read detects more than bit flips: a block read from the wrong place (LBA
//! mismatch), an older copy (generation behind the job's table), and a torn block (old
//! and new halves: the digest no longer matches). A block the job trimmed must read
//! back as zeroes (the emulated device's DLFEAT says deallocated blocks read as zeroes).

use md5::Digest as _;
use thiserror::Error;

/// Header magic, "nvmu" in little-endian bytes.
pub const MAGIC: u32 = 0x756d_766e;
/// Bytes of header at the start of each block.
pub const HEADER_LEN: usize = 56;
/// Smallest block size verify supports.
pub const MIN_BLOCK: usize = 64;
/// Generation meaning "trimmed": the block must read as zeroes.
pub const GEN_TRIMMED: u32 = u32::MAX - 1;
/// Expected generation meaning "written before this job, by any writer": the block
/// must carry an intact header for its own LBA, whatever its generation (as fio checks
/// what a read-only job reads). Writes never store it.
pub const GEN_ANY: u32 = 0;

const DIGEST_AT: usize = 24;
const DIGEST_MAX: usize = 32;

/// The digest a header block carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// MD5.
    Md5,
    /// SHA-256.
    Sha256,
    /// xxHash64.
    Xxhash,
}

impl Checksum {
    fn id(self) -> u32 {
        match self {
            Checksum::Crc32c => 1,
            Checksum::Md5 => 2,
            Checksum::Sha256 => 3,
            Checksum::Xxhash => 4,
        }
    }

    /// fio's name of the method.
    pub fn name(self) -> &'static str {
        match self {
            Checksum::Crc32c => "crc32c",
            Checksum::Md5 => "md5",
            Checksum::Sha256 => "sha256",
            Checksum::Xxhash => "xxhash",
        }
    }

    /// Digest of `head` then `tail` into `out` (zero-padded to 32 bytes).
    fn digest(self, head: &[u8], tail: &[u8]) -> [u8; DIGEST_MAX] {
        let mut out = [0u8; DIGEST_MAX];
        let mut put = |d: &[u8]| {
            if let Some(o) = out.get_mut(..d.len()) {
                o.copy_from_slice(d);
            }
        };
        match self {
            Checksum::Crc32c => {
                put(&crc32c::crc32c_append(crc32c::crc32c(head), tail).to_le_bytes())
            }
            Checksum::Md5 => {
                let mut h = md5::Md5::new();
                h.update(head);
                h.update(tail);
                put(&h.finalize());
            }
            Checksum::Sha256 => {
                let mut h = sha2::Sha256::new();
                h.update(head);
                h.update(tail);
                put(&h.finalize());
            }
            Checksum::Xxhash => {
                let mut h = xxhash_rust::xxh64::Xxh64::new(0);
                h.update(head);
                h.update(tail);
                put(&h.digest().to_le_bytes());
            }
        }
        out
    }
}

/// How blocks are filled and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// A header with LBA, generation and a digest.
    Header(Checksum),
    /// The pattern repeated from the start of every block.
    Pattern(Vec<u8>),
}

/// What is wrong with one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum VerifyFailureKind {
    /// No header: never written by a verify job, trimmed, or overwritten.
    #[error(
        "bad magic {found:#010x}, expected {MAGIC:#010x} (no verify header: never written \
         with this --verify method, trimmed, or overwritten)"
    )]
    BadMagic {
        /// Magic read.
        found: u32,
    },
    /// Content does not match its digest: bit flip or torn write.
    #[error("bad {method}: stored {stored:#018x}, computed {computed:#018x} (first 8 bytes)")]
    BadChecksum {
        /// fio's method name.
        method: &'static str,
        /// Digest in the header (first 8 bytes, big-endian).
        stored: u64,
        /// Digest of the data read (first 8 bytes, big-endian).
        computed: u64,
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
    /// `verify=pattern`: the block differs from the pattern.
    #[error("pattern mismatch at byte {offset}: expected {expected:#018x}, found {found:#018x}")]
    Pattern {
        /// First differing byte within the block.
        offset: usize,
        /// Up to 8 expected bytes from there (big-endian).
        expected: u64,
        /// The bytes read.
        found: u64,
    },
    /// A trimmed block that does not read back as zeroes.
    #[error("trimmed block not zero at byte {offset}: found {found:#018x}")]
    NotZero {
        /// First non-zero byte within the block.
        offset: usize,
        /// Up to 8 bytes read from there (big-endian).
        found: u64,
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

/// Up to 8 bytes from `at` as a big-endian number, for messages.
fn be_prefix(b: &[u8], at: usize) -> u64 {
    b.iter()
        .skip(at)
        .take(8)
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

fn fill_pseudo_random(buf: &mut [u8], lba: u64, generation: u32) {
    let mut x = lba.rotate_left(32) ^ u64::from(generation) ^ 0x9e37_79b9_7f4a_7c15;
    for chunk in buf.chunks_mut(8) {
        // xorshift64: cheap, deterministic, never stuck at 0 (seed mixed with a constant).
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        let n = chunk.len();
        chunk.copy_from_slice(bytes.get(..n).unwrap_or(&bytes));
    }
}

fn header_digest(sum: Checksum, buf: &[u8]) -> [u8; DIGEST_MAX] {
    sum.digest(
        buf.get(..DIGEST_AT).unwrap_or(&[]),
        buf.get(HEADER_LEN..).unwrap_or(&[]),
    )
}

/// Fills and checks the blocks of one job.
#[derive(Debug, Clone)]
pub struct Verifier {
    method: Method,
    job: u32,
}

impl Verifier {
    /// A verifier for `job`'s blocks.
    pub fn new(method: Method, job: u32) -> Verifier {
        Verifier { method, job }
    }

    /// Fills one block (`buf.len()` = LBA size) for `lba` at `generation`.
    pub fn fill_block(&self, buf: &mut [u8], lba: u64, generation: u32) {
        match &self.method {
            Method::Pattern(p) => {
                for (b, v) in buf.iter_mut().zip(p.iter().cycle()) {
                    *b = *v;
                }
            }
            Method::Header(sum) => {
                put(buf, 0, &MAGIC.to_le_bytes());
                put(buf, 4, &generation.to_le_bytes());
                put(buf, 8, &lba.to_le_bytes());
                put(buf, 16, &self.job.to_le_bytes());
                put(buf, 20, &sum.id().to_le_bytes());
                if let Some(rest) = buf.get_mut(HEADER_LEN..) {
                    fill_pseudo_random(rest, lba, generation);
                }
                let d = header_digest(*sum, buf);
                put(buf, DIGEST_AT, &d);
            }
        }
    }

    /// Checks one block read from `lba` against the expected generation.
    pub fn check_block(
        &self,
        buf: &[u8],
        lba: u64,
        expected: u32,
    ) -> Result<(), VerifyFailureKind> {
        if expected == GEN_TRIMMED {
            return match buf.iter().position(|&b| b != 0) {
                None => Ok(()),
                Some(offset) => Err(VerifyFailureKind::NotZero {
                    offset,
                    found: be_prefix(buf, offset),
                }),
            };
        }
        match &self.method {
            Method::Pattern(p) => {
                let bad = buf.iter().zip(p.iter().cycle()).position(|(b, v)| b != v);
                match bad {
                    None => Ok(()),
                    Some(offset) => {
                        let want: Vec<u8> = p
                            .iter()
                            .cycle()
                            .skip(offset % p.len().max(1))
                            .take(8)
                            .copied()
                            .collect();
                        Err(VerifyFailureKind::Pattern {
                            offset,
                            expected: be_prefix(&want, 0),
                            found: be_prefix(buf, offset),
                        })
                    }
                }
            }
            Method::Header(sum) => {
                let magic = le32(buf, 0);
                if magic != MAGIC {
                    return Err(VerifyFailureKind::BadMagic { found: magic });
                }
                let computed = header_digest(*sum, buf);
                let stored = buf.get(DIGEST_AT..HEADER_LEN).unwrap_or(&[]);
                if stored != computed.as_slice() {
                    return Err(VerifyFailureKind::BadChecksum {
                        method: sum.name(),
                        stored: be_prefix(stored, 0),
                        computed: be_prefix(&computed, 0),
                    });
                }
                let found_lba = le64(buf, 8);
                if found_lba != lba {
                    return Err(VerifyFailureKind::WrongLba { found: found_lba });
                }
                let found = le32(buf, 4);
                if expected != GEN_ANY && found != expected {
                    return Err(VerifyFailureKind::Generation { expected, found });
                }
                Ok(())
            }
        }
    }

    /// Fills consecutive blocks of `block_size` starting at `first_lba`, all at `generation`.
    pub fn fill_io(&self, buf: &mut [u8], first_lba: u64, block_size: usize, generation: u32) {
        for (i, block) in (0u64..).zip(buf.chunks_mut(block_size.max(1))) {
            self.fill_block(block, first_lba + i, generation);
        }
    }

    /// Checks consecutive blocks; reports the first bad one.
    pub fn check_io(
        &self,
        buf: &[u8],
        first_lba: u64,
        block_size: usize,
        expected: u32,
    ) -> Result<(), VerifyFailure> {
        for (i, block) in (0u64..).zip(buf.chunks(block_size.max(1))) {
            let lba = first_lba + i;
            self.check_block(block, lba, expected)
                .map_err(|kind| VerifyFailure { lba, kind })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: usize = 512;
    const ALL: [Checksum; 4] = [
        Checksum::Crc32c,
        Checksum::Md5,
        Checksum::Sha256,
        Checksum::Xxhash,
    ];

    fn v(sum: Checksum) -> Verifier {
        Verifier::new(Method::Header(sum), 0)
    }

    fn block(sum: Checksum, lba: u64, generation: u32) -> Vec<u8> {
        let mut b = vec![0u8; BS];
        v(sum).fill_block(&mut b, lba, generation);
        b
    }

    #[test]
    fn intact_blocks_pass_for_every_method() {
        for sum in ALL {
            assert_eq!(v(sum).check_block(&block(sum, 42, 3), 42, 3), Ok(()));
        }
    }

    #[test]
    fn bit_flips_are_detected_by_every_method() {
        for sum in ALL {
            for at in [9, 30, 300, BS - 1] {
                let mut b = block(sum, 42, 3);
                b[at] ^= 0x10;
                match v(sum).check_block(&b, 42, 3) {
                    Err(VerifyFailureKind::BadChecksum {
                        method,
                        stored,
                        computed,
                    }) => {
                        assert_eq!(method, sum.name());
                        assert_ne!(stored, computed);
                    }
                    other => panic!("{sum:?} flip at {at}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn a_block_of_another_method_fails() {
        let b = block(Checksum::Md5, 42, 3);
        assert!(matches!(
            v(Checksum::Sha256).check_block(&b, 42, 3),
            Err(VerifyFailureKind::BadChecksum { .. })
        ));
    }

    #[test]
    fn wrong_lba_and_stale_generation_are_detected() {
        let s = Checksum::Crc32c;
        assert_eq!(
            v(s).check_block(&block(s, 41, 3), 42, 3),
            Err(VerifyFailureKind::WrongLba { found: 41 })
        );
        assert_eq!(
            v(s).check_block(&block(s, 42, 2), 42, 3),
            Err(VerifyFailureKind::Generation {
                expected: 3,
                found: 2
            })
        );
    }

    #[test]
    fn torn_multi_block_io_is_detected_at_the_stale_block() {
        let vf = v(Checksum::Xxhash);
        let mut io = vec![0u8; BS * 4];
        vf.fill_io(&mut io, 100, BS, 5);
        let mut old = vec![0u8; BS * 4];
        vf.fill_io(&mut old, 100, BS, 4);
        io[BS * 2..].copy_from_slice(&old[BS * 2..]);
        assert_eq!(
            vf.check_io(&io, 100, BS, 5),
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
            v(Checksum::Crc32c).check_block(&[0u8; BS], 7, 1),
            Err(VerifyFailureKind::BadMagic { found: 0 })
        );
    }

    #[test]
    fn pattern_mode_checks_every_byte_and_names_the_first_bad_one() {
        let vf = Verifier::new(Method::Pattern(vec![0xde, 0xad, 0xbe, 0xef]), 0);
        let mut b = vec![0u8; BS];
        vf.fill_block(&mut b, 9, 1);
        assert_eq!(&b[..6], &[0xde, 0xad, 0xbe, 0xef, 0xde, 0xad]);
        assert_eq!(vf.check_block(&b, 9, 1), Ok(()));
        b[101] = 0;
        assert_eq!(
            vf.check_block(&b, 9, 1),
            Err(VerifyFailureKind::Pattern {
                offset: 101,
                expected: 0xadbe_efde_adbe_efde,
                found: 0x00be_efde_adbe_efde
            })
        );
    }

    #[test]
    fn trimmed_blocks_must_read_zero() {
        let vf = v(Checksum::Crc32c);
        assert_eq!(vf.check_block(&[0u8; BS], 3, GEN_TRIMMED), Ok(()));
        let mut b = [0u8; BS];
        b[7] = 1;
        assert_eq!(
            vf.check_block(&b, 3, GEN_TRIMMED),
            Err(VerifyFailureKind::NotZero {
                offset: 7,
                found: 0x0100_0000_0000_0000
            })
        );
    }

    #[test]
    fn data_differs_between_generations() {
        let s = Checksum::Crc32c;
        assert_ne!(block(s, 1, 1)[HEADER_LEN..], block(s, 1, 2)[HEADER_LEN..]);
    }
}
