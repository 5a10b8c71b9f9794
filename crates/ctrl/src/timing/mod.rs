// SPDX-License-Identifier: Apache-2.0
//! Target-side timing of every I/O command, for any client: where a command's time goes
//! between the poller seeing the SQ tail doorbell move and the interrupt being signalled.
//!
//! Off (the default) it costs one predictable branch per pass, per SQ batch and per
//! command: the controller holds no `Timing` and reads no clock for it. On (per bdev, by
//! `bdev_enable_histogram`), the poller reads the TSC once per pass, once per command, once
//! per batch flush and once at the end of a pass that completed a timed command
//! (`record.rs` says which moments reuse a reading and what that moves between layers),
//! and records into histograms
//! owned by the controller, so by the poller that owns it: nothing is shared with another
//! thread, and the RPC reads a copy through the poller's mailbox ([`Controller::timing`]).
//!
//! The moments, all on the poller's TSC:
//! - *seen*: the tail doorbell load that found the command queued (once per SQ per pass;
//!   read as the last reading before that load);
//! - *fetch*: the reading before the command's in its batch (*seen*, or the previous
//!   command's *done*); *done*: the backend (bdev copy) returned;
//! - *post*: the batch's CQEs written to the ring (`flush_cq`), or a held CQE's (`hold.rs`);
//! - *irq*: the end of the pass, after each CQ's MSI-X eventfd was written (for a CQ with
//!   interrupts disabled, the same moment without an interrupt).
//!
//! A command of a file namespace (`io/file_io/`) leaves its batch once its I/O is queued on
//! the controller's io_uring and completes in a later pass: it keeps *seen* and *fetch* from
//! the batch that took it (also while it waits for ring room), its *done* is the reading
//! when its last operation is reaped, so its backend layer is what the file's I/O cost,
//! submission to completion, and its CQE is held with its readings like a modelled
//! command's (`hold.rs`). The commands of the batch behind it are fetched after its
//! submission (one reading when it is queued), which is their queued layer.
//!
//! A transport whose own pass takes the commands off the wire before the poll and hands
//! the completions back to it after (NVMe/TCP's poll group) marks the passes instead
//! ([`PassMarks::Transport`]): every batch is *seen* at the transport's pass start and
//! *irq* is the transport's reading once the completions are sent.
//!
//! The SQE's wait before *seen* cannot be measured on the target (the host's doorbell
//! store is a plain store into shared memory), but it is bounded: the poller looked at the
//! same doorbell in the previous pass, so the command was queued within
//! `seen - previous pass start` ([`Layer::SqWaitBound`], not part of the total).

mod hist;
mod record;

pub use hist::{DEFAULT_GRANULARITY, LogLinearHist, MAX_GRANULARITY};
pub(crate) use record::{HeldStamps, Timing};

use nvmemu_spec::Qid;

use crate::Controller;

/// Who marks the start and the end of a pass, the readings *seen* and *irq* come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PassMarks {
    /// The controller's own poll (vfio-user): *seen* is the last reading before each SQ's
    /// doorbell load, *irq* the end of the poll, after the MSI-X eventfd writes.
    #[default]
    Poll,
    /// The transport around the poll (NVMe/TCP), through
    /// [`Controller::transport_pass_begins`] and [`Controller::transport_pass_ends`]: its
    /// pass takes commands off the wire before the poll and hands their completions to the
    /// wire after it, so every batch of the pass is *seen* at the pass start and *irq* is
    /// the reading the transport takes once the completions are sent.
    Transport,
}

/// One layer of a command's time on the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// Seen to fetched: behind earlier commands of the pass, plus the SQE copy.
    Queued = 0,
    /// Fetched to done: decode, PRP/SGL walk and the backend's copy.
    Backend = 1,
    /// Done to the CQE written (the rest of the batch runs first).
    Complete = 2,
    /// CQE written to the interrupt signalled (the pass's other queues, the eventfd write).
    Interrupt = 3,
    /// Seen to the interrupt: the four layers above, added.
    Total = 4,
    /// Upper bound of the wait between the host's doorbell store and *seen*: the time
    /// since the previous pass began.
    SqWaitBound = 5,
}

impl Layer {
    /// Every layer, in table order.
    pub const ALL: [Layer; 6] = [
        Layer::Queued,
        Layer::Backend,
        Layer::Complete,
        Layer::Interrupt,
        Layer::Total,
        Layer::SqWaitBound,
    ];

    /// The layer's name in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Queued => "queued",
            Layer::Backend => "backend",
            Layer::Complete => "complete",
            Layer::Interrupt => "interrupt",
            Layer::Total => "total",
            Layer::SqWaitBound => "sq_wait_bound",
        }
    }
}

/// The histograms (in TSC ticks) of one (queue, namespace) pair, one per [`Layer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerSet {
    hists: [LogLinearHist; 6],
}

impl LayerSet {
    /// Empty histograms of `granularity`.
    pub fn new(granularity: u32) -> LayerSet {
        LayerSet {
            hists: std::array::from_fn(|_| LogLinearHist::new(granularity)),
        }
    }

    /// The histogram of `layer`.
    pub fn get(&self, layer: Layer) -> &LogLinearHist {
        let [queued, backend, complete, interrupt, total, bound] = &self.hists;
        match layer {
            Layer::Queued => queued,
            Layer::Backend => backend,
            Layer::Complete => complete,
            Layer::Interrupt => interrupt,
            Layer::Total => total,
            Layer::SqWaitBound => bound,
        }
    }

    /// Add `other`'s counts.
    pub fn merge(&mut self, other: &LayerSet) {
        for (a, b) in self.hists.iter_mut().zip(other.hists.iter()) {
            a.merge(b);
        }
    }

    /// A command's own layers (queued, backend, complete).
    #[inline]
    fn record_command(&mut self, layers: [u64; 3]) {
        self.record_commands(std::iter::once(layers));
    }

    /// Some commands' own layers: each counted in its buckets, the counts, sums and maxima
    /// added once at the end.
    #[inline]
    fn record_commands(&mut self, commands: impl Iterator<Item = [u64; 3]>) {
        let [q, b, c, ..] = &mut self.hists;
        let mut hists = [q, b, c];
        let (mut n, mut sums, mut maxes) = (0u64, [0u128; 3], [0u64; 3]);
        for layers in commands {
            n += 1;
            for (((h, v), sum), max) in hists.iter_mut().zip(layers).zip(&mut sums).zip(&mut maxes)
            {
                h.count_in_bucket(v, 1);
                *sum += u128::from(v);
                *max = (*max).max(v);
            }
        }
        for ((h, sum), max) in hists.iter_mut().zip(sums).zip(maxes) {
            h.add_totals(n, sum, max);
        }
    }

    /// The layers `n` commands of one batch share: from their post to the interrupt, from
    /// their *seen* to it (the total), and the wait bound.
    #[inline]
    fn record_run(&mut self, interrupt: u64, total: u64, bound: Option<u64>, n: u64) {
        let [.., i, t, w] = &mut self.hists;
        i.record_n(interrupt, n);
        t.record_n(total, n);
        if let Some(b) = bound {
            w.record_n(b, n);
        }
    }
}

/// One namespace's histograms on one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsTiming {
    /// The command's NSID.
    pub nsid: u32,
    /// Its layers.
    pub layers: Box<LayerSet>,
}

/// One submission queue's timing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueTiming {
    /// Sum of the commands queued at each doorbell look that found work.
    pub depth_sum: u64,
    /// Doorbell looks that found work.
    pub looks: u64,
    /// Per namespace, in the order first seen.
    pub namespaces: Vec<NsTiming>,
}

/// A copy of a controller's timing, taken on its poller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingSnapshot {
    /// Histogram granularity (SPDK's `bucket_shift`).
    pub granularity: u32,
    /// Bdevs whose namespaces are timed.
    pub bdevs: Vec<String>,
    /// Per SQ id with any activity, with the bdev name of each namespace.
    pub queues: Vec<(Qid, QueueTiming, Vec<String>)>,
    /// Commands not timed for want of buffer room (expected 0).
    pub dropped: u64,
}

impl Controller {
    /// Turn timing on or off for the namespaces backed by bdev `bdev` (SPDK's
    /// `bdev_enable_histogram`). Enabling an enabled bdev keeps its histograms; disabling
    /// drops them, and timing stops entirely (no cost) once no bdev is enabled.
    /// `granularity` applies when timing starts on this controller. Returns whether a
    /// namespace of this controller uses `bdev`.
    pub fn set_timing(&mut self, bdev: &str, enable: bool, granularity: u32) -> bool {
        let uses = self.namespaces().any(|n| n.bdev().name() == bdev);
        if enable {
            let max_qid = self.config.max_io_queues;
            let t = self.instruments.timing.get_or_insert_with(|| {
                Box::new(Timing::new(
                    granularity,
                    max_qid,
                    crate::hold::MAX_HELD,
                    self.instruments.marks,
                ))
            });
            if !t.bdevs.iter().any(|b| b == bdev) {
                t.bdevs.push(bdev.to_owned());
            }
        } else {
            let gone: Vec<u32> = self
                .namespaces()
                .filter(|n| n.bdev().name() == bdev)
                .map(|n| n.nsid().0)
                .collect();
            let Some(t) = self.instruments.timing.as_deref_mut() else {
                return uses;
            };
            t.bdevs.retain(|b| b != bdev);
            for q in &mut t.queues {
                q.namespaces.retain(|n| !gone.contains(&n.nsid));
            }
            if t.bdevs.is_empty() {
                self.instruments.timing = None;
            }
        }
        self.refresh_timed_namespaces();
        uses
    }

    /// A detached namespace's histograms go with it: a namespace attached later at the same
    /// NSID (another bdev, say) starts from nothing instead of inheriting them.
    pub(crate) fn forget_namespace_timing(&mut self, nsid: u32) {
        if let Some(t) = self.instruments.timing.as_deref_mut() {
            for q in &mut t.queues {
                q.namespaces.retain(|n| n.nsid != nsid);
            }
        }
    }

    /// Recompute which NSIDs are timed (after enabling, attaching or detaching); a timed
    /// namespace's bdev channel leaves its latency counting to the timing (one reading
    /// serves both), an untimed one counts for itself while its bdev is timed.
    pub(crate) fn refresh_timed_namespaces(&mut self) {
        let bdevs = self
            .instruments
            .timing
            .as_deref()
            .map(|t| t.bdevs.as_slice());
        let on: Vec<bool> = self
            .namespaces
            .iter()
            .map(|n| {
                n.as_ref()
                    .zip(bdevs)
                    .is_some_and(|(n, b)| b.iter().any(|b| b == n.bdev().name()))
            })
            .collect();
        for (n, &on) in self.namespaces.iter().zip(&on) {
            if let Some(n) = n {
                n.io().set_timed_by_caller(on);
            }
        }
        if let Some(t) = self.instruments.timing.as_deref_mut() {
            t.ns_on = on;
        }
    }

    /// Whether any command is being timed.
    pub fn timing_enabled(&self) -> bool {
        self.instruments.timing.is_some()
    }

    /// Let the transport mark the passes of this controller's timing from now on (see
    /// [`PassMarks`]); applies to timing started after the call.
    pub fn set_pass_marks(&mut self, marks: PassMarks) {
        self.instruments.marks = marks;
    }

    /// The transport's pass began at `now` (TSC ticks), before it took commands off the
    /// wire ([`PassMarks::Transport`]; nothing while timing is off).
    pub fn transport_pass_begins(&mut self, now: u64) {
        if let Some(t) = self.instruments.timing.as_deref_mut() {
            t.pass_begins(now);
        }
    }

    /// Whether a timed command of this pass waits for [`transport_pass_ends`](Self::transport_pass_ends).
    pub fn timing_awaits_pass_end(&self) -> bool {
        self.instruments
            .timing
            .as_deref()
            .is_some_and(Timing::awaits_pass_end)
    }

    /// The transport handed this pass's completions to the wire at `now` (TSC ticks):
    /// the *irq* of the commands posted in it ([`PassMarks::Transport`]).
    pub fn transport_pass_ends(&mut self, now: u64) {
        if let Some(t) = self.instruments.timing.as_deref_mut()
            && t.awaits_pass_end()
        {
            t.pass_ends(now);
        }
    }

    /// A copy of the timing state (None while off).
    pub fn timing(&self) -> Option<TimingSnapshot> {
        let t = self.instruments.timing.as_deref()?;
        let name_of = |nsid: u32| {
            self.namespaces()
                .find(|n| n.nsid().0 == nsid)
                .map_or_else(String::new, |n| n.bdev().name().to_owned())
        };
        let queues = t
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| q.looks > 0 || !q.namespaces.is_empty())
            .filter_map(|(i, q)| {
                let qid = Qid(u16::try_from(i).ok()?);
                let names = q.namespaces.iter().map(|n| name_of(n.nsid)).collect();
                Some((qid, q.clone(), names))
            })
            .collect();
        Some(TimingSnapshot {
            granularity: t.granularity,
            bdevs: t.bdevs.clone(),
            queues,
            dropped: t.dropped,
        })
    }
}
