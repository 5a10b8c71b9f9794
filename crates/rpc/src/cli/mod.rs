// SPDX-License-Identifier: Apache-2.0
//! `nvmemu rpc [-s PATH] [-t TIMEOUT] METHOD [args]`: rpc.py's command line, calls and
//! output (`print_dict`, `print_json`, nothing), for the methods in [`args::MethodArgs`].

pub mod args;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser};
use serde_json::{Value, json};

use crate::client::{Client, ClientError};
use crate::server::DEFAULT_SOCKET;
use args::{CliCall, MethodArgs, PrintStyle, SaveConfigArgs};

/// `nvmemu rpc` arguments (embed with `#[command(flatten)]` or as a subcommand's args).
#[derive(Debug, Clone, Args)]
pub struct RpcArgs {
    /// RPC domain socket path.
    #[arg(short = 's', long = "server", default_value = DEFAULT_SOCKET)]
    pub server: PathBuf,
    /// Timeout as a floating point number expressed in seconds.
    #[arg(short = 't', long = "timeout", default_value_t = 60.0)]
    pub timeout: f64,
    /// The method and its arguments.
    #[command(subcommand)]
    pub method: MethodArgs,
}

/// Standalone parser for [`run_cli`].
#[derive(Debug, Parser)]
#[command(
    name = "nvmemu rpc",
    about = "Send SPDK-style JSON-RPC calls to nvmemu serve"
)]
struct RpcCli {
    #[command(flatten)]
    args: RpcArgs,
}

/// Parses `args` (everything after `nvmemu rpc`), makes the call and prints like rpc.py.
/// Returns the process exit code: 0 on success, 1 on a failed call, 2 on bad arguments.
pub fn run_cli(args: &[String]) -> i32 {
    let argv = std::iter::once("nvmemu rpc".to_owned()).chain(args.iter().cloned());
    match RpcCli::try_parse_from(argv) {
        Ok(cli) => run(&cli.args),
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            code
        }
    }
}

/// Runs already-parsed arguments; see [`run_cli`].
pub fn run(args: &RpcArgs) -> i32 {
    let mut out = std::io::stdout().lock();
    match execute(args, &mut out) {
        Ok(()) => 0,
        Err(msg) => {
            let _ = out.flush();
            // Lost if stderr's reader has gone (`eprintln!` would panic); the status still says it.
            let _ = writeln!(std::io::stderr().lock(), "{msg}");
            1
        }
    }
}

/// Runs `args`, writing rpc.py's output to `out`; `Err` holds the message for stderr.
pub fn execute(args: &RpcArgs, out: &mut dyn Write) -> Result<(), String> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(format!("Timeout value is invalid: {}", args.timeout));
    }
    let timeout = Duration::from_secs_f64(args.timeout.min(1e9));
    if let MethodArgs::SaveConfig(sc) = &args.method {
        let mut client = connect(&args.server, timeout)?;
        return save_config(&mut client, sc, out);
    }
    let call = args.method.to_call().map_err(|e| e.to_string())?;
    let mut client = connect(&args.server, timeout)?;
    match client.call(call.method, call.params.clone()) {
        Ok(result) => print_result(out, call.print, &result).map_err(|e| e.to_string()),
        // rpc.py ignores a connection the server closed while being killed.
        Err(ClientError::Closed) if call.method == "spdk_kill_instance" => Ok(()),
        Err(e) => Err(describe_error(&call, 1, e)),
    }
}

fn connect(path: &Path, timeout: Duration) -> Result<Client, String> {
    Client::connect(path, timeout).map_err(|e| {
        if let ClientError::Untrusted(untrusted) = &e {
            return untrusted.to_string();
        }
        let detail = match e {
            ClientError::Io(io) => io.to_string(),
            other => other.to_string(),
        };
        format!(
            "Error while connecting to {}\nIs nvmemu serve running?\nError details: {detail}",
            path.display()
        )
    })
}

/// rpc.py's `JSONRPCException` text for an error reply.
fn describe_error(call: &CliCall, req_id: u64, e: ClientError) -> String {
    match e {
        ClientError::Rpc(err) => {
            let mut req = match &call.params {
                Value::Object(m) => m.clone(),
                _ => serde_json::Map::new(),
            };
            req.insert("method".into(), json!(call.method));
            req.insert("req_id".into(), json!(req_id));
            let req = serde_json::to_string_pretty(&req).unwrap_or_default();
            let resp = serde_json::to_string_pretty(&err).unwrap_or_default();
            format!("request:\n{req}\nGot JSON-RPC error response\nresponse:\n{resp}")
        }
        ClientError::Closed => "Connection closed with partial response".to_owned(),
        ClientError::Io(io)
            if io.kind() == std::io::ErrorKind::WouldBlock
                || io.kind() == std::io::ErrorKind::TimedOut =>
        {
            "Timeout while waiting for response".to_owned()
        }
        other => format!("{other}: {}", source_text(&other)),
    }
}

fn source_text(e: &dyn std::error::Error) -> String {
    e.source().map(|s| s.to_string()).unwrap_or_default()
}

/// Prints `result` as rpc.py does for `style`.
pub fn print_result(out: &mut dyn Write, style: PrintStyle, result: &Value) -> std::io::Result<()> {
    match style {
        PrintStyle::Nothing => Ok(()),
        PrintStyle::Dict => writeln!(out, "{}", pretty(result)),
        PrintStyle::Json => {
            let text = pretty(result);
            writeln!(out, "{}", text.trim_matches('"'))
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// rpc.py's client-side `save_config`: `framework_get_subsystems`, then
/// `framework_get_config` for each selected subsystem, printed with `indent`.
fn save_config(
    client: &mut Client,
    sc: &SaveConfigArgs,
    out: &mut dyn Write,
) -> Result<(), String> {
    let fail = |method: &'static str, e| {
        describe_error(
            &CliCall {
                method,
                params: json!({}),
                print: PrintStyle::Nothing,
            },
            1,
            e,
        )
    };
    let subs = client
        .call("framework_get_subsystems", json!({}))
        .map_err(|e| fail("framework_get_subsystems", e))?;
    let subs: Vec<crate::methods::framework::SubsystemDeps> = serde_json::from_value(subs)
        .map_err(|e| format!("bad framework_get_subsystems reply: {e}"))?;
    let wanted: Option<Vec<String>> = match &sc.subsystems {
        None => None,
        Some(list) => {
            let mut set = Vec::new();
            for name in list.split(',') {
                let s = subs
                    .iter()
                    .find(|s| s.subsystem == name)
                    .ok_or_else(|| format!("unknown subsystem {name:?}"))?;
                set.push(s.subsystem.clone());
                set.extend(s.depends_on.iter().cloned());
            }
            Some(set)
        }
    };
    let mut config = Vec::new();
    for s in &subs {
        if wanted.as_ref().is_some_and(|w| !w.contains(&s.subsystem)) {
            continue;
        }
        let cfg = client
            .call("framework_get_config", json!({"name": s.subsystem}))
            .map_err(|e| fail("framework_get_config", e))?;
        config.push(json!({"subsystem": s.subsystem, "config": cfg}));
    }
    let doc = json!({"subsystems": config});
    let text = if sc.indent < 0 {
        doc.to_string()
    } else {
        let indent = " ".repeat(usize::try_from(sc.indent.min(64)).unwrap_or(2));
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        serde::Serialize::serialize(&doc, &mut ser).map_err(|e| e.to_string())?;
        String::from_utf8(buf).map_err(|e| e.to_string())?
    };
    writeln!(out, "{text}").map_err(|e| e.to_string())
}

/// Parses `args` (everything after `nvmemu rpc`) without running anything.
pub fn parse_args(args: &[&str]) -> Result<RpcArgs, clap::Error> {
    let argv = std::iter::once("nvmemu rpc").chain(args.iter().copied());
    RpcCli::try_parse_from(argv).map(|c| c.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_styles_match_rpc_py() {
        let mut out = Vec::new();
        print_result(&mut out, PrintStyle::Json, &json!("Malloc0")).unwrap();
        print_result(&mut out, PrintStyle::Json, &json!(1)).unwrap();
        print_result(&mut out, PrintStyle::Nothing, &json!(true)).unwrap();
        print_result(&mut out, PrintStyle::Dict, &json!([{"a": 1}])).unwrap();
        print_result(&mut out, PrintStyle::Dict, &json!([])).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Malloc0\n1\n[\n  {\n    \"a\": 1\n  }\n]\n[]\n"
        );
    }

    #[test]
    fn global_options_come_before_the_method() {
        let a = parse_args(&["-s", "/tmp/x.sock", "-t", "5", "framework_wait_init"]).unwrap();
        assert_eq!(a.server, PathBuf::from("/tmp/x.sock"));
        assert_eq!(a.timeout, 5.0);
        let a = parse_args(&["framework_wait_init"]).unwrap();
        assert_eq!(a.server, PathBuf::from(DEFAULT_SOCKET));
    }

    #[test]
    fn unknown_method_and_missing_args_are_usage_errors() {
        assert!(parse_args(&["bdev_frobnicate"]).is_err());
        assert!(parse_args(&["bdev_malloc_create", "64"]).is_err());
        assert!(parse_args(&["nvmf_subsystem_add_listener", "nqn", "-t", "VFIOUSER"]).is_err());
        assert_eq!(run_cli(&["bdev_frobnicate".to_owned()]), 2);
    }
}
