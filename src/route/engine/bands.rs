//! Routing by need: which candidates can take a request, in three bands.
//!
//! A request that needs tools, a JSON schema or an image read goes first
//! to the models the latest probe found able (`stats/capabilities.json`,
//! written by `check`), then to the models nobody knows about, and never
//! to a model known unable: the latest probe said no, or an upstream
//! refused the need more recently than that probe (a mark in the route
//! state, [`Verdicts::lacks`], kept a day). The probe's verdict wins once
//! it is newer than the mark. A prompt over a model's known context window
//! ([`known_window`], the one rule) rules it out too; an unknown window
//! rules nothing out. Within each band the order is as it was.
//!
//! A request with no capability need does none of this: its candidates
//! keep their order, and nothing is looked up for them.

use rustc_hash::FxHashMap;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::capabilities::{Capability, Findings, Judgement};
use crate::error::Result;
use crate::route::ask::Ask;
use crate::route::domain::RouteError;
use crate::route::verdicts::{VERDICT_TTL, Verdicts, WindowSource, known_window};
use crate::state::Watched;
use crate::upstream::dialect::Need;

use super::{Candidate, Engine};

/// The latest probe verdicts, as route reads them: `capabilities.json`
/// with its times parsed, watched like the state file. Keyed by
/// `provider::model` from the file `check` writes, never by what a client
/// sends: a fast hash, looked up per candidate for a request with a need.
#[derive(Debug, Default)]
pub struct Probed(FxHashMap<String, [Probe; 3]>);

/// One capability's latest probe of one model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probe {
    pub verdict: Judgement,
    /// When the probe that decided it started.
    pub seen: Option<DateTime<Utc>>,
    /// Why a `no`.
    pub reason: Option<String>,
}

impl From<&Findings> for Probed {
    fn from(f: &Findings) -> Probed {
        let map = f
            .models()
            .map(|(key, _)| {
                let probes = Capability::ALL.map(|cap| {
                    f.get(key, cap).map_or_else(Probe::default, |x| Probe {
                        verdict: x.verdict,
                        seen: x.seen_at(),
                        reason: x.reason.clone(),
                    })
                });
                (key.to_string(), probes)
            })
            .collect();
        Probed(map)
    }
}

impl Watched for Probed {
    const KEPT: &'static str = "the capability verdicts read before";

    fn load(path: &Path) -> Result<Probed> {
        Ok(Probed::from(&Findings::load(path)?))
    }
}

impl Probed {
    /// The latest probe of `cap` on `key` (`provider::model`), if any.
    pub fn get(&self, key: &str, cap: Capability) -> Option<&Probe> {
        self.0.get(key).map(|p| &p[cap as usize])
    }

    /// How many models have a verdict.
    pub fn models(&self) -> usize {
        self.0.len()
    }
}

/// Where a candidate stands for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Ability {
    /// Known able for every capability the request needs.
    Able,
    /// Not known unable, and not known able for every capability it needs.
    Unknown,
    /// Known unable: the need, and why, for the trail and the error.
    Unable(Need, String),
}

/// What route knows of `key`'s ability to serve `need` at `now`, from the
/// latest probe (`probed`) and the upstreams' refusals (`verdicts`): a
/// refusal newer than the probe (or with no probe) says unable; otherwise
/// the probe's verdict decides, and a need no probe covers (`n`, audio, …)
/// is able unless refused.
pub fn ability(
    probed: &Probed,
    verdicts: &Verdicts,
    key: &str,
    need: Need,
    now: DateTime<Utc>,
) -> Ability {
    ability_for(probed, verdicts, key, need, true, now)
}

/// [`ability`], for a request whose JSON need is a `json_schema` (`schema`)
/// or only `json_object`. The json probe asks for a schema, so its "no"
/// rules out only schema requests: a model that fails a strict schema may
/// still return plain JSON, and is unknown for it. Its "yes" holds for
/// both, and an upstream's refusal of JSON mode rules out both.
pub fn ability_for(
    probed: &Probed,
    verdicts: &Verdicts,
    key: &str,
    need: Need,
    schema: bool,
    now: DateTime<Utc>,
) -> Ability {
    let cap = Capability::of_need(need);
    let probe = cap.and_then(|c| probed.get(key, c));
    let seen = probe.and_then(|p| p.seen);
    if let Some(v) = verdicts.lacks(key, need, now) {
        let learned = v.until - VERDICT_TTL;
        if seen.is_none_or(|s| learned > s) {
            return Ability::Unable(
                need,
                format!(
                    "cannot {} (the upstream said so: {}; until {})",
                    need.ability(),
                    v.message.as_deref().unwrap_or("refused"),
                    crate::time::format_ts(v.until)
                ),
            );
        }
    }
    match (cap, probe.map(|p| p.verdict)) {
        (None, _) => Ability::Able,
        (Some(_), Some(Judgement::Yes)) => Ability::Able,
        (Some(Capability::Json), Some(Judgement::No)) if !schema => Ability::Unknown,
        (Some(c), Some(Judgement::No)) => {
            let p = probe.expect("a verdict has a probe");
            let when = p
                .seen
                .map(|s| format!(" at {}", crate::time::format_ts(s)))
                .unwrap_or_default();
            let reason = p
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            Ability::Unable(
                need,
                format!(
                    "cannot {} (the {c} probe{when} failed{reason})",
                    need.ability()
                ),
            )
        }
        (Some(_), _) => Ability::Unknown,
    }
}

/// What a view shows of one model's capability: `yes`, `no` or `unknown`,
/// as routing judges it now.
pub fn judgement(
    probed: &Probed,
    verdicts: &Verdicts,
    key: &str,
    cap: Capability,
    now: DateTime<Utc>,
) -> Judgement {
    // Speed is a figure, never a request need: views show no verdict.
    let Some(need) = cap.need() else {
        return Judgement::Unknown;
    };
    match ability(probed, verdicts, key, need, now) {
        Ability::Able => Judgement::Yes,
        Ability::Unknown => Judgement::Unknown,
        Ability::Unable(..) => Judgement::No,
    }
}

/// What the views show of one routable model: its context window and
/// where it came from, and each capability as routing judges it.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub window: Option<(u64, WindowSource)>,
    /// In [`Capability::ALL`]'s order.
    pub capabilities: [Judgement; 3],
}

impl Engine {
    /// The band of `c` for `ask`, or the need it cannot serve and why:
    /// the first need its dialect cannot carry, a prompt over its known
    /// context window, or a need it is known unable to serve. `probed` is
    /// `None` when the request has no capability need.
    pub(super) fn judge(
        &self,
        c: &Candidate,
        ask: &Ask,
        verdicts: &Verdicts,
        probed: Option<&Probed>,
        now: DateTime<Utc>,
    ) -> Ability {
        let dialect = c.provider.provider.dialect;
        if let Some(n) = ask.needs.iter().find(|n| !dialect.carries(**n)) {
            return Ability::Unable(
                *n,
                format!("cannot {} (the {} dialect)", n.ability(), dialect.as_str()),
            );
        }
        if let Some(n) = ask.openai_only
            && !crate::upstream::dialect::wire(dialect).passes_through()
        {
            return Ability::Unable(
                n,
                format!(
                    "cannot {} in this form (legacy functions or built-in tools; the {} dialect takes function tools)",
                    n.ability(),
                    dialect.as_str()
                ),
            );
        }
        let key = c.id.as_str();
        if let Some((w, source)) = known_window(
            c.provider.provider.info(&c.model).context_window,
            None,
            verdicts.context_window(key, now),
        ) && ask.prompt_tokens > w
        {
            return Ability::Unable(
                Need::Context,
                format!(
                    "cannot {} (context window {w} tokens ({}), prompt about {})",
                    Need::Context.ability(),
                    <&str>::from(source),
                    ask.prompt_tokens
                ),
            );
        }
        if ask.needs.is_empty() {
            return Ability::Able;
        }
        let empty;
        let probed = match probed {
            Some(p) => p,
            None => {
                empty = Probed::default();
                &empty
            }
        };
        let mut band = Ability::Able;
        for n in &ask.needs {
            match ability_for(probed, verdicts, key, *n, ask.json_schema, now) {
                Ability::Able => {}
                Ability::Unknown => band = Ability::Unknown,
                unable => return unable,
            }
        }
        band
    }

    /// The largest known context window among the active candidates for
    /// `model`, and whose it is (`provider::model`).
    pub fn largest_window(&self, model: Option<&str>) -> Option<(u64, String)> {
        let candidates = self.candidates(model).ok()?;
        let now = self.clock.now();
        let st = self.ledger.lock();
        candidates
            .iter()
            .filter_map(|c| {
                let key = c.key();
                known_window(
                    c.provider.provider.info(&c.model).context_window,
                    None,
                    st.verdicts.context_window(&key, now),
                )
                .map(|(w, _)| (w, key))
            })
            .max_by_key(|(w, _)| *w)
    }

    /// The error for a prompt that no active model can hold: it names the
    /// largest window among them.
    pub(super) fn too_long(&self, ask: &Ask) -> RouteError {
        RouteError::ContextTooSmall {
            prompt_tokens: ask.prompt_tokens,
            largest: self.largest_window(ask.model.as_deref()),
        }
    }

    /// What the views show of each `provider::model` in `keys` (unknown
    /// ones get nothing known).
    pub fn facts(&self, keys: &[String]) -> Vec<Facts> {
        let now = self.clock.now();
        let probed = self.record.probed();
        let st = self.ledger.lock();
        keys.iter()
            .map(|key| {
                let catalog = crate::catalog::ModelKey::split(key).and_then(|(p, m)| {
                    self.providers
                        .iter()
                        .find(|r| r.provider.name == p)
                        .and_then(|r| r.provider.info(m).context_window)
                });
                Facts {
                    window: known_window(catalog, None, st.verdicts.context_window(key, now)),
                    capabilities: Capability::ALL
                        .map(|cap| judgement(&probed, &st.verdicts, key, cap, now)),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Finding;
    use crate::upstream::hints::Refusal;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn probed(verdict: Judgement, seen: &str) -> Probed {
        let mut f = Findings::default();
        f.record(
            "a::m",
            Capability::Tools,
            Finding {
                verdict,
                seen: Some(seen.into()),
                reason: Some("wrong_answer: text".into()),
                ..Finding::default()
            },
        );
        Probed::from(&f)
    }

    #[test]
    fn a_probe_decides_and_a_newer_refusal_overrules_it_until_a_newer_probe() {
        let now = t("2026-12-02T12:00:00Z");
        let none = Verdicts::default();
        let yes = probed(Judgement::Yes, "2026-12-02T10:00:00Z");
        assert_eq!(
            ability(&yes, &none, "a::m", Need::Tools, now),
            Ability::Able
        );
        assert_eq!(
            ability(&yes, &none, "a::m", Need::Json, now),
            Ability::Unknown
        );
        assert_eq!(
            ability(&yes, &none, "b::m", Need::Tools, now),
            Ability::Unknown
        );
        // A failed schema probe rules out schema requests only.
        let mut f = Findings::default();
        f.record(
            "a::m",
            Capability::Json,
            Finding {
                verdict: Judgement::No,
                seen: Some("2026-12-02T10:00:00Z".into()),
                ..Finding::default()
            },
        );
        let no_json = Probed::from(&f);
        assert!(matches!(
            ability_for(&no_json, &none, "a::m", Need::Json, true, now),
            Ability::Unable(Need::Json, _)
        ));
        assert_eq!(
            ability_for(&no_json, &none, "a::m", Need::Json, false, now),
            Ability::Unknown
        );
        // A need no probe covers is able unless refused.
        assert_eq!(ability(&yes, &none, "b::m", Need::N, now), Ability::Able);
        let no = probed(Judgement::No, "2026-12-02T10:00:00Z");
        match ability(&no, &none, "a::m", Need::Tools, now) {
            Ability::Unable(Need::Tools, why) => {
                assert!(why.contains("wrong_answer: text"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        // Refused at 11:00, after the 10:00 probe: unable.
        let mut marks = Verdicts::default();
        marks.learn(
            "a::m",
            Refusal::Lacks(Need::Tools),
            "tools are not supported",
            t("2026-12-02T11:00:00Z"),
        );
        assert!(matches!(
            ability(&yes, &marks, "a::m", Need::Tools, now),
            Ability::Unable(Need::Tools, _)
        ));
        // Without any probe too.
        assert!(matches!(
            ability(&Probed::default(), &marks, "a::m", Need::Tools, now),
            Ability::Unable(Need::Tools, _)
        ));
        // A probe at 11:30 that passed lifts the mark.
        let newer = probed(Judgement::Yes, "2026-12-02T11:30:00Z");
        assert_eq!(
            ability(&newer, &marks, "a::m", Need::Tools, now),
            Ability::Able
        );
        assert_eq!(
            judgement(&newer, &marks, "a::m", Capability::Tools, now),
            Judgement::Yes
        );
        assert_eq!(
            judgement(&yes, &marks, "a::m", Capability::Tools, now),
            Judgement::No
        );
    }
}
