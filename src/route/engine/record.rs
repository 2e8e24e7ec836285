//! The record the engine routes by, and only reads: the model states
//! (`stats/state.json`), the capability verdicts (`stats/capabilities.json`)
//! and recent health (from the health log, through its cache), each
//! watched from the stats directory; or all three read from Redis
//! (`--record shared`) as `check --shared-state` publishes them.
//!
//! Requests read it lock-free; it is refreshed off the request path. The
//! record never reads the clock: the engine passes `now` in.

use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::route::health::{HealthCache, HealthMap};
use crate::route::shared::SharedState;
use crate::route::shared::record::{Reader, RecordView};
use crate::state::{ModelState, StateWatcher, Watcher};

use super::{Probed, lock};

/// The model states, capability verdicts and recent health routed by.
pub struct Record {
    pub states: Arc<StateWatcher>,
    /// The latest capability probes (`stats/capabilities.json`), watched
    /// like the states; routing goes on without them when they cannot be
    /// read.
    pub capabilities: Arc<Watcher<Probed>>,
    /// Recent health, re-read from the log off the request path
    /// ([`Record::refresh_health`]) and read lock-free by requests.
    health: arc_swap::ArcSwap<HealthMap>,
    health_cache: Mutex<HealthCache>,
    /// The record read from Redis (`--record shared`) instead of the
    /// stats directory: states, recent health and capability verdicts.
    reader: Option<Reader>,
}

impl Record {
    /// Watch the record in `stats_dir` (a bad state file is an error; bad
    /// capability verdicts are a warning, and routing goes on without).
    pub(super) fn open(stats_dir: &Path) -> Result<Record> {
        let states = Arc::new(StateWatcher::open(
            &stats_dir.join(crate::settings::STATE_FILE),
        )?);
        let (capabilities, problem) =
            Watcher::open_lenient(&stats_dir.join(crate::capabilities::FINDINGS_FILE));
        if let Some(e) = problem {
            eprintln!("warning: {e}; routing goes on without capability verdicts");
        }
        Ok(Record {
            states,
            capabilities: Arc::new(capabilities),
            health: arc_swap::ArcSwap::from_pointee(Default::default()),
            health_cache: Mutex::new(HealthCache::new(stats_dir.join(crate::settings::LOG_FILE))),
            reader: None,
        })
    }

    /// Read the record from the shared store instead of the stats
    /// directory. Nothing from the stats directory is kept: until the
    /// first record is read nothing is routed ([`Record::awaits`]).
    pub(super) fn read_shared(&mut self) {
        self.reader = Some(Reader::new());
        self.states.publish(Default::default());
        self.capabilities.publish(Default::default());
        self.health.store(Default::default());
    }

    /// True when the record comes from Redis: nothing reads the stats
    /// directory's states, capabilities or log then.
    pub fn reads_shared(&self) -> bool {
        self.reader.is_some()
    }

    /// True while a shared-record router has not read a record yet: its
    /// snapshot is empty, where every model (disabled ones too) would look
    /// active, so it routes nothing (`no_record`) and `/readyz` says 503.
    pub fn awaits(&self) -> bool {
        self.reader.as_ref().is_some_and(|r| !r.has_read())
    }

    /// Poll the shared record in `shared`, and route on a new one when it
    /// changed: the same state snapshot, health and verdicts the local
    /// files give. With Redis away, the last record seen stays.
    pub(super) async fn sync(&self, shared: &SharedState, now: DateTime<Utc>) {
        let Some(reader) = self.reader.as_ref() else {
            return;
        };
        if let Some(r) = reader.poll(shared, now).await {
            self.states.publish(r.snapshot());
            self.capabilities
                .publish(r.findings.as_ref().map(Probed::from).unwrap_or_default());
            self.health.store(Arc::new(r.health));
        }
    }

    /// Where the record comes from and how fresh it is at `now`, for the
    /// status views; `None` for the local stats directory.
    pub(super) fn view(&self, now: DateTime<Utc>) -> Option<RecordView> {
        self.reader.as_ref().map(|r| r.view(now))
    }

    /// Re-read recent health from the log if it changed. Blocking. With a
    /// shared record it does nothing: the health comes from Redis.
    pub(super) fn refresh_health(&self, now: DateTime<Utc>) -> Result<()> {
        if self.reader.is_some() {
            return Ok(());
        }
        let map = lock(&self.health_cache).get(now.timestamp())?;
        self.health.store(map);
        Ok(())
    }

    /// The recent health the candidate order uses.
    pub fn health(&self) -> Arc<HealthMap> {
        self.health.load_full()
    }

    /// The recent health, borrowed for one request (no reference count
    /// taken, as on the request path).
    pub(super) fn health_now(&self) -> arc_swap::Guard<Arc<HealthMap>> {
        self.health.load()
    }

    /// The state of a model now (from the watched state file).
    pub fn state_of(&self, key: &str) -> ModelState {
        self.states.current().state_of(key)
    }

    /// The capability verdicts watched from `stats/capabilities.json`.
    pub fn probed(&self) -> Arc<Probed> {
        self.capabilities.current()
    }

    /// Why `stats/capabilities.json` cannot be used now, if it cannot
    /// (routing goes on with the verdicts read before, or none).
    pub fn capabilities_problem(&self) -> Option<String> {
        self.capabilities.problem()
    }

    /// The file the capability verdicts are read from.
    pub fn capabilities_path(&self) -> &Path {
        self.capabilities.path()
    }
}
