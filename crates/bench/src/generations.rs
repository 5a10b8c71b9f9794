// SPDX-License-Identifier: Apache-2.0
//! Verify's bookkeeping per unit of a job's range: the generation each unit holds
//! (a write stores the next one in each block's header, a trim makes it read as
//! zeroes), which units have an I/O in flight, and the check of a read against them.

use std::collections::VecDeque;

use crate::job_output::{MAX_VERIFY_DETAILS, VerifySummary};
use crate::next_io::NextIo;
use crate::plan::JobPlan;
use crate::verify::{GEN_ANY, GEN_TRIMMED, Verifier};

/// Generation value meaning "content unknown" (a failed write); never checked.
pub(crate) const GEN_UNKNOWN: u32 = u32::MAX;

/// Where one I/O in flight goes and when it started.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    pub(crate) unit: u64,
    pub(crate) units: u64,
    pub(crate) lba: u64,
    /// 0 read, 1 write, 2 trim.
    pub(crate) dir: usize,
    pub(crate) start_ns: u64,
    pub(crate) issue_ns: u64,
}

/// Verify's state: the checker, what it does, and the generation of every unit.
pub(crate) struct VerifyState {
    pub(crate) verifier: Option<Verifier>,
    /// Reads are checked. fio checks a read-only job's reads even with do_verify=0
    /// (that option only drops the read-back phase after writes).
    pub(crate) checking: bool,
    /// `verify_only`: the writes are replayed without I/O, then read back.
    pub(crate) dry_run: bool,
    /// `verify_backlog`: written units are read back after this many.
    pub(crate) backlog_len: Option<u64>,
    pub(crate) gens: Vec<u32>,
    pub(crate) busy: Busy,
    /// Written units waiting for their backlog check; room for a full backlog plus what
    /// completes while it drains, so it never grows on the hot path.
    pub(crate) backlog: VecDeque<(u64, u64)>,
}

impl VerifyState {
    pub(crate) fn new(plan: &JobPlan, depth: usize) -> VerifyState {
        let vplan = plan.verify.as_ref();
        let verifier = vplan.map(|v| Verifier::new(v.method.clone(), plan.job));
        let checking = vplan.is_some_and(|v| v.do_verify || reads_only(plan));
        let backlog_len = vplan.and_then(|v| v.backlog).filter(|_| checking);
        let units_len = usize::try_from(plan.units).unwrap_or(0);
        let table = verifier.is_some();
        VerifyState {
            verifier,
            checking,
            dry_run: vplan.is_some_and(|v| v.verify_only),
            backlog_len,
            gens: if table {
                vec![0; units_len]
            } else {
                Vec::new()
            },
            busy: Busy(if table {
                vec![0; units_len.div_ceil(64)]
            } else {
                Vec::new()
            }),
            backlog: VecDeque::with_capacity(backlog_len.map_or(0, |n| {
                usize::try_from(n.min(plan.units)).unwrap_or(0) + depth
            })),
        }
    }
}

pub(crate) fn next_gen(g: u32) -> u32 {
    if g == 0 || g >= GEN_TRIMMED { 1 } else { g + 1 }
}

/// One bit per unit: in flight (verify never has two I/Os on one unit).
pub(crate) struct Busy(pub(crate) Vec<u64>);

impl Busy {
    pub(crate) fn get(&self, u: u64) -> bool {
        let i = usize::try_from(u / 64).unwrap_or(usize::MAX);
        self.0.get(i).is_some_and(|w| w & (1 << (u % 64)) != 0)
    }
    pub(crate) fn any(&self, unit: u64, units: u64) -> bool {
        (unit..unit + units).any(|u| self.get(u))
    }
    pub(crate) fn set(&mut self, unit: u64, units: u64, on: bool) {
        for u in unit..unit + units {
            let i = usize::try_from(u / 64).unwrap_or(usize::MAX);
            if let Some(w) = self.0.get_mut(i) {
                if on {
                    *w |= 1 << (u % 64);
                } else {
                    *w &= !(1 << (u % 64));
                }
            }
        }
    }
}

pub(crate) fn gen_at(gens: &[u32], u: u64) -> u32 {
    usize::try_from(u)
        .ok()
        .and_then(|i| gens.get(i))
        .copied()
        .unwrap_or(0)
}

pub(crate) fn set_gen(gens: &mut [u32], u: u64, g: u32) {
    if let Some(slot) = usize::try_from(u).ok().and_then(|i| gens.get_mut(i)) {
        *slot = g;
    }
}

/// What a completed write or trim leaves in each of its units.
pub(crate) fn apply(gens: &mut [u32], io: NextIo) {
    for u in io.unit..io.unit + io.units {
        let g = match io.dir {
            1 => next_gen(gen_at(gens, u)),
            2 => GEN_TRIMMED,
            _ => continue,
        };
        set_gen(gens, u, g);
    }
}

/// Whether the job only reads: with verify, it checks every block it reads against
/// the block's own header (or the pattern), as fio does, since it wrote none of them.
pub(crate) fn reads_only(plan: &JobPlan) -> bool {
    plan.read_pct == 100 && !plan.rw.is_trim()
}

/// Checks a verify read of `s` (in `buf`) against the generation table; blocks the
/// job did not write are checked only in a read-only job.
pub(crate) fn check_read(
    plan: &JobPlan,
    verifier: &Verifier,
    gens: &[u32],
    s: &Slot,
    buf: &[u8],
    out: &mut VerifySummary,
) {
    let unit_len = usize::try_from(u64::from(plan.unit_blocks) * u64::from(plan.block_size))
        .unwrap_or(usize::MAX);
    let block_size = usize::try_from(plan.block_size).unwrap_or(512);
    let mut checked = 0u64;
    let any_writer = reads_only(plan);
    for (i, chunk) in (0u64..s.units).zip(buf.chunks(unit_len.max(1))) {
        let g = gen_at(gens, s.unit + i);
        if g == GEN_UNKNOWN || (g == GEN_ANY && !any_writer) {
            continue;
        }
        let lba = s.lba + i * u64::from(plan.unit_blocks);
        if let Err(f) = verifier.check_io(chunk, lba, block_size, g) {
            out.errors += 1;
            if out.first.len() < MAX_VERIFY_DETAILS {
                out.first.push(f);
            }
            return;
        }
        checked += u64::from(plan.unit_blocks);
    }
    if checked > 0 {
        out.verified_ios += 1;
        out.verified_blocks += checked;
    } else {
        out.unverifiable_ios += 1;
    }
}
