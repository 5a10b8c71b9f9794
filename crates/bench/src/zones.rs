// SPDX-License-Identifier: Apache-2.0
//! fio's `random_distribution=zoned:A/R:A/R:...`: the range is cut into consecutive zones,
//! zone i covering `R` percent of it and receiving `A` percent of the accesses, drawn
//! uniformly inside it (with replacement, as the other skewed distributions). A zone
//! written `A/` takes the part of the range the others leave. The access shares add up
//! to 100; the range shares to at most 100 (what is left gets no access).

use crate::offsets::Rng;
use crate::option_values::OptionError;

/// Most zones one distribution may have.
pub const MAX_ZONES: usize = 16;

/// The zones, in range order: `(access percent, range percent)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zones {
    zones: [(u8, u8); MAX_ZONES],
    len: u8,
}

impl Zones {
    /// The zones as given.
    pub fn as_slice(&self) -> &[(u8, u8)] {
        self.zones.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// fio's spelling.
    pub fn to_fio(self) -> String {
        let parts: Vec<String> = self
            .as_slice()
            .iter()
            .map(|(a, r)| format!("{a}/{r}"))
            .collect();
        format!("zoned:{}", parts.join(":"))
    }

    /// Where each zone lies in `0..units` and its cumulative access share:
    /// `(first unit, units, accesses up to and including it)`; every zone holds at
    /// least one unit.
    pub fn layout(&self, units: u64) -> Vec<(u64, u64, u32)> {
        let units = units.max(1);
        let mut out = Vec::with_capacity(self.as_slice().len());
        let (mut range_pct, mut access) = (0u64, 0u32);
        for &(a, r) in self.as_slice() {
            let start = (units * range_pct / 100).min(units - 1);
            range_pct += u64::from(r);
            let end = (units * range_pct / 100).clamp(start + 1, units);
            access += u32::from(a);
            out.push((start, end - start, access));
        }
        out
    }
}

/// Draws a unit from a [`Zones::layout`].
#[inline]
pub fn pick(layout: &[(u64, u64, u32)], rng: &mut Rng) -> u64 {
    let r = u32::try_from(rng.below(100)).unwrap_or(0);
    let zone = layout
        .iter()
        .find(|z| r < z.2)
        .or(layout.last())
        .copied()
        .unwrap_or((0, 1, 100));
    zone.0 + rng.below(zone.1.max(1))
}

/// Parses the part after `zoned:`: `50/5:30/15:20/` (`A/R` pairs, a blank R once).
pub fn parse_zones(s: &str, whole: &str) -> Result<Zones, OptionError> {
    let err = || OptionError::Distribution(whole.to_string());
    let mut zones = [(0u8, 0u8); MAX_ZONES];
    let mut len = 0usize;
    let mut blank = None;
    for part in s.split(':').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, r) = part.split_once('/').ok_or_else(err)?;
        let a: u8 = a.trim().parse().map_err(|_| err())?;
        let r: u8 = match r.trim() {
            "" if blank.is_none() => {
                blank = Some(len);
                0
            }
            r => r.parse().map_err(|_| err())?,
        };
        *zones.get_mut(len).ok_or_else(err)? = (a, r);
        len += 1;
    }
    let access: u32 = zones.iter().map(|z| u32::from(z.0)).sum();
    let range: u32 = zones.iter().map(|z| u32::from(z.1)).sum();
    if len == 0 || access != 100 || range > 100 {
        return Err(err());
    }
    if let Some(i) = blank
        && let Some(z) = zones.get_mut(i)
    {
        z.1 = u8::try_from(100 - range).map_err(|_| err())?;
    }
    Ok(Zones {
        zones,
        len: u8::try_from(len).map_err(|_| err())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_forms_parse_and_a_blank_range_takes_the_rest() {
        let z = parse_zones("50/5:30/15:20/", "x").unwrap();
        assert_eq!(z.as_slice(), [(50, 5), (30, 15), (20, 80)]);
        assert_eq!(z.to_fio(), "zoned:50/5:30/15:20/80");
        assert_eq!(parse_zones("50/5:30/15:20/80", "x").unwrap(), z);
        for bad in [
            "",
            "50/5:30/15",
            "50/5:50/5/",
            "60/60:40/60",
            "a/5:100/",
            "50:50",
        ] {
            assert!(parse_zones(bad, "x").is_err(), "{bad}");
        }
        let many = vec!["5/5"; MAX_ZONES + 1].join(":");
        assert!(parse_zones(&many, "x").is_err());
    }

    #[test]
    fn each_zone_gets_its_share_of_accesses_inside_its_range() {
        let z = parse_zones("50/5:30/15:20/", "x").unwrap();
        let units = 10_000;
        let layout = z.layout(units);
        assert_eq!(layout, [(0, 500, 50), (500, 1500, 80), (2000, 8000, 100)]);
        let mut rng = Rng::new(7);
        let mut hits = [0u32; 3];
        for _ in 0..100_000 {
            let u = pick(&layout, &mut rng);
            assert!(u < units);
            hits[if u < 500 {
                0
            } else if u < 2000 {
                1
            } else {
                2
            }] += 1;
        }
        for (h, want) in hits.iter().zip([50_000, 30_000, 20_000]) {
            assert!(h.abs_diff(want) < 1_500, "{hits:?}");
        }
        // A range too small for the zones still gives each zone a unit.
        assert!(z.layout(2).iter().all(|&(s, n, _)| n >= 1 && s + n <= 2));
    }
}
