// SPDX-License-Identifier: Apache-2.0
//! Harnesses shared by the fuzz targets: whatever a target needs beyond "feed bytes to one
//! function" lives here, so each file under `fuzz_targets/` stays a short description of
//! its input and its invariants. Built only by cargo-fuzz (nightly), outside the workspace.

pub mod device;
pub mod rpc;
