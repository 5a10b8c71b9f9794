// SPDX-License-Identifier: Apache-2.0
//! nvmemu-target (skeleton; see ../shared/STYLE.md for what this crate owns).
#![forbid(unsafe_code)]
