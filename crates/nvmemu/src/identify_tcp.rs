// SPDX-License-Identifier: Apache-2.0
//! `nvmemu identify --tcp`: the Identify pages read over an NVMe/TCP admin queue.

use anyhow::{Result, anyhow};
use nvmemu_driver::IDENTIFY_BYTES;
use nvmemu_driver::sqe::{self, cns};
use nvmemu_spec::Nsid;
use nvmemu_tcp::initiator::{HostController, HostError, Transfer};

use crate::identify::IdentifyPages;
use nvmemu::error_chain;

/// Identify (06h) with `cns` for `nsid`; the 4 KiB page.
pub fn identify_page(ctrl: &mut HostController, cns: u8, nsid: u32) -> Result<Vec<u8>, HostError> {
    let mut page = vec![0u8; IDENTIFY_BYTES];
    let sqe = sqe::identify(cns, Nsid(nsid));
    let cqe = ctrl.admin_exec(sqe, Transfer::In(&mut page))?;
    let status = cqe.status();
    if !status.is_success() {
        return Err(HostError::Status {
            what: "Identify",
            status,
        });
    }
    Ok(page)
}

/// The controller page and the pages of `nsid` (or of every active namespace).
pub fn read_pages(ctrl: &mut HostController, nsid: Option<u32>) -> Result<IdentifyPages> {
    let page = identify_page(ctrl, cns::CONTROLLER, 0)
        .map_err(|e| anyhow!("Identify Controller failed: {}", error_chain(&e)))?;
    let nsids = match nsid {
        Some(n) => vec![n],
        None => {
            let list = identify_page(ctrl, cns::ACTIVE_NS_LIST, 0).map_err(|e| {
                anyhow!("Identify Active Namespace List failed: {}", error_chain(&e))
            })?;
            list.chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .take_while(|&n| n != 0)
                .collect()
        }
    };
    let mut namespaces = Vec::with_capacity(nsids.len());
    for n in nsids {
        let p = identify_page(ctrl, cns::NAMESPACE, n)
            .map_err(|e| anyhow!("Identify Namespace {n} failed: {}", error_chain(&e)))?;
        namespaces.push((n, p));
    }
    Ok(IdentifyPages {
        ctrl: page,
        namespaces,
    })
}
