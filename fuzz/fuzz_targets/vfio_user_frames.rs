// SPDX-License-Identifier: Apache-2.0
//! Arbitrary bytes from a client through the vfio-user server's decoder and dispatcher.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    nvmemu_vfio_user::fuzz_server_input(data);
});
