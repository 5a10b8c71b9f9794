// SPDX-License-Identifier: Apache-2.0
//! nvmemu's fault rules over RPC (`nvmemu_bdev_inject_fault`, `nvmemu_bdev_clear_faults`,
//! `nvmemu_bdev_get_faults`): each call checks its params into a `FaultRule` and edits the
//! bdev's `FaultSlot`; the pollers apply the rules (`nvmemu_ctrl`'s `fault.rs`).

use nvmemu_bdev::fault::{
    FaultAction, FaultIo, FaultRule, FaultTarget, FaultWhen, MAX_RULES, RuleView,
};
use nvmemu_rpc::methods::fault::{
    NvmemuBdevClearFaultsParams, NvmemuBdevGetFaultsParams, NvmemuBdevInjectFaultParams,
};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::{Map, Value, json};

use super::bdev::Registry;

/// The longest `delay_us`: a minute.
const MAX_DELAY_US: u64 = 60_000_000;
/// The most commands one `reorder` rule reverses.
const MAX_REORDERED: u32 = 64;

fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::errno_msg(Errno::EINVAL, msg)
}

fn no_bdev(name: &str) -> RpcError {
    RpcError::errno_msg(Errno::ENODEV, format!("No such bdev: {name}"))
}

/// `nvmemu_bdev_inject_fault`: the new rule's id.
pub(crate) fn inject(reg: &Registry, p: &NvmemuBdevInjectFaultParams) -> Result<Value, RpcError> {
    let (name, e) = reg.get(&p.name).ok_or_else(|| no_bdev(&p.name))?;
    let rule = rule(p)?;
    let id = e.bdev.faults().add(rule).map_err(|_| {
        RpcError::errno_msg(
            Errno::ENOSPC,
            format!(
                "bdev {name} has {MAX_RULES} fault rules already: remove some first (nvmemu_bdev_clear_faults)"
            ),
        )
    })?;
    tracing::info!(name, id, action = rule.action.name(), "fault rule added");
    Ok(json!(id))
}

/// The rule `p` asks for, or EINVAL naming the parameter that is wrong.
pub(crate) fn rule(p: &NvmemuBdevInjectFaultParams) -> Result<FaultRule, RpcError> {
    Ok(FaultRule {
        action: action(p)?,
        target: target(p)?,
        when: when(p)?,
    })
}

fn action(p: &NvmemuBdevInjectFaultParams) -> Result<FaultAction, RpcError> {
    let action = p.action.as_deref().unwrap_or("status");
    Ok(match action {
        "status" => {
            let (sct, sc) = (p.sct.unwrap_or(0), p.sc.unwrap_or(6));
            if !matches!(sct, 0..=3 | 7) {
                return Err(invalid(format!(
                    "sct {sct}: Status Code Types are 0, 1, 2, 3 and 7"
                )));
            }
            if (sct, sc) == (0, 0) {
                return Err(invalid("sct 0 sc 0 is Successful Completion, not a fault"));
            }
            FaultAction::Status {
                sct,
                sc,
                dnr: p.dnr,
            }
        }
        "corrupt" => FaultAction::Corrupt {
            offset: p.corrupt_offset.unwrap_or(0),
            value: match p.corrupt_value.unwrap_or(0xFF) {
                0 => return Err(invalid("corrupt_value must be 1-255 (0 changes nothing)")),
                v => v,
            },
        },
        "drop" => FaultAction::Drop,
        "delay" | "reorder" => {
            let Some(us @ 1..=MAX_DELAY_US) = p.delay_us else {
                return Err(invalid(format!(
                    "action {action} needs delay_us from 1 to {MAX_DELAY_US}"
                )));
            };
            if action == "delay" {
                FaultAction::Delay { us }
            } else if matches!(p.count, Some(1..=MAX_REORDERED)) {
                FaultAction::Reorder { us }
            } else {
                return Err(invalid(format!(
                    "action reorder needs a count from 1 to {MAX_REORDERED} (the commands reversed)"
                )));
            }
        }
        other => {
            return Err(invalid(format!(
                "action {other}: use status, corrupt, drop, delay or reorder"
            )));
        }
    })
}

fn target(p: &NvmemuBdevInjectFaultParams) -> Result<FaultTarget, RpcError> {
    let io = match p.io_type.as_deref() {
        None | Some("all") => None,
        Some(name) => Some(FaultIo::from_name(name).ok_or_else(|| {
            invalid(format!(
                "io_type {name}: use read, write, flush, unmap or all"
            ))
        })?),
    };
    if io.is_some() && p.opcode.is_some() {
        return Err(invalid("give io_type or opcode, not both"));
    }
    let lba = match (p.lba_start, p.lba_count) {
        (None, None) => None,
        (_, Some(0)) => return Err(invalid("lba_count must be at least 1")),
        (start, count) => Some((start.unwrap_or(0), count.unwrap_or(u64::MAX))),
    };
    Ok(FaultTarget {
        io,
        opcode: p.opcode,
        lba,
        qid: p.qid,
    })
}

fn when(p: &NvmemuBdevInjectFaultParams) -> Result<FaultWhen, RpcError> {
    let probability = p.probability.map_or(1.0, |p| p.0);
    if !(probability > 0.0 && probability <= 1.0) {
        return Err(invalid(format!(
            "probability {probability}: must be above 0 and at most 1"
        )));
    }
    let every = p.every.unwrap_or(1);
    if every == 0 {
        return Err(invalid("every must be at least 1"));
    }
    let (from_ms, until_ms) = (p.from_ms.unwrap_or(0), p.until_ms);
    if until_ms.is_some_and(|until| until <= from_ms) {
        return Err(invalid("until_ms must be later than from_ms"));
    }
    Ok(FaultWhen {
        every,
        probability,
        seed: p.seed.unwrap_or(0),
        count: p.count.unwrap_or(1),
        from_ms,
        until_ms,
        queue_depth: 0,
    })
}

/// `nvmemu_bdev_clear_faults`: ENOENT for an id the bdev has no rule by.
pub(crate) fn clear(reg: &Registry, p: &NvmemuBdevClearFaultsParams) -> Result<Value, RpcError> {
    let (name, e) = reg.get(&p.name).ok_or_else(|| no_bdev(&p.name))?;
    if !e.bdev.faults().remove(p.id) && p.id.is_some() {
        return Err(RpcError::errno_msg(
            Errno::ENOENT,
            format!("bdev {name} has no fault rule {}", p.id.unwrap_or(0)),
        ));
    }
    tracing::info!(name, id = ?p.id, "fault rules removed");
    Ok(Value::Bool(true))
}

/// `nvmemu_bdev_get_faults`: every bdev with rules, or the one named (even without).
pub(crate) fn get(reg: &Registry, p: &NvmemuBdevGetFaultsParams) -> Result<Value, RpcError> {
    let named = match &p.name {
        Some(n) => Some(reg.get(n).ok_or_else(|| no_bdev(n))?.0),
        None => None,
    };
    let list = reg
        .iter()
        .filter(|(n, _)| named.is_none_or(|w| w == *n))
        .map(|(n, e)| (n, e.bdev.faults().rules()))
        .filter(|(_, rules)| named.is_some() || !rules.is_empty())
        .map(|(n, rules)| json!({"name": n, "faults": rules.iter().map(view_json).collect::<Vec<_>>()}))
        .collect();
    Ok(Value::Array(list))
}

/// One rule as `nvmemu_bdev_get_faults` shows it: its parameters under their RPC names,
/// then its counters.
pub(crate) fn view_json(v: &RuleView) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, val: Value| {
        m.insert(k.to_owned(), val);
    };
    put("id", json!(v.id));
    put("action", json!(v.spec.action.name()));
    match v.spec.action {
        FaultAction::Status { sct, sc, dnr } => {
            put("sct", json!(sct));
            put("sc", json!(sc));
            put("dnr", json!(dnr));
        }
        FaultAction::Corrupt { offset, value } => {
            put("corrupt_offset", json!(offset));
            put("corrupt_value", json!(value));
        }
        FaultAction::Delay { us } | FaultAction::Reorder { us } => put("delay_us", json!(us)),
        FaultAction::Drop | FaultAction::Nomem => {}
    }
    let t = &v.spec.target;
    put("io_type", json!(t.io.map_or("all", FaultIo::name)));
    if let Some(op) = t.opcode {
        put("opcode", json!(op));
    }
    if let Some((start, count)) = t.lba {
        put("lba_start", json!(start));
        put("lba_count", json!(count));
    }
    if let Some(q) = t.qid {
        put("qid", json!(q));
    }
    let w = &v.spec.when;
    put("every", json!(w.every));
    put("count", json!(w.count));
    put("probability", json!(w.probability));
    put("seed", json!(w.seed));
    put("from_ms", json!(w.from_ms));
    if let Some(until) = w.until_ms {
        put("until_ms", json!(until));
    }
    if w.queue_depth > 0 {
        put("queue_depth", json!(w.queue_depth));
    }
    put("spdk", json!(v.spdk));
    put("matched", json!(v.matched));
    put("injected", json!(v.injected));
    m.insert("remaining".to_owned(), json!(v.remaining));
    Value::Object(m)
}
