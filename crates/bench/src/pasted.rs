// SPDX-License-Identifier: Apache-2.0
//! fio options people paste from their command lines and job files that change nothing
//! for nvmemu's jobs (`ioengine`, `direct`, `buffered`, ...). They are accepted rather
//! than rejected, so a job file written for a kernel device runs unchanged; each one set
//! is listed in the JSON report's "job options" as written and named once on stderr
//! ([`PastedOptions::notes`]). `filename` is kept here too: the binary decides whether it
//! names a vfio-user socket. The rest of fio's option names are in [`crate::fio_names`].

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use crate::fio_names::IGNORED;

/// An accepted option and why it has no effect (`None`: it is honoured as it is, or the
/// caller handles it).
struct Pasted {
    name: &'static str,
    note: Option<&'static str>,
}

/// Options that take a value (`--ioengine libaio` works too); the others are switches,
/// bare or `=1`/`=0`, as fio's booleans.
const VALUED: &[&str] = &[
    "ioengine",
    "filename",
    "description",
    "buffer_compress_percentage",
    "dedupe_percentage",
    "clocksource",
    "fsync",
    "fdatasync",
    "iodepth_low",
    "cpus_allowed_policy",
    "nrfiles",
    "filesize",
    "directory",
    "kb_base",
];

const NO_CACHE: Option<&str> = Some("there is no page cache between the jobs and the device");
const BUFFERS: Option<&str> =
    Some("write buffers are filled once before the run; the device neither compresses nor dedupes");
const KERNEL: Option<&str> = Some("a kernel ioengine option; the jobs use nvmemu's own driver");
const NO_FILES: Option<&str> = Some("the jobs address the namespace directly, there are no files");
const ALL_LATENCIES: Option<&str> = Some("slat, clat and lat are always measured (calibrated TSC)");

/// Every accepted option; a name here must not be one of `BenchOptions`' own.
const PASTED: &[Pasted] = &[
    Pasted {
        name: "ioengine",
        note: Some("jobs always use nvmemu's own userspace NVMe driver (ioengine=nvmemu)"),
    },
    Pasted {
        name: "direct",
        note: NO_CACHE,
    },
    Pasted {
        name: "buffered",
        note: NO_CACHE,
    },
    Pasted {
        name: "invalidate",
        note: NO_CACHE,
    },
    Pasted {
        name: "thread",
        note: None,
    },
    Pasted {
        name: "filename",
        note: None,
    },
    Pasted {
        name: "description",
        note: None,
    },
    Pasted {
        name: "refill_buffers",
        note: BUFFERS,
    },
    Pasted {
        name: "scramble_buffers",
        note: BUFFERS,
    },
    Pasted {
        name: "zero_buffers",
        note: BUFFERS,
    },
    Pasted {
        name: "buffer_compress_percentage",
        note: BUFFERS,
    },
    Pasted {
        name: "dedupe_percentage",
        note: BUFFERS,
    },
    Pasted {
        name: "gtod_reduce",
        note: ALL_LATENCIES,
    },
    Pasted {
        name: "disable_lat",
        note: ALL_LATENCIES,
    },
    Pasted {
        name: "disable_clat",
        note: ALL_LATENCIES,
    },
    Pasted {
        name: "disable_slat",
        note: ALL_LATENCIES,
    },
    Pasted {
        name: "clocksource",
        note: ALL_LATENCIES,
    },
    Pasted {
        name: "lat_percentiles",
        note: Some("percentiles are reported for clat, as fio's default"),
    },
    Pasted {
        name: "clat_percentiles",
        note: None,
    },
    Pasted {
        name: "fsync",
        note: Some("the namespace has no volatile write cache, so no flushes are issued"),
    },
    Pasted {
        name: "fdatasync",
        note: Some("the namespace has no volatile write cache, so no flushes are issued"),
    },
    Pasted {
        name: "end_fsync",
        note: Some("the namespace has no volatile write cache, so no flushes are issued"),
    },
    Pasted {
        name: "hipri",
        note: KERNEL,
    },
    Pasted {
        name: "fixedbufs",
        note: KERNEL,
    },
    Pasted {
        name: "registerfiles",
        note: KERNEL,
    },
    Pasted {
        name: "sqthread_poll",
        note: KERNEL,
    },
    Pasted {
        name: "userspace_reap",
        note: KERNEL,
    },
    Pasted {
        name: "iodepth_low",
        note: Some("the queue is refilled as iodepth_batch_complete_min says"),
    },
    Pasted {
        name: "cpus_allowed_policy",
        note: Some("jobs are pinned round-robin to cpus_allowed (fio's policy=split)"),
    },
    Pasted {
        name: "allow_mounted_write",
        note: NO_FILES,
    },
    Pasted {
        name: "nrfiles",
        note: NO_FILES,
    },
    Pasted {
        name: "filesize",
        note: NO_FILES,
    },
    Pasted {
        name: "directory",
        note: NO_FILES,
    },
    Pasted {
        name: "create_on_open",
        note: NO_FILES,
    },
    Pasted {
        name: "overwrite",
        note: NO_FILES,
    },
    Pasted {
        name: "kb_base",
        note: Some("sizes are read with fio's default kb_base=1024"),
    },
    Pasted {
        name: "log_offset",
        note: Some("logs are written without the offset column"),
    },
    Pasted {
        name: "per_job_logs",
        note: None,
    },
    Pasted {
        name: "exitall",
        note: Some("jobs end on their own runtime or size"),
    },
];

/// Every accepted name with its note: [`PASTED`], then fio's other names.
fn entries() -> impl Iterator<Item = (&'static str, Option<&'static str>)> {
    let pasted = PASTED.iter().map(|p| (p.name, p.note));
    let rest = IGNORED
        .iter()
        .flat_map(|g| g.names.iter().map(move |&name| (name, g.note)));
    pasted.chain(rest)
}

/// The pasted options a job set, in the order of `entries()`, with their values as written
/// (empty for a bare key such as `thread`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PastedOptions(pub Vec<(&'static str, String)>);

impl PastedOptions {
    /// The value of `name`, if the job set it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// One line per option set that has no effect here: `direct=1: there is no page cache...`.
    pub fn notes(&self) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|(name, value)| {
                let note = entries().find(|(n, _)| n == name)?.1?;
                Some(if value.is_empty() {
                    format!("{name} ignored: {note}")
                } else {
                    format!("{name}={value} ignored: {note}")
                })
            })
            .collect()
    }
}

impl FromArgMatches for PastedOptions {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut s = PastedOptions::default();
        s.update_from_arg_matches(m)?;
        Ok(s)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for (name, _) in entries() {
            if let Some(v) = m.get_one::<String>(name) {
                self.0.retain(|(n, _)| *n != name);
                self.0.push((name, v.clone()));
            }
        }
        self.0
            .sort_by_key(|(n, _)| entries().position(|(e, _)| e == *n));
        Ok(())
    }
}

impl Args for PastedOptions {
    fn augment_args(cmd: Command) -> Command {
        entries().fold(cmd, |cmd, (name, _)| {
            let arg = Arg::new(name).long(name).value_name("VALUE").hide(true);
            cmd.arg(if VALUED.contains(&name) {
                arg
            } else {
                // A switch must not take the next word (a job file) as its value.
                arg.num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("")
            })
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        pasted: PastedOptions,
    }

    #[test]
    fn pasted_options_are_accepted_with_one_note_each() {
        let c = Cli::try_parse_from([
            "bench",
            "--direct=1",
            "--ioengine=libaio",
            "--thread",
            "--filename=/dev/nvme0n1",
            "--gtod_reduce=1",
        ])
        .unwrap();
        let p = c.pasted;
        assert_eq!(p.get("ioengine"), Some("libaio"));
        assert_eq!(p.get("thread"), Some(""));
        assert_eq!(p.get("filename"), Some("/dev/nvme0n1"));
        let notes = p.notes();
        // thread and filename are honoured or handled by the caller: no note.
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].starts_with("ioengine=libaio ignored: "),
            "{notes:?}"
        );
        assert!(notes[1].starts_with("direct=1 ignored: "), "{notes:?}");
    }

    #[test]
    fn switches_leave_the_next_word_alone() {
        let c = Cli::try_parse_from(["bench", "--thread", "--ioengine", "libaio"]).unwrap();
        assert_eq!(c.pasted.get("thread"), Some(""));
        assert_eq!(c.pasted.get("ioengine"), Some("libaio"));
        assert!(Cli::try_parse_from(["bench", "--direct", "job.fio"]).is_err());
    }

    #[test]
    fn every_name_is_unique() {
        let names: Vec<&str> = entries().map(|(n, _)| n).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(n), "{n} twice");
        }
    }

    #[test]
    fn fio_options_from_other_engines_and_features_are_named_once_each() {
        let c = Cli::try_parse_from([
            "bench",
            "--zonemode=strided",
            "--threads=1",
            "--port=8888",
            "--startdelay=4",
            "--percentage_random=50",
            "--continue_on_error=all",
        ])
        .unwrap();
        let notes = c.pasted.notes();
        assert_eq!(notes.len(), 6, "{notes:?}");
        assert!(notes[0].starts_with("port=8888 ignored: an option of another ioengine"));
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("zonemode=strided ignored: a zone option"))
        );
        assert!(Cli::try_parse_from(["bench", "--zonemodes=strided"]).is_err());
    }
}
