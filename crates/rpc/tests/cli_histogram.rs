// SPDX-License-Identifier: Apache-2.0
//! argv -> (method, params) for the histogram methods, against what rpc.py sends
//! (`bdev_enable_histogram`: `enable` always, the optional values only when set).

use nvmemu_rpc::cli::args::PrintStyle;
use nvmemu_rpc::cli::parse_args;
use serde_json::json;

#[test]
fn histogram_methods_map_like_rpc_py() {
    let call = |argv: &[&str]| {
        let c = parse_args(argv).unwrap().method.to_call().unwrap();
        (c.method.to_owned(), c.params, c.print)
    };
    assert_eq!(
        call(&["bdev_enable_histogram", "Malloc0"]),
        (
            "bdev_enable_histogram".into(),
            json!({"name": "Malloc0", "enable": true}),
            PrintStyle::Nothing
        )
    );
    assert_eq!(
        call(&[
            "bdev_enable_histogram",
            "-e",
            "Malloc0",
            "--granularity",
            "5"
        ])
        .1,
        json!({"name": "Malloc0", "enable": true, "granularity": 5})
    );
    assert_eq!(
        call(&["bdev_enable_histogram", "-d", "Malloc0"]).1,
        json!({"name": "Malloc0", "enable": false})
    );
    assert!(parse_args(&["bdev_enable_histogram", "-e", "-d", "Malloc0"]).is_err());
    assert_eq!(
        call(&["bdev_get_histogram", "Malloc0"]),
        (
            "bdev_get_histogram".into(),
            json!({"name": "Malloc0"}),
            PrintStyle::Dict
        )
    );
    assert_eq!(
        call(&["nvmemu_get_latency_breakdown"]),
        (
            "nvmemu_get_latency_breakdown".into(),
            json!({}),
            PrintStyle::Dict
        )
    );
}
