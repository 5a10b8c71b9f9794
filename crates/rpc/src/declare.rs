// SPDX-License-Identifier: Apache-2.0
//! `rpc_methods!`: expands the method table in `table.rs` into everything that lists the
//! methods, so each one is declared once: the [`crate::Request`] enum, [`crate::METHODS`]
//! (the `rpc_get_methods` answer), `Request::decode`, `Request::method`, and `nvmemu rpc`'s
//! [`crate::cli::args::MethodArgs`] with its `to_call`.
//!
//! One table row:
//!
//! ```text
//! /// Request variant's doc: `method_name` → what it returns.
//! Variant = "method_name" (ParamsType),                  // params: `parse`d, then none
//! Variant = "method_name" (ParamsType, check = path),    // ... then `path(&params)?`
//! Variant = "method_name",                               // no params (`{}`/`null`/absent)
//!     cli(ArgsType, Dict | Json | Nothing, "rpc.py's help line.");  // or no `cli(..)`
//! ```

/// See the module docs.
macro_rules! rpc_methods {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident = $name:literal $(($params:ty $(, check = $check:path)?))?
            $(, cli($args:ty, $print:ident, $help:literal))?;
    )*) => {
        /// One decoded JSON-RPC call, one variant per supported SPDK method.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Request {
            $( $(#[doc = $doc])* $variant $(($params))?, )*
        }

        /// Every method name [`Request::decode`] accepts, in `rpc_get_methods` order.
        pub const METHODS: &[&str] = &[$($name),*];

        impl Request {
            /// Decodes a method name and its `params` (absent or `null` = no parameters).
            ///
            /// Unknown methods give `-32601`; missing, unknown or mistyped parameters give
            /// `-32602` with a message naming the parameter (e.g. "missing field `block_size`").
            pub fn decode(
                method: &str,
                params: Option<serde_json::Value>,
            ) -> Result<Request, $crate::RpcError> {
                match method {
                    $( $name => decode_params!(
                        method, params, Request::$variant $(, $params $(, $check)?)?
                    ), )*
                    other => Err($crate::RpcError::method_not_found(other)),
                }
            }

            /// The SPDK method name of this request.
            pub fn method(&self) -> &'static str {
                match self {
                    $( Request::$variant { .. } => $name, )*
                }
            }
        }

        /// The methods `nvmemu rpc` knows, with rpc.py's arguments.
        #[derive(Debug, Clone, clap::Subcommand)]
        #[command(rename_all = "snake_case")]
        #[allow(missing_docs)] // Each variant's doc is its method's help text.
        pub enum MethodArgs {
            $( $( #[doc = $help] $variant($args), )? )*
        }

        impl MethodArgs {
            /// The call rpc.py makes for these arguments (for `save_config`, which the CLI
            /// builds from `framework_get_subsystems` and `framework_get_config` calls, the
            /// method name only).
            pub fn to_call(&self) -> Result<$crate::cli::args::CliCall, $crate::cli::args::ArgError> {
                use $crate::cli::args::{CliCall, CliParams, PrintStyle};
                match self {
                    $( $( MethodArgs::$variant(a) => Ok(CliCall {
                        method: $name,
                        params: <$args as CliParams>::params(a)?,
                        print: PrintStyle::$print,
                    }), )? )*
                }
            }
        }
    };
}

/// One `Request::decode` arm: no params, params, or params and a check.
macro_rules! decode_params {
    ($method:ident, $p:ident, $ctor:path) => {
        $crate::methods::no_params($method, $p, $ctor)
    };
    ($method:ident, $p:ident, $ctor:path, $params:ty) => {
        $crate::methods::parse::<$params>($p).map($ctor)
    };
    ($method:ident, $p:ident, $ctor:path, $params:ty, $check:path) => {
        $crate::methods::parse::<$params>($p).and_then(|v| {
            $check(&v)?;
            Ok($ctor(v))
        })
    };
}
