// SPDX-License-Identifier: Apache-2.0
//! nvmemu-bench: the fio-style benchmark behind `nvmemu bench`.
//!
//! Owns: job options with fio's names ([`BenchOptions`]), the per-job I/O loop
//! over an [`IoQueue`] (one pinned thread and one queue pair per job), latency
//! and bandwidth statistics, fio's workload shapes (block size mixes, offset
//! distributions, trims, pacing) and verify methods, the live status
//! line, and reports in fio's normal / JSON / JSON+ formats plus our `target`
//! and `machine` sections ([`render`]).
//!
//! May depend on: `nvmemu-mem` (the clock, and the memory the ceiling probe shares between its
//! threads). The glue implementing [`IoQueue`] over the driver's I/O qpair lives with whoever
//! wires them (the binary).
//! Never: allocates, locks, logs or makes a syscall per I/O on the hot path
//! (one clock read per I/O is the exception), or panics on a device's answer.
//!
//! ```no_run
//! use std::sync::{atomic::AtomicBool, Arc};
//! use nvmemu_bench::{render, run_bench, BenchOptions, IoQueue, MemDevice, NoTarget, OutputFormat};
//!
//! let dev = MemDevice::new(512, 1 << 16, 128 * 1024);
//! let opts = BenchOptions { runtime: Some(std::time::Duration::from_secs(1)), ..BenchOptions::default() };
//! let queues: Vec<Box<dyn IoQueue>> = vec![Box::new(dev.queue())];
//! let result = run_bench(&opts, queues, &NoTarget, &[], Arc::new(AtomicBool::new(false)))?;
//! print!("{}", render(&result, OutputFormat::NORMAL));
//! # Ok::<(), nvmemu_bench::BenchError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod breakdown;
pub mod ceiling;
pub mod compare;
mod dir_clock;
mod engine;
mod error;
mod fio_names;
mod generations;
mod io_latency;
pub mod iolog;
mod job;
mod job_output;
pub mod jobfile;
mod log_files;
mod mem_queue;
mod next_io;
mod offsets;
mod option_values;
mod options;
mod pace;
mod pasted;
mod plan;
pub mod plot;
pub mod plot_time;
pub mod report;
mod result;
mod runner;
mod rw_spec;
mod sizes;
mod skew;
mod stats;
mod status;
mod status_loop;
mod svg;
mod sysinfo;
mod think;
pub mod verify;
mod workload_options;
mod workload_values;
mod zones;

pub use breakdown::LatBreakdown;
pub use ceiling::{CeilingError, CeilingOptions, CeilingResult, run_ceiling};
pub use compare::{Comparison, RunSummary, median};
pub use engine::{EngineError, Geometry, IoQueue, Op};
pub use error::BenchError;
pub use job::run_job;
pub use job_output::{JobOutput, JobState, Progress, VerifySummary};
pub use log_files::write_logs;
pub use mem_queue::{CommandLog, MemDevice, MemQueue};
pub use offsets::{Offsets, Permutation, RandomMap, Rng};
pub use options::{
    Batching, BenchOptions, BsSpec, CpuList, DEFAULT_RANDSEED, EtaMode, OptionError, OutputFormat,
    PercentileList, RwMode, RwSpec, SizeSpec, VerifyMode, parse_bool, parse_cpu_list,
    parse_cpu_list_arg, parse_output_format, parse_percentile_list, parse_size, parse_size_spec,
    parse_time,
};
pub use pasted::PastedOptions;
pub use plan::{JobPlan, plan_jobs};
pub use report::{render, render_header, render_json, render_terse, render_text};
pub use result::{
    BenchResult, CoreCounters, JobResult, MachineInfo, NoTarget, TargetCore, TargetProbe,
    TargetReport, TargetSnapshot,
};
pub use runner::{StageJob, run_bench, run_stage};
pub use stats::{
    DirStats, IoLatency, JobStats, LatBuckets, LatStat, PendingLatencies, RunningStat,
};
pub use status::{StatusInput, format_status};
pub use sysinfo::ThreadUsage;
pub use think::{BlocksType, ThinkPlan};
pub use workload_options::WorkloadOptions;
pub use workload_values::{
    BlockSizes, DirBlockSizes, DirRates, RandomDistribution, VerifyPattern, parse_bsrange,
    parse_bssplit, parse_random_distribution, parse_rate, parse_rate_iops, parse_time_us,
    parse_verify_pattern,
};
