//! `stats/last_run.json`: when the last `check` run finished, and how it
//! went. It is tiny and rewritten whole (atomically) at the end of every
//! completed run, so `check --if-due`, `brief`'s staleness warning and
//! `schedule show` can answer "when did check last run?" without reading the
//! health log.
//!
//! A run that records nothing because another run holds the lock, or a
//! `--dry-run`, does not count as a run. An offline run (exit 6) does: it
//! ran, and `offline` says so; so does one a signal stopped (130, 143).
//!
//! It also names the providers the run left out and why (`skipped`), so
//! that `brief` can say why a provider went stale: `skipped: GROQ_API_KEY
//! unset in the last run`. A file written before that field existed reads
//! as a run that skipped nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::fsutil;
use crate::run_observer::{FinishedRun, RunObserver, Skipped};

pub const FILE: &str = "last_run.json";

/// One completed `check` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    pub version: u32,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// The run's exit code (0, 1 with --fail-on-down, 6 offline, 130 or
    /// 143 stopped by a signal).
    pub exit_code: u8,
    /// No remote provider answered: only loopback providers' results were
    /// recorded.
    pub offline: bool,
    /// Probes sent, and how many of them passed.
    pub probes: u64,
    pub ok: u64,
    /// The providers the run left out, and why (a key variable unset, a
    /// host variable that is not a host); empty in files written before
    /// this field existed.
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// Each provider's newest probe by a completed run in the last 7 days
    /// ([`crate::healthlog::last::RECENT_SECS`]), carried from run to run, so that
    /// `brief` and `check` can tell which providers are still probed
    /// without reading a week of the log. Re-probes (`check --paused`,
    /// route's re-prober) never count. `None` in files written before this
    /// field existed: readers then read the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<BTreeMap<String, DateTime<Utc>>>,
}

impl LastRun {
    pub const VERSION: u32 = 1;

    /// How long ago the run finished, as seen at `now` (never negative).
    pub fn age(&self, now: DateTime<Utc>) -> chrono::TimeDelta {
        (now - self.finished_at).max(chrono::TimeDelta::zero())
    }

    /// [`LastRun::newest`] as a [`crate::healthlog::last::Newest`], when the file
    /// has it.
    pub fn newest_probes(&self) -> Option<crate::healthlog::last::Newest> {
        let map = self.newest.as_ref()?;
        let mut n = crate::healthlog::last::Newest::default();
        for (p, t) in map {
            n.insert(p, t.timestamp());
        }
        Some(n)
    }

    /// Why the run left `provider` out, if it did.
    pub fn skipped(&self, provider: &str) -> Option<&Skipped> {
        self.skipped.iter().find(|s| s.provider == provider)
    }
}

pub fn path(stats_dir: &Path) -> PathBuf {
    stats_dir.join(FILE)
}

/// The last run, or `None` when no run has completed in this stats
/// directory. A file that does not parse is a data error (exit 4) and is
/// left as it is.
pub fn read(stats_dir: &Path) -> Result<Option<LastRun>> {
    let p = path(stats_dir);
    let Some(bytes) = fsutil::read_data_file(&p)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| DataError::new(&p, None, format!("not a last-run record: {e}")).into())
}

/// Replace the record atomically (temporary file, then rename), so a reader
/// sees the old run or the new one.
pub fn write(stats_dir: &Path, run: &LastRun) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(run).expect("a LastRun always serialises");
    bytes.push(b'\n');
    fsutil::atomic_write_unlocked(&path(stats_dir), &bytes)
}

/// Writes `last_run.json` once a run is recorded. A failure fails the run
/// at once: a run that cannot say it ran would be repeated by `--if-due`.
#[derive(Debug, Default)]
pub struct LastRunRecord;

impl RunObserver for LastRunRecord {
    fn on_recorded(&mut self, run: &FinishedRun<'_>) -> Result<()> {
        let newest = carried_newest(run);
        write(
            run.stats_dir,
            &LastRun {
                version: LastRun::VERSION,
                started_at: run.started_at,
                finished_at: run.finished_at,
                exit_code: run.exit_code,
                offline: run.offline,
                probes: run.entries.len() as u64,
                ok: run.passed() as u64,
                skipped: run.skipped.to_vec(),
                newest: Some(newest),
            },
        )
    }
}

/// The previous run's [`LastRun::newest`] (or, in a stats directory whose
/// last run did not keep one, a week of the log read backwards, once),
/// with this run's probes added and anything older than a week dropped.
fn carried_newest(run: &FinishedRun<'_>) -> BTreeMap<String, DateTime<Utc>> {
    let week_ago = run.finished_at.timestamp() - crate::healthlog::last::RECENT_SECS;
    let mut newest = match read(run.stats_dir)
        .ok()
        .flatten()
        .and_then(|r| r.newest_probes())
    {
        Some(n) => n,
        None => {
            let log = run.stats_dir.join(crate::healthlog::LOG_FILE);
            crate::healthlog::last::Newest::read(&log, week_ago).unwrap_or_default()
        }
    };
    for e in run.entries {
        if e.source.is_none()
            && let Some(t) = crate::time::parse_ts(&e.ts)
        {
            newest.insert(&e.provider, t);
        }
    }
    newest
        .iter()
        .filter(|(_, t)| *t >= week_ago)
        .filter_map(|(p, t)| Some((p.to_string(), DateTime::from_timestamp(t, 0)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_at(ts: &str) -> LastRun {
        let t: DateTime<Utc> = ts.parse().unwrap();
        LastRun {
            version: LastRun::VERSION,
            started_at: t - chrono::TimeDelta::seconds(30),
            finished_at: t,
            exit_code: 0,
            offline: false,
            probes: 3,
            ok: 2,
            skipped: Vec::new(),
            newest: None,
        }
    }

    #[test]
    fn round_trips_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let r = run_at("2026-12-01T10:00:00Z");
        write(dir.path(), &r).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(r));
    }

    #[test]
    fn a_bad_file_is_a_data_error_and_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), b"{oops").unwrap();
        let err = read(dir.path()).unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::DATA);
        assert!(err.to_string().contains(FILE), "{err}");
        assert_eq!(std::fs::read(path(dir.path())).unwrap(), b"{oops");
    }

    /// The observer records what the run says, passes counted from the
    /// entries.
    #[test]
    fn the_observer_writes_the_finished_run() {
        use crate::outcome::{Entry, FailureType, Outcome};
        let dir = tempfile::tempdir().unwrap();
        let outcome = |failure| Outcome {
            failure,
            latency_ms: 5,
            status: Some(200),
            error: None,
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        let entries = [
            Entry::new("2026-12-01T10:00:00Z".into(), "p", "a", &outcome(None)),
            Entry::new(
                "2026-12-01T10:00:01Z".into(),
                "p",
                "b",
                &outcome(Some(FailureType::WrongAnswer)),
            ),
        ];
        let skipped = [Skipped {
            provider: "groq".into(),
            reason: "skipped: set GROQ_API_KEY".into(),
            unset: vec!["GROQ_API_KEY".into()],
        }];
        let want = LastRun {
            exit_code: 1,
            probes: 2,
            ok: 1,
            skipped: skipped.to_vec(),
            newest: Some(BTreeMap::from([(
                "p".to_string(),
                "2026-12-01T10:00:01Z".parse().unwrap(),
            )])),
            ..run_at("2026-12-01T10:00:30Z")
        };
        let state_path = dir.path().join("model_state.json");
        let run = FinishedRun {
            started_at: want.started_at,
            finished_at: want.finished_at,
            exit_code: 1,
            entries: &entries,
            state_changes: &[],
            offline: false,
            scope: &[],
            skipped: &skipped,
            stats_dir: dir.path(),
            state_path: &state_path,
            summary: "",
        };
        LastRunRecord.on_recorded(&run).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(want.clone()));
        // The next run carries p's newest probe forward, adds its own, and
        // never counts a re-probe.
        let mut reprobe = Entry::new("2026-12-01T11:00:05Z".into(), "q", "a", &outcome(None));
        reprobe.source = Some(crate::outcome::SOURCE_REPROBE);
        let later = [
            Entry::new("2026-12-01T11:00:00Z".into(), "r", "a", &outcome(None)),
            reprobe,
        ];
        let finished: DateTime<Utc> = "2026-12-01T11:00:30Z".parse().unwrap();
        LastRunRecord
            .on_recorded(&FinishedRun {
                finished_at: finished,
                entries: &later,
                ..run
            })
            .unwrap();
        let newest = read(dir.path()).unwrap().unwrap().newest.unwrap();
        let names: Vec<&str> = newest.keys().map(String::as_str).collect();
        assert_eq!(names, ["p", "r"]);
        assert_eq!(newest["p"], want.newest.as_ref().unwrap()["p"]);
        // A stats directory that is a file cannot take the record.
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"").unwrap();
        let run = FinishedRun {
            stats_dir: &file,
            ..run
        };
        assert!(LastRunRecord.on_recorded(&run).is_err());
    }

    /// A file from before `skipped` existed still reads, as a run that
    /// skipped nothing; the field's JSON form is as docs/formats.md shows.
    #[test]
    fn an_older_file_without_skipped_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            path(dir.path()),
            br#"{"version": 1, "started_at": "2026-12-01T09:59:30Z",
                "finished_at": "2026-12-01T10:00:00Z", "exit_code": 0,
                "offline": false, "probes": 3, "ok": 2}"#,
        )
        .unwrap();
        let r = read(dir.path()).unwrap().unwrap();
        assert_eq!(r, run_at("2026-12-01T10:00:00Z"));
        assert!(r.skipped("groq").is_none());
        let mut r = r;
        r.skipped = vec![
            Skipped {
                provider: "groq".into(),
                reason: "skipped: set GROQ_API_KEY".into(),
                unset: vec!["GROQ_API_KEY".into()],
            },
            Skipped {
                provider: "ollama".into(),
                reason: "skipped: OLLAMA_HOST=\"::\" is not a host, host:port or URL".into(),
                unset: Vec::new(),
            },
        ];
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["skipped"],
            serde_json::json!([
                {"provider": "groq", "reason": "skipped: set GROQ_API_KEY", "unset": ["GROQ_API_KEY"]},
                {"provider": "ollama", "reason": "skipped: OLLAMA_HOST=\"::\" is not a host, host:port or URL"}
            ])
        );
        assert_eq!(r.skipped("groq").unwrap().unset, ["GROQ_API_KEY"]);
    }

    #[test]
    fn age_is_never_negative() {
        let r = run_at("2026-12-01T10:00:00Z");
        let earlier: DateTime<Utc> = "2026-12-01T09:00:00Z".parse().unwrap();
        let later: DateTime<Utc> = "2026-12-01T11:00:00Z".parse().unwrap();
        assert_eq!(r.age(earlier), chrono::TimeDelta::zero());
        assert_eq!(r.age(later), chrono::TimeDelta::hours(1));
    }
}
