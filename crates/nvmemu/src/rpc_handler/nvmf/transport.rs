// SPDX-License-Identifier: Apache-2.0
//! `nvmf_create_transport` and `nvmf_get_transports`: the one VFIOUSER transport and its
//! options.

use nvmemu_ctrl::ControllerConfig;
use nvmemu_rpc::methods::nvmf::{
    NvmfCreateTransportParams, NvmfGetTransportsParams, TransportInfo, VfioUserDefaults,
};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::Value;

use super::super::{State, to_value};
use super::{Transport, VFIOUSER};

fn positive_u16(name: &str, v: Option<u32>, min: u32, default: u16) -> Result<u16, RpcError> {
    match v {
        None => Ok(default),
        Some(v) if v >= min => Ok(u16::try_from(v).unwrap_or(u16::MAX)),
        Some(v) => Err(RpcError::invalid_params(format!(
            "Invalid parameter `{name}`: {v} is below {min}"
        ))),
    }
}

pub(crate) fn create_transport(
    st: &mut State,
    p: NvmfCreateTransportParams,
) -> Result<Value, RpcError> {
    if !p.trtype.eq_ignore_ascii_case(VFIOUSER) {
        return Err(RpcError::invalid_params(format!(
            "Transport type '{}' unavailable.",
            p.trtype
        )));
    }
    if st.transport.is_some() {
        return Err(RpcError::invalid_params(format!(
            "Transport type '{VFIOUSER}' already exists"
        )));
    }
    let d = ControllerConfig::default();
    let max_queue_entries =
        positive_u16("max_queue_depth", p.max_queue_depth, 2, d.max_queue_entries)?;
    let max_io_queues = positive_u16(
        "max_io_qpairs_per_ctrlr",
        p.max_io_qpairs_per_ctrlr,
        1,
        d.max_io_queues,
    )?;
    let mdts = match p.max_io_size {
        None => d.mdts,
        Some(n) if n >= 4096 => {
            // MDTS is a power of two of 4 KiB pages: round down.
            u8::try_from((n / 4096).ilog2()).unwrap_or(u8::MAX)
        }
        Some(n) => {
            return Err(RpcError::invalid_params(format!(
                "Invalid parameter `max_io_size`: {n} is below 4096"
            )));
        }
    };
    st.transport = Some(Transport {
        params: NvmfCreateTransportParams {
            trtype: VFIOUSER.to_owned(),
            ..p
        },
        max_queue_entries,
        max_io_queues,
        mdts,
    });
    tracing::info!("VFIOUSER transport created");
    Ok(Value::Bool(true))
}

pub(super) fn transport_info(t: &Transport) -> TransportInfo {
    let p = &t.params;
    let max_io_size = 4096u32.checked_shl(u32::from(t.mdts)).unwrap_or(u32::MAX);
    TransportInfo {
        trtype: VFIOUSER.to_owned(),
        max_queue_depth: u32::from(t.max_queue_entries),
        max_io_qpairs_per_ctrlr: u32::from(t.max_io_queues),
        in_capsule_data_size: p
            .in_capsule_data_size
            .unwrap_or(VfioUserDefaults::IN_CAPSULE_DATA_SIZE),
        max_io_size,
        // SPDK's default, not max_io_size: nvmf_tgt refuses a unit larger than its iobuf
        // pool's large buffers (135168 bytes), so a saved 1 MiB would not load there.
        io_unit_size: p
            .io_unit_size
            .unwrap_or(VfioUserDefaults::IO_UNIT_SIZE.min(max_io_size)),
        max_aq_depth: p.max_aq_depth.unwrap_or(VfioUserDefaults::MAX_AQ_DEPTH),
        num_shared_buffers: p.num_shared_buffers.unwrap_or(0),
        buf_cache_size: p.buf_cache_size.unwrap_or(0),
        dif_insert_or_strip: false,
        zcopy: p.zcopy,
        abort_timeout_sec: p.abort_timeout_sec.unwrap_or(1),
        ack_timeout: 0,
        data_wr_pool_size: 0,
        disable_mappable_bar0: p.disable_mappable_bar0,
        disable_adaptive_irq: p.disable_adaptive_irq,
        disable_shadow_doorbells: p.disable_shadow_doorbells,
        c2h_success: None,
    }
}

pub(crate) fn get_transports(st: &State, p: &NvmfGetTransportsParams) -> Result<Value, RpcError> {
    let list: Vec<TransportInfo> = st
        .transport
        .iter()
        .filter(|_| {
            p.trtype
                .as_ref()
                .is_none_or(|t| t.eq_ignore_ascii_case(VFIOUSER))
        })
        .map(transport_info)
        .chain(
            st.tcp
                .iter()
                .filter(|_| p.trtype.as_ref().is_none_or(|t| super::is_tcp(t)))
                .map(super::tcp::transport_info),
        )
        .collect();
    if p.trtype.is_some() && list.is_empty() {
        return Err(RpcError::errno(Errno::ENODEV));
    }
    to_value(list)
}
