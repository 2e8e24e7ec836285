//! `check --shared-state`: publish the record to Redis for `route
//! --record shared` ([`super::record`] names the keys and the values).
//!
//! While the run goes on, a background task watches `model_state.json`
//! (the same [`Watcher`] route uses, every 250 ms) and publishes the whole
//! table each time the writer changes it, so a pause reaches every router
//! within about a second. When the run ends it publishes each model's
//! recent health (the figures route ranks by, computed by
//! [`crate::route::health::read`]) and `capabilities.json` when there is
//! one. An offline run refreshes nothing.
//!
//! The local files stay the record of truth: Redis failing never fails
//! the run or changes what it records. It says so once on stderr, and the
//! run's exit code is what it would have been.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;

use super::SharedState;
use super::record::Verdicts;
use crate::capabilities::Findings;
use crate::clock::Clock;
use crate::settings::Settings;
use crate::state::{States, Watcher};

/// How often the state file is looked at during a run.
pub const STATE_POLL: Duration = Duration::from_millis(250);

/// What the warning says goes on while Redis is away.
const MEANWHILE: &str =
    "the local files are written as always; the shared record is not updated by this run";

/// A run's publisher: the connection, and the task that publishes state
/// changes as they are written.
pub struct Publisher {
    rt: tokio::runtime::Runtime,
    shared: Arc<SharedState>,
    states: Arc<Watcher<States>>,
    task: tokio::task::JoinHandle<()>,
    log: PathBuf,
    findings: PathBuf,
    stale_after: TimeDelta,
    clock: Clock,
    /// Publishing refreshes the record's age (`false` for `check
    /// --paused`: re-probes are no sign that the scheduled job runs).
    stamp: bool,
}

impl Publisher {
    /// Connect to `url`, and publish the states at every change the run
    /// makes. `None`, after one warning on stderr, when Redis cannot be
    /// reached: the run goes on without publishing.
    /// `stamp`: whether what it publishes refreshes the record's age
    /// (every run but `check --paused`).
    pub fn start(url: &str, s: &Settings, clock: Clock, stamp: bool) -> Option<Publisher> {
        let rt = match crate::http_server::runtime(1) {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("warning: {e}; the shared record is not updated by this run");
                return None;
            }
        };
        let shared = match rt.block_on(SharedState::connect_saying(url, MEANWHILE)) {
            Ok(sh) => sh,
            Err(e) => {
                eprintln!("warning: {e}; {MEANWHILE}");
                return None;
            }
        };
        // Twice the interval scheduled runs come at (1 h unless `schedule
        // install --every` said otherwise): the rule `brief` judges a
        // stale run by.
        let every = crate::schedule::Marker::read(s.stats_dir())
            .ok()
            .flatten()
            .map(|m| m.interval())
            .unwrap_or_default();
        let stale_after = every.stale_after();
        let (states, problem) = Watcher::<States>::open_lenient(&s.state_path());
        if let Some(e) = problem {
            eprintln!("warning: {e}; the shared states are not updated until it parses");
        }
        let states = Arc::new(states);
        let task = rt.spawn(watch(
            shared.clone(),
            states.clone(),
            clock.clone(),
            stale_after,
            stamp,
        ));
        Some(Publisher {
            rt,
            shared,
            states,
            task,
            log: s.log_path(),
            findings: s.capabilities_path(),
            stale_after,
            clock,
            stamp,
        })
    }

    /// The run ended: unless it was offline (it recorded nothing, so it
    /// refreshes nothing), publish the states as they are now (changes
    /// made by hand since the last run included), the recent health and
    /// the capability verdicts. Never fails.
    pub fn finish(self, offline: bool) {
        self.task.abort();
        if offline || !self.shared.is_healthy() {
            return;
        }
        let now = self.clock.now();
        match self.states.refresh() {
            Err(e) => eprintln!("warning: {e}; the shared states are not updated"),
            Ok(_) if self.states.problem().is_some() => {}
            Ok(_) => {
                let _ = self.rt.block_on(self.shared.publish_states(
                    &self.states.current(),
                    self.stamp.then_some(now),
                    self.stale_after,
                ));
            }
        }
        let health = match crate::route::health::read(
            &self.log,
            now.timestamp() - crate::route::health::WINDOW_SECS,
        ) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("warning: {e}; the shared record's recent health is not updated");
                return;
            }
        };
        // A verdicts file that does not parse is left out: the record
        // keeps the verdicts published before.
        let findings = Findings::load(&self.findings);
        let verdicts = match &findings {
            Ok(f) if f.models().next().is_some() => Verdicts::Publish(f),
            Ok(_) => Verdicts::Remove,
            Err(e) => {
                eprintln!(
                    "warning: {e}; the shared record keeps the capability verdicts published before"
                );
                Verdicts::Keep
            }
        };
        let _ = self.rt.block_on(self.shared.publish_run(
            &health,
            verdicts,
            self.stamp.then_some(now),
            self.stale_after,
        ));
    }
}

/// Publish the states each time the file changes, until aborted.
async fn watch(
    shared: Arc<SharedState>,
    states: Arc<Watcher<States>>,
    clock: Clock,
    stale_after: TimeDelta,
    stamp: bool,
) {
    let mut tick = tokio::time::interval(STATE_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let w = states.clone();
        match tokio::task::spawn_blocking(move || w.refresh()).await {
            Ok(Ok(true)) => {
                let _ = shared
                    .publish_states(&states.current(), stamp.then(|| clock.now()), stale_after)
                    .await;
            }
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                eprintln!("warning: {e}; the shared states are not updated until it parses")
            }
            Err(_) => return,
        }
    }
}
