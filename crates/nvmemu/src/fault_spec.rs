// SPDX-License-Identifier: Apache-2.0
//! `serve --fault` values: a fault rule for one `--ns` namespace, in the names of
//! `nvmemu_bdev_inject_fault` (`-` for `_`): `ns=1,io-type=read,sct=2,sc=0x81,count=0`;
//! a flag (`dnr`) alone.

use nvmemu_rpc::methods::fault::NvmemuBdevInjectFaultParams;
use serde_json::{Map, Value};

/// A parsed `--fault` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpec {
    /// The namespace (its place among the `--ns` options, from 1).
    pub ns: u32,
    /// The rule (its `name` is filled in per subsystem).
    pub params: NvmemuBdevInjectFaultParams,
}

/// A value as JSON: a number (decimal or `0x` hex, or a fraction), else a string.
fn json_value(v: &str) -> Value {
    let hex = v
        .strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    if let Some(n) = hex.or_else(|| v.parse::<u64>().ok()) {
        return Value::from(n);
    }
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() => Value::from(f),
        _ => Value::from(v),
    }
}

impl std::str::FromStr for FaultSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<FaultSpec, String> {
        let mut ns = 1u32;
        let mut map = Map::new();
        map.insert("name".into(), Value::from(""));
        for opt in text.split(',').filter(|o| !o.is_empty()) {
            match opt.split_once('=') {
                Some(("ns", v)) => {
                    ns = v
                        .parse()
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| format!("ns={v}: expected a namespace number from 1"))?;
                }
                Some((k, v)) => {
                    map.insert(k.replace('-', "_"), json_value(v));
                }
                None => {
                    map.insert(opt.replace('-', "_"), Value::Bool(true));
                }
            }
        }
        let params = serde_json::from_value(Value::Object(map))
            .map_err(|e| format!("{e} (see docs/device-models.md, nvmemu_bdev_inject_fault)"))?;
        Ok(FaultSpec { ns, params })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmemu_rpc::methods::fault::Probability;

    #[test]
    fn a_fault_spec_parses_into_the_rpc_params() {
        let f: FaultSpec = "ns=2,io-type=read,sct=2,sc=0x81,lba-start=8,lba-count=4,dnr"
            .parse()
            .unwrap();
        assert_eq!(f.ns, 2);
        let p = &f.params;
        assert_eq!(p.io_type.as_deref(), Some("read"));
        assert_eq!((p.sct, p.sc, p.dnr), (Some(2), Some(0x81), true));
        assert_eq!((p.lba_start, p.lba_count), (Some(8), Some(4)));
        let f: FaultSpec = "probability=0.5,seed=7,count=0,action=drop"
            .parse()
            .unwrap();
        assert_eq!(f.ns, 1);
        assert_eq!(f.params.probability, Some(Probability(0.5)));
        assert_eq!(f.params.action.as_deref(), Some("drop"));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_in_one_line() {
        let e = "io-typ=read".parse::<FaultSpec>().unwrap_err();
        assert!(e.contains("io_typ"), "{e}");
        assert!("sc=300".parse::<FaultSpec>().is_err());
        assert!("ns=0".parse::<FaultSpec>().is_err());
        assert_eq!(e.lines().count(), 1);
    }
}
