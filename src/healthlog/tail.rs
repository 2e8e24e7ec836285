//! Reading the health log backwards from its end.
//!
//! `brief` and `state` care about the most recent entries only, and must cost
//! the same on a year of history as on a day of it. llmprobe writes one entry
//! per line, so the tail can be read in fixed-size chunks from the end and
//! taken apart line by line, newest first, until the caller has seen enough.
//!
//! The reader is strict about that shape: a last line of `]`, one complete
//! object per line, a comma after every entry but the last, and `[` on a line
//! of its own at the start. Anything else (a pretty-printed legacy log, a
//! torn tail, damage) makes it give up with [`Tail::NotLineForm`] before the
//! caller has acted on anything, and the caller falls back to a full forward
//! read, which is authoritative about torn tails and damage.

use std::fs::File;
use std::path::Path;

use super::read::{Parsed, Record, fast, slow_element};
use crate::error::{Error, Result};
use crate::fsutil::read_exact_at;

/// How a backward read ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The caller stopped it, or the start of the array was reached. The
    /// count is how many lines were skipped as unusable entries.
    Done { skipped: u64 },
    /// The file is not in one-entry-per-line form (or is torn or damaged):
    /// read it forward instead. Records handed out before this must be
    /// discarded.
    NotLineForm,
}

const CHUNK: u64 = 64 * 1024;
/// A line longer than this is not llmprobe's format (a whole array on one
/// line, say); give up rather than let memory grow with the file.
const MAX_LINE: usize = 1 << 20;

/// What a line turned out to be.
enum Step {
    Continue,
    Stop,
    Start,
    Give,
}

/// Hand every entry to `each`, newest (last in the file) first, until it
/// returns false. A missing or empty file has no entries.
pub fn read_backward(path: &Path, mut each: impl FnMut(&Record<'_>) -> bool) -> Result<Tail> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Tail::Done { skipped: 0 });
        }
        Err(e) => return Err(Error::unreadable(path, e)),
    };
    let io = |e| Error::unreadable(path, e);
    let len = file.metadata().map_err(io)?.len();
    let mut end = len;
    let mut carry: Vec<u8> = Vec::new();
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK as usize);
    // Lines seen so far, newest first: nothing, then `]`, then entries.
    let mut seen_close = false;
    let mut entries = 0u64;
    let mut skipped = 0u64;
    let mut line_step = |line: &[u8]| -> Step {
        let t = trim(line);
        if t.is_empty() {
            return Step::Continue;
        }
        if !seen_close {
            if t == b"]" {
                seen_close = true;
                return Step::Continue;
            }
            return Step::Give;
        }
        if t == b"[" {
            return Step::Start;
        }
        // Every entry but the last ends with a comma.
        let body = match (entries, t.last()) {
            (0, Some(b',')) => return Step::Give,
            (0, _) => t,
            (_, Some(b',')) => trim(&t[..t.len() - 1]),
            _ => return Step::Give,
        };
        if body.first() != Some(&b'{') || body.last() != Some(&b'}') {
            return Step::Give;
        }
        entries += 1;
        if let Some((r, n)) = fast(body)
            && n == body.len()
        {
            return if each(&r) { Step::Continue } else { Step::Stop };
        }
        slow_element(body, |p| match p {
            Parsed::Record(r) => {
                if each(&r) {
                    Step::Continue
                } else {
                    Step::Stop
                }
            }
            Parsed::Skipped => {
                skipped += 1;
                Step::Continue
            }
            Parsed::Invalid(_) => Step::Give,
        })
    };
    loop {
        let start = end.saturating_sub(CHUNK);
        buf.clear();
        buf.resize((end - start) as usize, 0);
        match read_exact_at(&file, &mut buf, start) {
            Ok(()) => {}
            // Shorter than when it was measured: an append is cutting its
            // `]` right now (readers take no lock). The forward reader,
            // which reads no further than the length it finds, takes over.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(Tail::NotLineForm);
            }
            Err(e) => return Err(io(e)),
        }
        buf.extend_from_slice(&carry);
        let mut hi = buf.len();
        while let Some(nl) = buf[..hi].iter().rposition(|&c| c == b'\n') {
            match line_step(&buf[nl + 1..hi]) {
                Step::Continue => hi = nl,
                Step::Stop => return Ok(Tail::Done { skipped }),
                // `[` opens the array only as the file's first line: one
                // further down is inside something else (a nested array,
                // text before the log), which the forward reader judges.
                Step::Start if start == 0 && trim(&buf[..nl]).is_empty() => {
                    return Ok(Tail::Done { skipped });
                }
                Step::Start => return Ok(Tail::NotLineForm),
                Step::Give => return Ok(Tail::NotLineForm),
            }
        }
        if start == 0 {
            return Ok(match line_step(&buf[..hi]) {
                Step::Start | Step::Stop => Tail::Done { skipped },
                // The first line must be `[`; an empty file has no lines.
                Step::Continue if len == 0 || trim(&buf[..hi]).is_empty() && !seen_close => {
                    Tail::Done { skipped }
                }
                Step::Continue | Step::Give => Tail::NotLineForm,
            });
        }
        if hi > MAX_LINE {
            return Ok(Tail::NotLineForm);
        }
        carry.clear();
        carry.extend_from_slice(&buf[..hi]);
        end = start;
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let s = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let e = b.iter().rposition(|c| !ws(c)).map_or(s, |e| e + 1);
    &b[s..e]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back(s: &str, stop_after: usize) -> (Vec<i64>, Tail) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.json");
        std::fs::write(&p, s).unwrap();
        let mut got = Vec::new();
        let t = read_backward(&p, |r| {
            got.push(r.latency_ms as i64);
            got.len() < stop_after
        })
        .unwrap();
        (got, t)
    }

    fn entry(lat: u32) -> String {
        format!(
            r#"{{"ts":"2026-11-30T21:00:00Z","provider":"p","model":"m","ok":1,"latency_ms":{lat},"failure_type":""}}"#
        )
    }

    #[test]
    fn newest_first_across_chunks() {
        let n = 3000;
        let body: Vec<String> = (0..n).map(entry).collect();
        let s = format!("[\n{}\n]\n", body.join(",\n"));
        assert!(s.len() as u64 > 2 * CHUNK);
        let (got, t) = back(&s, usize::MAX);
        assert_eq!(t, Tail::Done { skipped: 0 });
        assert_eq!(got, (0..n as i64).rev().collect::<Vec<_>>());
        let (got, _) = back(&s, 5);
        assert_eq!(got, vec![2999, 2998, 2997, 2996, 2995]);
    }

    #[test]
    fn other_shapes_give_up() {
        let e = entry(1);
        for s in [
            "[\n  {\n \"a\": 1\n  }\n]\n".to_string(),
            format!("[\n{e},\n{e}"),
            format!("[\n{e},\n{e},\n]\n"),
            format!("[\n{e}\n{e}\n]\n"),
            format!("[{e},\n{e}\n]\n"),
            format!("[\n{e}, {e}\n]\n"),
            format!("[\n{{\"ts\": tru}},\n{e}\n]\n"),
        ] {
            assert_eq!(back(&s, usize::MAX).1, Tail::NotLineForm, "{s}");
        }
        assert_eq!(back("", 9).1, Tail::Done { skipped: 0 });
        assert_eq!(back("[\n]\n", 9).1, Tail::Done { skipped: 0 });
        let (got, t) = back(&format!("[\n{{\"x\":1}},\n{e}\n]\n"), 9);
        assert_eq!((got, t), (vec![1], Tail::Done { skipped: 1 }));
    }

    /// Found by the `healthlog_read` fuzz target: a `[` line that is not
    /// the file's first was taken for the start of the array, so the tail
    /// reader handed out entries of a nested array (or of a file with text
    /// before the log) that the forward reader skips or rejects.
    #[test]
    fn only_the_first_line_opens_the_array() {
        let e = entry(1);
        for s in [
            format!("x\n[\n{e}\n]\n"),
            format!("[\n{e},\n[\n{e}\n]\n"),
            format!("[\n\n[\n{e}\n]\n"),
        ] {
            assert_eq!(back(&s, usize::MAX).1, Tail::NotLineForm, "{s}");
        }
        assert_eq!(
            back(&format!("\n \n[\n{e}\n]\n"), 9),
            (vec![1], Tail::Done { skipped: 0 })
        );
    }
}
