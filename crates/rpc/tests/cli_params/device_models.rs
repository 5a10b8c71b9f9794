// SPDX-License-Identifier: Apache-2.0
//! argv -> params for the device-model methods (the delay and error bdevs, nvmemu's model)
//! and the file bdevs.

use nvmemu_rpc::cli::args::PrintStyle;
use serde_json::json;

use super::{call, params};

#[test]
fn delay_and_model_methods() {
    // rpc.py's flags for bdev_delay_create, its short forms, and the params it sends.
    assert_eq!(
        call(&[
            "bdev_delay_create",
            "-b",
            "Malloc0",
            "-d",
            "Delay0",
            "-r",
            "100",
            "-t",
            "1000",
            "--avg-write-latency",
            "50",
            "--nine-nine-write-latency",
            "500"
        ]),
        (
            "bdev_delay_create".into(),
            json!({"base_bdev_name": "Malloc0", "name": "Delay0",
                   "avg_read_latency": 100, "p99_read_latency": 1000,
                   "avg_write_latency": 50, "p99_write_latency": 500}),
            PrintStyle::Json
        )
    );
    assert_eq!(
        params(&["bdev_delay_update_latency", "Delay0", "p99_read", "2000"]),
        json!({"delay_bdev_name": "Delay0", "latency_type": "p99_read", "latency_us": 2000})
    );
    assert_eq!(
        params(&["bdev_delay_delete", "Delay0"]),
        json!({"name": "Delay0"})
    );
    assert_eq!(
        params(&[
            "nvmemu_bdev_set_model",
            "Malloc0",
            "--preset",
            "tlc",
            "--seed",
            "7",
            "--units",
            "16"
        ]),
        json!({"name": "Malloc0", "preset": "tlc", "seed": 7, "units": 16})
    );
    assert_eq!(
        params(&["nvmemu_bdev_set_model", "Malloc0", "--remove"]),
        json!({"name": "Malloc0", "remove": true})
    );
}

#[test]
fn error_bdev_methods() {
    // rpc.py's arguments for the error bdev methods and the params it sends.
    assert_eq!(
        call(&["bdev_error_create", "Malloc0", "--uuid", "u-1"]),
        (
            "bdev_error_create".into(),
            json!({"base_name": "Malloc0", "uuid": "u-1"}),
            PrintStyle::Json
        )
    );
    assert_eq!(
        params(&["bdev_error_delete", "EE_Malloc0"]),
        json!({"name": "EE_Malloc0"})
    );
    assert_eq!(
        params(&[
            "bdev_error_inject_error",
            "EE_Malloc0",
            "read",
            "failure",
            "-n",
            "5"
        ]),
        json!({"name": "EE_Malloc0", "io_type": "read", "error_type": "failure", "num": 5})
    );
    assert_eq!(
        params(&[
            "bdev_error_inject_error",
            "EE_Malloc0",
            "all",
            "corrupt_data",
            "--queue-depth",
            "4",
            "-o",
            "8",
            "-v",
            "255"
        ]),
        json!({"name": "EE_Malloc0", "io_type": "all", "error_type": "corrupt_data",
               "queue_depth": 4, "corrupt_offset": 8, "corrupt_value": 255})
    );
}

#[test]
fn file_bdev_methods_take_rpc_pys_arguments() {
    // rpc.py sends its store_true flags as booleans, set or not.
    assert_eq!(
        call(&["bdev_aio_create", "/dev/sdb", "Aio0", "4096", "-r"]),
        (
            "bdev_aio_create".into(),
            json!({"filename": "/dev/sdb", "name": "Aio0", "block_size": 4096,
                   "readonly": true, "fallocate": false}),
            PrintStyle::Json
        )
    );
    assert_eq!(
        params(&[
            "bdev_uring_create",
            "/tmp/f",
            "U0",
            "-u",
            "7e5c1b52-8c5e-4c1b-9a0d-000000000001"
        ]),
        json!({"filename": "/tmp/f", "name": "U0", "uuid": "7e5c1b52-8c5e-4c1b-9a0d-000000000001"})
    );
    assert_eq!(
        params(&["bdev_aio_delete", "Aio0"]),
        json!({"name": "Aio0"})
    );
    assert_eq!(params(&["bdev_uring_delete", "U0"]), json!({"name": "U0"}));
}
