// SPDX-License-Identifier: Apache-2.0
//! Splits a byte stream into JSON values as bytes arrive, the way SPDK's server and rpc.py's
//! client read: no delimiter, one value after another, whitespace allowed between them.
//!
//! Objects and arrays are delimited by an incremental scan (bracket depth outside strings),
//! so each byte is looked at once even when a peer sends one byte per write; only a complete
//! value is handed to `serde_json`. The buffer is bounded by `max_bytes`.

use serde_json::Value;

/// Default bound on one request: 16 MiB.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Why the stream cannot continue. Both are answered with `-32700` and a close, as SPDK does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The bytes are not JSON.
    #[error("invalid JSON: {0}")]
    Syntax(String),
    /// A value grew past the buffer bound before it was complete.
    #[error("message exceeds {limit} bytes")]
    TooLong {
        /// The bound.
        limit: usize,
    },
}

/// Incremental JSON value splitter.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Bytes of `buf` already scanned.
    scanned: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    max_bytes: usize,
}

impl Framer {
    /// A framer whose buffered, incomplete value may not exceed `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            scanned: 0,
            depth: 0,
            in_string: false,
            escaped: false,
            max_bytes,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether only whitespace is buffered.
    pub fn is_idle(&self) -> bool {
        self.buf.iter().all(u8::is_ascii_whitespace)
    }

    /// The next complete value, `Ok(None)` if more bytes are needed.
    pub fn next_value(&mut self) -> Result<Option<Value>, FrameError> {
        let start = match self.buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(s) => s,
            None => {
                self.reset(self.buf.len());
                return Ok(None);
            }
        };
        if start > 0 {
            self.reset(start);
        }
        let first = self.buf.first().copied();
        let end = if matches!(first, Some(b'{' | b'[')) {
            self.scan()
        } else {
            self.scalar_end()?
        };
        match end {
            Some(end) => {
                let slice = self.buf.get(..end).unwrap_or_default();
                let value = serde_json::from_slice::<Value>(slice)
                    .map_err(|e| FrameError::Syntax(e.to_string()))?;
                self.reset(end);
                Ok(Some(value))
            }
            None if self.buf.len() > self.max_bytes => Err(FrameError::TooLong {
                limit: self.max_bytes,
            }),
            None => Ok(None),
        }
    }

    /// Drops the first `n` bytes and restarts the scan.
    fn reset(&mut self, n: usize) {
        self.buf.drain(..n.min(self.buf.len()));
        self.scanned = 0;
        self.depth = 0;
        self.in_string = false;
        self.escaped = false;
    }

    /// Continues the bracket scan of an object/array; returns its end offset once closed.
    fn scan(&mut self) -> Option<usize> {
        while let Some(&b) = self.buf.get(self.scanned) {
            self.scanned += 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(self.scanned);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// A top-level scalar (never a valid request, but answered rather than hung on): let
    /// serde find its end; end-of-input means "wait for more".
    fn scalar_end(&mut self) -> Result<Option<usize>, FrameError> {
        let mut it = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
        match it.next() {
            Some(Ok(_)) => {
                let end = it.byte_offset();
                // A number may continue in the next read unless a delimiter follows it.
                let delimited = self.buf.get(end).is_some() || self.buf.first() == Some(&b'"');
                Ok(
                    if delimited || matches!(self.buf.first(), Some(b't' | b'f' | b'n')) {
                        Some(end)
                    } else {
                        None
                    },
                )
            }
            Some(Err(e)) if e.is_eof() => Ok(None),
            Some(Err(e)) => Err(FrameError::Syntax(e.to_string())),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all(f: &mut Framer) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = f.next_value().unwrap() {
            out.push(v);
        }
        out
    }

    #[test]
    fn values_back_to_back_and_with_whitespace() {
        let mut f = Framer::new(1024);
        f.push(br#"{"a":1}{"b":[1,{"c":"}"}]} "#);
        f.push(b"\n\t [2]\n");
        assert_eq!(
            all(&mut f),
            vec![json!({"a":1}), json!({"b":[1,{"c":"}"}]}), json!([2])]
        );
        assert!(f.is_idle());
    }

    #[test]
    fn byte_by_byte_yields_once_complete() {
        let text = br#"{"s":"a\"}{[","n":{"x":[1,2]}}"#;
        let mut f = Framer::new(1024);
        for (i, b) in text.iter().enumerate() {
            f.push(&[*b]);
            let v = f.next_value().unwrap();
            if i + 1 < text.len() {
                assert_eq!(v, None, "early value at byte {i}");
            } else {
                assert_eq!(v, Some(json!({"s": "a\"}{[", "n": {"x": [1, 2]}})));
            }
        }
    }

    #[test]
    fn garbage_is_a_syntax_error() {
        let mut f = Framer::new(1024);
        f.push(b"{\"a\" 1}");
        assert!(matches!(f.next_value(), Err(FrameError::Syntax(_))));
        let mut f = Framer::new(1024);
        f.push(b"hello");
        assert!(matches!(f.next_value(), Err(FrameError::Syntax(_))));
    }

    #[test]
    fn unbounded_value_is_rejected() {
        let mut f = Framer::new(16);
        f.push(b"{\"aaaaaaaaaaaaaaaaaaaaaaaa");
        assert_eq!(f.next_value(), Err(FrameError::TooLong { limit: 16 }));
    }

    #[test]
    fn scalars_wait_for_a_delimiter() {
        let mut f = Framer::new(64);
        f.push(b"12");
        assert_eq!(f.next_value().unwrap(), None);
        f.push(b"3 ");
        assert_eq!(f.next_value().unwrap(), Some(json!(123)));
        f.push(b"true");
        assert_eq!(f.next_value().unwrap(), Some(json!(true)));
    }
}
