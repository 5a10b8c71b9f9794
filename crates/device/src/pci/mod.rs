// SPDX-License-Identifier: Apache-2.0
//! The PCI side of the function.

pub mod config;
