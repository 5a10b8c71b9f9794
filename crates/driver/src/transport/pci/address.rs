// SPDX-License-Identifier: Apache-2.0
//! PCI function addresses as sysfs names them: `DDDD:BB:DD.F`.

use std::fmt;
use std::str::FromStr;

/// A PCI function address (domain, bus, device, function).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number (0-31).
    pub device: u8,
    /// Function number (0-7).
    pub function: u8,
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// A string that is not a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a PCI address: expected DDDD:BB:DD.F (or BB:DD.F), as lspci -D prints")]
pub struct BadPciAddress(pub String);

impl FromStr for PciAddress {
    type Err = BadPciAddress;

    /// `0000:01:00.0`, or `01:00.0` in domain 0.
    fn from_str(s: &str) -> Result<PciAddress, BadPciAddress> {
        let bad = || BadPciAddress(s.to_string());
        let (rest, function) = s.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(bad()),
        };
        let hex = |t: &str, max: u32| {
            u32::from_str_radix(t, 16)
                .ok()
                .filter(|&v| v <= max && !t.is_empty() && t.len() <= 4)
                .ok_or_else(bad)
        };
        Ok(PciAddress {
            domain: u16::try_from(hex(domain, 0xFFFF)?).map_err(|_| bad())?,
            bus: u8::try_from(hex(bus, 0xFF)?).map_err(|_| bad())?,
            device: u8::try_from(hex(device, 0x1F)?).map_err(|_| bad())?,
            function: u8::try_from(hex(function, 7)?).map_err(|_| bad())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_the_sysfs_form() {
        let a: PciAddress = "0000:01:00.0".parse().unwrap();
        assert_eq!((a.domain, a.bus, a.device, a.function), (0, 1, 0, 0));
        assert_eq!(a.to_string(), "0000:01:00.0");
        let b: PciAddress = "3:1f.7".parse().unwrap();
        assert_eq!(b.to_string(), "0000:03:1f.7");
        assert_eq!(
            "10000:00:00.0".parse::<PciAddress>(),
            Err(BadPciAddress("10000:00:00.0".into()))
        );
        for bad in [
            "",
            "00:00",
            "00:20.0",
            "00:00.8",
            "zz:00.0",
            "0:0:0:0.0",
            "/tmp/sock",
        ] {
            assert!(bad.parse::<PciAddress>().is_err(), "{bad}");
        }
    }
}
