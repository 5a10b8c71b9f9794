// SPDX-License-Identifier: Apache-2.0
//! `nvmemu`: serve | identify | bench | rpc.
#![forbid(unsafe_code)]

fn main() {
    eprintln!("nvmemu: not built yet");
    std::process::exit(2);
}
