//! Fuzz entry points for files and probe answers: the health log (read and
//! appended to), the state file, the config and env files, the answer
//! checks, and the waits and rate limits upstreams state in headers and
//! bodies.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::fsutil::DataLock;
use crate::healthlog::read::{self, Record, Sink};
use crate::healthlog::recent::{self, Direction, Recent};
use crate::healthlog::scan;
use crate::healthlog::tail::{self, Tail};

/// A scratch directory of this process's own, for the file-based readers
/// and writers (they need a path, and the writers a data lock). Kept in
/// memory-backed `/dev/shm` where there is one.
fn scratch_dir() -> PathBuf {
    let base = if cfg!(target_os = "linux") && Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("llmprobe-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the fuzz scratch directory");
    dir
}

/// `name` in the scratch directory, holding `data`.
fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    let path = scratch_dir().join(name);
    let mut f = std::fs::File::create(&path).expect("create a fuzz scratch file");
    f.write_all(data).expect("write a fuzz scratch file");
    path
}

/// The scratch file the health-log targets use.
fn scratch(data: &[u8]) -> PathBuf {
    scratch_file(crate::healthlog::LOG_FILE, data)
}

// ---------------------------------------------------------------------------
// The health log

/// Every record a read saw, in a comparable form, in the order seen.
#[derive(Default)]
struct Seen(Vec<(i64, String)>);

impl Seen {
    fn of(r: &Record<'_>) -> (i64, String) {
        (r.ts, format!("{r:?}"))
    }
}

impl Sink for Seen {
    fn record(&mut self, r: &Record<'_>) {
        check_record(r);
        self.0.push(Seen::of(r));
    }
    fn merge(&mut self, later: Self) {
        self.0.extend(later.0);
    }
}

impl Recent for Seen {}

/// What every record means whatever the entry said (docs/formats.md): a
/// provider, and `0 <= passed <= samples`, a latency that is not negative.
fn check_record(r: &Record<'_>) {
    assert!(!r.provider.is_empty(), "a record without a provider: {r:?}");
    assert!(
        r.samples >= 0.0 && r.passed >= 0.0 && r.passed <= r.samples,
        "passed/samples out of range: {r:?}"
    );
    assert!(r.latency_ms >= 0.0, "a negative latency: {r:?}");
}

/// A forward read on one thread: the records, the skipped count and how
/// the array ended, or the error's text.
type Forward = Result<(Vec<(i64, String)>, read::Summary), String>;

fn forward(path: &Path, parallel: bool) -> Forward {
    read::read_all_with(path, Seen::default, parallel)
        .map(|(s, sum)| (s.0, sum))
        .map_err(|e| e.to_string())
}

/// The health log's readers over one file, which must agree wherever each
/// gives an answer:
///
/// - the forward reader, on one thread and on two;
/// - the backward tail reader, which either gives up (`NotLineForm`) or,
///   read to the start, hands out exactly the forward read's records,
///   newest first, and skips as many;
/// - the shared recent-read policy ([`recent::read_recent`]), with no
///   window (everything, whichever way) and with one (newest first, a
///   prefix of that, stopping only at an entry older than the window);
/// - [`scan::scan_file`] and [`scan::scan_reader`] over the same bytes;
/// - [`read::first_ts`] and the first record.
///
/// And cutting the file short: any prefix of a log that reads reads too
/// (a cut is a torn tail, never damage), as a prefix of its records.
pub fn healthlog_read(data: &[u8]) {
    let path = scratch(data);
    let one = forward(&path, false);
    let two = forward(&path, true);
    assert_eq!(one, two, "one-thread and two-thread reads disagree");

    // The tail reader, read to the start.
    let mut back = Seen::default();
    let tail = tail::read_backward(&path, |r| {
        check_record(r);
        back.0.push(Seen::of(r));
        true
    });
    // Whether the tail reader takes the file for one entry per line all
    // the way to its start.
    let line_form = matches!(tail, Ok(Tail::Done { .. }));
    if let Ok(Tail::Done { skipped }) = tail {
        let Ok((fwd, summary)) = &one else {
            panic!(
                "the tail reader read a log the forward reader rejects: {:?}",
                one.as_ref().err()
            );
        };
        back.0.reverse();
        assert_eq!(
            &back.0, fwd,
            "the tail reader and the forward reader disagree"
        );
        assert_eq!(skipped, summary.skipped, "they skip different entries");
    }

    // The recent-read policy, as brief, state and route use it.
    let dir = std::cell::Cell::new(None);
    let all = recent::read_recent(&path, None, |d| {
        dir.set(Some(d));
        Seen::default()
    });
    match (&all, &one) {
        (Ok((seen, skipped)), Ok((fwd, summary))) => {
            let mut got = seen.0.clone();
            if dir.get() == Some(Direction::Backward) {
                got.reverse();
            }
            assert_eq!(&got, fwd, "read_recent without a window missed entries");
            assert_eq!(*skipped, summary.skipped);
        }
        (Ok(_), Err(e)) => panic!("read_recent read a log the forward reader rejects: {e}"),
        (Err(_), Ok(_)) => panic!("read_recent failed on a log the forward reader reads"),
        (Err(_), Err(_)) => {}
    }
    if let Ok((fwd, _)) = &one
        && let Some(&(mid, _)) = fwd.get(fwd.len() / 2)
    {
        let dirs = std::cell::Cell::new(None);
        let (seen, _) = recent::read_recent(&path, Some(mid), |d| {
            dirs.set(Some(d));
            Seen::default()
        })
        .expect("read_recent with a window fails where the forward read does not");
        // A windowed read stops at the window, so it cannot see damage
        // further back (a nested array whose lines look like entries): it
        // is held to the forward read only where the whole file is in line
        // form. llmprobe never writes such a file; a hand-made one may give
        // `brief` a wrong window (docs/development.md, "Fuzzing").
        let backward = dirs.get() == Some(Direction::Backward);
        if backward && line_form {
            let newest: Vec<_> = fwd.iter().rev().cloned().collect();
            let n = seen.0.len();
            assert_eq!(seen.0[..], newest[..n], "not the newest entries, in order");
            if let Some((ts, _)) = newest.get(n) {
                assert!(
                    *ts < mid - recent::CLOCK_SLACK_SECS,
                    "the backward read stopped inside the window"
                );
            }
        } else if !backward {
            assert_eq!(&seen.0, fwd);
        }
    }

    // The raw walk, over the file and over a reader.
    let mut by_file = Vec::new();
    let f = scan::scan_file(&path, |off, b| {
        by_file.push((off, b.to_vec()));
        Ok(())
    })
    .map_err(|e| e.to_string());
    let mut by_reader = Vec::new();
    let r = scan::scan_reader(&path, data, |off, b| {
        by_reader.push((off, b.to_vec()));
        Ok(())
    })
    .map_err(|e| e.to_string());
    assert_eq!(f, r, "scan_file and scan_reader end differently");
    assert_eq!(
        by_file, by_reader,
        "scan_file and scan_reader see different elements"
    );
    if let Ok((_, summary)) = &one {
        assert_eq!(
            f.as_ref().ok(),
            Some(&summary.end),
            "the scan and the read end differently"
        );
    }

    if let Ok((fwd, _)) = &one {
        let first = read::first_ts(&path).expect("first_ts fails on a log that reads");
        assert_eq!(
            first,
            fwd.first().map(|(ts, _)| *ts),
            "first_ts is not the first entry's"
        );
    }

    // Prefixes: what a crash in the middle of writing these bytes leaves.
    let Ok((fwd, _)) = &one else { return };
    let n = data.len();
    let mut cuts: Vec<usize> = (1..8).map(|i| n * i / 8).collect();
    cuts.extend([n.saturating_sub(1), n.saturating_sub(2)]);
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts.into_iter().filter(|&c| c < n) {
        let path = scratch(&data[..cut]);
        match forward(&path, false) {
            Ok((part, _)) => assert_eq!(
                part[..],
                fwd[..part.len().min(fwd.len())],
                "the first {cut} bytes read as other entries"
            ),
            Err(e) => panic!("the first {cut} bytes of a log that reads are damage: {e}"),
        }
    }
}

/// Appending one entry, under the real data lock, to a log of any content:
/// either the append refuses with an error and the file is byte-identical
/// (llmprobe never rewrites a log it cannot parse), or it succeeds, having
/// touched only the tail, and a forward read returns the log's complete
/// entries as before plus the new one (a torn tail is repaired, nothing
/// else is lost). `preflight`, which makes the append's tests without
/// writing, agrees with the append.
pub fn healthlog_append(data: &[u8]) {
    let dir = scratch_dir();
    let path = scratch(data);
    let before = forward(&path, false);
    let lock = DataLock::acquire(&dir).expect("the data lock of the scratch directory");
    let pre = crate::healthlog::preflight(&path, &lock).map_err(|e| e.to_string());
    let entry = crate::outcome::Entry {
        ts: "2026-12-02T15:00:00Z".into(),
        provider: "fuzz".into(),
        model: "appended".into(),
        ok: 0,
        latency_ms: 1234,
        failure_type: "timeout",
        ttft_ms: None,
        probe: None,
        output_tokens: None,
        tokens_per_s: None,
        status: Some(504),
        error: Some("gateway timeout".into()),
        source: None,
    };
    let result = crate::healthlog::append(&path, std::slice::from_ref(&entry), &lock);
    drop(lock);
    let after = std::fs::read(&path).expect("read the log back");
    let report = match result {
        Err(e) => {
            assert!(after == data, "a refused append changed the file: {e}");
            assert!(
                pre.is_err(),
                "preflight passes a log the append refuses: {e}"
            );
            return;
        }
        Ok(report) => report,
    };
    assert!(
        pre.is_ok(),
        "preflight refuses a log the append takes: {pre:?}"
    );
    let start = report.start.expect("an append of one entry says where") as usize;
    assert!(
        start <= data.len(),
        "the append starts past the end of the file"
    );
    assert_eq!(
        after[..start],
        data[..start],
        "the append rewrote more than the tail"
    );
    let now = forward(&path, false);
    let Ok((old, old_summary)) = before else {
        // Damage the append could not see (it reads only the tail, so that
        // its cost does not grow with the log) is still there for the
        // readers to report.
        return;
    };
    let (new, new_summary) = now.unwrap_or_else(|e| {
        panic!(
            "the append left a log that does not read: {e}\n{:?}",
            String::from_utf8_lossy(&after)
        )
    });
    assert!(
        matches!(new_summary.end, scan::End::Closed { .. }),
        "the append left the array unclosed: {:?}",
        new_summary.end
    );
    assert_eq!(
        new_summary.skipped, old_summary.skipped,
        "the append lost or added a skipped element"
    );
    let (last, kept) = new.split_last().expect("the new entry reads back");
    assert_eq!(
        kept,
        &old[..],
        "the append lost or changed entries\n{:?}",
        String::from_utf8_lossy(&after)
    );
    assert!(
        last.1.contains("provider: \"fuzz\", model: \"appended\""),
        "the last entry is not the one appended: {last:?}"
    );
}

// ---------------------------------------------------------------------------
// The state file

/// The state file's reader (`States::load`, and the snapshot `route
/// --serve` takes of it): no panic on any bytes; what it accepts, written
/// back by the real atomic writer under the data lock, reads back equal,
/// unknown fields included, and each entry written back as llmprobe
/// writes a changed one keeps them too.
pub fn state_read(data: &[u8]) {
    use crate::state::States;
    let dir = scratch_dir();
    let path = scratch_file("model_state.json", data);
    let Ok(states) = States::load(&path) else {
        return;
    };
    let _ = states.snapshot();
    let original: serde_json::Value = if data.iter().all(u8::is_ascii_whitespace) {
        serde_json::Value::Object(Default::default())
    } else {
        serde_json::from_slice(data).expect("what load accepts is JSON")
    };
    let known = [
        "state",
        "reason",
        "since",
        "consecutive_failures",
        "recovered_at",
        "retry_at",
    ];
    for (key, entry) in states.iter() {
        let Some(serde_json::Value::Object(fields)) = original.get(&key) else {
            panic!("entry {key:?} is not an object in the file");
        };
        for (name, value) in fields {
            if !known.contains(&name.as_str()) {
                assert_eq!(
                    entry.extra.get(name),
                    Some(value),
                    "unknown field {name:?} of {key:?} is not kept"
                );
            }
        }
    }
    let lock = DataLock::acquire(&dir).expect("the data lock of the scratch directory");
    states.save(&path, &lock).expect("save what was read");
    let again = States::load(&path).expect("what was saved reads back");
    assert_eq!(again, states, "the state file does not round-trip");
    // Every entry replaced by its typed self, as a state change writes it.
    let mut typed = states.clone();
    for (key, entry) in states.iter() {
        typed.set(&key, entry);
    }
    typed.save(&path, &lock).expect("save the retyped states");
    let again = States::load(&path).expect("the retyped states read back");
    for (key, entry) in states.iter() {
        assert_eq!(
            again.get(&key).as_ref(),
            Some(&entry),
            "entry {key:?} changed when written back"
        );
    }
}

// ---------------------------------------------------------------------------
// Config, prompt pools and env files

/// A fake key planted wherever the input says `$KEY`, as a user might
/// paste one into the wrong place.
const CANARY: &str = "sk-fuzzcanary0123456789abcdef";

/// Key-shaped words: what the redactor masks by shape alone.
fn key_shaped(text: &str) -> bool {
    crate::upstream::secret::Redactor::default().redact(text) != text
}

/// The config parser (`Catalog::load`, as every command reads `--config`),
/// the prompt pool parser and the `--env-file` reader over any text: no
/// panic, and no config or env file error quotes a value: a key pasted
/// anywhere in the file (`$KEY` in the input) never shows up in the
/// message, nor does anything key-shaped.
pub fn config_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data).replace("$KEY", CANARY);
    let path = scratch_file("config.toml", text.as_bytes());
    if let Err(e) = crate::catalog::Catalog::load(Some(&path)) {
        let msg = e.to_string();
        assert!(
            !msg.contains("fuzzcanary"),
            "a config error quotes a key: {msg}"
        );
        assert!(
            !key_shaped(&msg),
            "a config error holds something key-shaped: {msg}"
        );
    }
    // A prompt pool holds questions, not keys, and its errors quote the
    // line at fault on purpose: only no panic here.
    let _ = crate::prompts::Pool::parse(&text, "prompts.toml");
    let path = scratch_file("keys.env", text.as_bytes());
    match crate::schedule::envfile::read(&path) {
        Err(e) => {
            let msg = e.to_string();
            assert!(
                !msg.contains("fuzzcanary"),
                "an env file error quotes a key: {msg}"
            );
        }
        Ok(f) => {
            for name in &f.names {
                assert!(
                    crate::catalog::is_env_name(name),
                    "not a variable name: {name:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Probe answers

/// The answer checks: `check_answer` (the basic probe's) and the
/// capability probes' judges over any reply text, tool call and number:
/// no panic; a reply that is exactly the expected number (or `{"answer":
/// n}`, or a call with the two operands) passes; and no reply passes for
/// two different numbers.
pub fn answer_check(data: &[u8]) {
    use crate::capabilities::probe::Check;
    use crate::upstream::dialect::{ChatReply, ToolCall};
    let (head, rest) = data.split_at(data.len().min(16));
    let mut n = [0u8; 16];
    n[..head.len()].copy_from_slice(head);
    let expected = i64::from_le_bytes(n[..8].try_into().unwrap());
    let other = i64::from_le_bytes(n[8..].try_into().unwrap());
    let text = String::from_utf8_lossy(rest);

    let exact = expected.to_string();
    assert!(
        crate::prompts::check_answer(&exact, expected),
        "{exact} does not answer itself"
    );
    let passes = crate::prompts::check_answer(&text, expected);
    if passes && other != expected {
        assert!(
            !crate::prompts::check_answer(&text, other),
            "{text:?} answers both {expected} and {other}"
        );
    }

    let reply = |text: &str, calls: Vec<ToolCall>| ChatReply {
        text: text.to_string(),
        reasoning: None,
        finish_reason: Some("stop".into()),
        usage: None,
        tool_calls: calls,
    };
    let call = |args: &str| ToolCall {
        id: "c1".into(),
        name: crate::capabilities::probe::TOOL.into(),
        arguments: args.to_string(),
    };
    // Any reply, judged by every check.
    for check in [
        Check::Json { expected },
        Check::Reading { expected },
        Check::Call {
            a: expected,
            b: other,
        },
    ] {
        let _ = check.judge(&reply(&text, Vec::new()));
        let _ = check.judge(&reply("", vec![call(&text)]));
    }
    assert_eq!(
        Check::Reading { expected }
            .judge(&reply(&text, Vec::new()))
            .is_ok(),
        passes,
        "the reading judge and check_answer disagree"
    );
    // The right answers pass.
    let json = format!("{{\"answer\": {expected}}}");
    assert_eq!(
        Check::Json { expected }.judge(&reply(&json, Vec::new())),
        Ok(()),
        "{json}"
    );
    let args = format!("{{\"a\": {expected}, \"b\": {other}}}");
    let both = Check::Call {
        a: expected,
        b: other,
    };
    assert_eq!(both.judge(&reply("", vec![call(&args)])), Ok(()), "{args}");
    let swapped = Check::Call {
        a: other,
        b: expected,
    };
    assert_eq!(
        swapped.judge(&reply("", vec![call(&args)])),
        Ok(()),
        "{args}, swapped"
    );
}

// ---------------------------------------------------------------------------
// Waits and rate limits

/// The `now` every hint is read at.
fn fuzz_now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_796_223_600, 0).expect("a valid time") // 2026-12-02T15:00:00Z
}

/// Header names the rate-limit and wait readers look for, so that a
/// one-character name in the input stands for one of them.
const HEADER_NAMES: &[&str] = &[
    "retry-after",
    "retry-after-ms",
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-limit-requests-day",
    "x-ratelimit-remaining-requests-day",
    "x-ratelimit-reset-requests-day",
    "x-ratelimit-limit-tokens-minute",
    "x-ratelimit-remaining-tokens-minute",
    "x-ratelimit-reset-tokens-minute",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
];

/// Headers from `name: value` lines up to the first blank line, and the
/// body after it. A name of one character stands for
/// `HEADER_NAMES[its byte]`; lines that make no valid header are dropped.
fn headers_and_body(data: &[u8]) -> (HeaderMap, &[u8]) {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &b""[..]),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let name = match name {
            [b] => HEADER_NAMES[*b as usize % HEADER_NAMES.len()].as_bytes(),
            _ => name,
        };
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        else {
            continue;
        };
        headers.append(name, value);
    }
    (headers, body)
}

/// A wait, as the router turns it into a time: never before `now`, never
/// more than [`MAX_WAIT`](crate::upstream::hints::MAX_WAIT) after it.
fn check_wait(what: &str, d: Duration) {
    use crate::upstream::hints::{MAX_WAIT, after};
    let now = fuzz_now();
    let at = after(now, d);
    assert!(at >= now, "{what}: {d:?} ends before now");
    assert!(
        at - now <= TimeDelta::from_std(MAX_WAIT).unwrap(),
        "{what}: {d:?} waits past the cap"
    );
}

/// The wait readers of `upstream::hints`: `retry_after` (headers and
/// body), `daily_reset`, `parse_go_duration`, `wait_from_wording`,
/// Gemini's `retryDelay`, `parse_reset`, `is_daily_quota` and
/// `capability`. No panic; every wait, turned into a time, is within
/// `[now, now + MAX_WAIT]`; and waits the code must read exactly (a
/// `retry-after` of whole seconds, a Go duration, "try again in …", a
/// `retryDelay`) read back as written.
pub fn retry_hints(data: &[u8]) {
    use crate::upstream::hints::{
        capability, daily_reset, is_daily_quota, parse_go_duration, parse_reset, retry_after,
        wait_from_wording,
    };
    let now = fuzz_now();
    let (headers, body) = headers_and_body(data);
    if let Some(d) = retry_after(&headers, body, now) {
        check_wait("retry_after", d);
    }
    if let Some(d) = daily_reset(&headers, now) {
        check_wait("daily_reset", d);
    }
    let text = String::from_utf8_lossy(data);
    for d in [
        parse_go_duration(&text),
        wait_from_wording(&text),
        parse_reset(text.trim(), now),
    ]
    .into_iter()
    .flatten()
    {
        check_wait("a wait read from text", d);
    }
    let _ = is_daily_quota(body);
    let _ = capability(&text);

    // Known waits, written the ways upstreams write them, read back.
    let mut n = [0u8; 8];
    let k = data.len().min(8);
    n[..k].copy_from_slice(&data[..k]);
    let secs = u64::from(u32::from_le_bytes(n[..4].try_into().unwrap()) % 100_000);
    let millis = u64::from(u16::from_le_bytes(n[4..6].try_into().unwrap()) % 1000);
    let want = Duration::from_millis(secs * 1000 + millis);
    let close = |what: &str, got: Option<Duration>| {
        let got = got.unwrap_or_else(|| panic!("{what} does not read"));
        let diff = got.abs_diff(want);
        assert!(
            diff < Duration::from_micros(10),
            "{what} reads as {got:?}, not {want:?}"
        );
    };
    let go = format!("{}m{}.{millis:03}s", secs / 60, secs % 60);
    close(&go, parse_go_duration(&go));
    let wording = format!("Rate limit reached. Please try again in {go}.");
    close(&wording, wait_from_wording(&wording));
    let gemini = format!(
        r#"{{"error":{{"code":429,"details":[{{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"{}.{millis:03}s"}}]}}}}"#,
        secs
    );
    close(
        &gemini,
        retry_after(&HeaderMap::new(), gemini.as_bytes(), now),
    );
    let mut h = HeaderMap::new();
    h.insert("retry-after", HeaderValue::from(secs));
    assert_eq!(
        retry_after(&h, body, now),
        Some(Duration::from_secs(secs)),
        "retry-after: {secs}"
    );
    assert_eq!(
        parse_reset(&secs.to_string(), now),
        Some(Duration::from_secs(secs))
    );
}

/// The `x-ratelimit-*` and `anthropic-ratelimit-*` readers: the router's
/// `LimitLedger::learn` and the hints' `exhausted_bucket_reset`. No panic;
/// every learned bucket is from now, resets within `[now, now + MAX_WAIT]`,
/// has a positive limit if any, and is worth keeping (a limit, or a spent
/// bucket that blocks); and the ledger, as persisted in
/// `route_state.json`, round-trips.
pub fn ratelimit_headers(data: &[u8]) {
    use crate::catalog::RequestsWindow;
    use crate::route::cooldown::Target;
    use crate::upstream::hints::{MAX_WAIT, exhausted_bucket_reset};
    use crate::usage::limits::LimitLedger;
    let now = fuzz_now();
    let cap = TimeDelta::from_std(MAX_WAIT).unwrap();
    let (headers, _) = headers_and_body(data);
    let exhausted = exhausted_bucket_reset(&headers, now);
    if let Some(d) = exhausted {
        check_wait("exhausted_bucket_reset", d);
    }
    let target = Target::new("fuzz", "m");
    let mut ledger = LimitLedger::default();
    for window in [RequestsWindow::Minute, RequestsWindow::Day] {
        for (name, l) in ledger.learn(&target, window, &headers, now) {
            assert_eq!(l.learned_at, now, "{name}");
            assert!(l.limit.is_none_or(|n| n > 0), "{name}: a limit of 0");
            if let Some(at) = l.reset_at {
                assert!(at >= now && at - now <= cap, "{name}: resets at {at}");
            }
            let blocks = l.remaining == Some(0) && l.reset_at.is_some_and(|at| at > now);
            assert!(l.limit.is_some() || blocks, "{name}: learned nothing");
        }
    }
    let json = serde_json::to_string(&ledger).expect("the ledger serialises");
    let back: LimitLedger = serde_json::from_str(&json).expect("the ledger reads back");
    assert_eq!(back, ledger, "the ledger does not round-trip: {json}");
}
