//! Per-provider staleness: the one rule for when a provider's record is too
//! old to trust, used by `brief` (which shows it) and `check` (which warns
//! when it skips a provider for a missing key).
//!
//! A provider is stale when its newest probe is older than twice the
//! schedule's interval (2 h by default, [`crate::schedule::Every::stale_after`]),
//! or three times its own probe cadence when its probe budget spaces its
//! probes further apart than the schedule ([`crate::usage::budget`]: a
//! provider whose every model is probed every 12 h by design is not stale
//! at hour 3). Three, not two: a capability probe may take the place of a
//! model's next basic probe, which doubles one gap. Only providers the user still probes count:
//!
//! - the catalog lists it, and it is not turned off with `enabled = false`
//!   (that is how a provider is retired);
//! - not every one of its catalog models is `disabled`;
//! - the health log holds a probe of it from the last 7 days
//!   ([`RECENT_SECS`]). A provider never probed, or not for a week, is not
//!   stale: a fresh install, where most keys are unset, stays quiet.
//!
//! The reason is given when the last run (`last_run.json`) knows it: the
//! run skipped the provider (`skipped: GROQ_API_KEY unset in the last
//! run`), or it was offline.

use chrono::TimeDelta;
use serde::Serialize;

use crate::catalog::{Catalog, Provider, model_key};
use crate::lastrun::LastRun;
use crate::run_observer::Skipped;
use crate::state::{ModelState, States};

pub use crate::healthlog::last::{Newest, RECENT_SECS};

/// With no probe at all for this long, the whole record is stale: the
/// scheduled job has probably stopped (`brief`'s banner, the status page's
/// warning).
pub const RECORD_STALE_SECS: i64 = 2 * 3600;

/// How old the newest probe of all may be before the whole record is
/// stale: [`RECORD_STALE_SECS`], or, when every provider probed this week
/// (in `newest`) is spaced out by its probe budget, three times the
/// shortest of their cadences.
pub fn record_stale_after(catalog: &Catalog, states: &States, newest: &Newest) -> i64 {
    let mut least: Option<i64> = None;
    for p in catalog.providers.iter().filter(|p| !retired(p, states)) {
        if newest.get(&p.name).is_none() {
            continue;
        }
        let Some(every) = cadence(p, states) else {
            return RECORD_STALE_SECS;
        };
        least = Some(least.map_or(every.num_seconds(), |l| l.min(every.num_seconds())));
    }
    least.map_or(RECORD_STALE_SECS, |l| RECORD_STALE_SECS.max(3 * l))
}

/// How often `p`'s budget lets its most often probed model (of those not
/// disabled) be probed, when that is known and longer than every run.
fn cadence(p: &Provider, states: &States) -> Option<TimeDelta> {
    let models: Vec<&str> = p
        .models
        .iter()
        .filter(|m| states.state_of(&model_key(&p.name, m)) != ModelState::Disabled)
        .map(String::as_str)
        .collect();
    crate::usage::budget::provider_interval(p, &models)
}

/// The warning about a stale record, when the newest probe (at `newest`)
/// is more than `after` seconds old at `now` ([`record_stale_after`]): two
/// lines, as `brief` prints them after `!!! ` and the status page shows
/// them.
pub fn record_warning(newest: i64, now: i64, after: i64) -> Option<[String; 2]> {
    (now - newest > after).then(|| {
        [
            format!(
                "STALE: NO PROBE IN THE LAST {}. The newest is from {} ({}).",
                match after % 3600 {
                    0 => format!("{} HOURS", after / 3600),
                    _ => crate::format::fmt_age(after).to_uppercase(),
                },
                crate::format::fmt_minute(newest),
                crate::format::fmt_ago(now - newest)
            ),
            "The hourly check has probably stopped: the figures below are old, not healthy."
                .to_string(),
        ]
    })
}

/// The warning about one stale provider at `now`, with the schedule's
/// interval `every` (`1h`): as `brief` gives it.
pub fn provider_warning(st: &Stale, now: i64, every: &str) -> String {
    let over = match &st.cadence {
        Some(c) => format!("3 × its probe budget's {c}"),
        None => format!("2 × {every}"),
    };
    let mut message = format!(
        "{} is stale: no probe for {} (more than {over})",
        st.provider,
        crate::format::fmt_age(now - st.newest_ts),
    );
    if let Some(r) = &st.reason {
        message.push_str("; ");
        message.push_str(r);
    }
    message
}

/// A stale provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stale {
    pub provider: String,
    /// Its newest probe, RFC 3339.
    pub newest_probe: String,
    #[serde(skip)]
    pub newest_ts: i64,
    /// Why, when the last run knows: `skipped: GROQ_API_KEY unset in the
    /// last run`; `None` otherwise.
    pub reason: Option<String>,
    /// Its probe cadence (`12h`), when the budget spaces its probes further
    /// apart than the schedule and that set the threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cadence: Option<String>,
}

/// A provider the user has retired: turned off with `enabled = false`, or
/// every one of its catalog models `disabled`. It is never stale.
pub fn retired(p: &Provider, states: &States) -> bool {
    p.enabled == Some(false)
        || (!p.models.is_empty()
            && p.models
                .iter()
                .all(|m| states.state_of(&model_key(&p.name, m)) == ModelState::Disabled))
}

/// The stale providers of `catalog` at `now` (Unix seconds), by name:
/// those the user still probes (see the module's notes) whose newest probe
/// in `newest` is more than `stale_after` old.
pub fn judge(
    catalog: &Catalog,
    states: &States,
    newest: &Newest,
    last_run: Option<&LastRun>,
    now: i64,
    stale_after: TimeDelta,
) -> Vec<Stale> {
    let mut out: Vec<Stale> = catalog
        .providers
        .iter()
        .filter(|p| !retired(p, states))
        .filter_map(|p| {
            let t = newest.get(&p.name)?;
            let age = now - t;
            let cadence = cadence(p, states).filter(|c| *c * 2 > stale_after);
            let after = cadence.map_or(stale_after, |c| c * 3);
            if age <= after.num_seconds() || age > RECENT_SECS {
                return None;
            }
            Some(Stale {
                provider: p.name.clone(),
                newest_probe: crate::format::fmt_rfc3339(t),
                newest_ts: t,
                reason: last_run.and_then(|r| reason(&p.name, t, r)),
                cadence: cadence.map(|c| crate::format::fmt_age(c.num_seconds())),
            })
        })
        .collect();
    out.sort_by(|a, b| a.provider.cmp(&b.provider));
    out
}

/// Why the last run left `provider` (newest probe at `newest`) unprobed,
/// when it says.
fn reason(provider: &str, newest: i64, run: &LastRun) -> Option<String> {
    if let Some(s) = run.skipped(provider) {
        return Some(if s.missing_key() {
            format!("skipped: {} unset in the last run", unset_words(s))
        } else {
            format!("the last run: {}", s.reason)
        });
    }
    (run.offline && run.finished_at.timestamp() > newest)
        .then(|| "the last run was offline: it reached no remote provider".to_string())
}

/// The unset variables of a skip, in words: `GROQ_API_KEY`, `A and B`.
fn unset_words(s: &Skipped) -> String {
    s.unset.join(" and ")
}

/// The providers of `skipped` that were skipped for a missing key although
/// `newest` holds a probe of theirs from the last 7 days before `now`: a
/// job that lost its keys.
pub fn lost_keys<'a>(skipped: &'a [Skipped], newest: &Newest, now: i64) -> Vec<&'a Skipped> {
    skipped
        .iter()
        .filter(|s| s.missing_key())
        .filter(|s| {
            newest
                .get(&s.provider)
                .is_some_and(|t| now - t <= RECENT_SECS)
        })
        .collect()
}

/// The one line `check` prints about [`lost_keys`] (none when there are
/// none): `warning: probed in the last 7 days, skipped now for a missing
/// key: groq (GROQ_API_KEY unset)`.
pub fn lost_keys_line(lost: &[&Skipped]) -> Option<String> {
    if lost.is_empty() {
        return None;
    }
    let each: Vec<String> = lost
        .iter()
        .map(|s| format!("{} ({} unset)", s.provider, unset_words(s)))
        .collect();
    Some(format!(
        "warning: probed in the last 7 days, skipped now for a missing key: {}",
        each.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::healthlog::read::Sink;

    const H: i64 = 3600;
    /// The injected now: 2026-12-02T12:00:00Z.
    const NOW: i64 = 1_796_212_800;

    #[test]
    fn re_probes_do_not_make_a_provider_look_probed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("health_log.json");
        std::fs::write(
            &log,
            concat!(
                "[\n",
                r#"{"ts":"2026-12-02T08:00:00Z","provider":"groq","model":"m","ok":1,"latency_ms":5,"failure_type":""}"#,
                ",\n",
                r#"{"ts":"2026-12-02T11:50:00Z","provider":"groq","model":"m","ok":1,"latency_ms":5,"failure_type":"","source":"reprobe"}"#,
                ",\n",
                r#"{"ts":"2026-12-02T11:55:00Z","provider":"mistral","model":"m","ok":0,"latency_ms":5,"failure_type":"timeout","source":"reprobe"}"#,
                "\n]\n"
            ),
        )
        .unwrap();
        let n = Newest::read(&log, NOW - RECENT_SECS).unwrap();
        assert_eq!(n.get("groq"), Some(NOW - 4 * H));
        assert_eq!(n.get("mistral"), None);
    }

    fn catalog() -> Catalog {
        let toml = r#"
            include_default_catalog = false
            [[providers]]
            name = "groq"
            dialect = "openai"
            base_url = "http://127.0.0.1:9/v1"
            api_key_env = "GROQ_API_KEY"
            models = ["a", "b"]
            [[providers]]
            name = "keyless"
            dialect = "openai"
            base_url = "http://127.0.0.1:9/v1"
            models = ["a"]
            [[providers]]
            name = "retired"
            dialect = "openai"
            base_url = "http://127.0.0.1:9/v1"
            enabled = false
            models = ["a"]
            [[providers]]
            name = "gone"
            dialect = "openai"
            base_url = "http://127.0.0.1:9/v1"
            models = ["a", "b"]
        "#;
        Catalog::from_toml_str(toml, "test.toml").unwrap()
    }

    fn disabled(states: &mut States, key: &str) {
        states.set(
            key,
            serde_json::from_value(serde_json::json!({"state": "disabled"})).unwrap(),
        );
    }

    fn last_run(skipped: Vec<Skipped>, offline: bool) -> LastRun {
        let at = chrono::DateTime::from_timestamp(NOW - 600, 0).unwrap();
        LastRun {
            version: LastRun::VERSION,
            started_at: at,
            finished_at: at,
            exit_code: if offline { 6 } else { 0 },
            offline,
            probes: 1,
            ok: 1,
            skipped,
            newest: None,
        }
    }

    fn groq_skipped() -> Skipped {
        Skipped {
            provider: "groq".into(),
            reason: "skipped: set GROQ_API_KEY".into(),
            unset: vec!["GROQ_API_KEY".into()],
        }
    }

    fn names(v: &[Stale]) -> Vec<&str> {
        v.iter().map(|s| s.provider.as_str()).collect()
    }

    #[test]
    fn older_than_twice_the_interval_is_stale_with_the_last_runs_reason() {
        let c = catalog();
        let states = States::default();
        let mut newest = Newest::default();
        newest.insert("groq", NOW - 4 * H);
        newest.insert("keyless", NOW - 600);
        let run = last_run(vec![groq_skipped()], false);
        let two_hours = TimeDelta::hours(2);
        let stale = judge(&c, &states, &newest, Some(&run), NOW, two_hours);
        assert_eq!(
            stale,
            [Stale {
                cadence: None,
                provider: "groq".into(),
                newest_probe: "2026-12-02T08:00:00Z".into(),
                newest_ts: NOW - 4 * H,
                reason: Some("skipped: GROQ_API_KEY unset in the last run".into()),
            }]
        );
        // Exactly at the threshold is not stale yet; a second past it is.
        let mut at_threshold = Newest::default();
        at_threshold.insert("groq", NOW - 2 * H);
        assert!(judge(&c, &states, &at_threshold, None, NOW, two_hours).is_empty());
        let stale = judge(&c, &states, &at_threshold, None, NOW + 1, two_hours);
        assert_eq!(names(&stale), ["groq"]);
        assert_eq!(stale[0].reason, None, "no last run, no reason");
        // The threshold follows the interval: every 6 h tolerates 4 h.
        let mut four = Newest::default();
        four.insert("groq", NOW - 4 * H);
        assert!(judge(&c, &states, &four, None, NOW, TimeDelta::hours(12)).is_empty());
    }

    #[test]
    fn never_probed_a_week_old_retired_and_all_disabled_are_never_stale() {
        let c = catalog();
        let mut states = States::default();
        let mut newest = Newest::default();
        // Never probed: groq. Over a week: keyless.
        newest.insert("keyless", NOW - RECENT_SECS - 1);
        newest.insert("retired", NOW - 4 * H);
        newest.insert("gone", NOW - 4 * H);
        newest.insert("not-in-catalog", NOW - 4 * H);
        disabled(&mut states, "gone::a");
        let two_hours = TimeDelta::hours(2);
        // One of gone's models is still in use: stale.
        let stale = judge(&c, &states, &newest, None, NOW, two_hours);
        assert_eq!(names(&stale), ["gone"]);
        // Both disabled: retired.
        disabled(&mut states, "gone::b");
        assert!(judge(&c, &states, &newest, None, NOW, two_hours).is_empty());
        assert!(retired(c.provider("retired").unwrap(), &States::default()));
        assert!(!retired(c.provider("groq").unwrap(), &states));
        // Six days old still counts.
        newest.insert("keyless", NOW - 6 * 24 * H);
        assert_eq!(
            names(&judge(&c, &states, &newest, None, NOW, two_hours)),
            ["keyless"]
        );
    }

    #[test]
    fn the_reason_for_other_skips_and_an_offline_run() {
        let c = catalog();
        let states = States::default();
        let mut newest = Newest::default();
        newest.insert("groq", NOW - 4 * H);
        newest.insert("keyless", NOW - 5 * H);
        let bad_host = Skipped {
            provider: "keyless".into(),
            reason: "skipped: K_HOST=\"::\" is not a host, host:port or URL".into(),
            unset: Vec::new(),
        };
        let run = last_run(vec![bad_host], true);
        let stale = judge(&c, &states, &newest, Some(&run), NOW, TimeDelta::hours(2));
        let reasons: Vec<Option<&str>> = stale.iter().map(|s| s.reason.as_deref()).collect();
        assert_eq!(
            reasons,
            [
                Some("the last run was offline: it reached no remote provider"),
                Some("the last run: skipped: K_HOST=\"::\" is not a host, host:port or URL"),
            ]
        );
        // Two variables: both named.
        let two = Skipped {
            unset: vec!["CF_API_TOKEN".into(), "CF_ACCOUNT_ID".into()],
            ..groq_skipped()
        };
        let run = last_run(vec![two], false);
        let stale = judge(&c, &states, &newest, Some(&run), NOW, TimeDelta::hours(2));
        assert_eq!(
            stale[0].reason.as_deref(),
            Some("skipped: CF_API_TOKEN and CF_ACCOUNT_ID unset in the last run")
        );
    }

    #[test]
    fn lost_keys_are_skips_for_a_missing_key_of_providers_probed_this_week() {
        let mut newest = Newest::default();
        newest.insert("groq", NOW - 6 * 24 * H);
        newest.insert("old", NOW - RECENT_SECS - 1);
        newest.insert("badhost", NOW - H);
        let skipped = vec![
            groq_skipped(),
            Skipped {
                provider: "old".into(),
                reason: "skipped: set OLD_KEY".into(),
                unset: vec!["OLD_KEY".into()],
            },
            Skipped {
                provider: "never".into(),
                reason: "skipped: set NEVER_KEY".into(),
                unset: vec!["NEVER_KEY".into()],
            },
            Skipped {
                provider: "badhost".into(),
                reason: "skipped: B_HOST=\"::\" is not a host, host:port or URL".into(),
                unset: Vec::new(),
            },
        ];
        let lost = lost_keys(&skipped, &newest, NOW);
        assert_eq!(lost, [&skipped[0]]);
        assert_eq!(
            lost_keys_line(&lost).unwrap(),
            "warning: probed in the last 7 days, skipped now for a missing key: groq (GROQ_API_KEY unset)"
        );
        assert_eq!(lost_keys_line(&[]), None);
    }

    #[test]
    fn newest_keeps_each_providers_latest_probe_across_merges() {
        let mut a = Newest::default();
        a.insert("p", 10);
        a.insert("q", 30);
        let mut b = Newest::default();
        b.insert("p", 20);
        b.insert("q", 5);
        a.merge(b);
        assert_eq!(
            (a.get("p"), a.get("q"), a.get("r")),
            (Some(20), Some(30), None)
        );
    }
}
