// SPDX-License-Identifier: Apache-2.0
//! `--ns` values: `malloc:size=4G,lba=512`, `malloc:size=64G,lazy=on`,
//! `malloc:size=4G,hugepages=on`, `null:size=1T,lba=4096`, `malloc:size=1G,model=tlc,seed=7`,
//! `file:path=/var/lib/disk.img,lba=512` (an existing file or block device; its size is
//! the namespace's),
//! `malloc:size=4G,numa=1`.

use std::path::PathBuf;

use nvmemu_bdev::MallocBacking;
use nvmemu_bdev::model::{ModelConfig, PRESETS, preset};

use crate::size::parse_size;

/// Which backend a namespace uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsKind {
    /// In memory; unwritten blocks read as zeroes.
    Malloc,
    /// Reads return zeroes, writes are dropped.
    Null,
    /// A file or block device (SPDK's aio bdev): the data outlives the process.
    File,
}

/// A parsed `--ns` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsSpec {
    /// Backend.
    pub kind: NsKind,
    /// Size in bytes (a multiple of the LBA size).
    pub size: u64,
    /// LBA size in bytes.
    pub lba: u32,
    /// How a malloc namespace's memory is backed (`Populated` for null, where it means
    /// nothing).
    pub backing: MallocBacking,
    /// The latency model (`model=PRESET`, seeded by `seed=N`), if any.
    pub model: Option<ModelConfig>,
    /// The file of a `file` namespace.
    pub path: Option<PathBuf>,
    /// The NUMA node a malloc namespace's memory is bound to (`numa=N`).
    pub numa_node: Option<u32>,
}

impl NsSpec {
    /// Number of logical blocks.
    pub fn num_blocks(&self) -> u64 {
        self.size / u64::from(self.lba)
    }
}

impl std::str::FromStr for NsSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<NsSpec, String> {
        let (kind, opts) = text.split_once(':').unwrap_or((text, ""));
        let kind = match kind {
            "malloc" => NsKind::Malloc,
            "null" => NsKind::Null,
            "file" => NsKind::File,
            other => {
                return Err(format!(
                    "unknown namespace type '{other}' (use malloc, null or file)"
                ));
            }
        };
        let (mut size, mut lba) = (None, 512u32);
        let (mut lazy, mut huge) = (false, false);
        let (mut model, mut seed) = (None, 0u64);
        let mut path = None;
        let mut numa_node = None;
        for opt in opts.split(',').filter(|o| !o.is_empty()) {
            match opt.split_once('=') {
                Some(("size", v)) => size = Some(parse_size(v)?),
                Some(("lba", v)) => {
                    lba = match v {
                        "512" => 512,
                        "4096" | "4k" => 4096,
                        _ => return Err(format!("lba={v}: the LBA size must be 512 or 4096")),
                    }
                }
                Some(("lazy", v)) => lazy = on_off("lazy", v)?,
                Some(("hugepages", v)) => huge = on_off("hugepages", v)?,
                Some(("model", v)) => model = Some(v),
                Some(("path", v)) if kind == NsKind::File => path = Some(PathBuf::from(v)),
                Some(("numa", v)) => {
                    numa_node = Some(v.parse().map_err(|_| {
                        format!("numa={v}: the NUMA node is a number (see lscpu or numactl -H)")
                    })?);
                }
                Some(("seed", v)) => {
                    seed = v
                        .parse()
                        .map_err(|_| format!("seed={v}: the seed is a whole number"))?;
                }
                _ => {
                    return Err(format!(
                        "unknown namespace option '{opt}' (use size=SIZE,lba=512|4096, \
                         model=scm|tlc|qlc,seed=N, for malloc lazy=on, hugepages=on or \
                         numa=NODE, for file path=FILE instead of size)"
                    ));
                }
            }
        }
        if kind == NsKind::File {
            if size.is_some() {
                return Err("a file namespace's size is the file's: leave size= out".into());
            }
            let p = path.as_deref().ok_or("a file namespace needs path=FILE")?;
            size = Some(file_size(p)? / u64::from(lba) * u64::from(lba));
        }
        let size = size.ok_or_else(|| format!("'{text}' needs a size, e.g. {text}:size=1G"))?;
        if size < u64::from(lba) || size % u64::from(lba) != 0 {
            return Err(format!(
                "size {size} is not a positive multiple of the LBA size {lba}"
            ));
        }
        if kind != NsKind::Malloc && numa_node.is_some() {
            return Err(
                "numa= applies to malloc namespaces only (null and file ones have no memory \
                 of their own)"
                    .into(),
            );
        }
        let backing = match (kind, lazy, huge) {
            (_, false, false) => MallocBacking::Populated,
            (NsKind::Null | NsKind::File, ..) => {
                return Err("lazy= and hugepages= apply to malloc namespaces only".into());
            }
            (NsKind::Malloc, true, true) => {
                return Err(
                    "lazy=on and hugepages=on exclude each other (huge pages are reserved \
                     at creation)"
                        .into(),
                );
            }
            (NsKind::Malloc, true, false) => MallocBacking::Lazy,
            (NsKind::Malloc, false, true) => MallocBacking::HugePages,
        };
        let model = match model {
            Some(name) => Some(preset(name, seed).ok_or_else(|| {
                let names: Vec<_> = PRESETS.iter().map(|p| p.name).collect();
                format!("model={name}: unknown model (use {})", names.join(", "))
            })?),
            None => None,
        };
        Ok(NsSpec {
            kind,
            size,
            lba,
            backing,
            model,
            path,
            numa_node,
        })
    }
}

/// The size of the file or block device at `path`, which must exist (as SPDK's aio bdev
/// wants it).
fn file_size(path: &std::path::Path) -> Result<u64, String> {
    let why = |e: std::io::Error| {
        format!(
            "path={}: {e} (a file namespace needs an existing file, e.g. made with \
             truncate -s 1G FILE)",
            path.display()
        )
    };
    let mut f = std::fs::File::open(path).map_err(why)?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0)).map_err(why)
}

/// `on`/`off` (also `1`/`0`, `true`/`false`) of option `name`.
fn on_off(name: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("{name}={v}: use {name}=on or {name}=off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let s: NsSpec = "malloc:size=4G,lba=512".parse().unwrap();
        assert_eq!(
            s,
            NsSpec {
                kind: NsKind::Malloc,
                size: 4 << 30,
                lba: 512,
                backing: MallocBacking::Populated,
                model: None,
                path: None,
                numa_node: None,
            }
        );
        assert_eq!(s.num_blocks(), 8 << 20);
        let n: NsSpec = "null:lba=4096,size=1M".parse().unwrap();
        assert_eq!((n.kind, n.lba, n.num_blocks()), (NsKind::Null, 4096, 256));
        assert!(
            "malloc"
                .parse::<NsSpec>()
                .unwrap_err()
                .contains("needs a size")
        );
        assert!("disk:size=1G".parse::<NsSpec>().is_err());
        assert!("malloc:size=1G,lba=520".parse::<NsSpec>().is_err());
        assert!("malloc:size=1000,lba=512".parse::<NsSpec>().is_err());
        assert!("malloc:size=1G,color=red".parse::<NsSpec>().is_err());
    }

    #[test]
    fn a_numa_node_is_a_malloc_option() {
        let node = |t: &str| t.parse::<NsSpec>().map(|s| s.numa_node);
        assert_eq!(node("malloc:size=1G,numa=1"), Ok(Some(1)));
        assert_eq!(node("malloc:size=1G"), Ok(None));
        assert!(
            node("malloc:size=1G,numa=one")
                .unwrap_err()
                .contains("is a number")
        );
        assert!(
            node("null:size=1G,numa=0")
                .unwrap_err()
                .contains("malloc namespaces only")
        );
    }

    #[test]
    fn backing_options_parse_and_conflicts_are_refused() {
        let backing = |t: &str| t.parse::<NsSpec>().map(|s| s.backing);
        assert_eq!(backing("malloc:size=1G,lazy=on"), Ok(MallocBacking::Lazy));
        assert_eq!(
            backing("malloc:size=1G,lazy=off"),
            Ok(MallocBacking::Populated)
        );
        assert_eq!(
            backing("malloc:hugepages=on,size=1G"),
            Ok(MallocBacking::HugePages)
        );
        assert_eq!(
            backing("null:size=1G,lazy=off"),
            Ok(MallocBacking::Populated)
        );
        for bad in [
            "malloc:size=1G,lazy=on,hugepages=on",
            "malloc:size=1G,lazy=maybe",
            "null:size=1G,lazy=on",
            "null:size=1G,hugepages=on",
        ] {
            assert!(bad.parse::<NsSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_model_preset_and_its_seed_parse_and_unknown_ones_are_refused() {
        let m = "null:size=1G,model=qlc,seed=42"
            .parse::<NsSpec>()
            .unwrap()
            .model
            .unwrap();
        assert_eq!((m.preset, m.seed), (Some("qlc"), 42));
        assert_eq!(m, preset("qlc", 42).unwrap());
        assert_eq!("malloc:size=1G".parse::<NsSpec>().unwrap().model, None);
        let unknown = "malloc:size=1G,model=hdd".parse::<NsSpec>().unwrap_err();
        assert!(unknown.contains("use scm, tlc, qlc"), "{unknown}");
        assert!("malloc:size=1G,model=tlc,seed=x".parse::<NsSpec>().is_err());
    }

    #[test]
    fn a_file_namespace_takes_its_size_from_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("d.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len((1 << 20) + 100)
            .unwrap();
        let s: NsSpec = format!("file:path={},lba=4096", img.display())
            .parse()
            .unwrap();
        assert_eq!(
            (s.kind, s.size, s.path.as_deref()),
            (NsKind::File, 1 << 20, Some(img.as_path()))
        );
        let missing = format!("file:path={}", dir.path().join("no").display());
        assert!(
            missing
                .parse::<NsSpec>()
                .unwrap_err()
                .contains("existing file")
        );
        assert!(
            format!("file:path={},size=1M", img.display())
                .parse::<NsSpec>()
                .is_err()
        );
        assert!(
            "file:lba=512"
                .parse::<NsSpec>()
                .unwrap_err()
                .contains("path=")
        );
        assert!("malloc:size=1M,path=/x".parse::<NsSpec>().is_err());
    }
}
