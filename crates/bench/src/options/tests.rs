// SPDX-License-Identifier: Apache-2.0
//! Tests of the job options: fio spellings, defaults and derived values.

use super::*;
use clap::Parser;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    opts: BenchOptions,
}

fn parse(args: &[&str]) -> Result<BenchOptions, clap::Error> {
    let mut v = vec!["bench"];
    v.extend_from_slice(args);
    Cli::try_parse_from(v).map(|c| c.opts)
}

#[test]
fn defaults_match_fio() {
    let o = parse(&[]).unwrap();
    assert_eq!(o, BenchOptions::default());
    assert_eq!(*o.bs, 4096);
    assert_eq!(o.iodepth, 1);
    assert_eq!(o.rwmixread, 50);
    assert_eq!(o.name, "nvmemu");
    assert_eq!(o.output_format, OutputFormat::NORMAL);
}

#[test]
fn fio_spellings_parse() {
    let o = parse(&[
        "--rw=randrw",
        "--rwmixread=70",
        "--bs=128k",
        "--iodepth=32",
        "--numjobs=2",
        "--timeout=10",
        "--ramp_time=2s",
        "--time_based",
        "--size=1g",
        "--fileoffset=1m",
        "--cpus_allowed=0,2-3",
        "--verify=crc32c",
        "--output-format=json,normal",
        "--name=job1",
    ])
    .unwrap();
    assert_eq!(o.rw, RwMode::Randrw);
    assert_eq!(o.rwmixread, 70);
    assert_eq!(*o.bs, 128 * 1024);
    assert_eq!(o.iodepth, 32);
    assert_eq!(o.numjobs, 2);
    assert_eq!(o.runtime, Some(Duration::from_secs(10)));
    assert_eq!(o.ramp_time, Some(Duration::from_secs(2)));
    assert!(o.time_based);
    assert_eq!(o.size, Some(SizeSpec::Bytes(1 << 30)));
    assert_eq!(o.offset, SizeSpec::Bytes(1 << 20));
    assert_eq!(o.cpus_allowed, Some(CpuList(vec![0, 2, 3])));
    assert_eq!(o.verify, VerifyMode::Crc32c);
    assert_eq!(
        o.output_format,
        OutputFormat {
            normal: true,
            json: true,
            json_plus: false,
            terse: false,
        }
    );
    assert_eq!(o.name, "job1");
}

#[test]
fn batching_options_take_fio_names_and_aliases() {
    let o = parse(&[
        "--iodepth=32",
        "--iodepth_batch=8",
        "--iodepth_batch_complete=2",
        "--iodepth_batch_complete_max=16",
    ])
    .unwrap();
    assert_eq!(
        (
            o.iodepth_batch_submit,
            o.iodepth_batch_complete_min,
            o.iodepth_batch_complete_max
        ),
        (8, 2, 16)
    );
    assert_eq!(
        o.batching(),
        Batching {
            submit: 8,
            refill_min: 2,
            reap_max: 16
        }
    );
    let j = o.job_options();
    assert!(j.contains(&("iodepth_batch_submit", "8".to_string())));
    assert!(j.contains(&("iodepth_batch_complete_min", "2".to_string())));
    assert!(j.contains(&("iodepth_batch_complete_max", "16".to_string())));
    // Defaults: one doorbell per refill, half of iodepth reaped per poll; not
    // listed as job options.
    let d = parse(&["--iodepth=32"]).unwrap();
    assert_eq!(
        d.batching(),
        Batching {
            submit: 32,
            refill_min: 1,
            reap_max: 16
        }
    );
    assert!(
        !d.job_options()
            .iter()
            .any(|(k, _)| k.starts_with("iodepth_batch"))
    );
}

#[test]
fn rw_takes_fios_offset_modifier_on_sequential_patterns() {
    let o = parse(&["--rw=read:-8k"]).unwrap();
    assert_eq!(o.rw, RwMode::Read);
    assert_eq!(o.rw.seq_add, -8192);
    assert!(o.job_options().contains(&("rw", "read:-8k".to_string())));
    let o = parse(&["--readwrite=write:112k"]).unwrap();
    assert_eq!((o.rw.mode, o.rw.seq_add), (RwMode::Write, 112 << 10));
    assert_eq!(parse(&["--rw=readwrite"]).unwrap().rw, RwMode::Rw);
}

#[test]
fn bs_takes_one_size_per_direction_as_fio() {
    let o = parse(&["--bs=4k,64k"]).unwrap();
    assert_eq!(o.bs.0, [4096, 65536, 65536]);
    assert_eq!(o.max_bs(), 65536);
    assert!(o.job_options().contains(&("bs", "4k,64k,64k".to_string())));
    let lists = o.size_lists().unwrap();
    assert_eq!(lists.0[1].sizes(), [65536]);
    assert_eq!(
        parse(&["--bs=512,512,16384"]).unwrap().bs.0,
        [512, 512, 16384]
    );
    assert_eq!(parse(&["--bs=,8k"]).unwrap().bs.0, [4096, 8192, 8192]);
    assert!(parse(&["--bs=4k"]).unwrap().size_lists().is_none());
    assert!(parse(&["--bs=4k,4k,4k,4k"]).is_err());
}

#[test]
fn help_names_every_output_format() {
    use clap::CommandFactory;
    let help = Cli::command().render_help().to_string();
    let line = help.lines().find(|l| l.contains("Report formats")).unwrap();
    assert!(line.contains("json+, terse"), "{line}");
}

#[test]
fn dashed_spellings_are_not_fio_and_are_rejected() {
    assert!(parse(&["--ramp-time=1"]).is_err());
    assert!(parse(&["--time-based"]).is_err());
    assert!(parse(&["--cpus-allowed=1"]).is_err());
}

#[test]
fn bad_values_are_rejected() {
    assert!(parse(&["--rwmixread=101"]).is_err());
    assert!(parse(&["--iodepth=0"]).is_err());
    assert!(parse(&["--bs=4q"]).is_err());
    assert!(parse(&["--output-format=csv"]).is_err());
    assert!(parse(&["--cpus_allowed=3-1"]).is_err());
    assert!(parse(&["--rw=discard"]).is_err());
    assert_eq!(parse(&["--rw=randtrim"]).unwrap().rw, RwMode::Randtrim);
    assert_eq!(parse(&["--rw=trimwrite"]).unwrap().rw, RwMode::Trimwrite);
    assert_eq!(
        parse(&["--rw=randtrimwrite"]).unwrap().rw,
        RwMode::Randtrimwrite
    );
    assert!(parse(&["--rw=randread:8"]).is_err());
    assert!(parse(&["--rw=read:-"]).is_err());
    for v in ["crc32c-intel", "meta"] {
        let o = parse(&[&format!("--verify={v}")]).unwrap();
        assert_eq!(o.verify, VerifyMode::Crc32c, "{v}");
    }
}

#[test]
fn random_map_options_parse_like_fio() {
    let o = parse(&[]).unwrap();
    assert!(!o.norandommap && o.randrepeat && o.randseed.is_none());
    assert_eq!(o.seed(), DEFAULT_RANDSEED);
    let o = parse(&["--norandommap", "--randrepeat=0"]).unwrap();
    assert!(o.norandommap && !o.randrepeat);
    let j = o.job_options();
    assert!(j.contains(&("norandommap", String::new())));
    assert!(j.contains(&("randrepeat", "0".to_string())));
    let o = parse(&["--norandommap=1", "--randrepeat=1", "--randseed=42"]).unwrap();
    assert!(o.norandommap && o.randrepeat);
    assert_eq!(o.seed(), 42);
    assert!(o.job_options().contains(&("randseed", "42".to_string())));
    assert!(!parse(&["--norandommap=0"]).unwrap().norandommap);
    assert!(parse(&["--randrepeat=maybe"]).is_err());
    // An explicit seed wins over randrepeat=0.
    assert_eq!(
        parse(&["--randrepeat=0", "--randseed=7"]).unwrap().seed(),
        7
    );
}

#[test]
fn runtime_zero_means_no_limit() {
    let o = parse(&["--runtime=0"]).unwrap();
    assert_eq!(o.runtime, Some(Duration::ZERO));
    assert_eq!(o.time_limit(), None);
    assert_eq!(
        parse(&["--runtime=3"]).unwrap().time_limit(),
        Some(Duration::from_secs(3))
    );
}

#[test]
fn job_options_list_what_was_set() {
    let o = parse(&[
        "--rw=randread",
        "--bs=4k",
        "--iodepth=16",
        "--runtime=5",
        "--time_based",
    ])
    .unwrap();
    let j = o.job_options();
    assert!(j.contains(&("rw", "randread".to_string())));
    assert!(j.contains(&("iodepth", "16".to_string())));
    assert!(j.contains(&("runtime", "5".to_string())));
    assert!(j.contains(&("time_based", String::new())));
}
