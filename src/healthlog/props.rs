//! Property tests of the health log's crash safety (docs/formats.md):
//! random interleavings of appends through the real [`append`] and crashes
//! in the middle of one (the append's text cut at a random byte, as a
//! crash leaves it, sometimes followed by the zeros a file system can leave
//! past the last write). After every step every reader must return exactly
//! the entries whose append wrote them completely: the forward reader
//! ([`read_all`]), the tail reader ([`read_backward`], which may instead
//! give the file up to the forward reader, never return something else)
//! and [`read_recent`], their shared policy. After every completed append
//! the file is a valid JSON array of exactly those entries.

use std::path::Path;

use proptest::prelude::*;
use serde_json::Value;

use super::append::append;
use super::read::{Record, Sink, read_all};
use super::recent::{Direction, Recent, read_recent};
use super::tail::{Tail, read_backward};
use crate::fsutil::DataLock;
use crate::outcome::{Entry, FailureType, SOURCE_REPROBE};

/// The fields an entry is generated from; its `latency_ms` (unique, so
/// that entries can be told apart) and `ts` are given when it is appended.
#[derive(Debug, Clone)]
struct Gen {
    model: &'static str,
    failure: Option<FailureType>,
    status: Option<u16>,
    error: Option<String>,
    reprobe: bool,
}

#[derive(Clone)]
enum Op {
    /// An append that completed.
    Append(Vec<Gen>),
    /// An append cut short by a crash: the file ends `cut` bytes into
    /// what the append wrote (before or inside its entries, or inside its
    /// closing `\n]\n`), then `zeros` NUL bytes.
    Crash {
        entries: Vec<Gen>,
        cut: u16,
        zeros: u8,
    },
}

/// On one line, so that a shrunk failure reads as a story.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Append(e) => write!(f, "append {} {:?}", e.len(), e),
            Op::Crash {
                entries,
                cut,
                zeros,
            } => write!(
                f,
                "crash appending {} (cut {cut} bytes in, modulo its length; then {zeros} zeros) {entries:?}",
                entries.len()
            ),
        }
    }
}

fn gen_entry() -> impl Strategy<Value = Gen> {
    (
        proptest::sample::select(vec!["m", "llama-3.1-8b", "q\"uote", "ünï/cödé"]),
        proptest::option::of(proptest::sample::select(
            <FailureType as strum::IntoEnumIterator>::iter().collect::<Vec<_>>(),
        )),
        proptest::option::weighted(0.3, 200u16..600),
        // Escapes, quotes, brackets, commas and newlines inside strings
        // must not look like the array's own structure.
        proptest::option::weighted(0.4, "[a-z ,\\]\\[{}\"\\\\\n\té]{0,16}"),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(model, failure, status, error, reprobe)| Gen {
            model,
            status: status.filter(|_| failure.is_some()),
            error: error.filter(|_| failure.is_some()),
            failure,
            reprobe,
        })
}

fn op() -> impl Strategy<Value = Op> {
    let entries = || proptest::collection::vec(gen_entry(), 1..4);
    prop_oneof![
        3 => entries().prop_map(Op::Append),
        2 => (entries(), any::<u16>(), prop_oneof![3 => Just(0u8), 1 => 1u8..20])
            .prop_map(|(entries, cut, zeros)| Op::Crash { entries, cut, zeros }),
    ]
}

/// What a reader saw of each entry: its latency (the entry's number) and
/// model.
#[derive(Default)]
struct Seen(Vec<(u64, String)>);

impl Sink for Seen {
    fn record(&mut self, r: &Record<'_>) {
        self.0.push((r.latency_ms as u64, r.model.to_string()));
    }
    fn merge(&mut self, later: Self) {
        self.0.extend(later.0);
    }
}

impl Recent for Seen {}

fn ids(entries: &[Entry]) -> Vec<(u64, String)> {
    entries
        .iter()
        .map(|e| (e.latency_ms, e.model.clone()))
        .collect()
}

/// Every reader returns exactly `want`, in order.
fn readers_agree(log: &Path, want: &[Entry], line_form: bool) -> Result<(), TestCaseError> {
    let want = ids(want);
    let (fwd, _) = read_all(log, Seen::default).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&fwd.0, &want, "forward read");
    let mut back = Vec::new();
    let tail = read_backward(log, |r| {
        back.push((r.latency_ms as u64, r.model.to_string()));
        true
    })
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    match tail {
        Tail::Done { skipped } => {
            prop_assert_eq!(skipped, 0);
            back.reverse();
            prop_assert_eq!(&back, &want, "tail read");
        }
        // A torn tail is the forward reader's to judge.
        Tail::NotLineForm => prop_assert!(!line_form, "the tail reader gave up on a clean log"),
    }
    let dir = std::cell::Cell::new(Direction::Backward);
    let (recent, _) = read_recent(log, None, |d| {
        dir.set(d);
        Seen::default()
    })
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut recent = recent.0;
    if dir.get() == Direction::Backward {
        recent.reverse();
    }
    prop_assert_eq!(&recent, &want, "read_recent");
    Ok(())
}

/// Whether `b` is empty or a closed array, but for whitespace.
fn closed_at(b: &[u8]) -> bool {
    let t: Vec<u8> = b
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    t.is_empty() || t.last() == Some(&b']')
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(super::LOG_FILE);
    let lock = DataLock::acquire(dir.path()).unwrap();
    // Every entry whose append wrote it completely, in order.
    let mut kept: Vec<Entry> = Vec::new();
    let mut n = 0u64;
    // Whether the last step left a torn tail, which the next append may
    // cut; and whether that tail holds part of an entry, which it must cut.
    let mut torn = false;
    let mut partial = false;
    for op in ops {
        let (gens, crash) = match op {
            Op::Append(g) => (g, None),
            Op::Crash {
                entries,
                cut,
                zeros,
            } => (entries, Some((cut, *zeros))),
        };
        let entries: Vec<Entry> = gens
            .iter()
            .map(|g| {
                n += 1;
                Entry {
                    ts: crate::time::format_ts(
                        chrono::DateTime::from_timestamp(1_795_000_000 + n as i64 * 60, 0).unwrap(),
                    ),
                    provider: "p".into(),
                    model: g.model.into(),
                    ok: g.failure.is_none() as u8,
                    latency_ms: n,
                    failure_type: g.failure.map_or("", FailureType::as_str),
                    ttft_ms: (n.is_multiple_of(3) && g.failure.is_none()).then_some(n / 2),
                    probe: None,
                    output_tokens: None,
                    tokens_per_s: None,
                    status: g.status,
                    error: g.error.clone(),
                    source: g.reprobe.then_some(SOURCE_REPROBE),
                }
            })
            .collect();
        let before = std::fs::read(&log).unwrap_or_default();
        let report = append(&log, &entries, &lock).map_err(|e| {
            TestCaseError::fail(format!(
                "append after {:?}: {e}",
                String::from_utf8_lossy(&before)
            ))
        })?;
        // The append cut a torn tail only when there was one, and always
        // when it held part of an entry.
        prop_assert!(torn || report.repaired_bytes.is_none(), "{:?}", report);
        prop_assert!(!partial || report.repaired_bytes.is_some(), "{:?}", report);
        partial = false;
        let start = report.start.expect("entries were appended");
        let bytes = std::fs::read(&log).unwrap();
        match crash {
            None => {
                kept.extend(entries);
                // A valid JSON array of every completed entry.
                let v: Vec<Value> = serde_json::from_slice(&bytes).map_err(|e| {
                    TestCaseError::fail(format!("{e}: {:?}", String::from_utf8_lossy(&bytes)))
                })?;
                let want: Vec<Value> = kept
                    .iter()
                    .map(|e| serde_json::to_value(e).unwrap())
                    .collect();
                prop_assert_eq!(v, want);
                torn = false;
                readers_agree(&log, &kept, true)?;
            }
            Some((cut, zeros)) => {
                let at = start + u64::from(*cut) % (bytes.len() as u64 - start);
                // What survives of the append: the entries it wrote
                // completely before the cut.
                let text = &bytes[start as usize..];
                for e in entries {
                    let json = serde_json::to_string(&e).unwrap();
                    let pos = text
                        .windows(json.len())
                        .position(|w| w == json.as_bytes())
                        .expect("the entry was written");
                    let (from, to) = (start + pos as u64, start + (pos + json.len()) as u64);
                    if to <= at {
                        kept.push(e);
                    }
                    partial |= from < at && at < to;
                }
                let mut cut_bytes = bytes[..at as usize].to_vec();
                // (A file of nothing but zeros is not taken for a log.)
                let zeros = if at == 0 { 0 } else { zeros };
                partial |= zeros > 0;
                cut_bytes.extend(std::iter::repeat_n(0u8, usize::from(zeros)));
                std::fs::write(&log, &cut_bytes).unwrap();
                // Torn, unless the cut only took the last newline (or left
                // the new file empty). A cut inside an entry is torn even
                // when it falls just after a `]` in one of its strings.
                let closed = closed_at(&bytes[..at as usize]);
                torn = partial || !closed || zeros > 0;
                readers_agree(&log, &kept, false)?;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn readers_return_exactly_the_completed_entries(
        ops in proptest::collection::vec(op(), 1..12),
    ) {
        run(&ops)?;
    }
}

/// The one zero-filled tail the readers and the appender both take for a
/// crash's: zeros after the closing `]` (rare for the generator to hit).
#[test]
fn zeros_after_a_closed_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(super::LOG_FILE);
    let lock = DataLock::acquire(dir.path()).unwrap();
    let e = |n: u64| Entry {
        ts: "2026-11-30T00:00:00Z".into(),
        provider: "p".into(),
        model: "m".into(),
        ok: 1,
        latency_ms: n,
        failure_type: "",
        ttft_ms: None,
        probe: None,
        output_tokens: None,
        tokens_per_s: None,
        status: None,
        error: None,
        source: None,
    };
    append(&log, &[e(1), e(2)], &lock).unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend([0u8; 7]);
    std::fs::write(&log, &bytes).unwrap();
    readers_agree(&log, &[e(1), e(2)], false).unwrap();
    let report = append(&log, &[e(3)], &lock).unwrap();
    assert_eq!(report.repaired_bytes, Some(3 + 7), "{report:?}");
    let v: Vec<Value> = serde_json::from_slice(&std::fs::read(&log).unwrap()).unwrap();
    assert_eq!(v.len(), 3);
}
