//! The model states as `route --serve` sees them: a typed [`Snapshot`],
//! reloaded by a [`StateWatcher`] when the file changes and published without
//! a lock on the request path.
//!
//! People pause and enable models by hand while route runs, and `check`
//! rewrites the file every cycle, so route polls it: a `stat` every half
//! second is cheap, and a change lands well within two seconds. A file that
//! stops parsing does not stop routing: the last good snapshot stays, and
//! the error goes to the caller once per version of the file.
//!
//! The watcher is generic over what it loads ([`Watched`]): route watches
//! `stats/capabilities.json` the same way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::{ModelState, StateEntry, States};

use crate::error::{Error, Result};

/// Every model's state at one moment. A model without an entry is active.
/// The entries of paused models are kept whole, for `route --serve`'s
/// re-prober (when each is next due: [`super::reprobe`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    states: HashMap<String, ModelState>,
    paused: Vec<(String, StateEntry)>,
    /// The disabled models' entries, for the status page (reason, since).
    disabled: Vec<(String, StateEntry)>,
}

impl Snapshot {
    /// From `(provider::model, state)` pairs.
    pub fn new(states: impl IntoIterator<Item = (String, ModelState)>) -> Snapshot {
        Snapshot {
            states: states.into_iter().collect(),
            paused: Vec::new(),
            disabled: Vec::new(),
        }
    }

    /// With the entries of the disabled models.
    pub fn with_disabled(mut self, disabled: Vec<(String, StateEntry)>) -> Snapshot {
        self.disabled = disabled;
        self
    }

    /// Every model out of rotation, paused then disabled, whole: what the
    /// status page shows of the states.
    pub fn out_of_rotation(&self) -> impl Iterator<Item = &(String, StateEntry)> {
        self.paused.iter().chain(&self.disabled)
    }

    /// With the entries of the paused models (`provider::model`, entry).
    pub fn with_paused(mut self, paused: Vec<(String, StateEntry)>) -> Snapshot {
        self.paused = paused;
        self
    }

    /// The paused models' entries, in the file's order.
    pub fn paused(&self) -> &[(String, StateEntry)] {
        &self.paused
    }

    /// The state of `provider::model`; `active` when it has no entry. Does not
    /// allocate.
    pub fn state_of(&self, key: &str) -> ModelState {
        self.states.get(key).copied().unwrap_or(ModelState::Active)
    }

    /// True when route may use the model.
    #[cfg(test)]
    pub fn is_active(&self, key: &str) -> bool {
        self.state_of(key) == ModelState::Active
    }
}

/// What identifies one version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stamp {
    Missing,
    Present {
        modified: Option<SystemTime>,
        len: u64,
        /// llmprobe replaces the file by rename, which always makes a new
        /// inode: this catches a rewrite within one mtime tick that kept
        /// the size.
        #[cfg(unix)]
        inode: u64,
    },
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Stamp::Present {
            modified: m.modified().ok(),
            len: m.len(),
            #[cfg(unix)]
            inode: std::os::unix::fs::MetadataExt::ino(&m),
        }),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(Stamp::Missing)
        }
        Err(e) => Err(e),
    }
}

/// What a [`Watcher`] loads from its file.
pub trait Watched: Default + Send + Sync + 'static {
    /// What routing goes on with while the file does not parse, for the
    /// warning: "the states read before".
    const KEPT: &'static str;

    /// Read the file (it exists). A file that cannot be parsed is a
    /// [`DataError`](crate::error::DataError) naming it. A missing file is
    /// [`Default`].
    fn load(path: &Path) -> Result<Self>;
}

impl Watched for Snapshot {
    const KEPT: &'static str = "the states read before";

    fn load(path: &Path) -> Result<Snapshot> {
        Ok(States::load(path)?.snapshot())
    }
}

impl Watched for States {
    const KEPT: &'static str = "the states read before";

    fn load(path: &Path) -> Result<States> {
        States::load(path)
    }
}

/// Keeps a [`Snapshot`] of one state file current.
pub type StateWatcher = Watcher<Snapshot>;

/// Keeps what one data file holds (a [`Watched`] `T`) current.
///
/// Readers call [`current`](Watcher::current), which never blocks and
/// never touches the file. One poller calls [`refresh`](Watcher::refresh)
/// (see [`spawn_poller`](Watcher::spawn_poller)); nothing here writes
/// the file.
pub struct Watcher<T> {
    path: PathBuf,
    current: Arc<ArcSwap<T>>,
    /// The version of the file last read, good or bad. Held for the whole of
    /// a refresh, so refreshes do not overlap.
    seen: Mutex<Option<Stamp>>,
    /// Why the file as it is now cannot be used, while it cannot (for the
    /// status views).
    problem: Mutex<Option<String>>,
    /// Counts published snapshots, for whoever wants to wait for one.
    generation: watch::Sender<u64>,
}

impl<T> std::fmt::Debug for Watcher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").field("path", &self.path).finish()
    }
}

impl<T: Watched> Watcher<T> {
    /// Read `path` now. A missing file is `T::default()` (for the states:
    /// every model active); a file that cannot be parsed is an error here,
    /// so that route refuses to start on it rather than route to models
    /// that were paused.
    pub fn open(path: &Path) -> Result<Watcher<T>> {
        let w = Watcher::unread(path);
        w.refresh()?;
        Ok(w)
    }

    /// Read `path` now, and start from `T::default()` when it cannot be
    /// read or parsed: the error comes back beside the watcher (once; the
    /// poller does not repeat it for the same version of the file), and
    /// [`problem`](Watcher::problem) keeps saying it until the file is fixed.
    pub fn open_lenient(path: &Path) -> (Watcher<T>, Option<crate::error::Error>) {
        let w = Watcher::unread(path);
        let err = w.refresh().err();
        (w, err)
    }

    fn unread(path: &Path) -> Watcher<T> {
        Watcher {
            path: path.to_path_buf(),
            current: Arc::new(ArcSwap::from_pointee(T::default())),
            seen: Mutex::new(None),
            problem: Mutex::new(None),
            generation: watch::Sender::new(0),
        }
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The latest good snapshot. Lock-free: an atomic load and a reference
    /// count.
    pub fn current(&self) -> Arc<T> {
        self.current.load_full()
    }

    /// Why the file cannot be used as it is now (the last good snapshot
    /// stands meanwhile), if it cannot.
    pub fn problem(&self) -> Option<String> {
        self.problem
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Publish `value` as the current one, as if the file had said it: for
    /// a record read from elsewhere (`route --record shared` reads Redis,
    /// and then no poller reads the file).
    pub fn publish(&self, value: T) {
        *self.problem.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.current.store(Arc::new(value));
        self.generation.send_modify(|g| *g += 1);
    }

    /// Changes each time a new snapshot is published.
    #[cfg(test)]
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Reload the file if its modification time or size (or, on Unix, its
    /// inode) changed since the last read. Returns whether a new snapshot
    /// was published.
    ///
    /// A file that cannot be parsed keeps the last good snapshot and returns
    /// the [`DataError`](crate::error::DataError), once per version of the
    /// file: later calls return `Ok(false)` until it changes again. The file
    /// is never written. Blocking: call it from `spawn_blocking` or a plain
    /// thread.
    pub fn refresh(&self) -> Result<bool> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let now = stamp(&self.path).map_err(|e| self.failed(Error::unreadable(&self.path, e)))?;
        if *seen == Some(now) {
            return Ok(false);
        }
        // Stamp first, then read: a write in between makes the next stamp
        // differ, so that version is read again rather than missed.
        let loaded = match now {
            Stamp::Missing => Ok(T::default()),
            Stamp::Present { .. } => T::load(&self.path),
        };
        match loaded {
            Ok(value) => {
                *seen = Some(now);
                *self.problem.lock().unwrap_or_else(PoisonError::into_inner) = None;
                self.current.store(Arc::new(value));
                self.generation.send_modify(|g| *g += 1);
                Ok(true)
            }
            Err(e @ Error::Data(_)) => {
                // Report a bad version once, not on every poll.
                *seen = Some(now);
                Err(self.failed(e))
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Remember `e` as the file's problem, and pass it on.
    fn failed(&self, e: Error) -> Error {
        *self.problem.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
        e
    }

    /// Call [`refresh`](Watcher::refresh) every `every` on the current
    /// tokio runtime, with the file I/O on the blocking pool, until the task
    /// is aborted. Errors go to stderr as warnings: routing goes on with the
    /// last good snapshot.
    pub fn spawn_poller(self: Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let w = self.clone();
                match tokio::task::spawn_blocking(move || w.refresh()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        eprintln!("warning: {e}; routing goes on with {}", T::KEPT)
                    }
                    // The runtime is shutting down.
                    Err(_) => return,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::fs::{self, File};

    use super::*;

    const PAUSED: &str = r#"{"p::m": {"state": "paused", "reason": "timeout", "note": "kept"}}"#;

    fn write(path: &Path, text: &str) {
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_snapshot_is_typed_and_defaults_to_active() {
        let s = Snapshot::new([
            ("p::a".to_string(), ModelState::Paused),
            ("p::b".to_string(), ModelState::Disabled),
        ]);
        assert_eq!(s.state_of("p::a"), ModelState::Paused);
        assert_eq!(s.state_of("p::b"), ModelState::Disabled);
        assert_eq!(s.state_of("p::c"), ModelState::Active);
        assert!(s.is_active("p::c") && !s.is_active("p::a"));
    }

    #[test]
    fn the_paused_entries_are_kept_whole_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        write(
            &path,
            r#"{"p::z": {"state": "paused", "since": "2026-12-02T10:00:00Z", "retry_at": "2026-12-02T10:30:00Z"},
                "p::a": {"state": "disabled"},
                "p::b": {"state": "paused", "since": "2026-12-02T11:00:00Z"}}"#,
        );
        let w = StateWatcher::open(&path).unwrap();
        let snap = w.current();
        let paused: Vec<(&str, Option<&str>, Option<&str>)> = snap
            .paused()
            .iter()
            .map(|(k, e)| (k.as_str(), e.since.as_deref(), e.retry_at.as_deref()))
            .collect();
        assert_eq!(
            paused,
            [
                (
                    "p::z",
                    Some("2026-12-02T10:00:00Z"),
                    Some("2026-12-02T10:30:00Z")
                ),
                ("p::b", Some("2026-12-02T11:00:00Z"), None),
            ]
        );
    }

    #[test]
    fn a_missing_file_is_every_model_active() {
        let dir = tempfile::tempdir().unwrap();
        let w = StateWatcher::open(&dir.path().join("model_state.json")).unwrap();
        assert_eq!(w.current().state_of("p::m"), ModelState::Active);
        assert!(!w.refresh().unwrap());
        // A missing stats directory too.
        let w = StateWatcher::open(&dir.path().join("no/such/model_state.json")).unwrap();
        assert_eq!(*w.current(), Snapshot::default());
    }

    #[test]
    fn a_change_of_size_or_mtime_reloads_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        write(&path, PAUSED);
        let w = StateWatcher::open(&path).unwrap();
        let mut changes = w.subscribe();
        let before = w.current();
        assert_eq!(before.state_of("p::m"), ModelState::Paused);
        assert!(!w.refresh().unwrap(), "unchanged file");
        assert!(!changes.has_changed().unwrap());

        // A new size.
        write(
            &path,
            r#"{"p::m": {"state": "disabled"}, "q::n": {"state": "paused"}}"#,
        );
        assert!(w.refresh().unwrap());
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        assert_eq!(w.current().state_of("p::m"), ModelState::Disabled);
        assert_eq!(w.current().state_of("q::n"), ModelState::Paused);
        assert!(!w.refresh().unwrap());
        // The old snapshot is still whole for whoever holds it.
        assert_eq!(before.state_of("p::m"), ModelState::Paused);

        // Same size, rewritten in place (same inode), only the mtime moved.
        let same_size = r#"{"p::m": {"state": "active"  }, "q::n": {"state": "paused"}}"#;
        let len = fs::metadata(&path).unwrap().len();
        assert_eq!(same_size.len() as u64, len);
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut &f, same_size.as_bytes()).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
            .unwrap();
        drop(f);
        assert!(w.refresh().unwrap());
        assert_eq!(w.current().state_of("p::m"), ModelState::Active);
        assert!(!w.refresh().unwrap());

        // Removed: every model active again.
        fs::remove_file(&path).unwrap();
        assert!(w.refresh().unwrap());
        assert_eq!(w.current().state_of("q::n"), ModelState::Active);
    }

    #[test]
    fn a_corrupt_file_keeps_the_last_snapshot_and_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        write(&path, PAUSED);
        let w = StateWatcher::open(&path).unwrap();
        let bad = "{\"p::m\": {\"state\": \"sleeping\"}} and more";
        write(&path, bad);
        let err = w.refresh().unwrap_err();
        assert!(matches!(err, Error::Data(_)), "{err}");
        assert!(err.to_string().contains("model_state.json"), "{err}");
        assert_eq!(w.current().state_of("p::m"), ModelState::Paused);
        assert_eq!(fs::read_to_string(&path).unwrap(), bad);
        // Reported once per version of the file, and kept for the views.
        assert!(!w.refresh().unwrap());
        assert_eq!(w.current().state_of("p::m"), ModelState::Paused);
        assert!(w.problem().unwrap().contains("model_state.json"));
        // Fixed by hand: picked up.
        write(&path, r#"{"p::m": {"state": "disabled"}}"#);
        assert!(w.refresh().unwrap());
        assert_eq!(w.current().state_of("p::m"), ModelState::Disabled);
        assert_eq!(w.problem(), None);
        // A route that starts on a bad file refuses to.
        write(&path, bad);
        assert!(matches!(StateWatcher::open(&path), Err(Error::Data(_))));
        assert_eq!(fs::read_to_string(&path).unwrap(), bad);
        // Unless it may start without it: the default, the error once.
        let (w, err) = StateWatcher::open_lenient(&path);
        assert!(matches!(err, Some(Error::Data(_))));
        assert_eq!(*w.current(), Snapshot::default());
        assert!(!w.refresh().unwrap(), "not reported again");
        assert!(w.problem().is_some());
        assert_eq!(fs::read_to_string(&path).unwrap(), bad);
    }

    #[test]
    fn a_value_from_elsewhere_is_published_as_the_current_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        write(&path, "not json");
        let (w, err) = StateWatcher::open_lenient(&path);
        assert!(err.is_some() && w.problem().is_some());
        let changes = w.subscribe();
        w.publish(Snapshot::new([("p::m".to_string(), ModelState::Paused)]));
        assert!(changes.has_changed().unwrap());
        assert_eq!(w.current().state_of("p::m"), ModelState::Paused);
        assert_eq!(w.problem(), None);
        // The whole entries, for check's publisher.
        write(&path, PAUSED);
        let full = Watcher::<States>::open(&path).unwrap();
        assert_eq!(
            full.current().get("p::m").unwrap().state,
            ModelState::Paused
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_poller_publishes_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        let w = Arc::new(StateWatcher::open(&path).unwrap());
        let mut changes = w.subscribe();
        let poller = w.clone().spawn_poller(Duration::from_millis(5));
        // An atomic replace, as `check` and `state` do it.
        let tmp = dir.path().join("tmp");
        write(&tmp, PAUSED);
        File::open(&tmp).unwrap().sync_all().unwrap();
        fs::rename(&tmp, &path).unwrap();
        // The bound is only a safety net for a loaded machine.
        tokio::time::timeout(Duration::from_secs(60), changes.changed())
            .await
            .expect("the poller sees the change")
            .unwrap();
        assert_eq!(w.current().state_of("p::m"), ModelState::Paused);
        poller.abort();
    }
}
