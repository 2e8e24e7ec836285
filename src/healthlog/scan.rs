//! A streaming walk over the top-level JSON array of the health log.
//!
//! The scanner only tracks structure (brackets, strings, escapes), hands each
//! complete element to a callback as a byte slice with its file offset, and
//! reports how the array ended. Callers parse the elements they care about.
//! Memory is one read buffer plus the largest single element.
//!
//! A torn tail (a crash in the middle of an append) is not an error: the
//! scan reports where the last complete element ended. Anything else that is
//! not a JSON array is a [`DataError`](crate::error::DataError) naming the byte offset.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// How the array ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The file is empty or holds only whitespace.
    Empty,
    /// A well-formed array. `last_end` is the offset just past the last
    /// element (or past `[` when there is none); `close` is the offset of `]`.
    Closed { last_end: u64, close: u64 },
    /// The array stops early: a partial element, or no closing `]`. `last_end`
    /// is the offset just past the last complete element (or past `[`), and
    /// `torn_bytes` how much follows it.
    Torn { last_end: u64, torn_bytes: u64 },
}

impl End {
    pub fn is_torn(&self) -> bool {
        matches!(self, End::Torn { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    BeforeArray,
    /// After `[`: an element or `]`.
    FirstOrClose,
    /// After `,`: an element.
    Element,
    /// Inside an element.
    InElement,
    /// After an element: `,` or `]`.
    CommaOrClose,
    /// After `]`: only whitespace.
    AfterArray,
}

const BUF: usize = 1 << 20;

/// Walk the array in `path`, calling `each(offset, bytes)` for every complete
/// top-level element. A missing file is [`End::Empty`].
pub fn scan_file(path: &Path, each: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<End> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(End::Empty),
        Err(e) => return Err(Error::unreadable(path, e)),
    };
    scan_reader(path, file, each)
}

/// [`scan_file`] over any reader; `path` only names the file in errors.
pub fn scan_reader(
    path: &Path,
    mut r: impl Read,
    mut each: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<End> {
    let mut buf: Vec<u8> = Vec::with_capacity(BUF);
    // Offset in the file of buf[0].
    let mut base: u64 = 0;
    let mut state = State::BeforeArray;
    // Element being scanned: start index in buf, nesting depth, string flags.
    let mut elem_start = 0usize;
    let mut depth = 0u32;
    let mut in_str = false;
    let mut escaped = false;
    let mut scalar = false;
    let mut last_end: u64 = 0;
    let mut close: u64 = 0;
    let mut pos = 0usize;
    let bad = |off: u64, msg: &str| -> Error {
        super::log_error(path, Some(off), msg.to_string()).into()
    };
    loop {
        // Keep only the element in progress, then refill.
        let keep_from = if state == State::InElement {
            elem_start
        } else {
            pos
        };
        if keep_from > 0 {
            buf.drain(..keep_from);
            base += keep_from as u64;
            pos -= keep_from;
            if state == State::InElement {
                elem_start = 0;
            }
        }
        let old = buf.len();
        let want = BUF.max(old * 2) - old;
        buf.resize(old + want, 0);
        let n = loop {
            match r.read(&mut buf[old..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::unreadable(path, e)),
            }
        };
        buf.truncate(old + n);
        if n == 0 {
            break;
        }
        while pos < buf.len() {
            let c = buf[pos];
            match state {
                State::InElement => {
                    if in_str {
                        if escaped {
                            escaped = false;
                        } else if c == b'\\' {
                            escaped = true;
                        } else if c == b'"' {
                            in_str = false;
                            if scalar && depth == 0 {
                                // A bare string element ends with its quote.
                                let off = base + elem_start as u64;
                                each(off, &buf[elem_start..=pos])?;
                                last_end = base + pos as u64 + 1;
                                state = State::CommaOrClose;
                            }
                        }
                    } else if scalar {
                        if c == b',' || c == b']' || is_ws(c) {
                            each(base + elem_start as u64, &buf[elem_start..pos])?;
                            last_end = base + pos as u64;
                            state = State::CommaOrClose;
                            continue;
                        }
                    } else {
                        match c {
                            b'"' => in_str = true,
                            b'{' | b'[' => depth += 1,
                            b'}' | b']' => {
                                depth -= 1;
                                if depth == 0 {
                                    each(base + elem_start as u64, &buf[elem_start..=pos])?;
                                    last_end = base + pos as u64 + 1;
                                    state = State::CommaOrClose;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ if is_ws(c) => {}
                State::BeforeArray => {
                    if c != b'[' {
                        return Err(bad(base + pos as u64, "not a JSON array (expected '[')"));
                    }
                    last_end = base + pos as u64 + 1;
                    state = State::FirstOrClose;
                }
                State::FirstOrClose | State::Element => {
                    if c == b']' && state == State::FirstOrClose {
                        close = base + pos as u64;
                        state = State::AfterArray;
                    } else if c == b']' || c == b',' {
                        return Err(bad(base + pos as u64, "expected an entry"));
                    } else {
                        elem_start = pos;
                        state = State::InElement;
                        in_str = c == b'"';
                        escaped = false;
                        scalar = !(c == b'{' || c == b'[');
                        depth = if scalar { 0 } else { 1 };
                    }
                }
                State::CommaOrClose => match c {
                    b',' => state = State::Element,
                    b']' => {
                        close = base + pos as u64;
                        state = State::AfterArray;
                    }
                    _ => return Err(bad(base + pos as u64, "expected ',' or ']' after an entry")),
                },
                State::AfterArray => {
                    return Err(bad(
                        base + pos as u64,
                        "unexpected data after the closing ']'",
                    ));
                }
            }
            pos += 1;
        }
    }
    let eof = base + buf.len() as u64;
    match state {
        State::BeforeArray => Ok(End::Empty),
        State::AfterArray => Ok(End::Closed { last_end, close }),
        State::InElement if scalar && !in_str => {
            // A bare number at EOF may be complete or cut; treat it as torn.
            check_prefix(path, base + elem_start as u64, &buf[elem_start..])?;
            Ok(End::Torn {
                last_end,
                torn_bytes: eof - last_end,
            })
        }
        State::InElement => {
            check_prefix(path, base + elem_start as u64, &buf[elem_start..])?;
            Ok(End::Torn {
                last_end,
                torn_bytes: eof - last_end,
            })
        }
        State::FirstOrClose | State::Element | State::CommaOrClose => Ok(End::Torn {
            last_end,
            torn_bytes: eof - last_end,
        }),
    }
}

/// A torn element must be the beginning of valid JSON, cut short. Anything
/// else (garbage, NUL bytes) is damage, not a torn write.
fn check_prefix(path: &Path, off: u64, bytes: &[u8]) -> Result<()> {
    if is_json_prefix(bytes) {
        Ok(())
    } else {
        Err(super::log_error(
            path,
            Some(off),
            "damaged entry at the end of the file (not a cut-off write)",
        )
        .into())
    }
}

/// Whether `bytes` is a cut-off prefix of a JSON value.
pub fn is_json_prefix(bytes: &[u8]) -> bool {
    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => true,
        Err(e) => e.classify() == serde_json::error::Category::Eof,
    }
}

pub(crate) fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(s: &str) -> (Result<End>, Vec<(u64, String)>) {
        let mut got = Vec::new();
        let end = scan_reader(Path::new("t.json"), s.as_bytes(), |off, b| {
            got.push((off, String::from_utf8_lossy(b).into_owned()));
            Ok(())
        });
        (end, got)
    }

    #[test]
    fn well_formed_arrays() {
        let (end, got) = scan("[\n{\"a\":\"]}\\\"\"},\n  {\"b\":[1,{}]}\n]\n");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], (2, "{\"a\":\"]}\\\"\"}".into()));
        assert_eq!(got[1].1, "{\"b\":[1,{}]}");
        assert!(matches!(end.unwrap(), End::Closed { .. }));
        assert_eq!(
            scan("[]").0.unwrap(),
            End::Closed {
                last_end: 1,
                close: 1
            }
        );
        assert_eq!(scan("  \n").0.unwrap(), End::Empty);
        assert_eq!(scan("[1, \"x\", true]").1.len(), 3);
    }

    #[test]
    fn torn_tails_report_the_last_complete_entry() {
        let s = "[\n{\"a\":1},\n{\"b\":2";
        let (end, got) = scan(s);
        assert_eq!(got.len(), 1);
        assert_eq!(
            end.unwrap(),
            End::Torn {
                last_end: 9,
                torn_bytes: (s.len() - 9) as u64
            }
        );
        let (end, _) = scan("[\n{\"a\":1},\n");
        assert!(end.unwrap().is_torn());
        let (end, _) = scan("[\n{\"a\":1}");
        assert!(end.unwrap().is_torn());
        let (end, got) = scan("[\n{\"a\":\"x");
        assert!(got.is_empty());
        assert_eq!(
            end.unwrap(),
            End::Torn {
                last_end: 1,
                torn_bytes: 8
            }
        );
    }

    #[test]
    fn damage_is_an_error_with_an_offset() {
        for (s, off) in [
            ("{\"a\":1}", 0),
            ("[{\"a\":1} {\"b\":2}]", 9),
            ("[{\"a\":1}] x", 10),
            ("[{\"a\":1},]", 9),
            ("[{\"a\":1},\n{\"b\": nul\u{0}l", 10),
        ] {
            let err = scan(s).0.unwrap_err().to_string();
            assert!(err.contains(&format!("byte offset {off}")), "{s}: {err}");
        }
    }

    #[test]
    fn elements_spanning_buffer_refills_are_whole() {
        let big = format!("[{{\"x\":\"{}\"}},{{\"y\":1}}]", "z".repeat(3 * BUF));
        let (end, got) = scan(&big);
        assert!(matches!(end.unwrap(), End::Closed { .. }));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1.len(), 3 * BUF + 8);
        assert_eq!(got[1].1, "{\"y\":1}");
    }
}
