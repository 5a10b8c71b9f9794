// SPDX-License-Identifier: Apache-2.0
//! Where `nvmemu bench` writes: the report to standard output or `--output FILE`
//! (created before the run, so a bad path costs nothing), and the one-line notes for the
//! fio options that have no effect here.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::args::BenchArgs;
use super::jobs::{RunPlan, filename_socket};

/// The report's destination.
#[derive(Debug)]
pub enum Output {
    /// Standard output.
    Stdout,
    /// `--output FILE`.
    File(PathBuf, std::fs::File),
}

impl Output {
    /// Standard output, or `path` created (truncated) now.
    pub fn open(path: Option<&Path>) -> Result<Output> {
        let Some(path) = path else {
            return Ok(Output::Stdout);
        };
        match std::fs::File::create(path) {
            Ok(f) => Ok(Output::File(path.to_path_buf(), f)),
            Err(e) => bail!(
                "--output {}: cannot write there ({e}); choose a writable path",
                path.display()
            ),
        }
    }

    /// Writes `text` and flushes it, so a report is complete even if the run ends later.
    pub fn write(&mut self, text: &str) -> Result<()> {
        let r = match self {
            Output::Stdout => return nvmemu::console::print(text),
            Output::File(_, f) => f.write_all(text.as_bytes()).and_then(|()| f.flush()),
        };
        if let (Err(e), Output::File(path, _)) = (&r, &*self) {
            bail!("--output {}: write failed ({e})", path.display());
        }
        r.map_err(Into::into)
    }
}

/// Said when a paced job (rate, rate_iops, thinktime) drives a server: what its latencies
/// then include.
const PACED_REMOTE: &str = "rate and thinktime leave the server idle between I/Os: a server \
     that sleeps when idle (nvmemu serve without --busy-poll: 200 us naps, longer when its \
     core is busy) adds its wake-up to the latencies and can hold the job below its rate; \
     start the server with --busy-poll to measure the device alone";

/// The notes for options without effect, one line each and each once; a `filename` that
/// names a vfio-user socket becomes `lead.socket` (unless `--socket` is given).
pub fn notes(lead: &mut BenchArgs, plan: &RunPlan) -> Result<Vec<String>> {
    let mut notes: Vec<String> = Vec::new();
    let mut add = |n: String| {
        if !notes.contains(&n) {
            notes.push(n);
        }
    };
    let mut sockets: Vec<PathBuf> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    for j in plan.jobs() {
        for n in j.args.opts.pasted.notes() {
            add(n);
        }
        if let Some(f) = j.args.opts.pasted.get("filename") {
            match filename_socket(f) {
                Some(dir) if !sockets.contains(&dir) => sockets.push(dir),
                Some(_) => {}
                None if !others.iter().any(|o| o == f) => others.push(f.to_string()),
                None => {}
            }
        }
    }
    if lead.socket.is_none() {
        if sockets.len() > 1 {
            bail!(
                "the jobs' filename options name {} vfio-user sockets; one run drives one \
                 controller, so give them one filename (or --socket DIR)",
                sockets.len()
            );
        }
        lead.socket = sockets.pop();
    }
    let target = match &lead.socket {
        Some(dir) => format!("the jobs run against the controller at {}", dir.display()),
        None => "the jobs run against the in-process target (name a vfio-user socket \
                 directory with filename= or --socket for a server)"
            .to_string(),
    };
    for f in others {
        add(format!("filename={f} ignored: {target}"));
    }
    let paced = plan.jobs().any(|j| {
        let w = &j.args.opts.workload;
        w.rate.is_some() || w.rate_iops.is_some() || w.thinktime.is_some_and(|t| !t.is_zero())
    });
    if paced && lead.socket.is_some() {
        add(PACED_REMOTE.to_string());
    }
    if lead.status_interval.is_some() {
        add(
            "--status-interval ignored: the report is printed once, at the end; \
             --eta=always shows progress every second"
                .to_string(),
        );
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn notes_for(argv: &[&str]) -> Vec<String> {
        let argv = std::iter::once("bench").chain(argv.iter().copied());
        let mut args = Cli::try_parse_from(argv).unwrap().args;
        let plan = super::super::jobs::plan_run(&args, &[]).unwrap();
        notes(&mut args, &plan).unwrap()
    }

    #[test]
    fn paced_jobs_on_a_server_say_what_their_latencies_include() {
        for pace in ["--rate_iops=2000", "--rate=4m", "--thinktime=1000"] {
            let n = notes_for(&["--socket=/tmp/nvmemu-no-such-dir", pace]);
            assert_eq!(n, [PACED_REMOTE], "{pace}");
            assert!(notes_for(&[pace]).is_empty(), "{pace} in process");
        }
        assert!(notes_for(&["--socket=/tmp/nvmemu-no-such-dir"]).is_empty());
    }
}
