// SPDX-License-Identifier: Apache-2.0
//! Named models of drive classes. The ceilings (4 KiB random-read IOPS, sequential read
//! bandwidth) follow published specifications of one drive per class where they were
//! found; latencies and p99 values are set by hand where none was. They describe a class
//! of drive, not a measurement of one: docs/device-models.md names the sources, what each
//! figure rests on, and what the model leaves out.

use super::{ModelConfig, ServiceTime, Tail};

/// A named model.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// Its name (`--model` / `preset`).
    pub name: &'static str,
    /// One line for `--help` and the docs.
    pub about: &'static str,
    read: (u64, u64),
    write: (u64, u64),
    flush: (u64, u64),
    trim: (u64, u64),
    units: u32,
    unit_mib_per_sec: u64,
}

/// Every preset.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "scm",
        about: "storage-class memory (Optane P5800X class): ~6 us reads and writes, ~1.5 M IOPS",
        read: (6, 9),
        write: (6, 11),
        flush: (1, 1),
        trim: (6, 11),
        units: 9,
        unit_mib_per_sec: 800,
    },
    Preset {
        name: "tlc",
        about: "datacenter TLC NAND (D7-P5500 class): ~80 us reads, ~15 us cached writes, ~1 M read IOPS, 7 GB/s",
        read: (80, 250),
        write: (15, 90),
        flush: (20, 200),
        trim: (30, 300),
        units: 80,
        unit_mib_per_sec: 83,
    },
    Preset {
        name: "qlc",
        about: "datacenter QLC NAND (D5-P5316 class): ~130 us reads, slow tail on writes, ~800 K read IOPS, 7 GB/s",
        read: (130, 500),
        write: (30, 400),
        flush: (30, 400),
        trim: (50, 700),
        units: 104,
        unit_mib_per_sec: 64,
    },
];

/// The preset called `name`, as a model seeded with `seed`.
pub fn preset(name: &str, seed: u64) -> Option<ModelConfig> {
    let p = PRESETS.iter().find(|p| p.name == name)?;
    let t = |(avg_us, p99_us)| ServiceTime { avg_us, p99_us };
    Some(ModelConfig {
        read: t(p.read),
        write: t(p.write),
        flush: t(p.flush),
        trim: t(p.trim),
        tail: Tail::LogNormal,
        units: p.units,
        unit_mib_per_sec: p.unit_mib_per_sec,
        seed,
        preset: Some(p.name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_and_found_by_name() {
        for p in PRESETS {
            let m = preset(p.name, 1).expect(p.name);
            assert_eq!(m.check(), Ok(()), "{}", p.name);
            assert_eq!(m.preset, Some(p.name));
        }
        assert!(preset("hdd", 1).is_none());
    }
}
