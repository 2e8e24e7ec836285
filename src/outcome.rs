//! What a probe produced: the failure classes of docs/formats.md and the log entry
//! that records one probe.

use serde::Serialize;

/// The `failure_type` of a failed probe. A passing probe has none.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
    strum::EnumIter,
)]
#[strum(serialize_all = "snake_case")]
pub enum FailureType {
    Timeout,
    RateLimit,
    HttpError,
    WrongAnswer,
    Error,
}

crate::names::serde_via_strum!(FailureType);

impl FailureType {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<FailureType> {
        s.parse().ok()
    }

    /// Temporary failure classes pause a model and never count toward
    /// disabling it. (An `error` can still be temporary: see
    /// [`Outcome::verdict`].)
    pub fn is_temporary(self) -> bool {
        matches!(
            self,
            FailureType::Timeout | FailureType::RateLimit | FailureType::HttpError
        )
    }
}

/// What one probe says about the model, for the state machine. The log keeps
/// the five-class `failure_type`; the state machine decides from this, which
/// also knows whether the host could be reached at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The answer was right.
    Pass,
    /// A failure that says nothing lasting about the model: a timeout, a
    /// rate limit, a 5xx, or a host that could not be reached. The label
    /// becomes the state's `reason`.
    Temporary(&'static str),
    /// A failure of the model or its configuration: a wrong answer, a bad
    /// key, an unknown model, an unparseable body.
    Hard(&'static str),
}

/// The state `reason` of a probe whose host could not be reached.
pub const UNREACHABLE: &str = "unreachable";

impl std::fmt::Display for FailureType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of one probe, before it is stamped with provider and model.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `None` when the answer was right.
    pub failure: Option<FailureType>,
    /// Time to the full response in ms; 0 when there was no response.
    pub latency_ms: u64,
    /// The HTTP status, when there was one.
    pub status: Option<u16>,
    /// A short reason (≤ 200 chars), already redacted.
    pub error: Option<String>,
    /// No HTTP response, because the host could not be reached or the
    /// connection broke: refused, DNS failure, TLS handshake failure, reset,
    /// connect timeout. Such a failure is logged as `error` (or `timeout`)
    /// but is temporary, and decides whether a run was offline.
    pub unreachable: bool,
    /// The explicit wait a failure carried, as a time by the clock the
    /// log's `ts` is written with: `Retry-After` (seconds or an HTTP date),
    /// Gemini's `retryDelay`, "try again in …" wording, or a spent daily
    /// quota's reset (the one a header names, else the next UTC midnight),
    /// capped at a day ([`crate::upstream::hints::MAX_WAIT`]). `None` when
    /// the upstream named none, and for every pass. Recorded as the state
    /// entry's `retry_at`.
    pub retry_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The provider said the model does not exist (404, 410,
    /// `model_decommissioned`, "is not found", …: the classifier's
    /// `model_not_found`): with a fresh list that no longer carries it,
    /// the evidence that retires a model (docs/discovery.md).
    pub model_gone: bool,
    /// What the stream showed of speed: time to the first content token
    /// of a streamed answer, and a speed probe's output tokens and rate.
    /// All `None` for an answer read whole.
    pub timing: Timing,
}

/// What a streamed answer showed of speed (docs/formats.md: `ttft_ms`,
/// `output_tokens`, `tokens_per_s`, each optional in a log entry).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Timing {
    /// From just before the request was sent to its first content token.
    pub ttft_ms: Option<u64>,
    /// The answer's output tokens (the upstream's count, else an estimate):
    /// speed probes only.
    pub output_tokens: Option<u64>,
    /// Output tokens per second after the first token: speed probes only.
    pub tokens_per_s: Option<f64>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }

    pub fn verdict(&self) -> Verdict {
        match self.failure {
            None => Verdict::Pass,
            Some(_) if self.unreachable => Verdict::Temporary(UNREACHABLE),
            Some(f) if f.is_temporary() => Verdict::Temporary(f.as_str()),
            Some(f) => Verdict::Hard(f.as_str()),
        }
    }
}

/// One health-log entry in the current format. Serialised compactly, one per
/// line, with the six required fields first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub ts: String,
    pub provider: String,
    pub model: String,
    pub ok: u8,
    pub latency_ms: u64,
    pub failure_type: &'static str,
    /// Time to the first content token of a streamed probe, in ms. Absent
    /// for a probe read whole (a provider that refused to stream, a
    /// failure before the first token) and in older entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<u64>,
    /// Which capability a capability probe tested (`tools`, `json`,
    /// `vision`, `speed`); absent from the health log, whose entries are all basic
    /// probes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Capability>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Who sent the probe when it was not a scheduled `check`:
    /// [`SOURCE_REPROBE`] for a re-probe of a paused model. Absent for a
    /// plain run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// A speed probe's output tokens (capability log only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// A speed probe's output tokens per second after the first token
    /// (capability log only), rounded to 0.1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
}

/// The `source` of a re-probe of a paused model (`route --serve`'s
/// re-prober, `check --paused`).
pub const SOURCE_REPROBE: &str = "reprobe";

impl Entry {
    pub fn new(ts: String, provider: &str, model: &str, outcome: &Outcome) -> Entry {
        Entry {
            ts,
            provider: provider.to_string(),
            model: model.to_string(),
            ok: outcome.ok() as u8,
            latency_ms: outcome.latency_ms,
            failure_type: outcome.failure.map(FailureType::as_str).unwrap_or(""),
            ttft_ms: outcome.timing.ttft_ms,
            probe: None,
            status: outcome.status,
            error: outcome.error.clone(),
            source: None,
            output_tokens: outcome.timing.output_tokens,
            tokens_per_s: outcome
                .timing
                .tokens_per_s
                .map(|r| (r * 10.0).round() / 10.0),
        }
    }

    pub fn failure(&self) -> Option<FailureType> {
        FailureType::parse(self.failure_type)
    }

    /// The result in a word or two, as `check` shows it (its table's Result
    /// column, its progress lines): `ok`, `rate_limit (429)`, `error`.
    pub fn result(&self) -> String {
        match (self.ok, self.status) {
            (1, _) => "ok".to_string(),
            (_, Some(st)) => format!("{} ({st})", self.failure_type),
            _ => self.failure_type.to_string(),
        }
    }

    /// The latency as `check` shows it: `412 ms`, or `no response`.
    pub fn latency(&self) -> String {
        if self.latency_ms > 0 {
            format!("{} ms", self.latency_ms)
        } else {
            "no response".into()
        }
    }
}

/// Limit a reason to docs/formats.md's 200 characters, on a char boundary.
pub fn truncate_reason(s: &str) -> String {
    shorten(s, 200)
}

/// `s` trimmed, and cut to at most `max` characters (the last one `…`
/// when it was cut).
pub fn shorten(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// One thing a model may or may not be able to do beyond a plain answer,
/// probed by `check` (see `crate::capabilities`). Kept here, with the
/// log entry that names it, so that the catalog and the log can name one
/// without depending on the probes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Capability {
    /// A call of an offered function, with the right arguments.
    Tools,
    /// Content that parses as JSON and matches a `json_schema`.
    Json,
    /// The reading of an image.
    Vision,
    /// A long streamed answer, timed: not something a request needs, but
    /// a figure (`ttft_ms`, `tokens_per_s`) probed on the same cadence.
    Speed,
}

impl Capability {
    /// Every capability a request may need, in the order they are shown.
    pub const ALL: [Capability; 3] = [Capability::Tools, Capability::Json, Capability::Vision];

    /// Every capability `check` probes: [`Capability::ALL`], then speed.
    pub const PROBED: [Capability; 4] = [
        Capability::Tools,
        Capability::Json,
        Capability::Vision,
        Capability::Speed,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of capabilities (the catalog's `capabilities = [...]`), small
/// enough to copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CapSet(u8);

impl CapSet {
    /// Every capability `check` probes.
    pub fn all() -> CapSet {
        Capability::PROBED.into_iter().collect()
    }

    pub fn contains(self, c: Capability) -> bool {
        self.0 & c.bit() != 0
    }

    pub fn insert(&mut self, c: Capability) {
        self.0 |= c.bit();
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members, in [`Capability::PROBED`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::PROBED
            .into_iter()
            .filter(move |c| self.contains(*c))
    }
}

impl FromIterator<Capability> for CapSet {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> CapSet {
        let mut s = CapSet::default();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl<'de> serde::Deserialize<'de> for CapSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<CapSet, D::Error> {
        Ok(<Vec<Capability> as serde::Deserialize>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

impl Serialize for CapSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}
