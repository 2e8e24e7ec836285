//! What `state` and `brief` show of a model's capabilities: the latest
//! verdicts (`stats/capabilities.json`), which of them the catalog lists,
//! and the context window that counts
//! ([`known_window`](crate::route::verdicts::known_window)) with where it
//! came from, as one short cell (`tools ✔ json ✗ vision ? (3h) 128k`) and
//! as JSON.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::capabilities::{Capability, Findings, Judgement};
use crate::catalog::{Catalog, ModelInfo};
use crate::format::{fmt_age, fmt_tokens};
use crate::route::verdicts::{Verdicts, WindowSource, known_window};

/// One capability of one model, as the views show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapView {
    pub verdict: Judgement,
    /// When the probe that decided it started; `null` when never decided.
    pub seen: Option<String>,
    /// Why a `no`, as the verdicts file has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the catalog lists it for the model (`model_info`'s
    /// `capabilities`, unless the provider opted out with `capabilities =
    /// false`): `check` probes it without `--capabilities all`.
    pub listed: bool,
    /// Whether the verdicts file has an entry for it at all.
    #[serde(skip)]
    pub recorded: bool,
}

/// Every capability's view, in [`Capability::ALL`]'s order; in JSON an
/// object keyed by the capability's name, in that order.
#[derive(Debug, Clone, PartialEq)]
pub struct CapViews(Vec<(Capability, CapView)>);

impl CapViews {
    pub fn iter(&self) -> impl Iterator<Item = (Capability, &CapView)> {
        self.0.iter().map(|(c, v)| (*c, v))
    }
}

impl Serialize for CapViews {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(c, v)| (c.as_str(), v)))
    }
}

/// The context window that counts, and its source.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowView {
    pub tokens: u64,
    pub source: WindowSource,
}

/// Everything the views show of one model's capabilities. In JSON, every
/// capability appears (`unknown` when nothing is known).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCaps {
    pub capabilities: CapViews,
    pub context_window: Option<WindowView>,
}

impl ModelCaps {
    /// The view of `key` (`provider::model`): its verdicts in `findings`,
    /// what the catalog's `info` lists and documents, and the window an
    /// upstream stated (route's `learned` verdicts, in force at `now`).
    pub fn of(
        key: &str,
        info: ModelInfo,
        findings: &Findings,
        learned: &Verdicts,
        now: DateTime<Utc>,
    ) -> ModelCaps {
        let listed = info.capabilities.unwrap_or_default();
        let capabilities = Capability::ALL
            .into_iter()
            .map(|c| {
                let f = findings.get(key, c);
                let view = CapView {
                    verdict: f.map_or(Judgement::Unknown, |f| f.verdict),
                    seen: f.and_then(|f| f.seen.clone()),
                    reason: f.and_then(|f| f.reason.clone()),
                    listed: listed.contains(c),
                    recorded: f.is_some(),
                };
                (c, view)
            })
            .collect();
        let capabilities = CapViews(capabilities);
        let window = known_window(info.context_window, None, learned.context_window(key, now))
            .map(|(tokens, source)| WindowView { tokens, source });
        ModelCaps {
            capabilities,
            context_window: window,
        }
    }

    /// Whether the verdicts file says anything about this model: the
    /// views add their capability column only when some model has this.
    pub fn probed(&self) -> bool {
        self.capabilities.iter().any(|(_, c)| c.recorded)
    }

    /// Whether the brief lists the model: something recorded or listed.
    pub fn of_interest(&self) -> bool {
        self.capabilities
            .iter()
            .any(|(_, c)| c.recorded || c.listed)
    }

    /// The capabilities the cell shows: those the verdicts file records
    /// or the catalog lists, in [`Capability::ALL`]'s order.
    fn shown(&self) -> impl Iterator<Item = (Capability, &CapView)> {
        self.capabilities
            .iter()
            .filter(|(_, v)| v.recorded || v.listed)
    }

    /// The age of the oldest verdict shown, in seconds at `now`.
    fn oldest(&self, now: DateTime<Utc>) -> Option<i64> {
        self.shown()
            .filter_map(|(_, v)| crate::time::parse_ts(v.seen.as_deref()?))
            .min()
            .map(|seen| now.timestamp() - seen)
    }

    /// The one-cell summary: each capability shown, with `✔` (passed),
    /// `✗` (failed) or `?` (unknown); the age of the oldest verdict in
    /// brackets; then the context window, with its source unless it is the
    /// catalog. `tools ✔ json ✗ vision ? (3h) 128k`, `8k learned`; `—`
    /// when there is nothing to show.
    pub fn cell(&self, now: DateTime<Utc>) -> String {
        let mut parts: Vec<String> = self
            .shown()
            .map(|(name, v)| format!("{name} {}", mark(v.verdict)))
            .collect();
        if let Some(age) = self.oldest(now) {
            parts.push(format!("({})", fmt_age(age)));
        }
        if let Some(w) = self.context_window {
            let mut s = fmt_tokens(w.tokens);
            if w.source != WindowSource::Catalog {
                s.push(' ');
                s.push_str(w.source.into());
            }
            parts.push(s);
        }
        if parts.is_empty() {
            "—".into()
        } else {
            parts.join(" ")
        }
    }
}

/// What the catalog says of `key` (`provider::model`) for the views:
/// its `model_info`, with no listed capability when the provider opted out
/// of capability probes (`capabilities = false`), since `check` never
/// probes those; nothing for a provider the catalog does not have.
pub fn catalog_info(catalog: &Catalog, key: &str) -> ModelInfo {
    let (p, m) = crate::catalog::ModelKey::split(key).unwrap_or((key, ""));
    let Some(provider) = catalog.provider(p) else {
        return ModelInfo::default();
    };
    let mut info = provider.info(m);
    if !provider.capabilities {
        info.capabilities = None;
    }
    info
}

/// [`Findings::load`] for a view: a file that cannot be read shows every
/// capability as unknown, and the error (naming the file; the file is
/// never written) comes back for the view to show beside its output.
pub fn read_findings(path: &std::path::Path) -> (Findings, Option<String>) {
    match Findings::load(path) {
        Ok(f) => (f, None),
        Err(e) => (Findings::default(), Some(e.to_string())),
    }
}

/// `✔` yes, `✗` no, `?` unknown.
pub fn mark(j: Judgement) -> &'static str {
    j.mark()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Finding;
    use crate::upstream::hints::Refusal;

    fn now() -> DateTime<Utc> {
        "2026-12-02T12:00:00Z".parse().unwrap()
    }

    fn findings() -> Findings {
        serde_json::from_str(
            r#"{
  "groq::m": {
    "tools": {"verdict": "yes", "seen": "2026-12-02T09:00:00Z"},
    "json": {"verdict": "no", "seen": "2026-12-02T11:00:00Z", "reason": "wrong_answer: not JSON"}
  },
  "groq::old": {"vision": {"verdict": "yes", "seen": "2026-11-29T12:00:00Z"}}
}"#,
        )
        .unwrap()
    }

    fn info(window: Option<u64>, caps: &[Capability]) -> ModelInfo {
        ModelInfo {
            context_window: window,
            capabilities: (!caps.is_empty()).then(|| caps.iter().copied().collect()),
            ..ModelInfo::default()
        }
    }

    #[test]
    fn the_cell_shows_recorded_and_listed_capabilities_with_the_oldest_age() {
        let f = findings();
        let none = Verdicts::default();
        let c = ModelCaps::of(
            "groq::m",
            info(Some(131_072), &[Capability::Vision]),
            &f,
            &none,
            now(),
        );
        assert_eq!(c.cell(now()), "tools ✔ json ✗ vision ? (3h) 128k");
        assert!(c.probed());
        // Only listed: unknown, no age.
        let c = ModelCaps::of(
            "groq::new",
            info(None, &[Capability::Tools]),
            &f,
            &none,
            now(),
        );
        assert_eq!(c.cell(now()), "tools ?");
        assert!(!c.probed() && c.of_interest());
        // Days old.
        let c = ModelCaps::of("groq::old", info(None, &[]), &f, &none, now());
        assert_eq!(c.cell(now()), "vision ✔ (3d)");
        // Nothing at all; a window alone.
        let c = ModelCaps::of("x::y", info(None, &[]), &f, &none, now());
        assert_eq!(c.cell(now()), "—");
        assert!(!c.of_interest());
        let c = ModelCaps::of("x::y", info(Some(200_000), &[]), &f, &none, now());
        assert_eq!(c.cell(now()), "200k");
    }

    #[test]
    fn a_smaller_learned_window_counts_and_says_so_until_it_expires() {
        let mut learned = Verdicts::default();
        learned.learn(
            "groq::m",
            Refusal::Context(Some(8192)),
            "maximum context length is 8192 tokens",
            now(),
        );
        let f = Findings::default();
        let c = ModelCaps::of("groq::m", info(Some(131_072), &[]), &f, &learned, now());
        assert_eq!(
            c.context_window,
            Some(WindowView {
                tokens: 8192,
                source: WindowSource::Learned
            })
        );
        assert_eq!(c.cell(now()), "8k learned");
        let later = now() + crate::route::verdicts::VERDICT_TTL;
        let c = ModelCaps::of("groq::m", info(Some(131_072), &[]), &f, &learned, later);
        assert_eq!(c.cell(later), "128k");
    }

    #[test]
    fn json_has_every_capability_and_the_window_with_its_source() {
        let mut f = findings();
        f.record(
            "groq::m",
            Capability::Vision,
            Finding {
                verdict: Judgement::Unknown,
                ..Finding::default()
            },
        );
        let c = ModelCaps::of(
            "groq::m",
            info(Some(8192), &[Capability::Tools]),
            &f,
            &Verdicts::default(),
            now(),
        );
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "capabilities": {
                    "tools": {"verdict": "yes", "seen": "2026-12-02T09:00:00Z", "listed": true},
                    "json": {"verdict": "no", "seen": "2026-12-02T11:00:00Z", "reason": "wrong_answer: not JSON", "listed": false},
                    "vision": {"verdict": "unknown", "seen": null, "listed": false}
                },
                "context_window": {"tokens": 8192, "source": "catalog"}
            })
        );
        let order: Vec<&String> = v["capabilities"].as_object().unwrap().keys().collect();
        assert_eq!(order, ["tools", "json", "vision"]);
        // Recorded as unknown still shows, as "?".
        assert_eq!(c.cell(now()), "tools ✔ json ✗ vision ? (3h) 8k");
    }
}
