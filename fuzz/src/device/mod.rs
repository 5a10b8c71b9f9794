// SPDX-License-Identifier: Apache-2.0
//! The real NVMe PCI function (`nvmemu_device::NvmeFunction`) served over a socketpair by
//! the real vfio-user server, with this thread as the controller's poller.
//!
//! One control thread runs `serve_connection` as in `nvmemu serve`; the fuzz thread owns
//! the poller state, runs the mailbox whenever it waits for a reply and polls the controller
//! between requests. Every request is answered before the next is sent (a NO_REPLY request
//! is followed by a ping), so all server work of one input happens in a fixed order and an
//! input replays the same way.

pub mod good_host;
pub mod harness;
pub mod memory;
pub mod ops;

#[cfg(test)]
mod tests;
