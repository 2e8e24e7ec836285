//! What upstreams said a model cannot take, remembered for a day: a 400
//! that named a capability ("tools are not supported"), or that stated the
//! model's output cap or context window. The router passes over a model
//! for a need it was refused (`skip:<need>`), lowers `max_tokens` to a cap
//! it learned, and skips a model whose learned window a prompt exceeds,
//! so the next request does not spend an attempt to hear the same 400.
//!
//! Saved with the route state (`verdicts` in `route_state.json`, absent
//! while empty) and, for instances that share their state, in one Redis
//! hash ([`crate::route::shared`]), read back off the request path.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::upstream::dialect::Need;
use crate::upstream::hints::Refusal;

/// How long a verdict stands: a provider that adds tools to a model, or
/// raises its cap, is believed again the next day.
pub const VERDICT_TTL: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// The name an output cap is kept under, beside the needs' names.
pub const OUTPUT_CAP: &str = "max_output_tokens";
/// The name a context window is kept under.
pub const CONTEXT_WINDOW: &str = "context_window";

/// Where a context window came from, for the views that show one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum WindowSource {
    /// The catalog's `model_info.context_window` (the provider's documentation).
    Catalog,
    /// A provider's model listing.
    Listing,
    /// A 400 from the upstream that stated it.
    Learned,
}

/// The one rule for which context window counts: the smallest known among
/// the catalog's, a provider listing's and a learned one, with where it
/// came from (on a tie, the first of those).
pub fn known_window(
    catalog: Option<u64>,
    listing: Option<u64>,
    learned: Option<u64>,
) -> Option<(u64, WindowSource)> {
    [
        (catalog, WindowSource::Catalog),
        (listing, WindowSource::Listing),
        (learned, WindowSource::Learned),
    ]
    .into_iter()
    .filter_map(|(w, s)| w.map(|w| (w, s)))
    .min_by_key(|(w, _)| *w)
}

/// One thing an upstream said about a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub until: DateTime<Utc>,
    /// The cap or window it stated, for those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The upstream's words (redacted), for the trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `provider::model` → a need's name, [`OUTPUT_CAP`] or [`CONTEXT_WINDOW`]
/// → what was said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Verdicts(BTreeMap<String, BTreeMap<String, Verdict>>);

impl Verdicts {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Remember what a capability error said about `model` (a
    /// `provider::model`); the entry it made, as `(name, verdict)`, to
    /// share. A context overflow or cap that states no number teaches
    /// nothing: the request just moves on.
    pub fn learn(
        &mut self,
        model: &str,
        cap: Refusal,
        message: &str,
        now: DateTime<Utc>,
    ) -> Option<(String, Verdict)> {
        let until = now + VERDICT_TTL;
        let (name, limit) = match cap {
            Refusal::Lacks(need) => (need.as_str().to_string(), None),
            Refusal::OutputCap(Some(n)) => (OUTPUT_CAP.to_string(), Some(u64::from(n))),
            Refusal::Context(Some(n)) => (CONTEXT_WINDOW.to_string(), Some(n)),
            Refusal::OutputCap(None) | Refusal::Context(None) => return None,
        };
        let v = Verdict {
            until,
            limit,
            message: Some(message.to_string()),
        };
        self.insert(model, &name, v.clone());
        Some((name, v))
    }

    /// Put one entry in force (learned here or read from the shared
    /// store); a later end wins.
    pub fn insert(&mut self, model: &str, name: &str, v: Verdict) {
        let slot = self.0.entry(model.to_string()).or_default();
        match slot.get(name) {
            Some(old) if old.until >= v.until => {}
            _ => {
                slot.insert(name.to_string(), v);
            }
        }
    }

    fn get(&self, model: &str, name: &str, now: DateTime<Utc>) -> Option<&Verdict> {
        self.0
            .get(model)
            .and_then(|m| m.get(name))
            .filter(|v| v.until > now)
    }

    /// An upstream refused `need` for `model` within the last day.
    pub fn lacks(&self, model: &str, need: Need, now: DateTime<Utc>) -> Option<&Verdict> {
        self.get(model, need.as_str(), now)
    }

    /// True when an upstream stated, for any model, a context window in
    /// force at `now` that a prompt of `tokens` is over: without one, no
    /// learned window rules a candidate out (a cheap test before looking
    /// at each).
    pub fn any_window_below(&self, tokens: u64, now: DateTime<Utc>) -> bool {
        self.0
            .values()
            .filter_map(|m| m.get(CONTEXT_WINDOW))
            .any(|v| v.until > now && v.limit.is_some_and(|w| tokens > w))
    }

    /// The output cap an upstream stated for `model`.
    pub fn output_cap(&self, model: &str, now: DateTime<Utc>) -> Option<u32> {
        self.get(model, OUTPUT_CAP, now)
            .and_then(|v| v.limit)
            .and_then(|n| u32::try_from(n).ok())
    }

    /// The context window an upstream stated for `model`.
    pub fn context_window(&self, model: &str, now: DateTime<Utc>) -> Option<u64> {
        self.get(model, CONTEXT_WINDOW, now).and_then(|v| v.limit)
    }

    /// Drop what has expired.
    pub fn prune(&mut self, now: DateTime<Utc>) {
        for m in self.0.values_mut() {
            m.retain(|_, v| v.until > now);
        }
        self.0.retain(|_, m| !m.is_empty());
    }

    /// Every entry, as `(model, name, verdict)`.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &Verdict)> {
        self.0
            .iter()
            .flat_map(|(m, e)| e.iter().map(move |(n, v)| (m.as_str(), n.as_str(), v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> DateTime<Utc> {
        "2026-05-04T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_verdict_stands_for_a_day_and_a_stated_number_is_kept() {
        let mut v = Verdicts::default();
        v.learn("groq::x", Refusal::Lacks(Need::Tools), "no tools", t0());
        v.learn("groq::x", Refusal::OutputCap(Some(8192)), "cap", t0());
        v.learn("groq::x", Refusal::Context(Some(8192)), "ctx", t0());
        assert!(
            v.learn("groq::y", Refusal::OutputCap(None), "?", t0())
                .is_none()
        );
        // Groq's 413 is a per-key rate limit, not a window: it states none.
        let tpm = "Request too large for model `llama-3.1-8b-instant` on tokens per minute (TPM): Limit 6000, Requested 9000, please reduce your message size and try again.";
        let stated = crate::upstream::hints::context_window_stated(tpm);
        assert_eq!(stated, None);
        assert!(
            v.learn("groq::y", Refusal::Context(stated), tpm, t0())
                .is_none()
        );
        assert!(v.lacks("groq::x", Need::Tools, t0()).is_some());
        assert!(v.lacks("groq::x", Need::Json, t0()).is_none());
        assert!(v.lacks("groq::y", Need::Tools, t0()).is_none());
        assert_eq!(v.output_cap("groq::x", t0()), Some(8192));
        assert_eq!(v.context_window("groq::x", t0()), Some(8192));
        let later = t0() + VERDICT_TTL - chrono::TimeDelta::seconds(1);
        assert!(v.lacks("groq::x", Need::Tools, later).is_some());
        let day = t0() + VERDICT_TTL;
        assert!(v.lacks("groq::x", Need::Tools, day).is_none());
        assert_eq!(v.output_cap("groq::x", day), None);
        v.prune(day);
        assert!(v.is_empty());
    }

    #[test]
    fn the_smallest_known_window_counts_and_names_its_source() {
        assert_eq!(known_window(None, None, None), None);
        assert_eq!(
            known_window(Some(131_072), None, Some(8192)),
            Some((8192, WindowSource::Learned))
        );
        assert_eq!(
            known_window(Some(8192), Some(8192), Some(16_384)),
            Some((8192, WindowSource::Catalog))
        );
    }

    #[test]
    fn the_later_end_wins_and_the_file_shape_round_trips() {
        let mut v = Verdicts::default();
        v.learn("a::m", Refusal::Lacks(Need::Json), "later", t0());
        let early = Verdict {
            until: t0(),
            limit: None,
            message: None,
        };
        v.insert("a::m", "json", early);
        assert!(v.lacks("a::m", Need::Json, t0()).is_some());
        let text = serde_json::to_string(&v).unwrap();
        assert!(text.starts_with(r#"{"a::m":{"json":{"until":"#), "{text}");
        let back: Verdicts = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }
}
