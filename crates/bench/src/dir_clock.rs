// SPDX-License-Identifier: Apache-2.0
//! fio's per-direction runtime: how long each direction was active in a job.

/// Each direction's active time: a phase (a loop's workload, its verify read-back)
/// counts for the directions that completed I/O in it, from the ramp's end on.
#[derive(Debug, Default)]
pub(crate) struct DirClock {
    phase_start: u64,
    ios_at_start: [u64; 3],
    ns: [u64; 3],
}

impl DirClock {
    /// Ends the phase at `t` with `ios` completed so far per direction; `from` is when
    /// statistics started (None: still ramping, nothing counts).
    pub(crate) fn end_phase(&mut self, t: u64, from: Option<u64>, ios: &[u64; 3]) {
        if let Some(from) = from {
            let took = t.saturating_sub(self.phase_start.max(from));
            for ((ns, now), then) in self.ns.iter_mut().zip(ios).zip(self.ios_at_start) {
                if *now > then {
                    *ns += took;
                }
            }
        }
        self.phase_start = t;
        self.ios_at_start = *ios;
    }

    /// Whole milliseconds, never 0 for a direction that was active.
    pub(crate) fn ms(&self) -> [u64; 3] {
        self.ns
            .map(|ns| if ns == 0 { 0 } else { (ns / 1_000_000).max(1) })
    }
}
