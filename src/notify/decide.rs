//! When a `check` run is worth a message: this run's results against what
//! has been alerted before ([`NotifyState`]), under the [`Rules`]
//! (`--notify-on`, `--notify-after`). Pure: the run, the previous state and
//! the time come in; the changes worth telling and the next state go out.
//! docs/alerts.md ("When alerts are sent") is the same rules in prose.
//!
//! What is alerted is [`Rules::on`]: by default a model `disabled` and a
//! provider down (`provider_down`), not a model `paused` (a rate limit or
//! another temporary failure, routine on free tiers, that comes back by
//! itself). The recovery of whatever was alerted is always said.
//!
//! **A model** is judged in a run that probed it (or changed its state):
//!
//! - Its `failed_runs` counts consecutive runs whose probe of it failed; a
//!   pass sets it to 0. A `check --paused` run (a re-probe) never counts a
//!   failure, since it probes only models that are failing already and
//!   would reach N in minutes instead of N runs; its passes do count.
//! - **Paused** (with `paused` in `on`): it is `paused` after the run, no
//!   alert stands for it, and `failed_runs` has reached `--notify-after`.
//! - **Disabled** (with `disabled` in `on`): alerted whatever the count,
//!   and even when a `paused` alert stands (disabled needs a person;
//!   paused does not).
//! - **Still disabled**: disabled models are not probed, so a run also
//!   judges every catalog model `model_state.json` has disabled
//!   ([`Run::disabled`]): one with no `disabled` alert standing (its
//!   disable alert reached no channel, `notify_state.json` was deleted, or
//!   alerts were just configured) is alerted now.
//! - **Recovered**: an alert stands for it, it is `active` after the run,
//!   and its probe passed. Only an alerted model gets a recovery: one that
//!   was never alerted has nothing to resolve, and comes back silently.
//!
//! So a flapping model gets one message per change of direction (down,
//! resolved, down…), never one per run; with `--notify-after N` it is
//! alerted only once it has failed N runs in a row.
//!
//! **A provider** is down in a run in which every probe of its models
//! failed, when the run probed at least two of its models, or every one
//! of them that is not disabled ([`Run::catalog`]: a provider with one
//! model is down when that model fails). A run limited by `--model` to
//! one model of several, or a re-probe of paused models only, does not
//! judge providers down. With `provider_down` in `on`, it is alerted once
//! it has been down `--notify-after` runs in a row, and recovers when an
//! alert stands and any probe of it passes.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::record::NotifyState;
use super::{Change, ChangeKind};
use crate::catalog::{AlertOn, ModelKey, NotifySettings};
use crate::outcome::Entry;
use crate::state::{ModelState, Transition};

/// At most this many characters of a probe's error go into a message.
pub const ERROR_CHARS: usize = 160;

/// A provider is judged down only when a run probed at least this many
/// of its models (or every one it has that is not disabled).
pub const PROVIDER_MIN_MODELS: usize = 2;

/// What is alerted, and after how many failing runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// `--notify-on`, else `[notify] on`.
    pub on: Vec<AlertOn>,
    /// `--notify-after`, else `[notify] after` (at least 1): the runs in a
    /// row a paused model, or a provider down, must have failed.
    pub after: u32,
}

impl Rules {
    /// The rules of `[notify]`, with the flags over them.
    pub fn of(settings: &NotifySettings, on: &[AlertOn], after: Option<u32>) -> Rules {
        let mut on = match on {
            [] => settings.on.clone(),
            on => on.to_vec(),
        };
        on.sort_unstable();
        on.dedup();
        Rules {
            on,
            after: after.unwrap_or(settings.after).max(1),
        }
    }

    fn alerts(&self, what: AlertOn) -> bool {
        self.on.contains(&what)
    }
}

/// What one run did, as `decide` needs it.
pub struct Run<'a> {
    pub at: DateTime<Utc>,
    /// The basic probes the run recorded.
    pub entries: &'a [Entry],
    /// The state changes the run's writer made.
    pub transitions: &'a [Transition],
    /// Each model's state after the run, by `provider::model`.
    pub state_of: &'a dyn Fn(&str) -> ModelState,
    /// A `check --paused` run: re-probes of paused models only.
    pub reprobe: bool,
    /// Every catalog model `model_state.json` has disabled after the run,
    /// by `provider::model`, with the reason it gives.
    pub disabled: &'a [(String, Option<String>)],
    /// Every catalog model, whatever the run chose: how many models a
    /// provider has that may be probed.
    pub catalog: &'a BTreeSet<ModelKey>,
}

/// What to say, and what to remember.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The changes worth a message, each provider's own change first,
    /// then its models', providers and models in name order. Empty: send
    /// nothing.
    pub changes: Vec<Change>,
    pub state: NotifyState,
}

/// The changes worth telling after `run`, given `prev` and `rules`.
/// `clean` redacts and shortens a probe's error for a message.
pub fn decide(
    prev: &NotifyState,
    run: &Run<'_>,
    rules: &Rules,
    clean: &dyn Fn(&str) -> String,
) -> Decision {
    let after = rules.after.max(1);
    let mut next = prev.clone();
    next.fresh = false;
    let mut changes = Vec::new();

    // The run's last basic probe of each model, and its state change.
    let mut probed: BTreeMap<ModelKey, &Entry> = BTreeMap::new();
    for e in run.entries.iter().filter(|e| e.probe.is_none()) {
        probed.insert(ModelKey::new(&e.provider, &e.model), e);
    }
    let mut moved: BTreeMap<&str, (ModelState, &Transition)> = BTreeMap::new();
    for t in run.transitions {
        // Several in one run: from the first, to the last.
        let from = moved.get(t.model.as_str()).map_or(t.from, |(f, _)| *f);
        moved.insert(&t.model, (from, t));
    }

    // Providers.
    let mut by_provider: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in probed.values() {
        by_provider.entry(&e.provider).or_default().push(e);
    }
    for (provider, entries) in &by_provider {
        let s = next.providers.entry(provider.to_string()).or_default();
        let failed = entries.iter().filter(|e| e.ok == 0).count();
        if failed < entries.len() {
            s.failed_runs = 0;
            if let Some((was, alerted_at)) = s.resolve() {
                let passed = entries.len() - failed;
                changes.push(Change {
                    kind: ChangeKind::ProviderRecovered,
                    provider: provider.to_string(),
                    model: None,
                    key: None,
                    from: was,
                    to: "up".into(),
                    reason: format!("{passed} of {} probed models passed", entries.len()),
                    error: None,
                    until: None,
                    alerted_at,
                });
            }
        } else if !run.reprobe && entries.len() >= PROVIDER_MIN_MODELS.min(probeable(run, provider))
        {
            s.failed_runs = s.failed_runs.saturating_add(1);
            if rules.alerts(AlertOn::ProviderDown)
                && s.alerted.is_none()
                && s.failed_runs >= after
                && s.raise("down", run.at)
            {
                changes.push(Change {
                    kind: ChangeKind::ProviderDown,
                    provider: provider.to_string(),
                    model: None,
                    key: None,
                    until: None,
                    from: "up".into(),
                    to: "down".into(),
                    reason: with_runs(
                        format!(
                            "all {} probed models failed: {}",
                            entries.len(),
                            classes(entries)
                        ),
                        s.failed_runs,
                    ),
                    error: entries.iter().find_map(|e| e.error.as_deref()).map(clean),
                    alerted_at: None,
                });
            }
        }
    }

    // Models.
    let still_disabled: BTreeMap<&str, Option<&str>> = run
        .disabled
        .iter()
        .map(|(k, why)| (k.as_str(), why.as_deref()))
        .collect();
    let mut keys: Vec<&str> = probed.keys().map(ModelKey::as_str).collect();
    keys.extend(moved.keys().copied().filter(|k| !probed.contains_key(*k)));
    keys.extend(still_disabled.keys().copied().filter(|k| {
        rules.alerts(AlertOn::Disabled)
            && !probed.contains_key(*k)
            && !moved.contains_key(k)
            && prev.models.get(*k).and_then(|s| s.alerted.as_deref())
                != Some(ModelState::Disabled.as_str())
    }));
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let entry = probed.get(key).copied();
        let moved = moved.get(key);
        let s = next.models.entry(key.to_string()).or_default();
        match entry.map(|e| e.ok != 0) {
            Some(true) => s.failed_runs = 0,
            Some(false) if !run.reprobe => s.failed_runs = s.failed_runs.saturating_add(1),
            _ => {}
        }
        let now = (run.state_of)(key);
        let (provider, model) = split(key, entry);
        match now {
            ModelState::Paused | ModelState::Disabled => {
                // A fresh start (no notify_state.json: alerts were just
                // turned on, or the file was deleted): a model already
                // down before this run is taken as said, so that turning
                // alerts on does not page for every model paused or
                // disabled long ago. No time: it was never sent, so its
                // recovery is not said either.
                if prev.fresh && moved.is_none() && s.alerted.is_none() {
                    s.alerted = Some(now.as_str().into());
                    continue;
                }
                let due = if now == ModelState::Disabled {
                    rules.alerts(AlertOn::Disabled)
                        && s.alerted.as_deref() != Some(ModelState::Disabled.as_str())
                } else {
                    rules.alerts(AlertOn::Paused) && s.alerted.is_none() && s.failed_runs >= after
                };
                // Without a change this run (`--notify-after`, or a model
                // disabled before), what is alerted is the fall from the
                // state an alert stands for, else from active.
                let from = moved.map_or_else(
                    || s.alerted.clone().unwrap_or_else(|| "active".into()),
                    |(from, _)| from.as_str().to_string(),
                );
                if !due || !s.raise(now.as_str(), run.at) {
                    continue;
                }
                let why = moved
                    .map(|(_, t)| t.reason.clone())
                    .or_else(|| entry.map(|e| e.failure_type.to_string()))
                    .or_else(|| {
                        still_disabled
                            .get(key)
                            .copied()
                            .flatten()
                            .map(str::to_string)
                    })
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| now.as_str().to_string());
                changes.push(Change {
                    kind: ChangeKind::ModelDown,
                    provider,
                    model: Some(model),
                    key: None,
                    from,
                    to: now.as_str().into(),
                    reason: with_runs(why, s.failed_runs),
                    error: entry.and_then(|e| e.error.as_deref()).map(clean),
                    until: None,
                    alerted_at: None,
                });
            }
            ModelState::Active => {
                // An alert taken as said at a fresh start (no time) was
                // never sent: there is nothing to resolve.
                if entry.is_some_and(|e| e.ok != 0)
                    && let Some((was, alerted_at)) = s.resolve()
                    && alerted_at.is_some()
                {
                    changes.push(Change {
                        kind: ChangeKind::ModelRecovered,
                        provider,
                        model: Some(model),
                        key: None,
                        from: was,
                        to: ModelState::Active.as_str().into(),
                        reason: "its probe passed".into(),
                        error: None,
                        until: None,
                        alerted_at,
                    });
                }
            }
        }
    }

    next.models.retain(|_, s| !s.is_empty());
    next.providers.retain(|_, s| !s.is_empty());
    changes.sort_by(|a, b| {
        (&a.provider, a.model.is_some(), &a.model).cmp(&(&b.provider, b.model.is_some(), &b.model))
    });
    Decision {
        changes,
        state: next,
    }
}

/// How many of `provider`'s catalog models this run may have probed: those
/// not disabled after it, and those it probed (a model it disabled). At
/// least 1, for a provider the catalog does not know.
fn probeable(run: &Run<'_>, provider: &str) -> usize {
    let probed = |k: &ModelKey| {
        run.entries
            .iter()
            .any(|e| e.probe.is_none() && e.provider == k.provider() && e.model == k.model())
    };
    run.catalog
        .iter()
        .filter(|k| k.provider() == provider)
        .filter(|k| (run.state_of)(k.as_str()) != ModelState::Disabled || probed(k))
        .count()
        .max(1)
}

/// `reason`, with how many runs in a row it has failed when more than one.
fn with_runs(reason: String, runs: u32) -> String {
    if runs > 1 {
        format!("{reason}, {runs} runs in a row")
    } else {
        reason
    }
}

/// The distinct failure classes of `entries`, in order: `timeout and error`.
fn classes(entries: &[&Entry]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in entries {
        let c = if e.failure_type.is_empty() {
            "failed"
        } else {
            e.failure_type
        };
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen.join(" and ")
}

/// (provider, model) of a model key: from its entry when there is one (a
/// model id may itself hold `::`), else split at the first `::`.
fn split(key: &str, entry: Option<&Entry>) -> (String, String) {
    match entry {
        Some(e) => (e.provider.clone(), e.model.clone()),
        None => match ModelKey::split(key) {
            Some((p, m)) => (p.to_string(), m.to_string()),
            None => (String::new(), key.to_string()),
        },
    }
}

/// A probe's error as a message carries it: through `redactor` (the
/// probe redacted it already; a message leaves the machine, so once more),
/// then cut to [`ERROR_CHARS`].
pub fn clean_error(redactor: &crate::upstream::secret::Redactor, text: &str) -> String {
    crate::outcome::shorten(&redactor.redact(text), ERROR_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{FailureType, Outcome};
    use crate::state::States;

    /// Runs `check` would make, one at a time, through the real state
    /// machine: each run's results go through `States::apply_probe` as
    /// the writer applies them, then through `decide`.
    struct Sim {
        states: States,
        notify: NotifyState,
        rules: Rules,
        disable_after: u32,
        n: i64,
        /// The catalog; empty: each run's models, and one more per
        /// provider that no run probes.
        catalog: BTreeSet<ModelKey>,
    }

    /// A result: a pass, a temporary failure (paused) or a hard one.
    #[derive(Clone, Copy)]
    enum R {
        Pass,
        Temp,
        Hard,
    }

    impl Sim {
        /// Alerts on everything (pauses too) after `after` failing runs:
        /// the rules before `[notify] on`, which most tests here are about.
        fn new(after: u32) -> Sim {
            let on = vec![AlertOn::Paused, AlertOn::Disabled, AlertOn::ProviderDown];
            Sim::with(Rules { on, after })
        }

        fn with(rules: Rules) -> Sim {
            Sim {
                states: States::default(),
                notify: NotifyState::default(),
                rules,
                disable_after: 3,
                n: 0,
                catalog: BTreeSet::new(),
            }
        }

        /// The defaults of `[notify]`.
        fn defaults() -> Sim {
            Sim::with(Rules::of(&NotifySettings::default(), &[], None))
        }

        /// One run probing `results` (model key, result); the changes as
        /// `kind provider[::model] from->to`.
        fn run(&mut self, results: &[(&str, R)]) -> Vec<String> {
            self.run_as(results, false)
                .iter()
                .map(|c| {
                    let what = match &c.model {
                        Some(m) => ModelKey::new(&c.provider, m).to_string(),
                        None => c.provider.clone(),
                    };
                    format!("{:?} {what} {}->{}", c.kind, c.from, c.to)
                })
                .collect()
        }

        fn run_as(&mut self, results: &[(&str, R)], reprobe: bool) -> Vec<Change> {
            self.n += 1;
            let at: DateTime<Utc> = "2026-12-02T00:00:00Z".parse().unwrap();
            let at = at + chrono::TimeDelta::hours(self.n);
            let ts = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let mut entries = Vec::new();
            let mut transitions = Vec::new();
            for (key, r) in results {
                let (p, m) = ModelKey::split(key).unwrap();
                let o = match r {
                    R::Pass => outcome(None, None),
                    R::Temp => outcome(Some(FailureType::Timeout), Some("timed out after 2s")),
                    R::Hard => outcome(
                        Some(FailureType::WrongAnswer),
                        Some("said 5, expected 4; key sk-abcdefghijklmnop1234"),
                    ),
                };
                if let Some(t) = self
                    .states
                    .apply_probe(key, o.verdict(), &ts, self.disable_after)
                {
                    transitions.push(t);
                }
                entries.push(Entry::new(ts.clone(), p, m, &o));
            }
            let disabled: Vec<(String, Option<String>)> = self
                .states
                .iter()
                .filter(|(_, e)| e.state == ModelState::Disabled)
                .map(|(k, e)| (k, e.reason))
                .collect();
            let states = self.states.clone();
            let state_of = move |k: &str| states.get(k).map_or(ModelState::Active, |e| e.state);
            let redactor = crate::upstream::secret::Redactor::default();
            let catalog = match self.catalog.is_empty() {
                false => self.catalog.clone(),
                true => results
                    .iter()
                    .flat_map(|(k, _)| {
                        let (p, m) = ModelKey::split(k).unwrap();
                        [ModelKey::new(p, m), ModelKey::new(p, "unprobed")]
                    })
                    .collect(),
            };
            let d = decide(
                &self.notify,
                &Run {
                    at,
                    entries: &entries,
                    transitions: &transitions,
                    state_of: &state_of,
                    reprobe,
                    disabled: &disabled,
                    catalog: &catalog,
                },
                &self.rules,
                &|t| clean_error(&redactor, t),
            );
            self.notify = d.state;
            d.changes
        }
    }

    fn outcome(failure: Option<FailureType>, error: Option<&str>) -> Outcome {
        Outcome {
            failure,
            latency_ms: 5,
            status: Some(if failure.is_some() { 500 } else { 200 }),
            error: error.map(str::to_string),
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        }
    }

    use R::*;

    #[test]
    fn a_pause_alerts_once_and_its_recovery_resolves_it() {
        let mut s = Sim::new(1);
        assert_eq!(s.run(&[("p::a", Pass), ("p::b", Pass)]), [] as [&str; 0]);
        assert_eq!(
            s.run(&[("p::a", Temp), ("p::b", Pass)]),
            ["ModelDown p::a active->paused"]
        );
        // Still paused, still failing: nothing more.
        assert!(s.run(&[("p::a", Temp), ("p::b", Pass)]).is_empty());
        assert_eq!(s.notify.models["p::a"].failed_runs, 2);
        let back = s.run_as(&[("p::a", Pass), ("p::b", Pass)], false);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].kind, ChangeKind::ModelRecovered);
        assert_eq!(
            (back[0].from.as_str(), back[0].to.as_str()),
            ("paused", "active")
        );
        // Linked to the alert it resolves: sent at run 2.
        assert_eq!(
            back[0].alerted_at.unwrap().to_rfc3339(),
            "2026-12-02T02:00:00+00:00"
        );
        // Nothing is left to remember.
        assert_eq!(s.notify, NotifyState::default());
    }

    #[test]
    fn notify_after_waits_for_n_failing_runs_in_a_row() {
        let mut s = Sim::new(3);
        assert!(s.run(&[("p::a", Temp)]).is_empty());
        assert!(s.run(&[("p::a", Temp)]).is_empty());
        let third = s.run_as(&[("p::a", Temp)], false);
        assert_eq!(third.len(), 1);
        assert_eq!(third[0].kind, ChangeKind::ModelDown);
        // Paused at run 1; alerted as active -> paused at run 3, with why.
        assert_eq!(
            (third[0].from.as_str(), third[0].to.as_str()),
            ("active", "paused")
        );
        assert_eq!(third[0].reason, "timeout, 3 runs in a row");
        assert_eq!(third[0].error.as_deref(), Some("timed out after 2s"));
        assert!(s.run(&[("p::a", Temp)]).is_empty());
        assert_eq!(
            s.run(&[("p::a", Pass)]),
            ["ModelRecovered p::a paused->active"]
        );
    }

    #[test]
    fn a_failure_run_broken_by_a_pass_starts_counting_again_and_resolves_nothing() {
        let mut s = Sim::new(3);
        for _ in 0..2 {
            assert!(s.run(&[("p::a", Temp)]).is_empty());
        }
        // Back before the third: never alerted, so nothing to resolve.
        assert!(s.run(&[("p::a", Pass)]).is_empty());
        assert!(s.run(&[("p::a", Temp)]).is_empty());
        assert!(s.run(&[("p::a", Temp)]).is_empty());
        assert_eq!(s.run(&[("p::a", Temp)]), ["ModelDown p::a active->paused"]);
    }

    #[test]
    fn a_disable_alerts_before_notify_after_and_after_a_pause_alert() {
        let mut s = Sim::new(5);
        s.disable_after = 2;
        assert!(
            s.run(&[("p::a", Hard)]).is_empty(),
            "hard failures keep it active"
        );
        let d = s.run_as(&[("p::a", Hard)], false);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].from.as_str(), d[0].to.as_str()),
            ("active", "disabled")
        );
        assert_eq!(d[0].reason, "wrong_answer, 2 runs in a row");
        // The key in the probe's error is masked in the message.
        let err = d[0].error.as_deref().unwrap();
        assert!(!err.contains("sk-abcdefghijklmnop1234"), "{err}");
        assert!(err.contains("[REDACTED]"), "{err}");

        // Paused and alerted, then disabled: a second alert.
        let mut s = Sim::new(1);
        assert_eq!(s.run(&[("p::b", Temp)]), ["ModelDown p::b active->paused"]);
        assert!(s.run(&[("p::b", Hard)]).is_empty());
        assert!(s.run(&[("p::b", Hard)]).is_empty());
        assert_eq!(
            s.run(&[("p::b", Hard)]),
            ["ModelDown p::b paused->disabled"]
        );
        assert_eq!(s.notify.models["p::b"].alerted.as_deref(), Some("disabled"));
    }

    #[test]
    fn a_disabled_model_whose_alert_was_never_sent_is_alerted_at_the_next_run() {
        let mut s = Sim::new(3);
        s.disable_after = 1;
        assert_eq!(
            s.run(&[("p::a", Hard)]),
            ["ModelDown p::a active->disabled"]
        );
        // That message reached no channel: the observer put the alert back.
        s.notify.models.get_mut("p::a").unwrap().alerted = None;
        // Disabled models are not probed: a run of others still says it,
        // with the state's reason, whatever --notify-after.
        let d = s.run_as(&[("p::b", Pass)], false);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].model.as_deref(), Some("a"));
        assert_eq!(
            (d[0].from.as_str(), d[0].to.as_str()),
            ("active", "disabled")
        );
        assert!(d[0].reason.contains("wrong_answer"), "{}", d[0].reason);
        // Said once: the next runs say nothing more.
        assert!(s.run(&[("p::b", Pass)]).is_empty());
        // A paused alert standing is followed by the disable it became.
        let mut s = Sim::new(1);
        s.disable_after = 2;
        assert_eq!(s.run(&[("p::c", Temp)]), ["ModelDown p::c active->paused"]);
        s.run(&[("p::c", Hard)]);
        s.run(&[("p::c", Hard)]);
        let standing = &s.notify.models["p::c"];
        assert_eq!(standing.alerted.as_deref(), Some("disabled"));
    }

    #[test]
    fn a_fresh_start_takes_models_already_disabled_as_known() {
        let mut s = Sim::new(1);
        s.disable_after = 1;
        assert_eq!(
            s.run(&[("p::a", Hard)]),
            ["ModelDown p::a active->disabled"]
        );
        // notify_state.json deleted (or alerts just turned on): the model
        // disabled before is not paged for, but taken as said.
        s.notify = NotifyState {
            fresh: true,
            ..NotifyState::default()
        };
        assert!(s.run(&[("p::b", Pass)]).is_empty());
        assert_eq!(s.notify.models["p::a"].alerted.as_deref(), Some("disabled"));
        assert!(!s.notify.fresh, "only the first run is a fresh start");
        assert!(s.run(&[("p::b", Pass)]).is_empty());

        // A model paused before alerts were on, failing again: not said
        // (it changed nothing), nor its recovery (nothing was sent).
        let mut s = Sim::new(1);
        s.run(&[("p::c", Temp)]);
        s.notify = NotifyState {
            fresh: true,
            ..NotifyState::default()
        };
        assert!(s.run(&[("p::c", Temp)]).is_empty());
        assert_eq!(s.notify.models["p::c"].alerted.as_deref(), Some("paused"));
        assert!(s.run(&[("p::c", Pass)]).is_empty());
        assert!(
            s.notify
                .models
                .get("p::c")
                .is_none_or(|m| m.alerted.is_none())
        );
        // From then on, as usual.
        assert_eq!(s.run(&[("p::c", Temp)]), ["ModelDown p::c active->paused"]);
    }

    #[test]
    fn a_flapping_model_alerts_once_per_change_of_direction() {
        let mut s = Sim::new(1);
        let runs = [Temp, Temp, Pass, Pass, Temp, Pass, Temp];
        let said: Vec<Vec<String>> = runs.iter().map(|r| s.run(&[("p::a", *r)])).collect();
        let said: Vec<String> = said.iter().map(|c| c.join("; ")).collect();
        assert_eq!(
            said,
            [
                "ModelDown p::a active->paused",
                "",
                "ModelRecovered p::a paused->active",
                "",
                "ModelDown p::a active->paused",
                "ModelRecovered p::a paused->active",
                "ModelDown p::a active->paused",
            ]
        );
    }

    #[test]
    fn a_provider_whose_every_probed_model_failed_is_down_and_comes_back() {
        let mut s = Sim::new(1);
        assert_eq!(
            s.run(&[("p::a", Temp), ("p::b", Hard), ("q::c", Pass)]),
            ["ProviderDown p up->down", "ModelDown p::a active->paused"]
        );
        let c = s.run_as(&[("p::a", Temp), ("p::b", Hard)], false);
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(s.notify.providers["p"].failed_runs, 2);
        // One model answering is the provider back.
        assert_eq!(
            s.run(&[("p::a", Temp), ("p::b", Pass)]),
            ["ProviderRecovered p down->up"]
        );
        // A provider with one probed model of two is left to its model's
        // alert.
        let mut s = Sim::new(1);
        assert_eq!(s.run(&[("r::x", Temp)]), ["ModelDown r::x active->paused"]);
        assert!(!s.notify.providers.contains_key("r"));
        // One with one model (or one not disabled) is down with it.
        let mut s = Sim::new(1);
        s.disable_after = 1;
        s.catalog = [ModelKey::new("r", "x"), ModelKey::new("s", "x")]
            .into_iter()
            .chain([ModelKey::new("s", "gone")])
            .collect();
        s.run(&[("s::gone", Hard)]);
        assert_eq!(
            s.run(&[("r::x", Temp), ("s::x", Temp)]),
            [
                "ProviderDown r up->down",
                "ModelDown r::x active->paused",
                "ProviderDown s up->down",
                "ModelDown s::x active->paused"
            ]
        );
    }

    #[test]
    fn by_default_a_pause_says_nothing_and_a_provider_down_waits_two_runs() {
        let mut s = Sim::defaults();
        // A rate limit or a timeout: paused, and nothing said, run after run.
        for _ in 0..3 {
            assert!(s.run(&[("p::a", Temp), ("p::b", Pass)]).is_empty());
        }
        assert!(s.run(&[("p::a", Pass), ("p::b", Pass)]).is_empty());
        // A disable is said at once, and its recovery (enabled by hand).
        s.disable_after = 1;
        assert_eq!(
            s.run(&[("p::a", Hard), ("p::b", Pass)]),
            ["ModelDown p::a active->disabled"]
        );
        s.states = States::default();
        assert_eq!(
            s.run(&[("p::a", Pass), ("p::b", Pass)]),
            ["ModelRecovered p::a disabled->active"]
        );
        // A provider down: said at its second run down, and when it is back.
        s.disable_after = 3;
        assert!(s.run(&[("p::a", Temp), ("p::b", Temp)]).is_empty());
        let down = s.run_as(&[("p::a", Temp), ("p::b", Temp)], false);
        assert_eq!(down.len(), 1, "{down:?}");
        assert_eq!(down[0].kind, ChangeKind::ProviderDown);
        assert_eq!(down[0].priority(), crate::notify::Priority::High);
        assert!(s.run(&[("p::a", Temp), ("p::b", Temp)]).is_empty());
        assert_eq!(
            s.run(&[("p::a", Pass), ("p::b", Temp)]),
            ["ProviderRecovered p down->up"]
        );
    }

    #[test]
    fn what_is_not_in_on_is_never_said_but_what_stands_is_resolved() {
        let mut s = Sim::with(Rules {
            on: vec![AlertOn::ProviderDown],
            after: 1,
        });
        s.disable_after = 1;
        assert_eq!(
            s.run(&[("p::a", Hard), ("p::b", Temp)]),
            ["ProviderDown p up->down"]
        );
        // Its model disabled is not said, run after run.
        assert!(s.run(&[("p::b", Temp)]).is_empty());
        // A paused alert that stood before (`on` changed since) is
        // resolved all the same.
        let mut s = Sim::with(Rules {
            on: vec![],
            after: 1,
        });
        s.notify.models.insert(
            "p::a".into(),
            crate::notify::record::Standing {
                failed_runs: 1,
                alerted: Some("paused".into()),
                alerted_at: Some("2026-12-02T00:00:00Z".parse().unwrap()),
            },
        );
        assert!(s.run(&[("p::b", Temp), ("p::c", Temp)]).is_empty());
        assert_eq!(
            s.run(&[("p::a", Pass)]),
            ["ModelRecovered p::a paused->active"]
        );
    }

    #[test]
    fn the_flags_replace_the_files_rules() {
        let file = NotifySettings {
            after: 3,
            ..NotifySettings::default()
        };
        let r = Rules::of(&file, &[], None);
        assert_eq!(r.on, [AlertOn::Disabled, AlertOn::ProviderDown]);
        assert_eq!(r.after, 3);
        let r = Rules::of(&file, &[AlertOn::Paused, AlertOn::Paused], Some(1));
        assert_eq!(
            (r.on.as_slice(), r.after),
            ([AlertOn::Paused].as_slice(), 1)
        );
    }

    #[test]
    fn a_provider_down_reason_names_the_classes_and_the_error_is_cleaned() {
        let mut s = Sim::new(1);
        let c = s.run_as(&[("p::a", Hard), ("p::b", Temp)], false);
        assert_eq!(c[0].kind, ChangeKind::ProviderDown);
        assert_eq!(
            c[0].reason,
            "all 2 probed models failed: wrong_answer and timeout"
        );
        assert!(c[0].error.as_deref().unwrap().contains("[REDACTED]"));
        // With --notify-after 2, the provider waits too.
        let mut s = Sim::new(2);
        assert!(s.run(&[("p::a", Temp), ("p::b", Temp)]).is_empty());
        assert_eq!(
            s.run(&[("p::a", Temp), ("p::b", Temp)]),
            [
                "ProviderDown p up->down",
                "ModelDown p::a active->paused",
                "ModelDown p::b active->paused"
            ]
        );
    }

    #[test]
    fn a_reprobe_run_counts_no_failure_but_brings_models_back() {
        let mut s = Sim::new(2);
        assert!(s.run(&[("p::a", Temp)]).is_empty());
        // Re-probes every few minutes do not make it "2 runs in a row".
        for _ in 0..3 {
            assert!(s.run_as(&[("p::a", Temp)], true).is_empty());
        }
        assert_eq!(s.notify.models["p::a"].failed_runs, 1);
        assert_eq!(s.run(&[("p::a", Temp)]), ["ModelDown p::a active->paused"]);
        let back = s.run_as(&[("p::a", Pass)], true);
        assert_eq!(back[0].kind, ChangeKind::ModelRecovered);
        // A re-probe run never judges a provider down.
        let mut s = Sim::new(1);
        s.run(&[("p::a", Pass), ("p::b", Pass)]);
        let c = s.run_as(&[("p::a", Temp), ("p::b", Temp)], true);
        assert!(c.iter().all(|c| c.model.is_some()), "{c:?}");
    }

    #[test]
    fn a_model_enabled_by_hand_resolves_at_its_first_pass() {
        let mut s = Sim::new(1);
        s.disable_after = 1;
        assert_eq!(
            s.run(&[("p::a", Hard)]),
            ["ModelDown p::a active->disabled"]
        );
        // `llmprobe state enable p::a`: active, with no transition.
        s.states = States::default();
        assert_eq!(
            s.run(&[("p::a", Pass)]),
            ["ModelRecovered p::a disabled->active"]
        );
    }

    #[test]
    fn a_long_error_is_cut_for_a_phone() {
        let r = crate::upstream::secret::Redactor::default();
        let long = "x".repeat(500);
        let c = clean_error(&r, &long);
        assert_eq!(c.chars().count(), ERROR_CHARS);
        assert!(c.ends_with('…'));
    }
}
