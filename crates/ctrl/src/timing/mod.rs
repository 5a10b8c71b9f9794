// SPDX-License-Identifier: Apache-2.0
//! Target-side timing of every I/O command, for any client: where a command's time goes
//! between the poller seeing the SQ tail doorbell move and the interrupt being signalled.
//!
//! Off (the default) it costs one predictable branch per pass and per command: the
//! controller holds no [`Timing`] and reads no clock for it. On (per bdev, by
//! `bdev_enable_histogram`), the poller reads the TSC once per pass, once per busy SQ, twice
//! per command, once per batch flush and once at the pass end, and keeps the ticks of the
//! pass's commands in a buffer allocated when timing was enabled; at the end of the pass it
//! adds each command's layers to the histograms of its (queue, namespace) pair. All of it
//! belongs to the controller, so to the poller that owns it: nothing is shared with another
//! thread, and the RPC reads a copy through the poller's mailbox ([`Controller::timing`]).
//!
//! The moments, all on the poller's TSC:
//! - *seen*: the tail doorbell load that found the command queued (once per SQ per pass);
//! - *fetch*: the SQE copied out of the ring; *done*: the backend (bdev copy) returned;
//! - *post*: the batch's CQEs written to the ring (`flush_cq`);
//! - *irq*: the end of the pass, after each CQ's MSI-X eventfd was written (for a CQ with
//!   interrupts disabled, the same moment without an interrupt).
//!
//! The SQE's wait before *seen* cannot be measured on the target (the host's doorbell
//! store is a plain store into shared memory), but it is bounded: the poller looked at the
//! same doorbell in the previous pass, so the command was queued within
//! `seen - previous pass start` ([`Layer::SqWaitBound`], not part of the total).

mod hist;

pub use hist::{DEFAULT_GRANULARITY, LogLinearHist, MAX_GRANULARITY};

use nvmemu_spec::Qid;

use crate::Controller;

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

    fn record(&mut self, p: &Pending, irq: u64, pass_prev: u64) {
        let parts = [
            p.fetch.saturating_sub(p.seen),
            p.done.saturating_sub(p.fetch),
            p.post.saturating_sub(p.done),
            irq.saturating_sub(p.post),
        ];
        let [queued, backend, complete, interrupt, total, bound] = &mut self.hists;
        for (h, v) in [queued, backend, complete, interrupt]
            .into_iter()
            .zip(parts)
        {
            h.record(v);
        }
        total.record(parts.iter().sum());
        if pass_prev != 0 {
            bound.record(p.seen.saturating_sub(pass_prev));
        }
    }
}

/// The ticks of one command of the current pass.
#[derive(Debug, Clone, Copy)]
struct Pending {
    qid: u16,
    nsid: u32,
    seen: u64,
    fetch: u64,
    done: u64,
    post: u64,
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

/// A controller's timing state (exists only while some namespace's histogram is on).
#[derive(Debug)]
pub(crate) struct Timing {
    granularity: u32,
    /// Bdev names whose namespaces are timed.
    bdevs: Vec<String>,
    /// Timed, per NSID - 1.
    ns_on: Vec<bool>,
    /// Per SQ id.
    queues: Vec<QueueTiming>,
    /// Commands of this pass; capacity fixed when enabled (never grows on the I/O path).
    pending: Vec<Pending>,
    /// First entry of `pending` not yet posted.
    batch_start: usize,
    /// Ticks at the start of this pass and of the previous one.
    pass_now: u64,
    pass_prev: u64,
    /// Ticks when the current SQ's doorbell was seen.
    seen: u64,
    /// Commands not timed because `pending` was full (cannot happen with the capacity
    /// below; counted rather than assumed).
    dropped: u64,
}

impl Timing {
    fn new(granularity: u32, max_qid: u16, max_batch: usize) -> Timing {
        let sqs = usize::from(max_qid) + 1;
        Timing {
            granularity: granularity.clamp(1, MAX_GRANULARITY),
            bdevs: Vec::new(),
            ns_on: Vec::new(),
            queues: vec![QueueTiming::default(); sqs],
            pending: Vec::with_capacity(sqs * max_batch),
            batch_start: 0,
            pass_now: 0,
            pass_prev: 0,
            seen: 0,
            dropped: 0,
        }
    }

    #[inline]
    pub(crate) fn pass_begins(&mut self, now: u64) {
        self.pass_prev = self.pass_now;
        self.pass_now = now;
    }

    /// The doorbell of `qid` showed `queued` commands at `now`.
    #[inline]
    pub(crate) fn sq_seen(&mut self, qid: Qid, queued: u32, now: u64) {
        self.seen = now;
        if let Some(q) = self.queues.get_mut(usize::from(qid.0)) {
            q.depth_sum += u64::from(queued);
            q.looks += 1;
        }
    }

    /// A command of the current SQ was fetched at `fetch` and done at `done`.
    #[inline]
    pub(crate) fn command(&mut self, qid: Qid, nsid: u32, fetch: u64, done: u64) {
        if self.pending.len() == self.pending.capacity() {
            self.dropped += 1;
            return;
        }
        self.pending.push(Pending {
            qid: qid.0,
            nsid,
            seen: self.seen,
            fetch,
            done,
            post: 0,
        });
    }

    /// The current SQ's CQEs were written at `now`.
    #[inline]
    pub(crate) fn batch_posted(&mut self, now: u64) {
        for p in self.pending.get_mut(self.batch_start..).unwrap_or_default() {
            p.post = now;
        }
        self.batch_start = self.pending.len();
    }

    /// The pass ended (interrupts raised) at `now`: record its commands.
    pub(crate) fn pass_ends(&mut self, now: u64) {
        if self.pending.is_empty() {
            return;
        }
        let (g, prev) = (self.granularity, self.pass_prev);
        for p in &self.pending {
            let on = p
                .nsid
                .checked_sub(1)
                .and_then(|i| self.ns_on.get(i as usize))
                .copied()
                .unwrap_or(false);
            let Some(q) = self.queues.get_mut(usize::from(p.qid)) else {
                continue;
            };
            if !on {
                continue;
            }
            let found = q.namespaces.iter().position(|n| n.nsid == p.nsid);
            let set = match found.and_then(|i| q.namespaces.get_mut(i)) {
                Some(n) => &mut n.layers,
                None => {
                    // Once per (queue, namespace) pair while enabled.
                    q.namespaces.push(NsTiming {
                        nsid: p.nsid,
                        layers: Box::new(LayerSet::new(g)),
                    });
                    match q.namespaces.last_mut() {
                        Some(n) => &mut n.layers,
                        None => continue,
                    }
                }
            };
            set.record(p, now, prev);
        }
        self.pending.clear();
        self.batch_start = 0;
    }
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
                Box::new(Timing::new(granularity, max_qid, crate::poll::IO_BATCH))
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

    /// Recompute which NSIDs are timed (after enabling, attaching or detaching).
    pub(crate) fn refresh_timed_namespaces(&mut self) {
        let Some(t) = self.instruments.timing.as_deref_mut() else {
            return;
        };
        t.ns_on = self
            .namespaces
            .iter()
            .map(|n| {
                n.as_ref()
                    .is_some_and(|n| t.bdevs.iter().any(|b| b == n.bdev().name()))
            })
            .collect();
    }

    /// Whether any command is being timed.
    pub fn timing_enabled(&self) -> bool {
        self.instruments.timing.is_some()
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
