//! What the status page may show of text that came from outside: state
//! reasons (people write them by hand too), capability verdicts' reasons
//! (which quote a model's answer) and cooldowns (whose ids carry key
//! fingerprints).
//!
//! - Always: keys masked ([`Redactor`], which also masks anything shaped
//!   like a provider key), a URL's password and scheme cut ([`redact_url`]), and the
//!   text cut to one line of 60 characters
//!   ([`crate::capabilities::probe::snippet`]).
//! - Public (`--public`, `[route] public_status`): no free text at all. A
//!   reason is shown only when it is one of llmprobe's own words for a
//!   failure (`timeout`, `rate_limit`, `unreachable`, …); anything else
//!   (a hand-written reason, an error message with a host or a URL in it)
//!   is left out. A cooldown says what it covers in words, never its id
//!   (a key's fingerprint). A model id that names an account (Fireworks'
//!   `accounts/<account>/models/<name>`) shows `…` for the account
//!   ([`model_id`]).

use crate::catalog::redact_url;
use crate::outcome::{FailureType, UNREACHABLE};
use crate::upstream::classify::ErrorClass;
use crate::upstream::secret::Redactor;

use super::Cooldown;

/// The bench reason route gives a model after repeated failures.
const REPEATED_FAILURES: &str = "repeated_failures";

/// One of llmprobe's own words for a failure: safe to publish.
pub fn known_word(s: &str) -> bool {
    use strum::IntoEnumIterator;
    s == UNREACHABLE
        || s == REPEATED_FAILURES
        || s == crate::state::RETIRED
        || FailureType::iter().any(|f| f.as_str() == s)
        || ErrorClass::iter().any(|c| <&str>::from(c) == s)
}

/// Error text, redacted and shortened; in the public form only a known
/// word, else nothing.
pub fn reason(text: &str, public: bool, redactor: &Redactor) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if public {
        return known_word(text).then(|| text.to_string());
    }
    let masked: Vec<String> = redactor
        .redact(text)
        .split_whitespace()
        .map(|w| {
            // A URL keeps its host and path, but not its password nor its
            // scheme: the page holds no `http(s)://` at all.
            if let Some(i) = w.find("://") {
                let u = redact_url(w);
                u[u.find("://").map_or(i + 3, |j| j + 3)..].to_string()
            } else {
                w.to_string()
            }
        })
        .collect();
    Some(crate::capabilities::probe::snippet(&masked.join(" ")))
}

/// A model id as the public form shows it: the account an id names
/// masked. Of the catalog's providers, Fireworks' ids carry one
/// (`accounts/<account>/models/<name>`, a fine-tune's account its
/// owner's); the others' ids name only an organisation that publishes
/// models (`meta-llama/…`, `@cf/meta/…`).
pub fn model_id(id: &str) -> String {
    match id.strip_prefix("accounts/").and_then(|r| r.split_once('/')) {
        Some((_, rest)) => format!("accounts/…/{rest}"),
        None => id.to_string(),
    }
}

/// A cooldown in words: `rate_limit until 2026-12-02 14:05 UTC (groq#key0:ab12)`;
/// in the public form, what it covers instead of its id.
pub fn cooldown(c: &Cooldown, public: bool, redactor: &Redactor) -> String {
    let until = crate::format::fmt_minute(c.until);
    if public {
        let why = if known_word(&c.reason) {
            c.reason.as_str()
        } else {
            "cooling down"
        };
        let what = match c.scope.as_str() {
            "provider" => "the whole provider",
            "key" => "one of its keys",
            "model" => "this model",
            "key_model" => "one key's use of this model",
            _ => "part of the provider",
        };
        return format!("{why} until {until} ({what})");
    }
    let why = reason(&c.reason, false, redactor).unwrap_or_else(|| "cooling down".into());
    format!("{why} until {until} ({})", redactor.redact(&c.target))
}
