//! Appending to the health log in place.
//!
//! Cost does not depend on the size of the log: the file is never read whole.
//! Under the data lock we find the closing `]` from the end, write `,\n`, the
//! new entries (one compact object per line) and `\n]\n`, then fsync. A
//! pretty-printed log written by the old tool stays valid because only its
//! tail is touched.
//!
//! A crash mid-append can leave a torn tail. The next append notices, cuts
//! the file back to the end of the last complete entry, says so on stderr,
//! and appends. A file that is damaged in any other way is left
//! byte-identical and reported as a [`DataError`](crate::error::DataError).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::scan::{self, End, is_json_prefix, is_ws};
use crate::error::{Error, Result};
use crate::fsutil::{DataLock, read_exact_at, write_all_at};
use crate::outcome::Entry;

/// How much of the end of the file the fast path looks at.
const TAIL_WINDOW: u64 = 8 * 1024;

/// What an append did besides appending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendReport {
    /// Bytes of a torn tail that were cut before appending.
    pub repaired_bytes: Option<u64>,
    /// Where the appended text begins (the end of the last entry before
    /// it), for [`undo`]; `None` when nothing was appended.
    pub start: Option<u64>,
}

/// Where the new entries go, and what to write before them.
struct Insertion {
    at: u64,
    prefix: &'static str,
    torn_bytes: Option<u64>,
}

/// Append `entries` to the log at `path`, creating it if needed. The caller
/// holds the data lock of the stats directory.
pub fn append(path: &Path, entries: &[Entry], _lock: &DataLock) -> Result<AppendReport> {
    if entries.is_empty() {
        return Ok(AppendReport::default());
    }
    let io =
        |what: &str, e: std::io::Error| Error::io(format!("cannot {what} {}", path.display()), e);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io("open", e))?;
    let len = file.metadata().map_err(|e| io("stat", e))?.len();
    let ins = match fast_insertion(path, &file, len)? {
        Some(ins) => ins,
        None => slow_insertion(path)?,
    };
    if let Some(cut) = ins.torn_bytes {
        eprintln!(
            "warning: {}: cut a torn tail of {cut} bytes after byte {} (an interrupted write) before appending",
            path.display(),
            ins.at
        );
    }
    let mut text = String::with_capacity(entries.len() * 160 + 8);
    text.push_str(ins.prefix);
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            text.push_str(",\n");
        }
        text.push_str(&serde_json::to_string(e).expect("entries serialise"));
    }
    text.push_str("\n]\n");
    // Cut first: a crash between the cut and the write leaves a torn tail,
    // which the next append repairs; the old `]` never lingers after new data.
    file.set_len(ins.at).map_err(|e| io("truncate", e))?;
    // A write that fails (a full disk, a file size limit) or cannot be made
    // durable is rolled back: the log ends with its last complete entry
    // again, closed, and the error says the file was left so.
    let written = write_at(&file, text.as_bytes(), ins.at)
        .map_err(|e| ("write", e))
        .and_then(|()| file.sync_data().map_err(|e| ("fsync", e)));
    if let Err((what, e)) = written {
        return Err(rolled_back(path, &file, ins.at, what, e));
    }
    Ok(AppendReport {
        repaired_bytes: ins.torn_bytes,
        start: Some(ins.at),
    })
}

/// Take back the append `report` describes, which this process made under
/// `lock` and has not let go of since: the log ends with the entry before
/// it again. For a batch whose state update failed, so that the log and the
/// state file never disagree. A failure to do so leaves a torn tail at the
/// worst, which the next append repairs.
pub fn undo(path: &Path, report: &AppendReport, _lock: &DataLock) -> Result<()> {
    let Some(at) = report.start else {
        return Ok(());
    };
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
    close_at(&file, at).map_err(|e| {
        Error::io(
            format!(
                "cannot take back the last append to {}; the next append repairs it",
                path.display()
            ),
            e,
        )
    })
}

/// The error of an append whose `what` (write, fsync) failed with `e`,
/// after cutting the file back to `at` and closing the array there.
fn rolled_back(path: &Path, file: &File, at: u64, what: &str, e: std::io::Error) -> Error {
    let left = match close_at(file, at) {
        Ok(()) => "the log was left with the entries it had".to_string(),
        Err(e2) => format!(
            "rolling back failed too ({e2}): the log ends in a torn tail, which the next append repairs"
        ),
    };
    Error::io(format!("cannot {what} {} ({left})", path.display()), e)
}

/// Cut the log back to `at`, the end of its last complete entry (or 0),
/// and close the array there. The log's own close (`\n]\n`, as appends
/// write it) stood there before, so a file size limit or a disk that
/// held the log before holds it again.
fn close_at(file: &File, at: u64) -> std::io::Result<()> {
    file.set_len(at)?;
    if at > 0 {
        write_all_at(file, b"\n]\n", at)?;
    }
    file.sync_data()
}

/// Check, without writing, that the log at `path` can take an append: the
/// same tests an append makes, so that `check` can refuse a bad log before it
/// spends any probes. A torn tail is fine (the append repairs it).
pub fn preflight(path: &Path, _lock: &DataLock) -> Result<()> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("cannot open {}", path.display()), e)),
    };
    let len = file
        .metadata()
        .map_err(|e| Error::io(format!("cannot stat {}", path.display()), e))?
        .len();
    if fast_insertion(path, &file, len)?.is_none() {
        slow_insertion(path)?;
    }
    Ok(())
}

/// Test hook: `LLMPROBE_TEST_APPEND_DELAY_MS` makes the write crawl in small
/// pieces so that crash tests can kill the process in the middle of it.
fn write_at(file: &File, bytes: &[u8], at: u64) -> std::io::Result<()> {
    let delay = std::env::var("LLMPROBE_TEST_APPEND_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    match delay {
        None => write_all_at(file, bytes, at),
        Some(ms) => {
            let mut off = 0;
            for chunk in bytes.chunks(16) {
                write_all_at(file, chunk, at + off)?;
                off += chunk.len() as u64;
                (&*file).flush()?;
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
            Ok(())
        }
    }
}

/// Find the insertion point from the head and tail of the file alone. `None`
/// when the tail is unusual enough to need a full scan.
fn fast_insertion(path: &Path, file: &File, len: u64) -> Result<Option<Insertion>> {
    if len == 0 {
        return Ok(Some(Insertion {
            at: 0,
            prefix: "[\n",
            torn_bytes: None,
        }));
    }
    let read = |off: u64, n: u64| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; n as usize];
        read_exact_at(file, &mut buf, off).map_err(|e| Error::unreadable(path, e))?;
        Ok(buf)
    };
    let head = read(0, len.min(64))?;
    let Some(first) = head.iter().position(|&c| !is_ws(c)) else {
        return Ok(None);
    };
    if head[first] != b'[' {
        return Err(
            super::log_error(path, Some(first as u64), "not a JSON array (expected '[')").into(),
        );
    }
    let start = len.saturating_sub(TAIL_WINDOW);
    let tail = read(start, len - start)?;
    let trimmed = trim_end(&tail, |c| is_ws(c) || c == 0);
    if trimmed.last() == Some(&b']') {
        let before = trim_end(&trimmed[..trimmed.len() - 1], is_ws);
        // Zeros after the `]` (a crash's) are cut, and said so.
        let zeros = tail[trimmed.len()..].contains(&0);
        let at = start + before.len() as u64;
        return Ok(match before.last() {
            Some(b'}') if line_form(&tail[..before.len()], start == 0) => Some(Insertion {
                at,
                prefix: ",\n",
                torn_bytes: zeros.then_some(len - at),
            }),
            Some(b'[') if start + before.len() as u64 == first as u64 + 1 => Some(Insertion {
                at: first as u64 + 1,
                prefix: "\n",
                torn_bytes: zeros.then_some(len - (first as u64 + 1)),
            }),
            _ => None,
        });
    }
    // Torn: find the last whole entry line (our format puts each entry on a
    // line of its own, starting in column 0), and make sure what follows it
    // is only the cut-off beginning of another entry.
    let mut line_end = tail.len();
    while line_end > 0 {
        let line_start = tail[..line_end]
            .iter()
            .rposition(|&c| c == b'\n')
            .map(|i| i + 1)
            .unwrap_or(0);
        if line_start == 0 && start > 0 {
            break; // the line may begin before the window
        }
        // Zeros a crash left right after the last entry are not part of it.
        let line = trim_end(&tail[line_start..line_end], |c| {
            is_ws(c) || c == b',' || c == 0
        });
        if line.first() == Some(&b'{') && line.last() == Some(&b'}') && parses_as_object(line) {
            let at = line_start + line.len();
            let rest = &tail[at..];
            let rest = trim_start(rest, |c| is_ws(c) || c == b',' || c == 0);
            let rest = trim_end(rest, |c| is_ws(c) || c == 0);
            if !line_form(&tail[..at], start == 0) {
                return Ok(None);
            }
            // Only a cut-off object is a torn tail: a whole one after the
            // last entry line (indented, say, by a hand edit) is an entry,
            // and cutting it would lose it. The full scan places it.
            if rest.is_empty()
                || (rest[0] == b'{' && is_json_prefix(rest) && !parses_as_object(rest))
            {
                return Ok(Some(Insertion {
                    at: start + at as u64,
                    prefix: ",\n",
                    torn_bytes: Some(len - start - at as u64),
                }));
            }
            return Ok(None);
        }
        if line_start == 0 {
            break;
        }
        line_end = line_start - 1;
    }
    Ok(None)
}

/// Scan the whole file, validating every entry: used only when the tail is
/// torn in an unusual way or was written by something else.
fn slow_insertion(path: &Path) -> Result<Insertion> {
    let end = scan::scan_file(path, |off, bytes| {
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
            .map(|_| ())
            .map_err(|e| {
                // The offset of the error itself, in the words every
                // reader of the log uses.
                let at = crate::error::json_error_offset(bytes, &e);
                super::log_error(path, Some(off + at), "invalid JSON in an entry").into()
            })
    })?;
    Ok(match end {
        End::Empty => Insertion {
            at: 0,
            prefix: "[\n",
            torn_bytes: None,
        },
        End::Closed { last_end, close } => {
            let empty = is_after_open_bracket(path, last_end)?;
            let _ = close;
            Insertion {
                at: last_end,
                prefix: if empty { "\n" } else { ",\n" },
                torn_bytes: None,
            }
        }
        End::Torn {
            last_end,
            torn_bytes,
        } => {
            let empty = is_after_open_bracket(path, last_end)?;
            Insertion {
                at: last_end,
                prefix: if empty { "\n" } else { ",\n" },
                torn_bytes: (torn_bytes > 0).then_some(torn_bytes),
            }
        }
    })
}

/// Whether the byte before `off` is the array's `[` (no entries yet).
fn is_after_open_bracket(path: &Path, off: u64) -> Result<bool> {
    let f = File::open(path).map_err(|e| Error::unreadable(path, e))?;
    let mut b = [0u8; 1];
    read_exact_at(&f, &mut b, off - 1).map_err(|e| Error::unreadable(path, e))?;
    Ok(b[0] == b'[')
}

/// Whether the tail window up to the end of the last entry is in
/// llmprobe's line form: the `[` line (when the window starts at the
/// file's start; else its first line, which may begin before the window,
/// is not looked at), then entry lines, each one whole JSON object,
/// followed by a comma but the last. Only then is the last line the
/// array's last entry: a line that parses as an object may also sit inside
/// a nested array or a pretty-printed entry, and appending after it would
/// put the new entry inside that. Anything else takes the full scan. This
/// catches damage near the end (a hand edit, a bad tool) without reading
/// the whole log; damage further back is reported by the readers, which
/// scan everything.
fn line_form(window: &[u8], starts_file: bool) -> bool {
    let mut lines = window.split(|&c| c == b'\n');
    if !starts_file {
        lines.next();
    }
    let mut lines = lines
        .map(|l| trim_start(trim_end(l, is_ws), is_ws))
        .filter(|l| !l.is_empty())
        .peekable();
    if starts_file && lines.next() != Some(&b"["[..]) {
        return false;
    }
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        let body = match (last, line.last()) {
            (true, Some(b'}')) => line,
            (false, Some(b',')) => trim_end(&line[..line.len() - 1], is_ws),
            _ => return false,
        };
        if !parses_as_object(body) {
            return false;
        }
    }
    true
}

fn parses_as_object(b: &[u8]) -> bool {
    b.first() == Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(b).is_ok()
}

fn trim_end(b: &[u8], f: impl Fn(u8) -> bool) -> &[u8] {
    let n = b.iter().rposition(|&c| !f(c)).map(|i| i + 1).unwrap_or(0);
    &b[..n]
}

fn trim_start(b: &[u8], f: impl Fn(u8) -> bool) -> &[u8] {
    let n = b.iter().position(|&c| !f(c)).unwrap_or(b.len());
    &b[n..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{FailureType, Outcome};

    fn entry(i: u64) -> Entry {
        let o = Outcome {
            failure: (i % 2 == 1).then_some(FailureType::Timeout),
            latency_ms: i,
            status: None,
            error: None,
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        Entry::new(
            format!("2026-11-30T00:00:{:02}Z", i % 60),
            "p",
            &format!("m{i}"),
            &o,
        )
    }

    fn count(path: &Path) -> (End, usize) {
        let mut n = 0;
        let end = scan::scan_file(path, |_, b| {
            serde_json::from_slice::<serde_json::Value>(b).unwrap();
            n += 1;
            Ok(())
        })
        .unwrap();
        (end, n)
    }

    /// One entry line as llmprobe writes it, for model `m`.
    fn line(m: &str) -> String {
        format!(
            r#"{{"ts":"2026-11-30T21:00:00Z","provider":"p","model":"{m}","ok":1,"latency_ms":1,"failure_type":""}}"#
        )
    }

    fn setup(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, DataLock) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("health_log.json");
        std::fs::write(&path, content).unwrap();
        let lock = DataLock::acquire(dir.path()).unwrap();
        (dir, path, lock)
    }

    #[test]
    fn creates_then_appends() {
        let (_d, path, lock) = setup(b"");
        append(&path, &[entry(0)], &lock).unwrap();
        append(&path, &[entry(1), entry(2)], &lock).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("[\n{\"ts\":"), "{text}");
        assert!(text.ends_with("}\n]\n"));
        assert_eq!(text.lines().count(), 5);
        let v: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[2]["model"], "m2");
    }

    #[test]
    fn appends_to_empty_and_pretty_arrays() {
        for (start, n) in [
            ("[]", 0),
            ("[\n]\n", 0),
            ("[\n  {\n    \"a\": 1\n  }\n]", 1),
            ("  \n", 0),
        ] {
            let (_d, path, lock) = setup(start.as_bytes());
            append(&path, &[entry(3)], &lock).unwrap();
            let v: Vec<serde_json::Value> =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                    .unwrap_or_else(|e| panic!("{start:?}: {e}"));
            assert_eq!(v.len(), n + 1, "{start:?}");
        }
    }

    #[test]
    fn repairs_every_torn_tail() {
        // Cut a log at every byte of its last append: the complete entries
        // survive and the next append leaves a valid array.
        let (_d, path, lock) = setup(b"");
        append(&path, &[entry(0), entry(1)], &lock).unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        append(&path, &[entry(2), entry(3)], &lock).unwrap();
        let full = std::fs::read(&path).unwrap();
        for cut in (before as usize - 3)..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let (_, complete) = count(&path);
            append(&path, &[entry(9)], &lock).unwrap();
            let v: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(v.len(), complete + 1, "cut at {cut}");
            assert!(v.len() >= 3, "cut at {cut} lost entries");
            assert_eq!(v.last().unwrap()["model"], "m9");
        }
    }

    #[test]
    fn repairs_every_zero_filled_torn_tail() {
        // Found by the property test (src/healthlog/props.rs): a crash can
        // leave zeros past the last write. Cut at every byte of the last
        // append, then zeros: the readers see every complete entry (they
        // took the zeros for damage), and the next append keeps them all
        // (it cut a complete entry that the zeros followed directly) and
        // says it cut something.
        let (_d, path, lock) = setup(b"");
        append(&path, &[entry(0), entry(1)], &lock).unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        append(&path, &[entry(2), entry(3)], &lock).unwrap();
        let full = std::fs::read(&path).unwrap();
        for cut in (before as usize - 3)..=full.len() {
            let mut bytes = full[..cut].to_vec();
            bytes.extend([0u8; 5]);
            std::fs::write(&path, &bytes).unwrap();
            let (end, complete) = count(&path);
            assert!(end.is_torn(), "cut at {cut}: {end:?}");
            assert!(complete >= 2, "cut at {cut}");
            let r = append(&path, &[entry(9)], &lock).unwrap();
            assert!(r.repaired_bytes.is_some(), "cut at {cut}");
            let v: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(v.len(), complete + 1, "cut at {cut}");
        }
        // Zeros followed by anything else are damage, as before.
        std::fs::write(&path, b"[\n{\"a\":1}\0\0,\n{\"b\":2}\n]\n").unwrap();
        let err = scan::scan_file(&path, |_, _| Ok(())).unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");
    }

    #[test]
    fn undo_takes_back_exactly_the_last_append() {
        let (_d, path, lock) = setup(b"");
        let first = append(&path, &[entry(0)], &lock).unwrap();
        assert_eq!(first.start, Some(0));
        let one = std::fs::read(&path).unwrap();
        let second = append(&path, &[entry(1), entry(2)], &lock).unwrap();
        undo(&path, &second, &lock).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), one);
        // From a torn tail: the append repaired it, the undo leaves it
        // repaired and closed.
        std::fs::write(&path, [&one[..one.len() - 3], b",\n{\"ts\":\"20"].concat()).unwrap();
        let third = append(&path, &[entry(3)], &lock).unwrap();
        assert!(third.repaired_bytes.is_some());
        undo(&path, &third, &lock).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), one);
        // The first append made the file: undone, it is empty, which
        // every reader takes for an empty log.
        undo(&path, &first, &lock).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        append(&path, &[entry(4)], &lock).unwrap();
        let (_, n) = count(&path);
        assert_eq!(n, 1);
        // Nothing appended, nothing to undo.
        let none = append(&path, &[], &lock).unwrap();
        undo(&path, &none, &lock).unwrap();
        assert_eq!(count(&path).1, 1);
    }

    /// Found by the `healthlog_append` fuzz target: a last line that
    /// parses as an object but sits inside a nested array (here, one left
    /// open) was taken for the array's last entry, and the new entry went
    /// inside the nested array, where no reader counts it.
    #[test]
    fn an_entry_line_inside_a_nested_array_is_not_the_last_entry() {
        for old in [
            format!("[\n{},\n[\n{}\n]\n", line("a"), line("b")),
            format!("[\n{},\n\"x\",[\n{}\n", line("a"), line("b")),
            format!("[\n{},\n[\n{},\n{}", line("a"), line("b"), &line("c")[..20]),
        ] {
            let (_d, path, lock) = setup(old.as_bytes());
            append(&path, &[entry(5)], &lock).unwrap();
            let v: Vec<serde_json::Value> =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let last = v.last().unwrap();
            assert_eq!(last["model"], "m5", "{old:?}: {v:?}");
            assert_eq!(v[0]["model"], "a", "{old:?}");
        }
    }

    /// Found by the `healthlog_append` fuzz target: an unclosed log whose
    /// last entry is whole but indented was taken for one with a torn tail
    /// after the entry line before it, and the append cut the whole entry.
    #[test]
    fn a_whole_indented_last_entry_of_an_unclosed_log_is_kept() {
        for old in [
            format!("[\n{},\n\t\t{}\n", line("a"), line("b")),
            format!("[\n{},\n  {}", line("a"), line("b")),
            format!("[\n{},\n  {},\n", line("a"), line("b")),
        ] {
            let (_d, path, lock) = setup(old.as_bytes());
            let r = append(&path, &[entry(5)], &lock).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let v: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
            let models: Vec<_> = v.iter().map(|x| x["model"].as_str().unwrap()).collect();
            assert_eq!(models, ["a", "b", "m5"], "{old:?} became {text:?}");
            assert!(text.starts_with(old.trim_end()), "{old:?} became {text:?}");
            assert_eq!(
                r.start,
                Some(old.trim_end().trim_end_matches(',').len() as u64)
            );
        }
    }

    #[test]
    fn torn_pretty_tail_uses_the_full_scan() {
        let (_d, path, lock) = setup(b"[\n  {\n    \"a\": 1\n  },\n  {\n    \"b\":");
        let r = append(&path, &[entry(4)], &lock).unwrap();
        assert!(r.repaired_bytes.is_some());
        let v: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn damaged_files_are_left_byte_identical() {
        for bad in [
            &b"{\"not\": \"an array\"}"[..],
            b"hello",
            b"[\n{\"a\":1}\n{\"b\":2}\n]\n",
            b"[\n{\"a\":1},\nGARBAGE\n",
            b"[\n{\"a\":1},\n{\"b\":2}\n]\nextra",
            b"[\n{\"a\":1},\n{\"b\": nope}\n]\n",
            b"[\n{\"a\":1},\n\x00\x00\x00garbage",
        ] {
            let (_d, path, lock) = setup(bad);
            let err = append(&path, &[entry(5)], &lock).unwrap_err();
            assert!(
                matches!(err, Error::Data(_)),
                "{:?}: {err}",
                String::from_utf8_lossy(bad)
            );
            assert!(err.to_string().contains("health_log.json"), "{err}");
            assert_eq!(std::fs::read(&path).unwrap(), bad);
        }
    }
}
