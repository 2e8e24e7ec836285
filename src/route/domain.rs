//! What the router answers, in no surface's shape: why a request could not
//! be served ([`RouteError`]) and what a served stream carries
//! ([`StreamEvent`]). Each inbound surface (the OpenAI server
//! today, see [`crate::route::surface`]) renders it in its own shape, and
//! the one-shot command maps errors to exit codes; so nothing here names
//! an HTTP type or an exit status. A stream is the dialect's
//! [`ReplyDelta`]s, except the same-dialect pass-through, whose upstream
//! events travel as they came with only usage picked out of them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::upstream::classify::ErrorClass;
use crate::upstream::dialect::{Need, ReplyDelta, Usage};
use crate::usage::limits::LimitKind;

/// Why a request was not served.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteError {
    /// No provider with a key set serves the requested model. `unset`
    /// names, per catalog provider that would serve it, the key variables
    /// to set (`GROQ_API_KEY (groq)`).
    UnknownModel { model: String, unset: Vec<String> },
    /// The requested model exists, but every candidate is paused or
    /// disabled.
    NoneActive { model: String },
    /// The record is shared (`[route] record = "shared"`) and none has
    /// been read from Redis yet: nothing says which models are active, so
    /// nothing is routed.
    NoRecord,
    /// Nothing was sent, or everything tried is benched now: every
    /// candidate is cooling down or at a limit until `retry_at`.
    AllCoolingDown { retry_at: DateTime<Utc> },
    /// Every candidate that was sent to failed; `attempts` were sent.
    /// `retry_at` is the first time a benched candidate is usable again,
    /// when one is known.
    AllFailed {
        attempts: u32,
        retry_at: Option<DateTime<Utc>>,
    },
    /// No active candidate could ever take the request: each lacks
    /// something it needs (its dialect cannot carry it, its context window
    /// is too small, or an upstream said so within the day). Nothing was
    /// sent.
    Incapable {
        /// The needs some candidate was passed over for, in order.
        needs: Vec<Need>,
        /// How many active candidates there were.
        active: usize,
        /// Per candidate: `groq::x: cannot carry tools (…)`.
        reasons: Vec<String>,
    },
    /// No active candidate can hold the prompt: each one's known context
    /// window is smaller, or its upstream said the prompt is too long.
    ContextTooSmall {
        /// The prompt's estimated tokens.
        prompt_tokens: u64,
        /// The largest known window among the active models, and whose it
        /// is (`provider::model`).
        largest: Option<(u64, String)>,
    },
    /// The upstream refused the client's own request; trying elsewhere
    /// would fail the same way.
    ClientFault {
        class: ErrorClass,
        /// The upstream's 4xx status; 400 when it gave none or another.
        status: u16,
        /// Redacted where the error was made.
        message: String,
    },
}

impl RouteError {
    /// A client fault from what the upstream answered: its status is kept
    /// only when it says the request is at fault (4xx).
    pub fn client_fault(class: ErrorClass, status: Option<u16>, message: String) -> RouteError {
        RouteError::ClientFault {
            class,
            status: status.filter(|s| (400..500).contains(s)).unwrap_or(400),
            message,
        }
    }

    /// When a retry could succeed, if that is known.
    pub fn retry_at(&self) -> Option<DateTime<Utc>> {
        match self {
            RouteError::AllCoolingDown { retry_at } => Some(*retry_at),
            RouteError::AllFailed { retry_at, .. } => *retry_at,
            _ => None,
        }
    }

    /// The request can never succeed as written (an unknown model, or one
    /// the upstream refused as malformed, too large or unprocessable), as
    /// opposed to one that found nothing to serve it now.
    pub fn is_usage_error(&self) -> bool {
        match self {
            RouteError::UnknownModel { .. }
            | RouteError::Incapable { .. }
            | RouteError::ContextTooSmall { .. } => true,
            RouteError::ClientFault { status, .. } => matches!(status, 400 | 413 | 422),
            _ => false,
        }
    }
}

/// One attempt, for the trail, the headers and the exhausted message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    /// `provider::model`.
    pub model: String,
    /// `#<index>:<fingerprint>` of the key used, never the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// What became of it; the trail writes its [`AttemptClass`] as text.
    #[serde(serialize_with = "crate::route::domain::as_text")]
    pub class: AttemptClass,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When this candidate can be tried again, if it is benched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
}

impl Attempt {
    /// Sent and failed (not skipped for a need, a cooldown or a limit,
    /// not a last-resort mark, not served).
    pub fn failed(&self) -> bool {
        matches!(self.class, AttemptClass::Failed(_))
    }
}

/// What became of one candidate, as `X-Fallback-Trail` (and every other
/// trail: the exhausted message, the one-shot command's list, the JSON
/// `attempts`) writes it after `provider::model=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptClass {
    /// Sent, and the upstream's answer was this error: `rate_limit`,
    /// `server_error`, ….
    Failed(ErrorClass),
    /// Passed over without sending: it cannot take the request
    /// (`skip:<need>`).
    Skipped(Need),
    /// Picked, but its dialect cannot express the request, so it was not
    /// sent after all (`skip:dialect`).
    Unbuildable,
    /// Passed over without sending: benched until `retry_at`
    /// (`cooldown:<reason>`, the bench's reason).
    Cooldown(String),
    /// A paused model passed over as a last resort because the failure
    /// that paused it named a wait (`retry_at`) not yet over
    /// (`cooldown:retry_at`).
    PausedWait,
    /// Passed over without sending: at a configured limit
    /// (`limit:<rpm|rpd|tpm|tpd|daily_cap>`).
    Limit(LimitKind),
    /// The mark degraded mode puts before each paused model it tries as a
    /// last resort (`last-resort:paused`, docs/routing.md).
    LastResort,
}

impl AttemptClass {
    /// Passed over for time (benched, waiting, or at a limit): waiting
    /// would serve it.
    pub fn waits(&self) -> bool {
        matches!(
            self,
            AttemptClass::Cooldown(_) | AttemptClass::PausedWait | AttemptClass::Limit(_)
        )
    }
}

impl std::fmt::Display for AttemptClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttemptClass::Failed(class) => f.write_str(class.as_str()),
            AttemptClass::Skipped(need) => write!(f, "skip:{}", need.as_str()),
            AttemptClass::Unbuildable => f.write_str("skip:dialect"),
            AttemptClass::Cooldown(reason) => write!(f, "cooldown:{reason}"),
            AttemptClass::PausedWait => f.write_str("cooldown:retry_at"),
            AttemptClass::Limit(kind) => write!(f, "limit:{}", kind.as_str()),
            AttemptClass::LastResort => f.write_str("last-resort:paused"),
        }
    }
}

/// Serialize through `Display`: a trail's class is text in JSON too.
pub(crate) fn as_text<T: std::fmt::Display, S: serde::Serializer>(
    v: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// A request that nothing could serve: why, and every attempt made.
#[derive(Debug)]
pub struct Exhausted {
    pub error: RouteError,
    pub attempts: Vec<Attempt>,
}

impl Exhausted {
    /// What went wrong, in words every surface and the one-shot command
    /// show as they are.
    pub fn message(&self) -> String {
        match &self.error {
            RouteError::UnknownModel { model, unset } if !unset.is_empty() => format!(
                "the model {model:?} is not served by any provider with a key set: set {}",
                unset.join(", or ")
            ),
            RouteError::UnknownModel { model, .. } => format!(
                "the model {model:?} is not served by any provider with a key set; use \"auto\", a model id, provider::model or an alias (`llmprobe check --list` shows every provider, its models and its key variable; GET /v1/models lists what route --serve serves)"
            ),
            RouteError::NoneActive { model } => format!(
                "no active model for {model:?}: every one is paused or disabled (see `llmprobe state`)"
            ),
            RouteError::NoRecord => "no shared record has been read yet (Redis does not answer, or check --shared-state has not published to it): nothing says which models are active, so nothing is routed".to_string(),
            RouteError::AllCoolingDown { retry_at } => format!(
                "every candidate is cooling down or at a limit; the first is usable again at {}",
                crate::time::format_ts(*retry_at)
            ),
            RouteError::AllFailed { attempts, .. } => format!(
                "every candidate failed ({} attempt{}): {}",
                attempts,
                if *attempts == 1 { "" } else { "s" },
                trail(&self.attempts, 400)
            ),
            RouteError::Incapable {
                needs,
                active,
                reasons,
            } if needs.is_empty() => format!(
                "no active model can take this request: its dialect cannot express it ({})",
                reasons.join("; ")
            ),
            RouteError::Incapable {
                needs,
                active,
                reasons,
            } => {
                let phrases: Vec<&str> = needs.iter().map(|n| n.phrase()).collect();
                let abilities: Vec<&str> = needs.iter().map(|n| n.ability()).collect();
                let who = if *active == 1 {
                    "the one active model cannot".to_string()
                } else {
                    format!("none of the {active} active models can")
                };
                format!(
                    "no active model can take this request: {}, and {who} {} ({})",
                    phrases.join(" and "),
                    abilities.join(" and "),
                    reasons.join("; ")
                )
            }
            RouteError::ContextTooSmall {
                prompt_tokens,
                largest: Some((window, model)),
            } => format!(
                "no active model can hold a prompt of about {prompt_tokens} tokens; the largest context window among them is {window} tokens ({model})"
            ),
            RouteError::ContextTooSmall {
                prompt_tokens,
                largest: None,
            } => format!(
                "no active model can hold a prompt of about {prompt_tokens} tokens, and none of them has a known context window"
            ),
            RouteError::ClientFault { message, .. } => {
                format!("the upstream rejected the request itself: {message}")
            }
        }
    }
}

/// `p::m=class, …`, cut to about `cap` characters.
pub fn trail(attempts: &[Attempt], cap: usize) -> String {
    let mut out = String::new();
    for a in attempts {
        let item = format!("{}={}", a.model, a.class);
        if !out.is_empty() {
            if out.len() + item.len() + 2 > cap {
                out.push_str(", …");
                break;
            }
            out.push_str(", ");
        }
        out.push_str(&item);
    }
    out
}

/// What a served stream carries next: the reply's deltas in no surface's
/// shape, each upstream chunk as it came ahead of its deltas for the
/// same-dialect pass-through; the usage the engine corrects reservations
/// with; the end.
#[derive(Debug)]
pub enum StreamEvent {
    /// Reply content ([`ReplyDelta::Start`], `Text`, `Reasoning`,
    /// `Finish`), for each surface to render.
    Delta(ReplyDelta),
    /// The upstream's own chunk (an OpenAI one) as it came, ahead of the
    /// deltas it holds ([`ReplyDelta::Raw`]): a surface that speaks its
    /// dialect forwards it in place of those deltas; every other reader,
    /// the engine included, skips it.
    Raw(Value),
    /// What the reply used, which corrects the request's token estimate
    /// ([`crate::route::engine::Engine::watch_stream`]): `tokens` when
    /// both counts are known, and the counts.
    Usage {
        tokens: Option<u64>,
        counts: Usage,
    },
    /// The upstream failed after the first byte; the message is redacted.
    Failed(String),
    /// The upstream stopped sending for longer than the idle timeout.
    Stalled,
    Done,
}

impl StreamEvent {
    /// A dialect's delta as the event it is. An error is
    /// [`StreamEvent::Failed`] with the provider's words.
    pub fn from_delta(d: ReplyDelta) -> StreamEvent {
        match d {
            ReplyDelta::Raw(v) => StreamEvent::Raw(v),
            ReplyDelta::Usage(u) => StreamEvent::Usage {
                // Only a full count corrects the estimate, as it always has.
                tokens: u.input_tokens.zip(u.output_tokens).map(|(i, o)| i + o),
                counts: u,
            },
            ReplyDelta::Error(e) => StreamEvent::Failed(e.message),
            ReplyDelta::Done => StreamEvent::Done,
            d => StreamEvent::Delta(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trail is read by people and scripts: each class keeps its text.
    #[test]
    fn attempt_classes_write_the_trail_text() {
        let cases = [
            (AttemptClass::Failed(ErrorClass::RateLimit), "rate_limit"),
            (AttemptClass::Skipped(Need::Tools), "skip:tools"),
            (AttemptClass::Unbuildable, "skip:dialect"),
            (
                AttemptClass::Cooldown("server_error".into()),
                "cooldown:server_error",
            ),
            (AttemptClass::PausedWait, "cooldown:retry_at"),
            (AttemptClass::Limit(LimitKind::DailyCap), "limit:daily_cap"),
            (AttemptClass::LastResort, "last-resort:paused"),
        ];
        for (class, text) in cases {
            assert_eq!(class.to_string(), text);
        }
    }

    #[test]
    fn a_client_fault_keeps_only_a_4xx_status() {
        let status = |s| match RouteError::client_fault(ErrorClass::BadRequest, s, "m".into()) {
            RouteError::ClientFault { status, .. } => status,
            other => panic!("{other:?}"),
        };
        assert_eq!(status(Some(422)), 422);
        assert_eq!(status(Some(500)), 400);
        assert_eq!(status(None), 400);
    }

    #[test]
    fn usage_errors_are_the_requests_own_fault() {
        let fault = |s| RouteError::client_fault(ErrorClass::BadRequest, Some(s), "m".into());
        assert!(
            RouteError::UnknownModel {
                model: "x".into(),
                unset: Vec::new(),
            }
            .is_usage_error()
        );
        assert!(fault(400).is_usage_error());
        assert!(fault(413).is_usage_error());
        assert!(!fault(403).is_usage_error());
        assert!(!RouteError::NoneActive { model: "x".into() }.is_usage_error());
        let at = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let cooling = RouteError::AllCoolingDown { retry_at: at };
        assert!(!cooling.is_usage_error());
        assert_eq!(cooling.retry_at(), Some(at));
        assert_eq!(
            RouteError::AllFailed {
                attempts: 2,
                retry_at: None
            }
            .retry_at(),
            None
        );
    }

    #[test]
    fn deltas_become_events_and_only_full_usage_corrects() {
        let usage = |i, o| Usage {
            input_tokens: i,
            output_tokens: o,
        };
        assert!(matches!(
            StreamEvent::from_delta(ReplyDelta::Usage(usage(Some(25), Some(15)))),
            StreamEvent::Usage {
                tokens: Some(40),
                ..
            }
        ));
        assert!(matches!(
            StreamEvent::from_delta(ReplyDelta::Usage(usage(Some(25), None))),
            StreamEvent::Usage { tokens: None, .. }
        ));
        // The upstream's own chunk goes on as it came.
        let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": "x"}}]});
        match StreamEvent::from_delta(ReplyDelta::Raw(chunk.clone())) {
            StreamEvent::Raw(v) => assert_eq!(v, chunk),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            StreamEvent::from_delta(ReplyDelta::Error(crate::upstream::dialect::ProviderError {
                message: "boom".into(),
                ..Default::default()
            })),
            StreamEvent::Failed(m) if m == "boom"
        ));
        assert!(matches!(
            StreamEvent::from_delta(ReplyDelta::Text("hi".into())),
            StreamEvent::Delta(ReplyDelta::Text(t)) if t == "hi"
        ));
    }
}
