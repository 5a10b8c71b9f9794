// SPDX-License-Identifier: Apache-2.0
//! A subsystem's host access control: `nvmf_subsystem_add_host`,
//! `nvmf_subsystem_remove_host` and `nvmf_subsystem_allow_any_host`.
//!
//! Enforced as SPDK's VFIOUSER transport enforces it: a vfio-user client presents no host
//! NQN (SPDK connects its controllers with an empty one), so no allow-list entry can match
//! it, and a subsystem that does not allow any host admits no client at all. The list is
//! kept, listed and saved for SPDK's tools and for a later transport that carries NQNs.

use nvmemu_rpc::RpcError;
use nvmemu_rpc::methods::nvmf_host::{
    NvmfSubsystemAddHostParams, NvmfSubsystemAllowAnyHostParams, NvmfSubsystemRemoveHostParams,
};
use serde_json::Value;

use super::super::State;
use super::{MAX_NQN, subsystem_mut};

/// An NQN as the NVMe Base Specification (4.5, "NVMe Qualified Names") shapes it:
/// `nqn.yyyy-mm.reverse-domain[:anything]`, at most 223 bytes of printable ASCII.
fn valid_nqn(nqn: &str) -> bool {
    let b = nqn.as_bytes();
    let date_ok = b.len() > 12
        && nqn.starts_with("nqn.")
        && b[4..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'-'
        && b[9..11].iter().all(u8::is_ascii_digit)
        && b[11] == b'.';
    date_ok && nqn.len() <= MAX_NQN && b.iter().all(|c| (0x21..0x7F).contains(c))
}

pub(crate) fn add_host(st: &mut State, p: NvmfSubsystemAddHostParams) -> Result<Value, RpcError> {
    let sub = subsystem_mut(st, &p.nqn)?;
    if p.psk.is_some() || p.dhchap_key.is_some() || p.dhchap_ctrlr_key.is_some() {
        return Err(RpcError::invalid_params(
            "Invalid parameters: psk and dhchap keys need TCP; VFIOUSER has no authentication",
        ));
    }
    if !valid_nqn(&p.host) {
        return Err(RpcError::internal(format!(
            "Unable to add host {:?}: not an NQN (nqn.yyyy-mm.domain:name)",
            p.host
        )));
    }
    if sub.hosts.contains(&p.host) {
        return Err(RpcError::internal(format!(
            "Unable to add host {}: {} already allows it",
            p.host, p.nqn
        )));
    }
    if !sub.params.allow_any_host {
        tracing::warn!(
            "host {} allowed on {}: vfio-user clients present no host NQN, so only \
             nvmf_subsystem_allow_any_host admits them",
            p.host,
            p.nqn
        );
    }
    sub.hosts.push(p.host);
    Ok(Value::Bool(true))
}

pub(crate) fn remove_host(
    st: &mut State,
    p: &NvmfSubsystemRemoveHostParams,
) -> Result<Value, RpcError> {
    let sub = subsystem_mut(st, &p.nqn)?;
    let pos = sub.hosts.iter().position(|h| *h == p.host).ok_or_else(|| {
        RpcError::internal(format!(
            "Unable to remove host {}: {} does not list it",
            p.host, p.nqn
        ))
    })?;
    sub.hosts.remove(pos);
    Ok(Value::Bool(true))
}

pub(crate) fn allow_any_host(
    st: &mut State,
    p: &NvmfSubsystemAllowAnyHostParams,
) -> Result<Value, RpcError> {
    let sub = subsystem_mut(st, &p.nqn)?;
    sub.params.allow_any_host = p.allow_any_host;
    sub.admission.set(p.allow_any_host);
    tracing::info!(nqn = %p.nqn, allow_any_host = p.allow_any_host, "host policy changed");
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::valid_nqn;

    #[test]
    fn nqns_need_the_date_and_domain_form() {
        assert!(valid_nqn("nqn.2016-06.io.spdk:host1"));
        assert!(valid_nqn(
            "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555"
        ));
        for bad in [
            "",
            "nqn.x:a",
            "host1",
            "nqn.2016-6.io.spdk:h",
            "nqn.2016-06.io spdk",
        ] {
            assert!(!valid_nqn(bad), "{bad:?}");
        }
        assert!(!valid_nqn(&format!("nqn.2016-06.io.{}", "a".repeat(220))));
    }
}
