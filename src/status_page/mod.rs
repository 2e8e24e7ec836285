//! The status page: `rollup --format html` and `route --serve`'s
//! `GET /status`. One pass over the health log ([`days`]) gives each
//! provider a bar per UTC day of the window, its uptime over the last 24 h,
//! 7 d and 30 d, and a latency line; the model states, capability verdicts
//! and route cooldowns come from whoever builds the page (the files in the
//! stats directory, or route's live state). [`build`] makes the [`Page`],
//! [`render`] the one self-contained HTML file (docs/status-page.md has
//! its DOM, which is a stable interface).
//!
//! What the page shows of error text goes through [`privacy`]: redacted and
//! shortened, and, in the public form, left out.

pub mod days;
mod html;
pub mod privacy;

use std::path::Path;

use chrono::{DateTime, Utc};

use crate::capabilities::{Capability, Findings, Judgement};
use crate::catalog::{Catalog, model_key};
use crate::error::Result;
use crate::healthlog::read;
use crate::healthlog::scan::End;
use crate::stale::{self, Newest};
use crate::state::{ModelState, States};
use crate::upstream::secret::Redactor;
use crate::window::Window;

use days::{Days, LastProbe, PageAcc};

pub use html::render;

/// The page's window unless `--window` says otherwise: 90 days of bars.
pub const WINDOW: &str = "90d";

/// The longest window the page draws, in days (one bar a day): a year and
/// some. A longer one is refused (exit 2), not allocated.
pub const MAX_DAYS: i64 = 400;

/// A route cooldown in force, as the page shows it (from
/// `route_state.json`, or route's live state).
#[derive(Debug, Clone, PartialEq)]
pub struct Cooldown {
    /// The id it is stored under: `provider`, `provider#key0:fp`,
    /// `provider::model` or `provider#key0:fp::model`.
    pub target: String,
    /// `provider`, `key`, `model`, `key_model`.
    pub scope: String,
    pub until: i64,
    /// The failure class that set it.
    pub reason: String,
}

impl Cooldown {
    /// The provider and, for a model bench, the model it covers.
    fn covers(&self) -> (&str, Option<&str>) {
        let (left, model) = match crate::catalog::ModelKey::split(&self.target) {
            Some((l, m)) => (l, Some(m)),
            None => (self.target.as_str(), None),
        };
        (left.split('#').next().unwrap_or(left), model)
    }
}

/// What a page is built from.
pub struct Inputs<'a> {
    pub log: &'a Path,
    /// For the schedule's interval and the last run (staleness).
    pub stats_dir: &'a Path,
    pub catalog: &'a Catalog,
    pub window: &'a Window,
    pub now: DateTime<Utc>,
    pub states: &'a States,
    pub findings: &'a Findings,
    pub cooldowns: &'a [Cooldown],
    /// Which providers to show (`--provider`/`--exclude`).
    pub shown: &'a (dyn Fn(&str) -> bool + Sync),
    /// The public form: no error text, hosts, URLs or account ids.
    pub public: bool,
    pub redactor: &'a Redactor,
    /// The footer's words on the cooldowns: `cooldowns from <where>`, or
    /// why there are none (`no cooldowns recorded (no route_state.json)`).
    pub cooldowns_note: &'a str,
}

/// The page's content, before HTML.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub now: i64,
    pub window: String,
    pub public: bool,
    /// `ok`, `degraded`, `down`, `no_data` ([`overall`]).
    pub overall: &'static str,
    pub newest: Option<i64>,
    /// The staleness warning as `brief` gives it: the record's, else each
    /// stale provider's.
    pub stale: Vec<String>,
    pub days: Days,
    pub providers: Vec<ProviderPage>,
    pub cooldowns_note: String,
    /// Every provider the log holds, shown or not (for the check of
    /// `--provider` and `--exclude`).
    pub logged: Vec<String>,
    pub skipped: u64,
    pub torn_bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProviderPage {
    pub name: String,
    /// Uptime over 24 h, 7 d, 30 d; `None` without probes.
    /// Uptime over the last 1 h, 24 h, 7 d and 30 d.
    pub rolling: [Option<f64>; 4],
    /// The median time to first token of streamed probes that passed in
    /// the window, and the median of its models' latest speed probes.
    pub ttft_ms: Option<f64>,
    pub tokens_per_s: Option<f64>,
    pub window_samples: f64,
    pub window_uptime: Option<f64>,
    pub bars: Vec<Bar>,
    /// The bar of its first probe's day, where its history starts: the
    /// bars before it are days before it was ever probed, which the page
    /// leaves out ("no history before"). 0 when its history starts before
    /// the window; the last bar when it has no probe at all.
    pub history_from: usize,
    pub models: Vec<ModelPage>,
    pub newest: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The day's first second (UTC).
    pub day: i64,
    pub samples: f64,
    pub uptime: Option<f64>,
    pub p95_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelPage {
    pub name: String,
    pub state: ModelState,
    /// Already through [`privacy`].
    pub reason: Option<String>,
    pub since: Option<String>,
    pub last: Option<LastProbe>,
    /// Each capability's verdict, and why a `no` (through [`privacy`]).
    pub caps: Vec<(Capability, Judgement, Option<String>)>,
    /// The cooldowns in force on it (its own, its key's, its provider's),
    /// in words, through [`privacy`].
    pub cooldowns: Vec<String>,
    /// Its probe budget's cadence, when less often than every run:
    /// "probed every 12h: 20 requests/day, probes use 2".
    pub cadence: Option<String>,
    /// Its provider retired it ([`crate::state::RETIRED`]): since when its
    /// list lacked it (a date).
    pub retired: Option<String>,
    /// The median time to first token of its streamed passes in the
    /// window, and its latest speed probe's tokens per second.
    pub ttft_ms: Option<f64>,
    pub tokens_per_s: Option<f64>,
}

/// Read the log once and build the page.
pub fn build(i: &Inputs<'_>) -> Result<Page> {
    let now = i.now.timestamp();
    let days = match i.window.secs {
        Some(secs) if secs > MAX_DAYS * days::DAY => {
            return Err(crate::error::Error::config(format!(
                "--window {}: the status page draws one bar a day, for at most {MAX_DAYS} days; pass --window {MAX_DAYS}d or less",
                i.window.label
            )));
        }
        Some(_) => Days::new(i.window.start(now), now),
        // `all`: from the first entry's day.
        None => {
            let first = read::first_ts(i.log)?.unwrap_or(now).min(now);
            if now - first > MAX_DAYS * days::DAY {
                return Err(crate::error::Error::config(format!(
                    "--window all: {} goes back to {}, more days than the status page draws ({MAX_DAYS}, one bar a day); pass --window {MAX_DAYS}d or less",
                    crate::fsutil::absolute(i.log).display(),
                    crate::format::fmt_minute(first)
                )));
            }
            Days::all(first, now)
        }
    };
    let (acc, summary) = read::read_all(i.log, || PageAcc::new(days))?;
    let mut newest = Newest::default();
    for (name, f) in acc.names.iter().zip(&acc.figures) {
        if let Some(t) = f.newest_scheduled {
            newest.insert(name, t);
        }
    }
    let mut providers: Vec<ProviderPage> = Vec::new();
    for (p, (name, f)) in acc.names.iter().zip(&acc.figures).enumerate() {
        if !(i.shown)(name) {
            continue;
        }
        let bars = (0..days.count)
            .map(|d| {
                let fig = f.days.get(d);
                Bar {
                    day: days.day_start(d),
                    samples: fig.map_or(0.0, |x| x.probes.samples),
                    uptime: fig.and_then(|x| x.probes.uptime()),
                    p95_ms: fig.and_then(|x| x.p95()),
                }
            })
            .collect();
        let mut models: Vec<ModelPage> = acc
            .model_list
            .iter()
            .zip(&acc.model_ttft)
            .filter(|((mp, _, _), _)| *mp == p)
            .map(|((_, m, last), ttft)| {
                let mut page = model_page(i, name, m, last.clone());
                page.ttft_ms = ttft.median();
                page
            })
            .collect();
        // Models the state file holds that the log never saw.
        for (key, _) in i.states.iter() {
            if let Some((kp, km)) = crate::catalog::ModelKey::split(&key)
                && kp == &**name
                && !models.iter().any(|m| m.name == km)
            {
                models.push(model_page(i, name, km, None));
            }
        }
        if i.public {
            for m in &mut models {
                m.name = privacy::model_id(&m.name);
            }
        }
        models.sort_by(|a, b| a.name.cmp(&b.name));
        providers.push(ProviderPage {
            name: name.to_string(),
            rolling: f.rolling.map(|r| r.uptime()),
            ttft_ms: f.ttft.median(),
            tokens_per_s: i.findings.provider_tokens_per_s(name),
            window_samples: f.window.samples,
            window_uptime: f.window.uptime(),
            bars,
            history_from: match f.oldest {
                Some(t) if t >= days.day_start(0) => days.index(t),
                Some(_) => 0,
                None => days.count - 1,
            },
            models,
            newest: f.newest,
        });
    }
    providers.sort_by(|a, b| a.name.cmp(&b.name));
    // The header speaks of the providers shown only: the newest probe and
    // the whole record's staleness too.
    let shown_newest = acc
        .names
        .iter()
        .zip(&acc.figures)
        .filter(|(name, _)| (i.shown)(name))
        .filter_map(|(_, f)| f.newest)
        .max();
    let stale = staleness(i, shown_newest, &newest, now);
    Ok(Page {
        now,
        window: i.window.label.clone(),
        public: i.public,
        overall: overall(&providers),
        newest: shown_newest,
        stale,
        days,
        providers,
        cooldowns_note: i.cooldowns_note.to_string(),
        logged: acc.names.iter().map(|n| n.to_string()).collect(),
        skipped: summary.skipped,
        torn_bytes: match summary.end {
            End::Torn { torn_bytes, .. } => torn_bytes,
            _ => 0,
        },
    })
}

/// The page's overall state from its providers' last 24 h: `no_data`
/// when none was probed; `ok` when every probed one grades good; `down`
/// when every probed one grades poor; `degraded` otherwise.
pub fn overall(providers: &[ProviderPage]) -> &'static str {
    let words: Vec<&str> = providers
        .iter()
        .filter_map(|p| p.rolling[1])
        .map(|u| crate::grade::status_word(Some(u)))
        .collect();
    if words.is_empty() {
        "no_data"
    } else if words.iter().all(|w| *w == "ok") {
        "ok"
    } else if words.iter().all(|w| *w == "down") {
        "down"
    } else {
        "degraded"
    }
}

/// The staleness warning as `brief` gives it: the whole record's when no
/// probe is recent ([`stale::record_warning`]); else each stale shown
/// provider's ([`stale::provider_warning`]). The public form leaves out
/// the reasons (they name the variables a key lives in).
fn staleness(i: &Inputs<'_>, newest: Option<i64>, each: &Newest, now: i64) -> Vec<String> {
    let Some(t) = newest else {
        return Vec::new();
    };
    let after = stale::record_stale_after(i.catalog, i.states, each);
    if let Some(lines) = stale::record_warning(t, now, after) {
        return lines.to_vec();
    }
    let health = crate::schedule::Health::assess(i.stats_dir, i.now, newest);
    stale::judge(
        i.catalog,
        i.states,
        each,
        health.last_run.as_ref(),
        now,
        health.interval.stale_after(),
    )
    .into_iter()
    .filter(|st| (i.shown)(&st.provider))
    .map(|mut st| {
        if i.public {
            st.reason = None;
        }
        stale::provider_warning(&st, now, &health.every)
    })
    .collect()
}

fn model_page(i: &Inputs<'_>, provider: &str, model: &str, last: Option<LastProbe>) -> ModelPage {
    let key = model_key(provider, model);
    let entry = i.states.entry(&key);
    let state = entry.map_or(ModelState::Active, |e| e.state);
    let reason = entry
        .and_then(|e| e.reason.as_deref())
        .filter(|_| state != ModelState::Active)
        .and_then(|r| privacy::reason(r, i.public, i.redactor));
    // A hand-edited `since` that is not a time is text: not in public.
    let since = entry
        .and_then(|e| e.since.clone())
        .filter(|_| state != ModelState::Active)
        .filter(|s| !i.public || crate::time::parse_ts(s).is_some());
    let caps = Capability::ALL
        .iter()
        .map(|&c| {
            let f = i.findings.get(&key, c);
            let verdict = f.map_or(Judgement::Unknown, |f| f.verdict);
            let why = f
                .filter(|f| f.verdict == Judgement::No)
                .and_then(|f| f.reason.as_deref())
                .and_then(|r| privacy::reason(r, i.public, i.redactor));
            (c, verdict, why)
        })
        .collect();
    let now = i.now.timestamp();
    let cooldowns = i
        .cooldowns
        .iter()
        .filter(|c| c.until > now)
        .filter(|c| {
            let (p, m) = c.covers();
            p == provider && m.is_none_or(|m| m == model)
        })
        .map(|c| privacy::cooldown(c, i.public, i.redactor))
        .collect();
    let cadence = i.catalog.provider(provider).and_then(|p| {
        let probed = p
            .models
            .iter()
            .filter(|m| i.states.state_of(&model_key(provider, m)) != ModelState::Disabled)
            .count();
        crate::usage::budget::by_catalog(p, model, probed).cadence_words()
    });
    let retired = entry
        .filter(|e| e.retired())
        .map(|e| e.missing_since().unwrap_or_default().to_string())
        .filter(|d| !i.public || chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").is_ok());
    ModelPage {
        retired,
        name: model.to_string(),
        state,
        reason,
        since,
        last,
        caps,
        cooldowns,
        cadence,
        ttft_ms: None,
        tokens_per_s: i.findings.tokens_per_s(&key),
    }
}

#[cfg(test)]
mod tests;
