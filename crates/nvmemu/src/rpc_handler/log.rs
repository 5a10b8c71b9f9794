// SPDX-License-Identifier: Apache-2.0
//! SPDK's log methods wired to nvmemu's `tracing` output, and the bdev notifications.
//!
//! SPDK has a print level (what reaches stderr), a log level (what reaches syslog) and
//! per-component debug flags. nvmemu logs to stderr only: the print level sets the
//! filter's base level, each flag turns on debug lines for one part of nvmemu (the list is
//! [`FLAGS`]; unlike SPDK, a flag needs no DEBUG print level), and the log level is kept and
//! reported but has no syslog to govern. A change replaces the filter `RUST_LOG` gave.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use nvmemu_rpc::RpcError;
use nvmemu_rpc::methods::log::{LOG_LEVELS, Notification, NotifyGetNotificationsParams};
use serde_json::{Map, Value};

use super::to_value;

/// The flags `log_set_flag` knows and the `tracing` target each turns to debug.
pub(crate) const FLAGS: [(&str, &str); 7] = [
    ("bdev", "nvmemu_bdev"),
    ("guest", "guest"),
    ("nvme", "nvmemu_ctrl"),
    ("nvmf", "nvmemu::rpc_handler::nvmf"),
    ("nvmf_vfio", "nvmemu_device"),
    ("rpc", "nvmemu_rpc"),
    ("vfio_user", "nvmemu_vfio_user"),
];

/// Notifications kept; older ones are dropped (their ids are not reused).
const MAX_NOTIFICATIONS: usize = 4096;

/// Replaces the running subscriber's filter with a directive such as
/// `warn,nvmemu_ctrl=debug` (`nvmemu serve` passes a `tracing_subscriber` reload handle).
#[derive(Clone)]
pub struct LogControl(Arc<ApplyDirective>);

/// Applies one filter directive; the error says why it could not.
type ApplyDirective = dyn Fn(&str) -> Result<(), String> + Send + Sync;

impl LogControl {
    /// A control that applies directives with `apply`.
    pub fn new(apply: impl Fn(&str) -> Result<(), String> + Send + Sync + 'static) -> Self {
        LogControl(Arc::new(apply))
    }
}

impl std::fmt::Debug for LogControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogControl")
    }
}

/// Log settings and notifications.
#[derive(Debug)]
pub(crate) struct LogState {
    flags: BTreeSet<&'static str>,
    level: &'static str,
    print_level: &'static str,
    notifications: VecDeque<Notification>,
    next_id: u64,
}

impl Default for LogState {
    /// SPDK's default log level; nvmemu's default filter is `warn`.
    fn default() -> Self {
        LogState {
            flags: BTreeSet::new(),
            level: "NOTICE",
            print_level: "WARNING",
            notifications: VecDeque::new(),
            next_id: 0,
        }
    }
}

fn level_name(level: &str) -> Result<&'static str, RpcError> {
    LOG_LEVELS
        .iter()
        .find(|l| l.eq_ignore_ascii_case(level))
        .copied()
        .ok_or_else(|| RpcError::invalid_params("invalid log level"))
}

impl LogState {
    /// The filter directive for the current print level and flags.
    pub(crate) fn directive(&self) -> String {
        let base = match self.print_level {
            "ERROR" => "error",
            "WARNING" => "warn",
            "NOTICE" | "INFO" => "info",
            _ => "debug",
        };
        let mut d = base.to_owned();
        for (flag, target) in FLAGS {
            if self.flags.contains(flag) {
                d.push_str(&format!(",{target}=debug"));
            }
        }
        d
    }

    fn apply(&self, ctl: Option<&LogControl>) -> Result<Value, RpcError> {
        if let Some(ctl) = ctl {
            (ctl.0)(&self.directive()).map_err(RpcError::internal)?;
        }
        Ok(Value::Bool(true))
    }

    pub(crate) fn set_flag(
        &mut self,
        ctl: Option<&LogControl>,
        flag: &str,
        on: bool,
    ) -> Result<Value, RpcError> {
        let (name, _) = FLAGS
            .iter()
            .find(|(f, _)| *f == flag)
            .ok_or_else(|| RpcError::invalid_params("invalid log flag"))?;
        if on {
            self.flags.insert(name);
        } else {
            self.flags.remove(name);
        }
        self.apply(ctl)
    }

    pub(crate) fn flags(&self) -> Value {
        let m: Map<String, Value> = FLAGS
            .iter()
            .map(|(f, _)| ((*f).to_owned(), Value::Bool(self.flags.contains(f))))
            .collect();
        Value::Object(m)
    }

    pub(crate) fn set_level(&mut self, level: &str) -> Result<Value, RpcError> {
        self.level = level_name(level)?;
        Ok(Value::Bool(true))
    }

    pub(crate) fn level(&self) -> Value {
        Value::String(self.level.into())
    }

    pub(crate) fn set_print_level(
        &mut self,
        ctl: Option<&LogControl>,
        level: &str,
    ) -> Result<Value, RpcError> {
        self.print_level = level_name(level)?;
        self.apply(ctl)
    }

    pub(crate) fn print_level(&self) -> Value {
        Value::String(self.print_level.into())
    }

    /// Records a `bdev_register` or `bdev_unregister` of `bdev`.
    pub(crate) fn notify(&mut self, kind: &str, bdev: &str) {
        if self.notifications.len() == MAX_NOTIFICATIONS {
            self.notifications.pop_front();
        }
        self.notifications.push_back(Notification {
            kind: kind.into(),
            ctx: bdev.into(),
            id: self.next_id,
        });
        self.next_id += 1;
    }

    pub(crate) fn notifications(
        &self,
        p: &NotifyGetNotificationsParams,
    ) -> Result<Value, RpcError> {
        let max = usize::try_from(p.max.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
        let list: Vec<&Notification> = self
            .notifications
            .iter()
            .filter(|n| n.id >= p.id)
            .take(max)
            .collect();
        to_value(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn flags_and_print_level_reach_the_filter() {
        let applied = Arc::new(Mutex::new(Vec::new()));
        let ctl = {
            let applied = Arc::clone(&applied);
            LogControl::new(move |d| {
                applied.lock().unwrap().push(d.to_owned());
                Ok(())
            })
        };
        let mut s = LogState::default();
        s.set_flag(Some(&ctl), "nvme", true).unwrap();
        s.set_print_level(Some(&ctl), "info").unwrap();
        s.set_flag(Some(&ctl), "nvme", false).unwrap();
        assert_eq!(
            *applied.lock().unwrap(),
            ["warn,nvmemu_ctrl=debug", "info,nvmemu_ctrl=debug", "info"]
        );
        assert_eq!(s.print_level(), Value::String("INFO".into()));
        let e = s.set_flag(Some(&ctl), "bogus", true).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32602, "invalid log flag"));
        let e = s.set_level("FOO").unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32602, "invalid log level"));
        assert_eq!(
            applied.lock().unwrap().len(),
            3,
            "a refused change applies nothing"
        );
    }

    #[test]
    fn notifications_page_by_id_and_stay_bounded() {
        let mut s = LogState::default();
        for i in 0..MAX_NOTIFICATIONS + 2 {
            s.notify("bdev_register", &format!("b{i}"));
        }
        let p = |id, max| NotifyGetNotificationsParams { id, max };
        let v = s.notifications(&p(0, Some(1))).unwrap();
        assert_eq!(v[0]["id"], 2, "the two oldest were dropped");
        let v = s.notifications(&p(4097, None)).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 1);
        assert_eq!(v[0]["type"], "bdev_register");
        assert_eq!(v[0]["ctx"], "b4097");
    }
}
