//! The one streaming walk over the top-level JSON array of the health log.
//!
//! The walker only tracks structure (brackets, strings, escapes), hands each
//! complete element to a callback (`Elements`) with its file offset, and
//! reports how the array ended. [`scan_file`] hands raw bytes to a closure
//! (append's checks); [`super::read`] plugs in its record parser, with a
//! hook that lets its allocation-free matcher take an element before the
//! walker looks for its end. Memory is one read buffer plus the largest
//! single element. Byte offsets in errors and torn-tail repair are why this
//! is ours and not a JSON crate's streaming parser.
//!
//! A torn tail (a crash in the middle of an append) is not an error: the
//! walk reports where the last complete element ended. Anything else that is
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
pub(crate) enum State {
    BeforeArray,
    /// After `[`: an element or `]`.
    FirstOrClose,
    /// After `,`: an element.
    Element,
    /// After an element: `,` or `]`.
    CommaOrClose,
    /// After `]`: only whitespace.
    AfterArray,
}

/// Where a walk starts or stopped: an offset, the grammar state there, and
/// the end of the last complete element before it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resume {
    pub(crate) off: u64,
    pub(crate) state: State,
    pub(crate) last_end: u64,
}

impl Resume {
    pub(crate) fn start() -> Resume {
        Resume {
            off: 0,
            state: State::BeforeArray,
            last_end: 0,
        }
    }
}

#[derive(Debug)]
pub(crate) enum Stop {
    /// The end of the file.
    Eof,
    /// An element starts at or after the limit; the walk stopped before it.
    Limit(Resume),
    /// The callback asked to stop.
    Early,
}

const BUF: usize = 1 << 20;

/// How a walk ended.
#[derive(Debug)]
pub(crate) struct Walked {
    pub(crate) stop: Stop,
    /// How the array ended; meaningful only when `stop` is [`Stop::Eof`].
    pub(crate) end: End,
    /// Complete top-level elements handed to the callback.
    pub(crate) elements: u64,
}

/// Bytes at an offset: a file read by offset, so that two threads can walk
/// one `File` ([`crate::fsutil::read_at`]), or any reader read in order.
pub(crate) trait Source {
    fn read_at(&mut self, buf: &mut [u8], off: u64) -> std::io::Result<usize>;

    /// The length now, for a file: a walk reads no further than the
    /// length its source had when it began. `None` for a reader.
    fn len_now(&mut self) -> std::io::Result<Option<u64>> {
        Ok(None)
    }
}

impl Source for &File {
    fn read_at(&mut self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
        crate::fsutil::read_at(self, buf, off)
    }

    fn len_now(&mut self) -> std::io::Result<Option<u64>> {
        Ok(Some(self.metadata()?.len()))
    }
}

/// A reader, read in order: the walk asks for each byte once, in order.
struct InOrder<R>(R);

impl<R: Read> Source for InOrder<R> {
    fn read_at(&mut self, buf: &mut [u8], _off: u64) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

/// What the walk does with each complete top-level element.
pub(crate) trait Elements {
    /// A chance to take the element at the start of `b` (which may run on
    /// past its end) before the walk finds its end: `Some((length, go_on))`
    /// when taken, `None` to have it handed to [`Elements::whole`]. The
    /// health log reader's allocation-free matcher lives here.
    #[inline]
    fn prefix(&mut self, _b: &[u8]) -> Option<(usize, bool)> {
        None
    }

    /// One complete element at file offset `off`; `Ok(false)` stops the walk.
    fn whole(&mut self, off: u64, b: &[u8]) -> Result<bool>;
}

/// Walk the array in `path`, calling `each(offset, bytes)` for every complete
/// top-level element. A missing file is [`End::Empty`].
pub fn scan_file(path: &Path, each: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<End> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(End::Empty),
        Err(e) => return Err(Error::unreadable(path, e)),
    };
    let mut each = Each(each);
    Ok(walk(path, &mut &file, Resume::start(), None, &mut each)?.end)
}

/// [`scan_file`] over any reader; `path` only names the file in errors.
pub fn scan_reader(
    path: &Path,
    r: impl Read,
    each: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<End> {
    let mut each = Each(each);
    Ok(walk(path, &mut InOrder(r), Resume::start(), None, &mut each)?.end)
}

/// A plain callback as [`Elements`].
struct Each<F>(F);

impl<F: FnMut(u64, &[u8]) -> Result<()>> Elements for Each<F> {
    fn whole(&mut self, off: u64, b: &[u8]) -> Result<bool> {
        (self.0)(off, b)?;
        Ok(true)
    }
}

/// The walk itself. From `from` in state `from.state`, to the end of the
/// source, to the first element starting at or after `limit`, or until the
/// callback returns false. `path` only names the file in errors.
pub(crate) fn walk(
    path: &Path,
    src: &mut impl Source,
    from: Resume,
    limit: Option<u64>,
    each: &mut impl Elements,
) -> Result<Walked> {
    let bad = |off: u64, msg: &str| -> Error { super::log_error(path, Some(off), msg).into() };
    // Readers take no lock: an append may run while the walk reads. Bytes
    // before the old closing `]` never change, and an append cuts that `]`
    // and writes from there; so the file as long as it was when the walk
    // began reads as the old array or as a torn tail, while reading on past
    // that length could join the old `]` to the new entries' bytes (found
    // by scripts/soak: `rollup` failing on "data after the closing ']'").
    let end_at_start = src.len_now().map_err(|e| Error::unreadable(path, e))?;
    let mut buf: Vec<u8> = vec![0u8; BUF];
    let mut len = 0usize;
    let mut base = from.off;
    let mut pos = 0usize;
    let mut eof = false;
    let mut state = from.state;
    let mut last_end = from.last_end;
    let mut close = 0u64;
    let mut elements = 0u64;
    // Where a run of NUL bytes began: what a crash can leave past the last
    // write. Up to the end of the file it is a torn tail (the appender cuts
    // it); followed by anything else, damage.
    let mut zeros_from: Option<u64> = None;
    // Keep buf[pos..len] (the element in progress), move it to the front,
    // read more behind it.
    let mut refill = |buf: &mut Vec<u8>,
                      len: &mut usize,
                      base: &mut u64,
                      pos: &mut usize,
                      eof: &mut bool|
     -> Result<()> {
        let keep = *pos;
        buf.copy_within(keep..*len, 0);
        *len -= keep;
        *base += keep as u64;
        *pos -= keep;
        if *len * 2 > buf.len() {
            // A single element bigger than half the buffer: grow.
            let grown = buf.len() * 2;
            buf.resize(grown, 0);
        }
        let at = *base + *len as u64;
        let room = match end_at_start {
            Some(end) => (end.saturating_sub(at)).min((buf.len() - *len) as u64) as usize,
            None => buf.len() - *len,
        };
        if room == 0 {
            *eof = true;
            return Ok(());
        }
        loop {
            match src.read_at(&mut buf[*len..*len + room], at) {
                Ok(0) => {
                    *eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    *len += n;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::unreadable(path, e)),
            }
        }
    };
    let stop = loop {
        if pos >= len {
            if eof {
                break Stop::Eof;
            }
            refill(&mut buf, &mut len, &mut base, &mut pos, &mut eof)?;
            continue;
        }
        let c = buf[pos];
        if let Some(z) = zeros_from
            && c != 0
        {
            return Err(bad(z, "NUL bytes inside the log"));
        }
        match state {
            _ if is_ws(c) => pos += 1,
            _ if c == 0 && state != State::BeforeArray => {
                zeros_from.get_or_insert(base + pos as u64);
                pos += 1;
            }
            State::BeforeArray => {
                if c != b'[' {
                    return Err(bad(base + pos as u64, "not a JSON array (expected '[')"));
                }
                pos += 1;
                last_end = base + pos as u64;
                state = State::FirstOrClose;
            }
            State::CommaOrClose => {
                match c {
                    b',' => state = State::Element,
                    b']' => {
                        close = base + pos as u64;
                        state = State::AfterArray;
                    }
                    _ => {
                        return Err(bad(base + pos as u64, "expected ',' or ']' after an entry"));
                    }
                }
                pos += 1;
            }
            State::AfterArray => {
                return Err(bad(
                    base + pos as u64,
                    "unexpected data after the closing ']'",
                ));
            }
            State::FirstOrClose | State::Element => {
                if c == b']' && state == State::FirstOrClose {
                    close = base + pos as u64;
                    state = State::AfterArray;
                    pos += 1;
                    continue;
                }
                if c == b']' || c == b',' {
                    return Err(bad(base + pos as u64, "expected an entry"));
                }
                let off = base + pos as u64;
                if limit.is_some_and(|l| off >= l) {
                    break Stop::Limit(Resume {
                        off,
                        state,
                        last_end,
                    });
                }
                let b = &buf[pos..len];
                let (n, go_on) = match each.prefix(b) {
                    Some(found) => found,
                    None => {
                        let Some(n) = element_len(b) else {
                            if eof {
                                let cut = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
                                if !is_json_prefix(&b[..cut]) {
                                    return Err(bad(
                                        off,
                                        "damaged entry at the end of the file (not a cut-off write)",
                                    ));
                                }
                                break Stop::Eof;
                            }
                            refill(&mut buf, &mut len, &mut base, &mut pos, &mut eof)?;
                            continue;
                        };
                        (n, each.whole(off, &b[..n])?)
                    }
                };
                elements += 1;
                pos += n;
                last_end = base + pos as u64;
                state = State::CommaOrClose;
                if !go_on {
                    break Stop::Early;
                }
            }
        }
    };
    let end = match (&stop, state) {
        (Stop::Eof, State::BeforeArray) => End::Empty,
        (Stop::Eof, State::AfterArray) if zeros_from.is_none() => End::Closed { last_end, close },
        (Stop::Eof, _) => End::Torn {
            last_end,
            torn_bytes: base + len as u64 - last_end,
        },
        // Not at the end: the caller does not use it.
        _ => End::Empty,
    };
    Ok(Walked {
        stop,
        end,
        elements,
    })
}

/// Where one element ends, by structure alone; `None` when `b` ends first.
fn element_len(b: &[u8]) -> Option<usize> {
    let first = *b.first()?;
    match first {
        b'{' | b'[' => {
            let mut depth = 0u32;
            let mut i = 0;
            while i < b.len() {
                match b[i] {
                    b'"' => i = string_end(b, i + 1)?,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        b'"' => string_end(b, 1).map(|i| i + 1),
        _ => b.iter().position(|&c| c == b',' || c == b']' || is_ws(c)),
    }
}

/// The index of the closing quote of a string whose body starts at `i`.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Whether `bytes` is a cut-off prefix of a JSON value.
pub fn is_json_prefix(bytes: &[u8]) -> bool {
    let complete_or_cut = |b: &[u8]| match serde_json::from_slice::<serde::de::IgnoredAny>(b) {
        Ok(_) => true,
        Err(e) => e.classify() == serde_json::error::Category::Eof,
    };
    // serde_json calls a number cut after its `.`, `e` or sign invalid,
    // not cut off: with a digit more it is a prefix again, if it was one.
    complete_or_cut(bytes)
        || (matches!(bytes.last(), Some(b'.' | b'e' | b'E' | b'+' | b'-'))
            && complete_or_cut(&[bytes, b"0"].concat()))
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

    /// The log's file, appended to (as `healthlog::append` does: cut the
    /// closing `]`, write `,\n`, the entry and `\n]\n` from there) right
    /// after the walk's first read.
    #[cfg(unix)]
    struct AppendedMidWalk<'a> {
        file: &'a File,
        path: &'a Path,
        reads: usize,
    }

    #[cfg(unix)]
    impl Source for AppendedMidWalk<'_> {
        fn read_at(&mut self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
            let n = crate::fsutil::read_at(self.file, buf, off)?;
            self.reads += 1;
            if self.reads == 1 {
                let text = std::fs::read(self.path)?;
                let at = text.iter().rposition(|&c| c == b']').unwrap();
                let f = std::fs::OpenOptions::new().write(true).open(self.path)?;
                f.set_len(at as u64)?;
                std::os::unix::fs::FileExt::write_all_at(&f, b",\n{\"b\":2}\n]\n", at as u64)?;
            }
            Ok(n)
        }

        fn len_now(&mut self) -> std::io::Result<Option<u64>> {
            let mut f = self.file;
            f.len_now()
        }
    }

    #[cfg(unix)]
    #[test]
    fn an_append_during_a_walk_reads_as_the_log_before_it() {
        // Found by scripts/soak: `rollup` read the old `]`, then the bytes
        // an append wrote past the old end, and failed with "unexpected data
        // after the closing ']'" (exit 4) on a log that was never damaged.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("health_log.json");
        std::fs::write(&path, "[\n{\"a\":1}\n]\n").unwrap();
        let file = File::open(&path).unwrap();
        let mut src = AppendedMidWalk {
            file: &file,
            path: &path,
            reads: 0,
        };
        let mut got = Vec::new();
        let mut each = Each(|_, b: &[u8]| {
            got.push(String::from_utf8_lossy(b).into_owned());
            Ok(())
        });
        let w = walk(&path, &mut src, Resume::start(), None, &mut each).unwrap();
        assert_eq!(got, ["{\"a\":1}"]);
        assert!(matches!(w.end, End::Closed { .. }), "{:?}", w.end);
        // The next walk sees the append whole.
        let end = scan_file(&path, |_, _| Ok(())).unwrap();
        assert!(matches!(end, End::Closed { .. }), "{end:?}");
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

    /// Found by the `healthlog_read` fuzz target: a log cut in the middle
    /// of a number (`272.`, `1e`, `1e-`, `-`) was called damage, not a
    /// torn tail, so the next append refused it.
    #[test]
    fn a_number_cut_anywhere_is_a_torn_tail() {
        for cut in [
            "{\"latency_ms\": 272.",
            "{\"a\": 1e",
            "{\"a\": 1E+",
            "{\"a\": 1e-",
            "{\"a\": -",
            "-",
            "[2.",
        ] {
            assert!(is_json_prefix(cut.as_bytes()), "{cut}");
            let (end, got) = scan(&format!("[\n{{\"x\":1}},\n{cut}"));
            assert!(end.unwrap().is_torn(), "{cut}");
            assert_eq!(got.len(), 1);
        }
        for bad in ["{\"a\": x.", "{\"a\": 1.5.", "{\"a\": 1e5e", "{\"a\": --"] {
            assert!(!is_json_prefix(bad.as_bytes()), "{bad}");
        }
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
