//! Reading the health log forward, fast, in flat memory.
//!
//! Readers need only a few fields of each entry: when, which provider and
//! model, how many probes it stands for, how many passed, the latency and
//! the failure class. [`Record`] is that view, and it means the same thing
//! for all three kinds of entry docs/formats.md describes (new, legacy averaged,
//! legacy per-sample). The capability log (`stats/capability_log.json`) has
//! the same format plus `probe`, and is read by the same code.
//!
//! Entries written by llmprobe have one fixed compact shape, so a hand-rolled
//! byte matcher ([`fast`]) extracts the fields straight from the read buffer
//! with no allocation. Anything it does not recognise (pretty-printed legacy
//! entries, escapes, other key orders, unknown fields) falls back to serde on
//! that one element, so the fast path changes speed, never meaning.
//!
//! The walk is [`super::scan`]'s, with a per-element callback that parses
//! records, so it reports the end the same way ([`End`]): a torn tail is
//! tolerated, any other damage is a
//! [`DataError`](crate::error::DataError) naming the byte offset. A large file is split in two at an
//! entry boundary and read on two threads; the first thread verifies that it
//! reaches exactly that boundary in the expected state, and if it does not,
//! the second half's work is thrown away and the first thread reads on.
//! Both threads read the one `File` by offset ([`crate::fsutil::read_at`]),
//! never through its shared cursor.

use std::fs::File;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::scan::{self, Elements, End, Resume, State, Stop};
use crate::error::json_error_offset;
use crate::error::{Error, Result};
use crate::fsutil::read_exact_at;
use crate::time::parse_ts;

/// What one entry says, whatever its format.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record<'a> {
    /// Unix seconds, from `ts` or, in legacy entries, `timestamp`.
    pub ts: i64,
    pub provider: &'a str,
    pub model: &'a str,
    /// How many probes the entry stands for: 1, `sample_count` for a legacy
    /// averaged entry, 0 for a `disabled_skip` row (not a probe at all).
    pub samples: f64,
    /// How many of those passed (`uptime × sample_count` when averaged).
    pub passed: f64,
    pub latency_ms: f64,
    /// `""` when the probe passed; else the `failure_type`, or the legacy
    /// `status` (`error`, `degraded`, `averaged`).
    pub failure: &'a str,
    /// The HTTP status, when the entry has one.
    pub http_status: Option<u16>,
    /// Which capability a capability probe tested (`tools`, `json`,
    /// `vision`: the capability log's `probe`); `""` for a basic probe, as
    /// every health-log entry is.
    pub probe: &'a str,
    /// Who sent the probe (`reprobe`), `""` for a scheduled `check`.
    pub source: &'a str,
    /// Time to the first content token of a streamed probe, in ms; `None`
    /// for a probe read whole and in older entries.
    pub ttft_ms: Option<f64>,
    /// A speed probe's output tokens per second (capability log only).
    pub tokens_per_s: Option<f64>,
}

impl Record<'_> {
    /// A re-probe of a paused model (`"source": "reprobe"`): a real
    /// sample, but no sign that the scheduled job runs.
    pub fn is_reprobe(&self) -> bool {
        self.source == crate::outcome::SOURCE_REPROBE
    }

    /// Whether the entry counts as probes at all.
    pub fn is_sample(&self) -> bool {
        self.samples > 0.0
    }

    /// A probe that failed with an error: no response, or an error
    /// response. A wrong answer (legacy: `degraded`) means the provider did
    /// answer, so it is a failure but not an error.
    pub fn is_error(&self) -> bool {
        self.is_sample()
            && self.passed <= 0.0
            && !matches!(self.failure, "wrong_answer" | "degraded")
    }

    /// A short human description of the result: `ok`, `timeout (504)`,
    /// `averaged 92% of 13`.
    pub fn result_label(&self) -> String {
        if !self.is_sample() {
            return if self.failure.is_empty() {
                "not probed".into()
            } else {
                format!("not probed ({})", self.failure)
            };
        }
        if self.failure == "averaged" {
            return format!(
                "averaged {} of {}",
                crate::format::fmt_pct(self.passed / self.samples),
                self.samples
            );
        }
        if self.passed >= self.samples {
            return "ok".into();
        }
        let what = if self.failure.is_empty() {
            "failed"
        } else {
            self.failure
        };
        match self.http_status {
            Some(s) => format!("{what} ({s})"),
            None => what.to_string(),
        }
    }
}

/// A map with a fast, non-cryptographic hash (FxHash) for the per-model
/// maps the readers update once per entry: SipHash would cost more than the
/// parse.
pub type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// Something that consumes records. Each half of a split file gets its own
/// sink; [`Sink::merge`] folds the later half into the earlier one.
pub trait Sink: Send {
    fn record(&mut self, r: &Record<'_>);
    fn merge(&mut self, later: Self)
    where
        Self: Sized;
}

/// How a forward read went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub end: End,
    /// Top-level elements seen (records and skipped ones).
    pub elements: u64,
    /// Elements that are valid JSON but not usable entries: no provider, no
    /// parseable timestamp, or not an object. They are ignored, not errors.
    pub skipped: u64,
}

/// Files smaller than this are read on one thread: a second one would cost
/// more to start than it saves.
const PARALLEL_MIN: u64 = 8 << 20;

/// Read every entry of the log at `path` into a sink made by `make`. A
/// missing file is an empty log.
pub fn read_all<S: Sink>(path: &Path, make: impl Fn() -> S) -> Result<(S, Summary)> {
    read_all_with(path, make, true)
}

/// [`read_all`] with the two-thread split switched on or off (tests compare
/// the two).
pub fn read_all_with<S: Sink>(
    path: &Path,
    make: impl Fn() -> S,
    parallel: bool,
) -> Result<(S, Summary)> {
    let Some(file) = open(path)? else {
        return Ok((make(), empty_summary()));
    };
    let len = file
        .metadata()
        .map_err(|e| Error::unreadable(path, e))?
        .len();
    let split = if parallel && len >= PARALLEL_MIN && threads() > 1 {
        find_split(path, &file, len)?
    } else {
        None
    };
    let mut first = make();
    let Some(at) = split else {
        let w = walk(path, &file, Resume::start(), None, |r| {
            first.record(r);
            true
        })?;
        return Ok((first, w.summary()));
    };
    let mut second = make();
    let (w1, w2) = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            let resume = Resume {
                off: at,
                state: State::Element,
                last_end: at,
            };
            walk(path, &file, resume, None, |r| {
                second.record(r);
                true
            })
        });
        let w1 = walk(path, &file, Resume::start(), Some(at), |r| {
            first.record(r);
            true
        });
        (w1, h.join().expect("reader thread panicked"))
    });
    let w1 = w1?;
    match w1.stop {
        Stop::Limit(resume) if resume.off == at && resume.state == State::Element => {
            // The split was a true entry boundary: the second half's result,
            // including its error if any, is exactly what one thread would
            // have found.
            let mut w2 = w2?;
            if w2.elements == 0
                && let End::Torn { .. } = w2.end
            {
                let eof = match w2.end {
                    End::Torn {
                        last_end,
                        torn_bytes,
                    } => last_end + torn_bytes,
                    _ => unreachable!(),
                };
                w2.end = End::Torn {
                    last_end: resume.last_end,
                    torn_bytes: eof - resume.last_end,
                };
            }
            first.merge(second);
            Ok((
                first,
                Summary {
                    end: w2.end,
                    elements: w1.elements + w2.elements,
                    skipped: w1.skipped + w2.skipped,
                },
            ))
        }
        Stop::Limit(resume) => {
            // Not a boundary after all (a nested object at column 0): ignore
            // the second half and read on from where the first stopped.
            drop(second);
            let rest = walk(path, &file, resume, None, |r| {
                first.record(r);
                true
            })?;
            Ok((
                first,
                Summary {
                    end: rest.end,
                    elements: w1.elements + rest.elements,
                    skipped: w1.skipped + rest.skipped,
                },
            ))
        }
        Stop::Eof | Stop::Early => Ok((first, w1.summary())),
    }
}

/// The timestamp of the first usable entry, or `None` for an empty log.
pub fn first_ts(path: &Path) -> Result<Option<i64>> {
    let Some(file) = open(path)? else {
        return Ok(None);
    };
    let mut ts = None;
    walk(path, &file, Resume::start(), None, |r| {
        ts = Some(r.ts);
        false
    })?;
    Ok(ts)
}

fn empty_summary() -> Summary {
    Summary {
        end: End::Empty,
        elements: 0,
        skipped: 0,
    }
}

fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn open(path: &Path) -> Result<Option<File>> {
    match File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::unreadable(path, e)),
    }
}

/// A candidate split point near the middle: the `{` of `,\n{`, the shape
/// llmprobe appends in. Only a candidate: [`read_all`] verifies it.
fn find_split(path: &Path, file: &File, len: u64) -> Result<Option<u64>> {
    let from = len / 2;
    let n = (len - from).min(1 << 20) as usize;
    let mut buf = vec![0u8; n];
    match read_exact_at(file, &mut buf, from) {
        Ok(()) => {}
        // Shorter than it was a moment ago: an append is cutting its `]`
        // right now. Read it in one pass instead.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::unreadable(path, e)),
    }
    Ok(buf
        .windows(3)
        .position(|w| w == b",\n{")
        .map(|i| from + i as u64 + 2))
}

/// The one walker ([`scan::walk`]) over records: the fast matcher first,
/// serde on anything it declines, and a count of skipped elements. From
/// `from`, to the end of the file, to the first element starting at or
/// after `limit`, or until `each` returns false.
fn walk(
    path: &Path,
    file: &File,
    from: Resume,
    limit: Option<u64>,
    each: impl FnMut(&Record<'_>) -> bool,
) -> Result<Walked> {
    let mut el = Records {
        path,
        each,
        skipped: 0,
    };
    let w = scan::walk(path, &mut &*file, from, limit, &mut el)?;
    Ok(Walked {
        stop: w.stop,
        end: w.end,
        elements: w.elements,
        skipped: el.skipped,
    })
}

struct Records<'p, F> {
    path: &'p Path,
    each: F,
    skipped: u64,
}

impl<F: FnMut(&Record<'_>) -> bool> Elements for Records<'_, F> {
    #[inline]
    fn prefix(&mut self, b: &[u8]) -> Option<(usize, bool)> {
        if b.first() != Some(&b'{') {
            return None;
        }
        let (r, n) = fast(b)?;
        Some((n, (self.each)(&r)))
    }

    fn whole(&mut self, off: u64, b: &[u8]) -> Result<bool> {
        slow_element(b, |p| match p {
            Parsed::Record(r) => Ok((self.each)(&r)),
            Parsed::Skipped => {
                self.skipped += 1;
                Ok(true)
            }
            Parsed::Invalid(at) => {
                Err(super::log_error(self.path, Some(off + at), "invalid JSON in an entry").into())
            }
        })
    }
}

#[derive(Debug)]
struct Walked {
    stop: Stop,
    end: End,
    elements: u64,
    skipped: u64,
}

impl Walked {
    fn summary(self) -> Summary {
        Summary {
            end: self.end,
            elements: self.elements,
            skipped: self.skipped,
        }
    }
}

/// The fields a slow-path entry may have; everything else is ignored.
/// `Value` rather than typed fields, so that an entry with an odd type is
/// skipped rather than mistaken for damage.
#[derive(Deserialize)]
struct Loose {
    ts: Option<Value>,
    timestamp: Option<Value>,
    provider: Option<Value>,
    model: Option<Value>,
    ok: Option<Value>,
    latency_ms: Option<Value>,
    failure_type: Option<Value>,
    status: Option<Value>,
    uptime: Option<Value>,
    sample_count: Option<Value>,
    probe: Option<Value>,
    source: Option<Value>,
    ttft_ms: Option<Value>,
    tokens_per_s: Option<Value>,
}

/// What one complete element turned out to be.
pub(crate) enum Parsed<'a> {
    Record(Record<'a>),
    /// Valid JSON, but not a usable entry.
    Skipped,
    /// Not valid JSON; the offset is within the element.
    Invalid(u64),
}

/// Parse one complete element with serde and call `each` on its record.
pub(crate) fn slow_element<R>(bytes: &[u8], each: impl FnOnce(Parsed<'_>) -> R) -> R {
    match serde_json::from_slice::<Loose>(bytes) {
        Ok(l) => match interpret(&l) {
            Some(r) => each(Parsed::Record(r)),
            None => each(Parsed::Skipped),
        },
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            // Valid JSON of the wrong shape (not an object, a field of an odd
            // type), unless the syntax breaks later on.
            match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => each(Parsed::Skipped),
                Err(e) => each(Parsed::Invalid(json_error_offset(bytes, &e))),
            }
        }
        Err(e) => each(Parsed::Invalid(json_error_offset(bytes, &e))),
    }
}

fn num(v: &Option<Value>) -> Option<f64> {
    match v {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::Bool(b)) => Some(*b as u8 as f64),
        _ => None,
    }
}

fn text(v: &Option<Value>) -> Option<&str> {
    match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// docs/formats.md's reading of an entry, any format. `None` when it lacks a
/// provider, a parseable timestamp, or any sign of a result.
fn interpret(l: &Loose) -> Option<Record<'_>> {
    let provider = text(&l.provider).filter(|p| !p.is_empty())?;
    let model = match &l.model {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s,
        Some(_) => return None,
    };
    let ts = parse_ts(text(&l.ts).or(text(&l.timestamp))?)?;
    let latency_ms = num(&l.latency_ms).unwrap_or(0.0).max(0.0);
    let failure_type = text(&l.failure_type).unwrap_or("");
    let skip = failure_type == "disabled_skip";
    let http_status = match &l.status {
        Some(Value::Number(n)) => n.as_u64().and_then(|v| u16::try_from(v).ok()),
        _ => None,
    };
    let mut r = Record {
        ts,
        provider,
        model,
        samples: 1.0,
        passed: 0.0,
        latency_ms,
        failure: "",
        http_status,
        probe: text(&l.probe).unwrap_or(""),
        source: text(&l.source).unwrap_or(""),
        ttft_ms: num(&l.ttft_ms).filter(|v| *v >= 0.0),
        tokens_per_s: num(&l.tokens_per_s).filter(|v| *v >= 0.0),
    };
    if l.ok.is_some() {
        r.passed = if num(&l.ok)? >= 1.0 { 1.0 } else { 0.0 };
        if r.passed == 0.0 {
            r.failure = failure_type;
        }
    } else {
        let status = text(&l.status)?;
        if status == "averaged" {
            let n = num(&l.sample_count)?.max(0.0);
            let up = num(&l.uptime)?.clamp(0.0, 1.0);
            r.samples = n;
            r.passed = up * n;
            r.failure = "averaged";
        } else if status == "ok" {
            r.passed = 1.0;
        } else {
            r.failure = status;
        }
    }
    if skip {
        r.samples = 0.0;
        r.passed = 0.0;
        r.failure = "disabled_skip";
    }
    Some(r)
}

/// The fast path: an entry exactly as llmprobe writes it,
/// `{"ts":"…","provider":"…","model":"…","ok":1,"latency_ms":312,"failure_type":""`
/// optionally followed by `,"ttft_ms":180` (streamed probes), `,"probe":"tools"` (capability log entries only),
/// `,"status":429`, `,"error":"…"` and `,"source":"reprobe"`, then `}`. A health-log entry pays
/// one failed compare for the `probe` it never has.
/// Returns the record and the element's length, or `None` when the element
/// is anything else (or runs past the end of `b`); the caller then takes
/// the slow path, which decides.
#[inline]
pub(crate) fn fast(b: &[u8]) -> Option<(Record<'_>, usize)> {
    let mut p = 0usize;
    lit(b, &mut p, b"{\"ts\":\"")?;
    let ts = string(b, &mut p)?;
    lit(b, &mut p, b",\"provider\":\"")?;
    let provider = string(b, &mut p)?;
    lit(b, &mut p, b",\"model\":\"")?;
    let model = string(b, &mut p)?;
    lit(b, &mut p, b",\"ok\":")?;
    let ok = match b.get(p)? {
        b'0' => 0.0,
        b'1' => 1.0,
        _ => return None,
    };
    p += 1;
    lit(b, &mut p, b",\"latency_ms\":")?;
    let latency = uint(b, &mut p)?;
    lit(b, &mut p, b",\"failure_type\":\"")?;
    let failure = string(b, &mut p)?;
    let mut ttft_ms = None;
    if lit(b, &mut p, b",\"ttft_ms\":").is_some() {
        ttft_ms = Some(uint(b, &mut p)? as f64);
    }
    let mut probe = "";
    if lit(b, &mut p, b",\"probe\":\"").is_some() {
        probe = string(b, &mut p)?;
    }
    let mut http_status = None;
    if lit(b, &mut p, b",\"status\":").is_some() {
        http_status = Some(u16::try_from(uint(b, &mut p)?).ok()?);
    }
    if lit(b, &mut p, b",\"error\":\"").is_some() {
        string(b, &mut p)?;
    }
    let mut source = "";
    if lit(b, &mut p, b",\"source\":\"").is_some() {
        source = string(b, &mut p)?;
    }
    if *b.get(p)? != b'}' {
        return None;
    }
    let ts = hour_cached_ts(ts)?;
    let mut r = Record {
        ts,
        provider,
        model,
        samples: 1.0,
        passed: ok,
        latency_ms: latency as f64,
        failure: if ok == 1.0 { "" } else { failure },
        http_status,
        probe,
        source,
        ttft_ms,
        tokens_per_s: None,
    };
    if failure == "disabled_skip" {
        r.samples = 0.0;
        r.passed = 0.0;
        r.failure = "disabled_skip";
    }
    if provider.is_empty() {
        return None;
    }
    Some((r, p + 1))
}

thread_local! {
    /// The last `YYYY-MM-DDTHH` seen on this thread and its Unix time.
    static HOUR: std::cell::Cell<([u8; 13], i64)> = const { std::cell::Cell::new(([0; 13], i64::MIN)) };
}

/// [`parse_ts`] for `YYYY-MM-DDTHH:MM:SSZ`, with the date and hour cached:
/// an hourly check writes every entry of a run within the same hour, and
/// the calendar arithmetic was a tenth of a rollup.
#[inline]
fn hour_cached_ts(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let two = |i: usize| -> Option<i64> {
        let (x, y) = (b[i], b[i + 1]);
        (x.is_ascii_digit() && y.is_ascii_digit()).then(|| ((x - b'0') * 10 + (y - b'0')) as i64)
    };
    if b.len() != 20 || b[13] != b':' || b[16] != b':' || b[19] != b'Z' {
        return parse_ts(s);
    }
    let (min, sec) = (two(14)?, two(17)?);
    if min > 59 || sec > 59 {
        // Invalid, or a leap second: parse_ts decides, as for any odd form.
        return parse_ts(s);
    }
    let key: [u8; 13] = b[..13].try_into().ok()?;
    let (k, base) = HOUR.get();
    if k == key && base != i64::MIN {
        return Some(base + min * 60 + sec);
    }
    let mut top = [0u8; 20];
    top[..13].copy_from_slice(&key);
    top[13..].copy_from_slice(b":00:00Z");
    let base = parse_ts(std::str::from_utf8(&top).ok()?)?;
    HOUR.set((key, base));
    Some(base + min * 60 + sec)
}

#[inline]
fn lit<const N: usize>(b: &[u8], p: &mut usize, want: &[u8; N]) -> Option<()> {
    // A fixed-size array compare inlines to a few word compares; a slice
    // compare would call memcmp for every key of every entry.
    let got: &[u8; N] = b.get(*p..*p + N)?.try_into().ok()?;
    if got == want {
        *p += N;
        Some(())
    } else {
        None
    }
}

/// A string body after its opening quote, up to and past the closing one.
/// Escapes and control characters send the element to the slow path; UTF-8
/// is checked as serde would.
#[inline]
fn string<'a>(b: &'a [u8], p: &mut usize) -> Option<&'a str> {
    let start = *p;
    let mut i = start;
    let mut ascii = true;
    loop {
        let c = *b.get(i)?;
        if c == b'"' {
            break;
        }
        if c == b'\\' || c < 0x20 {
            return None;
        }
        ascii &= c < 0x80;
        i += 1;
    }
    *p = i + 1;
    let s = &b[start..i];
    if ascii {
        // SAFETY: every byte is below 0x80, and ASCII is valid UTF-8. This
        // skips a UTF-8 validation call per field, a tenth of a rollup.
        Some(unsafe { std::str::from_utf8_unchecked(s) })
    } else {
        std::str::from_utf8(s).ok()
    }
}

/// A JSON unsigned integer (no sign, fraction, exponent or leading zero).
#[inline]
fn uint(b: &[u8], p: &mut usize) -> Option<u64> {
    let start = *p;
    let mut v: u64 = 0;
    while let Some(&c) = b.get(*p) {
        if !c.is_ascii_digit() {
            break;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
        *p += 1;
    }
    let n = *p - start;
    if n == 0 || (n > 1 && b[start] == b'0') || *p - start > 18 {
        return None;
    }
    // A fraction or exponent makes it a float: slow path.
    match b.get(*p)? {
        b'.' | b'e' | b'E' => None,
        _ => Some(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect(Vec<String>);

    impl Sink for Collect {
        fn record(&mut self, r: &Record<'_>) {
            self.0.push(format!(
                "{} {} {} {}/{} {} {}",
                r.ts, r.provider, r.model, r.passed, r.samples, r.latency_ms, r.failure
            ));
        }
        fn merge(&mut self, later: Self) {
            self.0.extend(later.0);
        }
    }

    fn read_str(s: &str) -> Result<(Vec<String>, Summary)> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.json");
        std::fs::write(&p, s).unwrap();
        read_all_with(&p, Collect::default, false).map(|(c, s)| (c.0, s))
    }

    const NEW: &str = r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":1,"latency_ms":312,"failure_type":""}"#;

    #[test]
    fn fast_path_matches_the_slow_path() {
        let lines = [
            NEW,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":0,"latency_ms":0,"failure_type":"timeout","status":504,"error":"gateway"}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":0,"latency_ms":0,"failure_type":"disabled_skip"}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"grøq","model":"m","ok":0,"latency_ms":7,"failure_type":"error","error":"x"}"#,
            // Capability log entries, as check writes them.
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":1,"latency_ms":412,"failure_type":"","probe":"tools"}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":0,"latency_ms":90,"failure_type":"wrong_answer","probe":"json","status":200,"error":"not JSON"}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":0,"latency_ms":90,"failure_type":"rate_limit","status":429,"error":"slow down","source":"reprobe"}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":1,"latency_ms":90,"failure_type":"","source":"reprobe"}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"groq","model":"m","ok":1,"latency_ms":900,"failure_type":"","ttft_ms":212}"#,
        ];
        for l in lines {
            let (fast_r, n) = fast(l.as_bytes()).expect(l);
            assert_eq!(n, l.len());
            let slow_r = slow_element(l.as_bytes(), |p| match p {
                Parsed::Record(r) => format!("{r:?}"),
                _ => "none".into(),
            });
            assert_eq!(format!("{fast_r:?}"), slow_r, "{l}");
            assert_eq!(fast_r.probe.is_empty(), !l.contains("\"probe\""), "{l}");
            assert_eq!(fast_r.ttft_ms.is_some(), l.contains("\"ttft_ms\""), "{l}");
            assert_eq!(
                fast_r.is_reprobe(),
                l.contains("\"source\":\"reprobe\""),
                "{l}"
            );
        }
        // Shapes the fast path declines; the slow path reads them.
        for l in [
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"g\"q","model":"m","ok":1,"latency_ms":3,"failure_type":""}"#,
            r#"{"provider":"g","ts":"2026-11-30T21:00:00Z","model":"m","ok":1,"latency_ms":3,"failure_type":""}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"g","model":"m","ok":1,"latency_ms":3.5,"failure_type":""}"#,
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"g","model":"m","ok":1,"latency_ms":3,"failure_type":"","extra":1}"#,
            r#"{"ts": "2026-11-30T21:00:00Z","provider":"g","model":"m","ok":1,"latency_ms":3,"failure_type":""}"#,
            // A speed probe's figures: the capability log is small.
            r#"{"ts":"2026-11-30T21:00:00Z","provider":"g","model":"m","ok":1,"latency_ms":900,"failure_type":"","ttft_ms":212,"probe":"speed","output_tokens":120,"tokens_per_s":171.4}"#,
        ] {
            assert!(fast(l.as_bytes()).is_none(), "{l}");
            let (got, sum) = read_str(&format!("[\n{l}\n]\n")).unwrap();
            assert_eq!(got.len(), 1, "{l}");
            assert_eq!(sum.skipped, 0);
        }
    }

    #[test]
    fn the_hour_cache_agrees_with_parse_ts() {
        for s in [
            "2026-11-30T21:00:00Z",
            "2026-11-30T21:59:59Z",
            "2026-11-30T21:07:03Z",
            "2026-12-01T00:00:00Z",
            "2024-02-29T23:59:60Z",
            "2026-11-30T21:61:00Z",
            "2026-11-30T21:0a:00Z",
            "2026-11-30T21:00:00+01:00",
            "2026-13-30T21:00:00Z",
        ] {
            assert_eq!(hour_cached_ts(s), parse_ts(s), "{s}");
            assert_eq!(hour_cached_ts(s), parse_ts(s), "{s} (cached)");
        }
    }

    proptest::proptest! {
        /// The cache must not change meaning either, whatever the order of
        /// the timestamps it sees (the cache key is the date and hour).
        #[test]
        fn the_hour_cache_is_parse_ts_on_any_sequence(
            ts in proptest::collection::vec(
                (
                    proptest::sample::select(vec![1900u32, 2000, 2024, 2026, 2100]),
                    1..=12u32, 27..=32u32, 22..=24u32, 58..=60u32, 58..=61u32,
                ),
                1..20,
            )
        ) {
            for (y, mo, d, h, mi, sec) in ts {
                let s = format!("{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}Z");
                proptest::prop_assert_eq!(hour_cached_ts(&s), parse_ts(&s), "{}", s);
            }
        }
    }

    #[test]
    fn legacy_entries_mean_what_design_says() {
        let log = r#"[
  {"timestamp": "2026-04-18T00:00:00Z", "provider": "groq", "model": "a", "status": "averaged",
   "latency_ms": 214.5, "quality": 1.0, "uptime": 0.5, "sample_count": 12, "rollup": "24h"},
  {"timestamp": "2026-05-02T05:07:10Z", "provider": "openai", "model": "b", "status": "degraded",
   "latency_ms": 1848, "quality": 0.0, "response": "5"},
  {"timestamp": "2026-05-02T05:07:11Z", "provider": "openai", "model": "b", "status": "ok", "latency_ms": 10},
  {"quality": 1.0, "response": "4"},
  7
]"#;
        let (got, sum) = read_str(log).unwrap();
        assert_eq!(
            got,
            vec![
                "1776470400 groq a 6/12 214.5 averaged",
                "1777698430 openai b 0/1 1848 degraded",
                "1777698431 openai b 1/1 10 ",
            ]
        );
        assert_eq!(sum.skipped, 2);
        assert_eq!(sum.elements, 5);
    }

    #[test]
    fn ends_and_errors_agree_with_the_scanner() {
        let cases = [
            format!("[\n{NEW},\n{NEW}\n]\n"),
            format!("[\n{NEW},\n{NEW}"),
            format!("[\n{NEW},\n{}", &NEW[..40]),
            format!("[\n{NEW},\n"),
            "[]".to_string(),
            "  \n".to_string(),
            String::new(),
            NEW.to_string(),
            format!("[{NEW} {NEW}]"),
            format!("[{NEW}] x"),
            format!("[{NEW},]"),
            format!("[{NEW},\n{{\"b\": nul\u{0}l"),
            "[1, \"x\", true]".to_string(),
            "[1, 2".to_string(),
        ];
        for s in &cases {
            let want = scan::scan_reader(Path::new("log.json"), s.as_bytes(), |_, _| Ok(()));
            let got = read_str(s).map(|(_, sum)| sum.end);
            match (want, got) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{s}"),
                (Err(a), Err(b)) => {
                    let off = |e: Error| {
                        e.to_string()
                            .split("byte offset ")
                            .nth(1)
                            .map(|x| x.split(')').next().unwrap().to_string())
                    };
                    assert_eq!(off(a), off(b), "{s}");
                }
                (a, b) => panic!("{s}: scanner {a:?}, reader {b:?}"),
            }
        }
    }

    #[test]
    fn invalid_json_inside_an_entry_is_damage() {
        let s = format!("[\n{NEW},\n{{\"ts\": tru}},\n{NEW}\n]\n");
        let err = read_str(&s).unwrap_err();
        assert!(matches!(err, Error::Data(_)));
        // `[\n`, the first entry, `,\n`, then serde stops at the `}` after `tru`.
        let at = 2 + NEW.len() + 2 + 10;
        assert!(
            err.to_string().contains(&format!("byte offset {at}")),
            "{err}"
        );
    }

    #[test]
    fn two_threads_give_the_same_result_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.json");
        let mut s = String::from("[\n");
        let n = (PARALLEL_MIN as usize / NEW.len()) + 1000;
        for i in 0..n {
            if i > 0 {
                s.push_str(",\n");
            }
            if i % 1000 == 7 {
                // A nested object at column 0 right where a split may land.
                s.push_str("{\"ts\":\"2026-11-30T21:00:00Z\",\"provider\":\"x\",\"model\":\"m\",\"ok\":1,\"latency_ms\":1,\"failure_type\":\"\",\"n\":\n{\"a\":1}}");
            } else {
                s.push_str(&NEW.replace("312", &(i % 977).to_string()));
            }
        }
        s.push_str("\n]\n");
        std::fs::write(&p, &s).unwrap();
        let (a, sa) = read_all_with(&p, Collect::default, false).unwrap();
        let (b, sb) = read_all_with(&p, Collect::default, true).unwrap();
        assert_eq!(a.0.len(), n);
        assert_eq!(sa, sb);
        assert_eq!(a.0, b.0);
        // Torn in the second half.
        std::fs::write(&p, &s[..s.len() - 30]).unwrap();
        let (a, sa) = read_all_with(&p, Collect::default, false).unwrap();
        let (b, sb) = read_all_with(&p, Collect::default, true).unwrap();
        assert!(sa.end.is_torn());
        assert_eq!((sa, a.0), (sb, b.0));
    }
}
