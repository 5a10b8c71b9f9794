// SPDX-License-Identifier: Apache-2.0
//! What `nvmemu bench` runs: the jobs of its fio job files, or the one job its options
//! describe. Each job's options go through the same parser as the command line, by
//! fio's names (`--key=value`, or `--key` for a bare key), so every option the command
//! line takes works in a job file. Options on the command line apply to every job and
//! win over the files' (fio lets the files win; here `--runtime=2` shortens a job file
//! written for 60 s). Jobs are split into stages (a `stonewall` waits for the jobs
//! before it) and reporting groups (`new_group` or a stonewall start the next).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use clap::{Args, FromArgMatches};
use nvmemu_bench::jobfile::{JobDef, JobOption, read_job_files};

use super::args::BenchArgs;

/// One job definition to run (its `numjobs` clones included).
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Its options (the command line's where it sets them).
    pub args: BenchArgs,
    /// fio's reporting group.
    pub groupid: u32,
    /// A job file's job: its options as written, for the JSON report.
    pub written: Option<WrittenOptions>,
}

/// A job file's options for one job as written (a bare key has an empty value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WrittenOptions {
    /// The `[global]` options in force for it.
    pub global: Vec<(String, String)>,
    /// Its own section's.
    pub own: Vec<(String, String)>,
}

impl WrittenOptions {
    fn of(def: &JobDef) -> WrittenOptions {
        let pair = |o: &JobOption| (o.key.clone(), o.value.clone().unwrap_or_default());
        let (global, own) = def.options.split_at(def.globals.min(def.options.len()));
        WrittenOptions {
            global: global.iter().map(pair).collect(),
            own: own.iter().map(pair).collect(),
        }
    }
}

/// The jobs in stages, run one stage after the other.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// Each stage's jobs run at the same time.
    pub stages: Vec<Vec<JobSpec>>,
}

impl RunPlan {
    /// Every job, stage by stage.
    pub fn jobs(&self) -> impl Iterator<Item = &JobSpec> {
        self.stages.iter().flatten()
    }

    /// The first job: its settings for the target, the output and the reports count for
    /// the whole run.
    pub fn lead(&self) -> Option<&JobSpec> {
        self.jobs().next()
    }
}

/// The clap command that parses one job's options.
fn command(job_file: bool) -> clap::Command {
    let cmd = BenchArgs::augment_args(clap::Command::new("bench")).args_override_self(true);
    if job_file {
        // A job file starts from fio's defaults, not the quick check's.
        cmd.mut_arg("rw", |a| a.default_value("read"))
            .mut_arg("iodepth", |a| a.default_value("1"))
    } else {
        cmd
    }
}

/// `--key=value` or `--key`.
fn as_arg(o: &JobOption) -> String {
    match &o.value {
        Some(v) => format!("--{}={v}", o.key),
        None => format!("--{}", o.key),
    }
}

/// The first line of a clap error, without its `error: ` prefix.
fn clap_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid option");
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// One job file section as `BenchArgs`: its options, then the command line's.
fn job_args(def: &JobDef, cli: &[OsString]) -> Result<BenchArgs> {
    // Each option alone first, so a bad one is reported with its file and line.
    for o in &def.options {
        let argv = ["bench".to_string(), as_arg(o)];
        if let Err(e) = command(true).try_get_matches_from(argv) {
            bail!("{}: {}", o.at, clap_line(&e));
        }
    }
    let mut argv: Vec<OsString> = vec!["bench".into(), format!("--name={}", def.name).into()];
    argv.extend(def.options.iter().map(|o| as_arg(o).into()));
    argv.extend(cli.iter().cloned());
    let m = command(true)
        .try_get_matches_from(argv)
        .map_err(|e| anyhow!("job {}: {}", def.name, clap_line(&e)))?;
    BenchArgs::from_arg_matches(&m).map_err(|e| anyhow!("job {}: {}", def.name, clap_line(&e)))
}

/// The run `args` asks for; `cli` is the command line after `bench`, given again to every
/// job of the job files so that it wins over their values.
pub fn plan_run(args: &BenchArgs, cli: &[OsString]) -> Result<RunPlan> {
    if args.job_files.is_empty() {
        return Ok(RunPlan {
            stages: vec![vec![JobSpec {
                args: args.clone(),
                groupid: 0,
                written: None,
            }]],
        });
    }
    let defs = read_job_files(&args.job_files)?;
    let mut stages: Vec<Vec<JobSpec>> = Vec::new();
    let mut groupid = 0u32;
    let mut in_group = 0usize;
    for def in &defs {
        // fio: a new group only once the current one has a job.
        if def.new_group && in_group > 0 {
            groupid += 1;
            in_group = 0;
        }
        in_group += 1;
        let spec = JobSpec {
            args: job_args(def, cli)?,
            groupid,
            written: Some(WrittenOptions::of(def)),
        };
        match stages.last_mut() {
            Some(stage) if !def.stonewall => stage.push(spec),
            _ => stages.push(vec![spec]),
        }
    }
    Ok(RunPlan { stages })
}

/// The directory of a vfio-user socket that a job's `filename` names (the directory
/// holding `cntrl`, or the `cntrl` socket itself), if it names one.
pub fn filename_socket(filename: &str) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    let p = Path::new(filename);
    let is_socket = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.file_type().is_socket())
            .unwrap_or(false)
    };
    if is_socket(&p.join("cntrl")) {
        return Some(p.to_path_buf());
    }
    (p.file_name().is_some_and(|n| n == "cntrl") && is_socket(p))
        .then(|| p.parent().unwrap_or(Path::new(".")).to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use nvmemu_bench::RwMode;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn plan(file: &str, cli: &[&str]) -> Result<RunPlan> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.fio");
        std::fs::write(&path, file).unwrap();
        let mut argv = vec!["bench".to_string(), path.display().to_string()];
        argv.extend(cli.iter().map(ToString::to_string));
        let args = Cli::try_parse_from(&argv).unwrap().args;
        let raw: Vec<OsString> = argv[1..].iter().map(OsString::from).collect();
        plan_run(&args, &raw)
    }

    const PAPER: &str = "[global]\nioengine=libaio\ndirect=1\nbs=4k\niodepth=32\nruntime=60\n\
                         time_based\ngroup_reporting\nfilename=/dev/nvme0n1\n\n[randread]\nrw=randread\n";

    #[test]
    fn a_paper_job_file_parses_by_fio_names_and_the_command_line_wins() {
        let p = plan(PAPER, &["--runtime=1"]).unwrap();
        assert_eq!(p.stages.len(), 1);
        let o = &p.stages[0][0].args.opts;
        assert_eq!(o.name, "randread");
        assert_eq!(o.rw, RwMode::Randread);
        assert_eq!(o.iodepth, 32);
        assert!(o.time_based && o.group_reporting);
        assert_eq!(o.runtime, Some(std::time::Duration::from_secs(1)));
        assert_eq!(o.pasted.get("ioengine"), Some("libaio"));
        assert_eq!(o.pasted.get("filename"), Some("/dev/nvme0n1"));
    }

    #[test]
    fn stonewall_starts_a_stage_and_new_group_a_group() {
        let p = plan(
            "[global]\nsize=1m\n[a]\n[b]\nnew_group\nrw=write\n[c]\nstonewall\nnumjobs=2\n",
            &[],
        )
        .unwrap();
        let shape: Vec<Vec<(String, u32)>> = p
            .stages
            .iter()
            .map(|s| {
                s.iter()
                    .map(|j| (j.args.opts.name.clone(), j.groupid))
                    .collect()
            })
            .collect();
        assert_eq!(
            shape,
            [
                vec![("a".to_string(), 0), ("b".to_string(), 1)],
                vec![("c".to_string(), 2)]
            ]
        );
        // fio's defaults, not the quick check's.
        assert_eq!(p.stages[0][0].args.opts.rw, RwMode::Read);
        assert_eq!(p.stages[0][0].args.opts.iodepth, 1);
        assert_eq!(p.stages[1][0].args.opts.numjobs, 2);
    }

    #[test]
    fn a_bad_option_names_its_line() {
        let e = plan("[a]\nbs=4k\nnosuchoption=1\n", &[]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("job.fio:3: "), "{e}");
        assert!(e.contains("nosuchoption"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = plan("[a]\nrw=sideways\n", &[]).unwrap_err().to_string();
        assert!(e.contains("job.fio:2: ") && e.contains("sideways"), "{e}");
    }

    #[test]
    fn filename_names_a_socket_directory_or_nothing() {
        assert_eq!(filename_socket("/dev/nvme0n1"), None);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(filename_socket(&dir.path().display().to_string()), None);
        let _l = std::os::unix::net::UnixListener::bind(dir.path().join("cntrl")).unwrap();
        let d = dir.path().to_path_buf();
        assert_eq!(filename_socket(&d.display().to_string()), Some(d.clone()));
        assert_eq!(
            filename_socket(&d.join("cntrl").display().to_string()),
            Some(d)
        );
    }
}
