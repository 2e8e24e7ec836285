//! The plan of a `check` run: which providers run, which of their models
//! are probed, which are left out and why, and when each probe starts;
//! and which capability probe each provider may add after its basic
//! probes. Nothing here sends a request or touches a file.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::capabilities::{self, CapSet, Capability, Findings, Judgement};
use crate::catalog::{Resolved, Unusable, model_key};
use crate::cli::CapabilityProbes;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::outcome::Verdict;
use crate::settings::Settings;
use crate::state::{ModelState, StateEntry, States};

/// One provider's share of a run.
#[derive(Debug)]
pub struct Lane {
    pub resolved: Resolved,
    pub models: Vec<String>,
    pub spacing: Duration,
    pub timeout: Duration,
    /// The capability probe this provider may add after its basic probes;
    /// `None` when it may add none (`--capabilities none`, the provider's
    /// `capabilities = false`, or no model with a capability to probe).
    pub caps: Option<CapPlan>,
}

impl Lane {
    /// After its models changed: its capability plan keeps only the
    /// models still in the lane, and goes when none is left.
    pub fn caps_follow_models(&mut self) {
        if let Some(caps) = &mut self.caps {
            caps.wanted.retain(|(m, _)| self.models.contains(m));
        }
        if self.caps.as_ref().is_some_and(|c| c.wanted.is_empty()) {
            self.caps = None;
        }
    }
}

/// What a lane may probe for capabilities: each model's candidates, and
/// what was known of them when the run started. The lane chooses one probe
/// ([`CapPlan::choose`]) once its basic probes are done, because only a
/// model whose basic probe just passed is worth the tokens.
#[derive(Debug, Clone)]
pub struct CapPlan {
    /// The provider's name, for the verdicts' `provider::model` keys.
    pub provider: String,
    /// The lane's models that have capabilities to probe, in lane order,
    /// with those capabilities.
    pub wanted: Vec<(String, CapSet)>,
    /// What the catalog lists for each model (`model_info`): among due
    /// probes, these go before those only `--capabilities all` adds.
    pub listed: BTreeMap<String, CapSet>,
    /// The verdicts (`capabilities.json`) as the run found them, shared by
    /// every lane.
    pub findings: Arc<Findings>,
    /// The state entries of the `wanted` models as the run found them, by
    /// model id; a model without one is active.
    pub states: BTreeMap<String, StateEntry>,
    /// What "now" is when a verdict's age is judged.
    pub clock: Clock,
}

/// The capability probe a lane chose: the most overdue verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct CapChoice {
    pub model: String,
    pub capability: Capability,
    /// How overdue its verdict is ([`capabilities::overdue`]);
    /// `TimeDelta::MAX` when it was never decided.
    pub overdue: TimeDelta,
}

impl CapChoice {
    /// How overdue, in words: "never decided", or "overdue by 3h" (a
    /// model back to `active` since its verdict is overdue by the time
    /// since it came back).
    pub fn why(&self) -> String {
        if self.overdue == TimeDelta::MAX {
            "never decided".into()
        } else {
            format!(
                "overdue by {}",
                crate::duration::format(self.overdue.num_seconds().max(0) as u64)
            )
        }
    }
}

/// How a due capability probe ranks, best highest: listed by the catalog,
/// then more overdue, then fewer decided verdicts for its model.
type Rank = (bool, TimeDelta, std::cmp::Reverse<usize>);

impl CapPlan {
    /// The most overdue (model, capability) among `passed`: the lane's
    /// models whose basic probe passed in this run, each with the `ts` of
    /// that probe. A model is judged by its state after that probe (a
    /// paused model that passes comes back to `active`, which makes its
    /// verdicts due at once); one that is not active is never chosen. A
    /// capability the catalog lists for its model goes before one it does
    /// not, however overdue. Ties (verdicts never decided, above all) go
    /// to the model with the fewest decided verdicts, then to the model
    /// earlier in the lane, then to [`Capability::PROBED`]'s order. `None`
    /// when nothing is due.
    pub fn choose(&self, passed: &[(&str, &str)], now: DateTime<Utc>) -> Option<CapChoice> {
        let mut best: Option<(CapChoice, Rank)> = None;
        for (model, set) in &self.wanted {
            let Some((_, ts)) = passed.iter().find(|(m, _)| *m == model.as_str()) else {
                continue;
            };
            let entry = self.states.get(model).cloned().map(|mut e| {
                // Only a pass gets here, and a pass never disables.
                crate::state::step(&mut e, Verdict::Pass, ts, u32::MAX);
                e
            });
            if entry
                .as_ref()
                .is_some_and(|e| e.state != ModelState::Active)
            {
                continue;
            }
            // Among equally overdue verdicts (never decided, above all), the
            // model the record knows least about goes first, so a new
            // catalog learns something of every model before all of one.
            let key = self.key(model);
            let decided = set
                .iter()
                .filter(|c| self.findings.verdict(&key, *c) != Judgement::Unknown)
                .count();
            let listed = self.listed.get(model).copied().unwrap_or_default();
            for cap in set.iter() {
                let finding = self.findings.get(&key, cap);
                let Some(overdue) = capabilities::overdue(finding, entry.as_ref(), now) else {
                    continue;
                };
                let rank = (listed.contains(cap), overdue, std::cmp::Reverse(decided));
                if best.as_ref().is_none_or(|(_, r)| rank > *r) {
                    best = Some((
                        CapChoice {
                            model: model.clone(),
                            capability: cap,
                            overdue,
                        },
                        rank,
                    ));
                }
            }
        }
        best.map(|(c, _)| c)
    }

    fn key(&self, model: &str) -> String {
        model_key(&self.provider, model)
    }
}

pub use crate::run_observer::Skipped;

/// A model left out because of its state.
#[derive(Debug, Clone, Serialize)]
pub struct NotProbed {
    pub model: String,
    pub state: ModelState,
}

/// What a run will do, and what it leaves out.
#[derive(Debug)]
pub struct Plan {
    pub lanes: Vec<Lane>,
    pub skipped: Vec<Skipped>,
    pub not_probed: Vec<NotProbed>,
}

/// Every model the run covers, probed or skipped as disabled, as
/// (provider, model).
pub fn scope(plan: &Plan) -> Vec<(String, String)> {
    let mut scope: Vec<(String, String)> = plan
        .lanes
        .iter()
        .flat_map(|l| {
            l.models
                .iter()
                .map(|m| (l.resolved.provider.name.clone(), m.clone()))
        })
        .collect();
    scope.extend(plan.not_probed.iter().filter_map(|n| {
        crate::catalog::ModelKey::split(&n.model).map(|(p, m)| (p.to_string(), m.to_string()))
    }));
    scope
}

/// Why a run has nothing to do, and what to do about it. A cron job that
/// lost its keys must not look healthy, so this is an error (exit 2).
pub fn nothing_to_probe(plan: &Plan) -> Error {
    let mut why = Vec::new();
    let missing = plan.skipped.iter().filter(|s| s.missing_key()).count();
    if missing > 0 {
        why.push(format!("{missing} skipped for a missing key"));
    }
    let other = plan.skipped.len() - missing;
    if other > 0 {
        why.push(format!("{other} off or misconfigured"));
    }
    if !plan.not_probed.is_empty() {
        why.push(format!("{} model(s) disabled", plan.not_probed.len()));
    }
    let detail = if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join(", "))
    };
    let mut msg = format!(
        "nothing to probe: no selected provider is ready{detail}. Set a provider's key variable (`llmprobe check --list` names them), turn on a local server, or try `llmprobe demo`"
    );
    if !plan.not_probed.is_empty() {
        msg.push_str("; re-enable a disabled model with `llmprobe state enable P::M`");
    }
    let details: Vec<String> = plan
        .skipped
        .iter()
        .map(|s| format!("\n  {}: {}", s.provider, s.reason))
        .collect();
    msg.push_str(&details.concat());
    Error::config(msg)
}

/// The plan for `providers` and `models` (`--provider`, `--model`; empty:
/// all), with `spacing` and `timeout` overriding the catalog's, and the
/// capability probes `capabilities` allows (`--capabilities`). The lanes'
/// verdicts are empty until [`Plan::set_findings`].
pub fn plan(
    s: &Settings,
    providers: &[String],
    models: &[String],
    states: &States,
    spacing: Option<Duration>,
    timeout: Option<Duration>,
    capabilities: CapabilityProbes,
) -> Result<Plan> {
    for p in providers {
        s.catalog.known_provider(p, "--provider")?;
    }
    let wanted_model = |provider: &str, model: &str| {
        models.is_empty()
            || models
                .iter()
                .any(|m| m == model || *m == model_key(provider, model))
    };
    let mut matched_models = 0usize;
    let mut plan = Plan {
        lanes: Vec::new(),
        skipped: Vec::new(),
        not_probed: Vec::new(),
    };
    for p in &s.catalog.providers {
        if !providers.is_empty() && !providers.contains(&p.name) {
            continue;
        }
        let models: Vec<&String> = p
            .models
            .iter()
            .filter(|m| wanted_model(&p.name, m))
            .collect();
        matched_models += models.len();
        if models.is_empty() {
            continue;
        }
        let resolved = match p.resolve() {
            Ok(r) => r,
            Err(Unusable::Off { .. }) if providers.is_empty() => continue,
            Err(why) => {
                plan.skipped.push(Skipped {
                    provider: p.name.clone(),
                    reason: why.to_string(),
                    unset: match &why {
                        Unusable::Missing(vars) => vars.clone(),
                        // Its key is one way to turn it on: it joins the
                        // note of providers without a key.
                        Unusable::Keyless { var } => vec![var.clone()],
                        _ => Vec::new(),
                    },
                });
                continue;
            }
        };
        let mut probe = Vec::new();
        for m in models {
            let key = model_key(&p.name, m);
            match states.state_of(&key) {
                ModelState::Disabled => plan.not_probed.push(NotProbed {
                    model: key,
                    state: ModelState::Disabled,
                }),
                _ => probe.push(m.clone()),
            }
        }
        if !probe.is_empty() {
            let caps = cap_plan(p, &probe, states, capabilities);
            plan.lanes.push(Lane {
                spacing: spacing.unwrap_or(p.spacing),
                timeout: timeout.unwrap_or(p.timeout),
                resolved,
                models: probe,
                caps,
            });
        }
    }
    if !models.is_empty() && matched_models == 0 {
        return Err(Error::config(format!(
            "--model {} matches no model in the catalog (see `llmprobe check --list`)",
            models.join(",")
        )));
    }
    Ok(plan)
}

/// What provider `p` may probe for capabilities among `models`: nothing
/// under `--capabilities none` or the provider's `capabilities = false`;
/// otherwise each model's listed capabilities (`model_info`), or all of
/// them under `--capabilities all`.
fn cap_plan(
    p: &crate::catalog::Provider,
    models: &[String],
    states: &States,
    which: CapabilityProbes,
) -> Option<CapPlan> {
    if !p.capabilities {
        return None;
    }
    let listed: BTreeMap<String, CapSet> = models
        .iter()
        .map(|m| (m.clone(), p.info(m).capabilities.unwrap_or_default()))
        .collect();
    let wanted: Vec<(String, CapSet)> = models
        .iter()
        .filter_map(|m| {
            let set = match which {
                CapabilityProbes::None => return None,
                CapabilityProbes::All => CapSet::all(),
                CapabilityProbes::Listed => listed[m],
            };
            (!set.is_empty()).then(|| (m.clone(), set))
        })
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let states = wanted
        .iter()
        .filter_map(|(m, _)| Some((m.clone(), states.get(&model_key(&p.name, m))?)))
        .collect();
    Some(CapPlan {
        provider: p.name.clone(),
        wanted,
        listed,
        findings: Arc::default(),
        states,
        clock: Clock::from_env(),
    })
}

impl Plan {
    /// Some lane may make a capability probe, so the verdicts are needed.
    pub fn wants_capabilities(&self) -> bool {
        self.lanes.iter().any(|l| l.caps.is_some())
    }

    /// Keep only the models in `keys` (`provider::model`): the rest leave
    /// their lanes, lanes left empty go, and so do the disabled models and
    /// the skipped providers that have no model in `keys` (a run of a chosen
    /// few, `check --paused`, says nothing of the others). Each lane keeps
    /// its spacing, timeout and order.
    pub fn retain_models(&mut self, keys: &BTreeSet<String>) {
        self.drop_models(|k| !keys.contains(k));
        self.not_probed.retain(|n| keys.contains(&n.model));
        self.skipped.retain(|s| {
            keys.iter()
                .any(|k| crate::catalog::ModelKey::split(k).is_some_and(|(p, _)| p == s.provider))
        });
    }

    /// Take the models `gone` says (by `provider::model`) out of their
    /// lanes (and their capability plans); lanes left empty go. What the
    /// run leaves out otherwise stays.
    pub fn drop_models(&mut self, gone: impl Fn(&str) -> bool) {
        for lane in &mut self.lanes {
            let provider = lane.resolved.provider.name.clone();
            lane.models.retain(|m| !gone(&model_key(&provider, m)));
            lane.caps_follow_models();
        }
        self.lanes.retain(|l| !l.models.is_empty());
    }

    /// Give every lane the verdicts the run starts from.
    pub fn set_findings(&mut self, findings: Findings) {
        let findings = Arc::new(findings);
        for caps in self.lanes.iter_mut().filter_map(|l| l.caps.as_mut()) {
            caps.findings = findings.clone();
        }
    }
}

/// When the `i`-th model of a lane starts, after the run's start. Checked:
/// a user's spacing times a model count must not overflow.
pub fn start_offset(lane: &Lane, i: usize) -> Result<Duration> {
    u32::try_from(i)
        .ok()
        .and_then(|i| lane.spacing.checked_mul(i))
        .ok_or_else(|| {
            Error::config(format!(
                "provider {}: spacing {} × {} models is too long a run",
                lane.resolved.provider.name,
                crate::duration::format_secs(lane.spacing),
                lane.models.len()
            ))
        })
}

/// One planned probe, for `--dry-run`.
#[derive(Debug, Serialize)]
pub struct Planned<'a> {
    pub provider: &'a str,
    pub order: usize,
    pub model: &'a str,
    #[serde(serialize_with = "as_secs")]
    pub starts_at_secs: Duration,
    #[serde(serialize_with = "as_secs")]
    pub timeout_secs: Duration,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// The capability probe a lane would make, for `--dry-run`.
#[derive(Debug, Serialize)]
pub struct PlannedCap<'a> {
    pub provider: &'a str,
    pub model: String,
    pub capability: Capability,
    /// "never decided", or how overdue its verdict is.
    pub why: String,
    #[serde(serialize_with = "as_secs")]
    pub starts_at_secs: Duration,
    #[serde(serialize_with = "as_secs")]
    pub timeout_secs: Duration,
}

/// The capability probe each lane would make at `now` if every basic
/// probe passed, with its start: after the lane's last basic probe, one
/// spacing later.
pub fn cap_schedule(plan: &Plan, now: DateTime<Utc>) -> Result<Vec<PlannedCap<'_>>> {
    let ts = crate::time::format_ts(now);
    let mut out = Vec::new();
    for lane in &plan.lanes {
        let Some(caps) = &lane.caps else { continue };
        let passed: Vec<(&str, &str)> = lane
            .models
            .iter()
            .map(|m| (m.as_str(), ts.as_str()))
            .collect();
        if let Some(c) = caps.choose(&passed, now) {
            out.push(PlannedCap {
                provider: &lane.resolved.provider.name,
                why: c.why(),
                model: c.model,
                capability: c.capability,
                starts_at_secs: start_offset(lane, lane.models.len())?,
                timeout_secs: lane.timeout,
            });
        }
    }
    Ok(out)
}

/// Every probe of the plan with its start offset, checked.
pub fn schedule(plan: &Plan) -> Result<Vec<Planned<'_>>> {
    let mut out = Vec::new();
    for lane in &plan.lanes {
        for (i, m) in lane.models.iter().enumerate() {
            out.push(Planned {
                provider: &lane.resolved.provider.name,
                order: i + 1,
                model: m,
                starts_at_secs: start_offset(lane, i)?,
                timeout_secs: lane.timeout,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::prompts::Pool;

    fn settings() -> Settings {
        let toml = r#"
            include_default_catalog = false
            [[providers]]
            name = "p"
            dialect = "openai"
            base_url = "http://127.0.0.1:9/v1"
            models = ["t", "tj", "plain", "off"]
            model_info = { "t" = { capabilities = ["tools"] }, "tj" = { capabilities = ["json", "tools"] }, "off" = { capabilities = ["vision"] } }
            [[providers]]
            name = "optout"
            dialect = "openai"
            base_url = "http://127.0.0.1:9/v1"
            models = ["t"]
            capabilities = false
            model_info = { "t" = { capabilities = ["tools"] } }
        "#;
        Settings {
            catalog: Catalog::from_toml_str(toml, "test.toml").unwrap(),
            prompts: Pool::embedded(),
            stats_dir: std::path::PathBuf::from("/nonexistent"),
            config: None,
        }
    }

    fn wanted(plan: &Plan, provider: &str) -> Option<Vec<(String, Vec<Capability>)>> {
        let lane = plan
            .lanes
            .iter()
            .find(|l| l.resolved.provider.name == provider)?;
        Some(
            lane.caps
                .as_ref()?
                .wanted
                .iter()
                .map(|(m, set)| (m.clone(), set.iter().collect()))
                .collect(),
        )
    }

    #[test]
    fn retain_models_keeps_only_the_chosen_models_in_lane_order() {
        let s = settings();
        let mut states = States::default();
        let disabled = StateEntry {
            state: ModelState::Disabled,
            ..StateEntry::active()
        };
        states.set("p::off", disabled);
        let mut plan = plan(&s, &[], &[], &states, None, None, CapabilityProbes::Listed).unwrap();
        assert_eq!(plan.lanes.len(), 2);
        assert_eq!(plan.not_probed.len(), 1);
        let keys: BTreeSet<String> = ["p::plain", "p::t"].map(String::from).into();
        plan.retain_models(&keys);
        assert_eq!(plan.lanes.len(), 1);
        assert_eq!(plan.lanes[0].models, ["t", "plain"]);
        assert_eq!(
            wanted(&plan, "p").unwrap(),
            [("t".to_string(), vec![Capability::Tools])]
        );
        assert!(plan.not_probed.is_empty());
        // Nothing chosen: nothing left.
        plan.retain_models(&BTreeSet::new());
        assert!(plan.lanes.is_empty());
    }

    #[test]
    fn among_verdicts_never_decided_the_model_known_least_goes_first() {
        let all: CapSet = Capability::ALL.into_iter().collect();
        let mut findings = Findings::default();
        findings.record(
            "p::a",
            Capability::Tools,
            crate::capabilities::Finding {
                verdict: Judgement::Yes,
                seen: Some("2026-12-02T11:00:00Z".into()),
                ..Default::default()
            },
        );
        let plan = CapPlan {
            provider: "p".into(),
            wanted: vec![("a".into(), all), ("b".into(), all)],
            listed: BTreeMap::new(),
            findings: Arc::new(findings),
            states: BTreeMap::new(),
            clock: Clock::default(),
        };
        let now: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
        let ts = "2026-12-02T12:00:00Z";
        let c = plan.choose(&[("a", ts), ("b", ts)], now).unwrap();
        // a's json and b's tools are both never decided; b is known least.
        assert_eq!((c.model.as_str(), c.capability), ("b", Capability::Tools));
        let c = plan.choose(&[("a", ts)], now).unwrap();
        assert_eq!((c.model.as_str(), c.capability), ("a", Capability::Json));
    }

    #[test]
    fn a_capability_the_catalog_lists_goes_before_one_it_does_not() {
        let all = CapSet::all();
        let mut findings = Findings::default();
        // b's speed was seen long ago; a's listed speed is overdue by an
        // hour only, and b's unlisted tools never decided.
        for (key, cap, seen) in [
            ("p::a", Capability::Speed, "2026-12-01T11:00:00Z"),
            ("p::b", Capability::Speed, "2026-11-01T11:00:00Z"),
        ] {
            let finding = crate::capabilities::Finding {
                verdict: Judgement::Yes,
                seen: Some(seen.into()),
                ..Default::default()
            };
            findings.record(key, cap, finding);
        }
        let speed: CapSet = [Capability::Speed].into_iter().collect();
        let plan = CapPlan {
            provider: "p".into(),
            wanted: vec![("a".into(), all), ("b".into(), all)],
            listed: [("a".to_string(), speed)].into(),
            findings: Arc::new(findings),
            states: BTreeMap::new(),
            clock: Clock::default(),
        };
        let now: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
        let ts = "2026-12-02T12:00:00Z";
        let c = plan.choose(&[("a", ts), ("b", ts)], now).unwrap();
        assert_eq!((c.model.as_str(), c.capability), ("a", Capability::Speed));
        // Nothing listed is due: the most overdue of the rest.
        let c = plan.choose(&[("b", ts)], now).unwrap();
        assert_eq!((c.model.as_str(), c.capability), ("b", Capability::Tools));
    }

    /// The states of a run in which `p::off` is disabled.
    fn p_off_disabled() -> States {
        let mut states = States::default();
        states.set(
            "p::off",
            serde_json::from_value(serde_json::json!({"state": "disabled"})).unwrap(),
        );
        states
    }

    #[test]
    fn capabilities_listed_all_or_none_and_a_provider_may_opt_out() {
        use Capability::{Json, Tools, Vision};
        let s = settings();
        let states = p_off_disabled();
        let plan_with = |which| plan(&s, &[], &[], &states, None, None, which).unwrap();

        let listed = plan_with(CapabilityProbes::Listed);
        // A disabled model is not in the run, so not capability-probed.
        assert_eq!(
            wanted(&listed, "p").unwrap(),
            [
                ("t".to_string(), vec![Tools]),
                ("tj".to_string(), vec![Tools, Json])
            ]
        );
        assert!(wanted(&listed, "optout").is_none());
        assert!(listed.wants_capabilities());

        let all = plan_with(CapabilityProbes::All);
        let w = wanted(&all, "p").unwrap();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w.iter()
                .all(|(_, c)| c[..] == [Tools, Json, Vision, Capability::Speed])
        );
        assert!(
            wanted(&all, "optout").is_none(),
            "capabilities = false wins"
        );

        let none = plan_with(CapabilityProbes::None);
        assert!(!none.wants_capabilities());
    }

    #[test]
    fn the_dry_run_shows_the_capability_probe_after_the_basic_ones() {
        let s = settings();
        let states = p_off_disabled();
        let mut plan = plan(
            &s,
            &["p".into()],
            &[],
            &states,
            Some(Duration::from_secs(90)),
            None,
            CapabilityProbes::Listed,
        )
        .unwrap();
        let now: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
        let mut f = Findings::default();
        for (m, cap, seen) in [
            ("p::t", Capability::Tools, "2026-12-02T11:00:00Z"),
            ("p::tj", Capability::Tools, "2026-12-01T09:00:00Z"),
            ("p::tj", Capability::Json, "2026-12-01T10:00:00Z"),
        ] {
            let finding = capabilities::Finding {
                verdict: capabilities::Judgement::Yes,
                seen: Some(seen.into()),
                ..Default::default()
            };
            f.record(m, cap, finding);
        }
        plan.set_findings(f);
        let caps = cap_schedule(&plan, now).unwrap();
        assert_eq!(caps.len(), 1);
        let c = &caps[0];
        assert_eq!((c.model.as_str(), c.capability), ("tj", Capability::Tools));
        assert_eq!(c.why, "overdue by 3h");
        // Three models probed (`off` is disabled): the capability probe
        // starts one spacing after the last basic probe.
        assert_eq!(c.starts_at_secs, Duration::from_secs(3 * 90));
    }
}
