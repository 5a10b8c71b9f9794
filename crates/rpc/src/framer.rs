// SPDX-License-Identifier: Apache-2.0
//! Splits a byte stream into JSON values as bytes arrive, the way SPDK's server and rpc.py's
//! client read: no delimiter, one value after another, whitespace allowed between them.
//!
//! Linear in the bytes received: an incremental scan finds where each value ends (bracket
//! depth outside strings for objects and arrays, the closing quote of a string, the first
//! delimiter after a number or literal) and remembers where it stopped, so each byte is
//! examined once however the peer splits its writes; only a complete value is handed to
//! `serde_json`, once. Consumed bytes are dropped at the next [`Framer::push`], so each byte
//! is also moved at most once. The value being received is bounded by `max_bytes`.

use serde_json::Value;

/// Default bound on one value: 16 MiB (replies; the server bounds requests lower).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Why the stream cannot continue. Both are answered with an error and a close, as SPDK does.
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

/// Where the scan of the buffered bytes stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Between values: only whitespace seen since the last one.
    Between,
    /// Inside an object or array.
    Container {
        depth: usize,
        in_string: bool,
        escaped: bool,
    },
    /// Inside a top-level string.
    String { escaped: bool },
    /// Inside a top-level number or literal (`true`, `false`, `null`).
    Token,
}

/// Incremental JSON value splitter.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Offset in `buf` of the value being received (bytes before it are consumed).
    start: usize,
    /// Offset in `buf` of the next byte to examine.
    scanned: usize,
    scan: Scan,
    max_bytes: usize,
    /// Bytes examined or moved so far: the linearity tests' measure of work.
    work: usize,
}

impl Framer {
    /// A framer whose incomplete value may not exceed `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            scan: Scan::Between,
            max_bytes,
            work: 0,
        }
    }

    /// Appends received bytes (and drops those of values already returned).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            let consumed = self.start.min(self.buf.len());
            self.buf.drain(..consumed);
            self.work = self.work.saturating_add(self.buf.len());
            self.scanned = self.scanned.saturating_sub(consumed);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Whether only whitespace is buffered.
    pub fn is_idle(&self) -> bool {
        self.scan == Scan::Between
            && self
                .buf
                .get(self.scanned..)
                .is_none_or(|rest| rest.iter().all(u8::is_ascii_whitespace))
    }

    /// Whether part of a value has been received and examined, but not its end: after
    /// [`Framer::next_value`] returned `Ok(None)`, "a request is half sent".
    pub fn in_value(&self) -> bool {
        self.scan != Scan::Between
    }

    /// The next complete value, `Ok(None)` if more bytes are needed.
    pub fn next_value(&mut self) -> Result<Option<Value>, FrameError> {
        match self.scan_to_end()? {
            Some(end) if end - self.start > self.max_bytes => Err(FrameError::TooLong {
                limit: self.max_bytes,
            }),
            Some(end) => {
                let slice = self.buf.get(self.start..end).unwrap_or_default();
                let value = serde_json::from_slice::<Value>(slice)
                    .map_err(|e| FrameError::Syntax(e.to_string()))?;
                self.start = end;
                self.scan = Scan::Between;
                Ok(Some(value))
            }
            None if self.in_value() && self.buf.len() - self.start > self.max_bytes => {
                Err(FrameError::TooLong {
                    limit: self.max_bytes,
                })
            }
            None => Ok(None),
        }
    }

    /// Continues the scan; returns the end offset of the value once it is complete.
    fn scan_to_end(&mut self) -> Result<Option<usize>, FrameError> {
        while let Some(&b) = self.buf.get(self.scanned) {
            self.work = self.work.saturating_add(1);
            let at = self.scanned;
            self.scanned += 1;
            match &mut self.scan {
                Scan::Between => {
                    if b.is_ascii_whitespace() {
                        self.start = self.scanned;
                        continue;
                    }
                    self.start = at;
                    self.scan = match b {
                        b'{' | b'[' => Scan::Container {
                            depth: 1,
                            in_string: false,
                            escaped: false,
                        },
                        b'"' => Scan::String { escaped: false },
                        b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => Scan::Token,
                        _ => {
                            return Err(FrameError::Syntax(format!(
                                "expected a value, found byte 0x{b:02x}"
                            )));
                        }
                    };
                    if let Some(end) = self.literal_end()? {
                        return Ok(Some(end));
                    }
                }
                Scan::Container {
                    depth,
                    in_string,
                    escaped,
                } => {
                    if *in_string {
                        if *escaped {
                            *escaped = false;
                        } else if b == b'\\' {
                            *escaped = true;
                        } else if b == b'"' {
                            *in_string = false;
                        }
                        continue;
                    }
                    match b {
                        b'"' => *in_string = true,
                        b'{' | b'[' => *depth += 1,
                        b'}' | b']' => {
                            *depth -= 1;
                            if *depth == 0 {
                                return Ok(Some(self.scanned));
                            }
                        }
                        _ => {}
                    }
                }
                Scan::String { escaped } => {
                    if *escaped {
                        *escaped = false;
                    } else if b == b'\\' {
                        *escaped = true;
                    } else if b == b'"' {
                        return Ok(Some(self.scanned));
                    }
                }
                Scan::Token => {
                    if !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) {
                        // The delimiter is not part of the value.
                        self.scanned = at;
                        return Ok(Some(at));
                    }
                    if let Some(end) = self.literal_end()? {
                        return Ok(Some(end));
                    }
                }
            }
        }
        Ok(None)
    }

    /// For a token starting with `t`, `f` or `n`: its end once it spells the whole literal
    /// (no delimiter needed), or a syntax error as soon as it cannot become one.
    fn literal_end(&self) -> Result<Option<usize>, FrameError> {
        let token = self.buf.get(self.start..self.scanned).unwrap_or_default();
        let literal: &[u8] = match token.first() {
            Some(b't') => b"true",
            Some(b'f') => b"false",
            Some(b'n') => b"null",
            _ => return Ok(None),
        };
        if !literal.starts_with(token) {
            return Err(FrameError::Syntax(format!(
                "expected {}",
                String::from_utf8_lossy(literal)
            )));
        }
        Ok((token.len() == literal.len()).then_some(self.scanned))
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
    fn a_value_over_the_bound_is_rejected_even_when_complete() {
        let mut f = Framer::new(8);
        f.push(br#"{"a": "123456789"}"#);
        assert_eq!(f.next_value(), Err(FrameError::TooLong { limit: 8 }));
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

    #[test]
    fn garbage_fails_at_its_first_byte_not_after_a_deadline() {
        for bad in [&b"]"[..], b",", b"x", b"tx", b"nul ", b"fals3"] {
            let mut f = Framer::new(64);
            f.push(bad);
            assert!(
                matches!(f.next_value(), Err(FrameError::Syntax(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn in_value_tells_a_half_sent_value_from_whitespace() {
        let mut f = Framer::new(64);
        f.push(b"  \n");
        assert_eq!(f.next_value().unwrap(), None);
        assert!(!f.in_value() && f.is_idle());
        f.push(b"{\"a\"");
        assert_eq!(f.next_value().unwrap(), None);
        assert!(f.in_value() && !f.is_idle());
        f.push(b":1} ");
        assert_eq!(f.next_value().unwrap(), Some(json!({"a": 1})));
        assert!(!f.in_value() && f.is_idle());
    }

    /// The issue's "slow huge request": a large value sent in tiny pieces, and many small
    /// values in one read, each cost work proportional to their size.
    #[test]
    fn work_is_linear_in_the_bytes_received() {
        let big = serde_json::to_vec(&json!({"s": "x\\\"{".repeat(50_000), "n": vec![1; 20_000]}))
            .unwrap();
        for piece in [1, 7, 4096] {
            let mut f = Framer::new(1 << 20);
            let mut got = None;
            for chunk in big.chunks(piece) {
                f.push(chunk);
                if let Some(v) = f.next_value().unwrap() {
                    got = Some(v);
                }
            }
            assert_eq!(got.unwrap()["n"].as_array().unwrap().len(), 20_000);
            assert!(
                f.work <= 2 * big.len(),
                "piece {piece}: {} for {}",
                f.work,
                big.len()
            );
        }
        // A top-level string and number in pieces, too.
        let s = format!("\"{}\" {} ", "y".repeat(100_000), "9".repeat(300));
        let mut f = Framer::new(1 << 20);
        let mut values = 0;
        for chunk in s.as_bytes().chunks(3) {
            f.push(chunk);
            while f.next_value().unwrap().is_some() {
                values += 1;
            }
        }
        assert_eq!(values, 2);
        assert!(f.work <= 2 * s.len(), "{} for {}", f.work, s.len());
        // Ten thousand pipelined requests in one read.
        let one = br#"{"jsonrpc":"2.0","method":"framework_wait_init","id":1} "#;
        let many = one.repeat(10_000);
        let mut f = Framer::new(1 << 20);
        f.push(&many);
        let mut n = 0;
        while f.next_value().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 10_000);
        assert!(f.work <= 2 * many.len(), "{} for {}", f.work, many.len());
    }
}
