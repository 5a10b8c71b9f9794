// SPDX-License-Identifier: Apache-2.0
//! SPDK's `save_config` JSON document (`{"subsystems": [{"subsystem", "config": [{"method",
//! "params"}]}]}`): what `save_config` writes, `framework_get_config` answers from and
//! [`crate::load_config`] replays.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::methods::framework::SubsystemDeps;

/// A whole `save_config` document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpdkConfig {
    /// Subsystems in initialisation order.
    pub subsystems: Vec<SubsystemConfig>,
}

/// One subsystem's part of a [`SpdkConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsystemConfig {
    /// Subsystem name, e.g. `bdev` or `nvmf`.
    pub subsystem: String,
    /// Calls that recreate the subsystem's state; SPDK writes `null` for an empty one.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub config: Vec<ConfigEntry>,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigEntry {
    /// Method name.
    pub method: String,
    /// Its parameters, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

fn null_as_empty<'de, D>(d: D) -> Result<Vec<ConfigEntry>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<Vec<ConfigEntry>>::deserialize(d)?.unwrap_or_default())
}

impl SpdkConfig {
    /// The named subsystem, if present.
    pub fn subsystem(&self, name: &str) -> Option<&SubsystemConfig> {
        self.subsystems.iter().find(|s| s.subsystem == name)
    }

    /// The `framework_get_subsystems` view: each subsystem depends on those before it.
    pub fn subsystem_deps(&self) -> Vec<SubsystemDeps> {
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::with_capacity(self.subsystems.len());
        for s in &self.subsystems {
            out.push(SubsystemDeps {
                subsystem: s.subsystem.clone(),
                depends_on: seen.clone(),
            });
            seen.push(s.subsystem.clone());
        }
        out
    }
}
