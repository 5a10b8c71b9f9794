// SPDX-License-Identifier: Apache-2.0
//! fio job files: `[global]` and job sections of `key=value` lines or bare keys
//! (`time_based`), `;` and `#` comments (whole lines, or after a blank at the end of a
//! line), `include FILE` (relative to the including file), `${VAR}` taken from the
//! environment and fio's `$ncpus`, `$pagesize` and `$mb_memory`. As in fio, an unset
//! `${VAR}` and any other `$word` (`$jobnum` in `filename_format`) stay as written. Each job comes out as fio option names and values in order, the
//! `[global]` ones before its own, for the caller to feed to the same option parser as
//! the command line; only the options that place jobs (`stonewall`, `wait_for_previous`,
//! `new_group`) are read here.
//!
//! As in fio, a `[global]` section applies to the jobs after it in the same file, and
//! the first job of every file after the first waits for the jobs before it.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::option_values::parse_bool;

/// Deepest `include` nesting accepted (fio: includes may nest; a loop must not hang).
const MAX_INCLUDE_DEPTH: usize = 8;

/// Why a job file could not be read.
#[derive(Debug, Error)]
pub enum JobFileError {
    /// The file could not be read.
    #[error("cannot read job file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause (part of the one-line message, so not a `#[source]`).
        source: std::io::Error,
    },
    /// A line that is not a section, an option, a comment or an include.
    #[error("{}:{line}: {what}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what to do.
        what: String,
    },
    /// The files hold no job section.
    #[error("no jobs in {files}: add a [name] section after [global]")]
    NoJobs {
        /// The files read.
        files: String,
    },
}

/// One option as written: `key=value`, or a bare `key` (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOption {
    /// fio's option name.
    pub key: String,
    /// The value after `=`, variables expanded.
    pub value: Option<String>,
    /// `file:line`, for error messages.
    pub at: String,
}

/// One job section with the `[global]` options in force for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDef {
    /// The section name (fio's job name unless `name=` says otherwise).
    pub name: String,
    /// Global options, then the section's, in file order.
    pub options: Vec<JobOption>,
    /// How many of `options` came from `[global]`.
    pub globals: usize,
    /// Waits for every job before it (`stonewall`, `wait_for_previous`, or the first job
    /// of a later file).
    pub stonewall: bool,
    /// Starts a new reporting group (`new_group`, or any stonewall).
    pub new_group: bool,
}

/// Reads `paths` in order into job definitions.
pub fn read_job_files(paths: &[PathBuf]) -> Result<Vec<JobDef>, JobFileError> {
    let env = |k: &str| std::env::var(k).ok();
    let mut jobs = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let before = jobs.len();
        let mut reader = Reader {
            env: &env,
            global: Vec::new(),
            jobs: &mut jobs,
        };
        reader.file(path, 0)?;
        if i > 0
            && let Some(first) = jobs.get_mut(before)
        {
            first.stonewall = true;
            first.new_group = true;
        }
    }
    if jobs.is_empty() {
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(JobFileError::NoJobs {
            files: files.join(", "),
        });
    }
    Ok(jobs)
}

/// Parses one file's text (already read) as [`read_job_files`] does.
pub fn parse_job_text(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<JobDef>, JobFileError> {
    let mut jobs = Vec::new();
    let mut reader = Reader {
        env,
        global: Vec::new(),
        jobs: &mut jobs,
    };
    reader.text(text, path, 0)?;
    Ok(jobs)
}

enum Section {
    None,
    Global,
    Job,
}

struct Reader<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    global: Vec<JobOption>,
    jobs: &'a mut Vec<JobDef>,
}

impl Reader<'_> {
    fn file(&mut self, path: &Path, depth: usize) -> Result<(), JobFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| JobFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        self.text(&text, path, depth)
    }

    fn text(&mut self, text: &str, path: &Path, depth: usize) -> Result<(), JobFileError> {
        let mut section = Section::None;
        for (i, raw) in text.lines().enumerate() {
            let line = strip_comment(raw).trim();
            let bad = |what: String| JobFileError::Line {
                path: path.to_path_buf(),
                line: i + 1,
                what,
            };
            if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[') {
                let Some(name) = name.strip_suffix(']').map(str::trim) else {
                    return Err(bad(format!("{line:?} opens a section but has no ']'")));
                };
                if name.is_empty() {
                    return Err(bad("a section needs a name: [global] or [jobname]".into()));
                }
                section = if name == "global" {
                    Section::Global
                } else {
                    let mut job = JobDef {
                        name: name.to_string(),
                        options: Vec::with_capacity(self.global.len()),
                        globals: 0,
                        stonewall: false,
                        new_group: false,
                    };
                    // A placing option under [global] places every job after it.
                    for opt in &self.global {
                        if !place(&mut job, opt).map_err(bad)? {
                            job.options.push(opt.clone());
                        }
                    }
                    job.globals = job.options.len();
                    self.jobs.push(job);
                    Section::Job
                };
                continue;
            }
            if let Some(inc) = line.strip_prefix("include ") {
                if depth >= MAX_INCLUDE_DEPTH {
                    return Err(bad(format!(
                        "includes nest deeper than {MAX_INCLUDE_DEPTH}; is a file including itself?"
                    )));
                }
                let inc = expand(inc.trim(), self.env);
                let target = path.parent().unwrap_or(Path::new(".")).join(inc);
                self.file(&target, depth + 1)?;
                continue;
            }
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim(), Some(expand(v.trim(), self.env))),
                None => (line, None),
            };
            let opt = JobOption {
                key: key.to_string(),
                value,
                at: format!("{}:{}", path.display(), i + 1),
            };
            match section {
                Section::None => {
                    return Err(bad(format!(
                        "{key} comes before any section; put it under [global] or a [job]"
                    )));
                }
                Section::Global => self.global.push(opt),
                Section::Job => {
                    let Some(job) = self.jobs.last_mut() else {
                        continue;
                    };
                    if !place(job, &opt).map_err(bad)? {
                        job.options.push(opt);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Applies the options that place a job (`stonewall`, `wait_for_previous`, `new_group`,
/// `wait_for`); false for any other option. `wait_for=NAME` waits for every job before
/// this one, the named one among them, and stays in the same reporting group.
fn place(job: &mut JobDef, opt: &JobOption) -> Result<bool, String> {
    if !matches!(
        opt.key.as_str(),
        "stonewall" | "wait_for_previous" | "new_group" | "wait_for"
    ) {
        return Ok(false);
    }
    let on = match (&opt.value, opt.key.as_str()) {
        (None, _) | (Some(_), "wait_for") => true,
        (Some(v), _) => parse_bool(v).map_err(|e| format!("{}: {e}", opt.key))?,
    };
    match opt.key.as_str() {
        "wait_for" => job.stonewall = true,
        "stonewall" | "wait_for_previous" => {
            job.stonewall |= on;
            job.new_group |= on;
        }
        "new_group" => job.new_group |= on,
        _ => return Ok(false),
    }
    Ok(true)
}

/// The line without a trailing comment: `;` or `#` after a blank (`size=100k ; note`).
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let at = (1..bytes.len())
        .find(|&i| matches!(bytes[i], b';' | b'#') && bytes[i - 1].is_ascii_whitespace());
    at.map_or(line, |i| &line[..i])
}

/// Replaces `${VAR}` with the environment's value and fio's keywords `$ncpus`,
/// `$pagesize` and `$mb_memory` with the machine's; anything else (an unset `${VAR}`,
/// `$jobnum`) stays as written, as fio leaves it.
fn expand(v: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let braced = after
            .strip_prefix('{')
            .and_then(|b| b.find('}').map(|end| (&b[..end], &b[end + 1..])));
        if let Some((name, tail)) = braced {
            match env(name) {
                Some(value) => out.push_str(&value),
                None => out.push_str(&rest[at..rest.len() - tail.len()]),
            }
            rest = tail;
            continue;
        }
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let (name, tail) = (&after[..end], &after[end..]);
        match keyword(name) {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[at..=at + name.len()]),
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// fio's job file keywords: the machine's CPU count, page size and memory in MiB.
fn keyword(name: &str) -> Option<String> {
    match name {
        "ncpus" => std::thread::available_parallelism()
            .map(|n| n.get().to_string())
            .ok(),
        "pagesize" => Some(rustix::param::page_size().to_string()),
        "mb_memory" => {
            let info = std::fs::read_to_string("/proc/meminfo").ok()?;
            let kib: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some((kib / 1024).to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        (k == "DEV").then(|| "/dev/nvme0n1".to_string())
    }

    fn parse(text: &str) -> Result<Vec<JobDef>, JobFileError> {
        parse_job_text(text, Path::new("t.fio"), &env)
    }

    fn kv(d: &JobDef) -> Vec<(&str, Option<&str>)> {
        d.options
            .iter()
            .map(|o| (o.key.as_str(), o.value.as_deref()))
            .collect()
    }

    #[test]
    fn a_paper_job_file_gives_its_jobs_with_globals_first() {
        let jobs = parse(
            "; from a paper\n[global]\nioengine=libaio\ndirect=1\nbs=4k\n  iodepth = 32\n\
             runtime=60\ntime_based\ngroup_reporting\nfilename=${DEV}\n\n\
             [randread]\nrw=randread\n# comment\n[seqwrite]\nstonewall\nrw=write\nbs=128k\n",
        )
        .unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].name, "randread");
        assert!(!jobs[0].stonewall);
        let o = kv(&jobs[0]);
        assert_eq!(o[3], ("iodepth", Some("32")));
        assert_eq!(o[5], ("time_based", None));
        assert_eq!(o[7], ("filename", Some("/dev/nvme0n1")));
        assert_eq!(o[8], ("rw", Some("randread")));
        assert!(jobs[1].stonewall && jobs[1].new_group);
        let o = kv(&jobs[1]);
        assert_eq!(&o[8..], [("rw", Some("write")), ("bs", Some("128k"))]);
        assert_eq!(jobs[1].options[9].at, "t.fio:18");
    }

    #[test]
    fn a_global_section_applies_to_later_jobs_only() {
        let jobs =
            parse("[a]\nrw=read\n[global]\nbs=8k\n[b]\nnew_group\n[c]\nwait_for=a\n").unwrap();
        assert_eq!(kv(&jobs[0]), [("rw", Some("read"))]);
        assert_eq!(kv(&jobs[1]), [("bs", Some("8k"))]);
        assert!(jobs[1].new_group && !jobs[1].stonewall);
        assert!(!jobs[2].new_group && jobs[2].stonewall);
    }

    #[test]
    fn bad_lines_name_the_line_and_the_fix() {
        let e = parse("bs=4k\n[a]\n").unwrap_err().to_string();
        assert_eq!(
            e,
            "t.fio:1: bs comes before any section; put it under [global] or a [job]"
        );
        assert!(
            parse("[a\n")
                .unwrap_err()
                .to_string()
                .starts_with("t.fio:1: ")
        );
        assert!(parse("[a]\nstonewall=maybe\n").is_err());
    }

    #[test]
    fn variables_expand_as_fio_expands_them() {
        assert_eq!(expand("x${DEV}y", &env), "x/dev/nvme0n1y");
        assert_eq!(expand("cost: 5$", &env), "cost: 5$");
        assert!(expand("$ncpus", &env).parse::<u32>().unwrap() >= 1);
        assert!(expand("$mb_memory", &env).parse::<u64>().unwrap() >= 1);
        // fio keeps other words and unset variables as written.
        assert_eq!(
            expand("/mnt/$jobnum.$filenum-$DEV", &env),
            "/mnt/$jobnum.$filenum-$DEV"
        );
        assert_eq!(expand("${NOPE}/x", &env), "${NOPE}/x");
        assert_eq!(expand("${unclosed", &env), "${unclosed");
        let jobs = parse("[a]\nfilename_format=f.$jobnum.$filenum\nfilename=${NOPE}\n").unwrap();
        assert_eq!(
            kv(&jobs[0]),
            [
                ("filename_format", Some("f.$jobnum.$filenum")),
                ("filename", Some("${NOPE}"))
            ]
        );
    }

    #[test]
    fn comments_end_a_line_after_a_blank() {
        let jobs =
            parse("[a] ; first\nsize=102404k ; 100Mb+4k\nbs=4k\t# four\nverify_pattern=a;b\n")
                .unwrap();
        assert_eq!(jobs[0].name, "a");
        assert_eq!(
            kv(&jobs[0]),
            [
                ("size", Some("102404k")),
                ("bs", Some("4k")),
                ("verify_pattern", Some("a;b"))
            ]
        );
    }

    #[test]
    fn files_include_others_and_later_files_wait_for_earlier_ones() {
        let dir = std::env::temp_dir().join(format!("nvmemu-jobfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("common.fio"), "[global]\nbs=16k\n").unwrap();
        std::fs::write(dir.join("a.fio"), "include common.fio\n[a]\nrw=read\n").unwrap();
        std::fs::write(dir.join("b.fio"), "[b]\nrw=write\n[c]\nrw=write\n").unwrap();
        std::fs::write(dir.join("loop.fio"), "include loop.fio\n").unwrap();
        let jobs = read_job_files(&[dir.join("a.fio"), dir.join("b.fio")]).unwrap();
        assert_eq!(kv(&jobs[0]), [("bs", Some("16k")), ("rw", Some("read"))]);
        // Globals do not carry into the next file; its first job is stonewalled.
        assert_eq!(kv(&jobs[1]), [("rw", Some("write"))]);
        assert!(jobs[1].stonewall && !jobs[2].stonewall);
        assert!(read_job_files(&[dir.join("loop.fio")]).is_err());
        let e = read_job_files(&[dir.join("common.fio")]).unwrap_err();
        assert!(matches!(e, JobFileError::NoJobs { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
