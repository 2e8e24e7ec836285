//! What a probe produced: the failure classes of DESIGN.md and the log entry
//! that records one probe.

use serde::Serialize;

/// The `failure_type` of a failed probe. A passing probe has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureType {
    Timeout,
    RateLimit,
    HttpError,
    WrongAnswer,
    Error,
}

impl FailureType {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureType::Timeout => "timeout",
            FailureType::RateLimit => "rate_limit",
            FailureType::HttpError => "http_error",
            FailureType::WrongAnswer => "wrong_answer",
            FailureType::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<FailureType> {
        Some(match s {
            "timeout" => FailureType::Timeout,
            "rate_limit" => FailureType::RateLimit,
            "http_error" => FailureType::HttpError,
            "wrong_answer" => FailureType::WrongAnswer,
            "error" => FailureType::Error,
            _ => return None,
        })
    }

    /// Temporary failures pause a model and never count toward disabling it.
    pub fn is_temporary(self) -> bool {
        matches!(
            self,
            FailureType::Timeout | FailureType::RateLimit | FailureType::HttpError
        )
    }
}

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
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.failure.is_none()
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Entry {
    pub fn new(ts: String, provider: &str, model: &str, outcome: &Outcome) -> Entry {
        Entry {
            ts,
            provider: provider.to_string(),
            model: model.to_string(),
            ok: outcome.ok() as u8,
            latency_ms: outcome.latency_ms,
            failure_type: outcome.failure.map(FailureType::as_str).unwrap_or(""),
            status: outcome.status,
            error: outcome.error.clone(),
        }
    }

    pub fn failure(&self) -> Option<FailureType> {
        FailureType::parse(self.failure_type)
    }
}

/// Limit a reason to DESIGN.md's 200 characters, on a char boundary.
pub fn truncate_reason(s: &str) -> String {
    const MAX: usize = 200;
    let s = s.trim();
    if s.chars().count() <= MAX {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX - 1).collect();
    out.push('…');
    out
}
