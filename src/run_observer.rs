//! Who hears how a `check` run went: the run-observer trait, and what it is
//! told. `last_run.json` ([`crate::lastrun`]), the `--ping-url` monitor
//! ([`crate::ping`]) and the `--prom-file` textfile ([`crate::textfile`])
//! each implement [`RunObserver`]; a new channel is one more implementation,
//! registered in `cmd/check.rs`.
//!
//! This module sits below `check` and the channels alike, so that each
//! channel can implement the trait without importing the run's machinery.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::exit;
use crate::outcome::Entry;
use crate::state::Transition;

/// How a `check` invocation ended, for the observers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// `--list` or `--dry-run`: not a run, nothing to ping.
    NotARun(u8),
    /// `--if-due`: the last run is recent; nothing was done (exit 0). A
    /// skip sends no ping: the monitor expects one ping per real run, and
    /// its period and grace are those of the runs, not of the triggers.
    NotDue,
    /// A run that completed: exit 0, 1 (`--fail-on-down`), 6 (offline), or
    /// 130 or 143 (stopped by a signal, what it measured recorded).
    Completed(u8),
}

impl Ran {
    pub fn code(self) -> u8 {
        match self {
            Ran::NotARun(c) | Ran::Completed(c) => c,
            Ran::NotDue => exit::SUCCESS,
        }
    }
}

/// A provider a run left out, and why: its key variable is unset, or its
/// host variable holds no host. `check` prints it, `last_run.json` keeps it
/// (so that `brief` can say why a provider went stale), and `check --json`
/// lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub provider: String,
    /// The reason as `check` prints it (`skipped: set GROQ_API_KEY`).
    pub reason: String,
    /// When it was skipped for a missing key: the unset variables, by name
    /// (`GROQ_API_KEY`; `A or B` when either will do). Never a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
}

impl Skipped {
    /// Skipped because a key variable is unset.
    pub fn missing_key(&self) -> bool {
        !self.unset.is_empty()
    }
}

/// A run whose probes are done and recorded.
#[derive(Debug)]
pub struct FinishedRun<'a> {
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// The run's exit code (0, 1 with `--fail-on-down`, 6 offline, 130 or
    /// 143 stopped by a signal).
    pub exit_code: u8,
    /// The entries the run recorded (an offline run recorded none of its
    /// remote probes).
    pub entries: &'a [Entry],
    /// The state changes the run made (`active` → `paused`, …), in order.
    pub state_changes: &'a [Transition],
    /// No remote provider answered: only loopback providers' results were
    /// recorded (the offline rule, docs/formats.md).
    pub offline: bool,
    /// Every model the run covers, probed or skipped as disabled, as
    /// (provider, model).
    pub scope: &'a [(String, String)],
    /// The providers the run left out, and why.
    pub skipped: &'a [Skipped],
    pub stats_dir: &'a Path,
    pub state_path: &'a Path,
    /// The run in a few plain lines (counts, failures, state changes, what
    /// was left out), for channels that send text.
    pub summary: &'a str,
}

impl FinishedRun<'_> {
    /// How many of the recorded probes passed.
    pub fn passed(&self) -> usize {
        self.entries.iter().filter(|e| e.ok != 0).count()
    }
}

/// One channel that hears about a run. Every method has a default that
/// does nothing, so a channel implements only what it reacts to. They are
/// called in the order the channels were registered.
pub trait RunObserver {
    /// The run holds its lock and is about to probe (never for `--list`,
    /// `--dry-run` or a run that is not due). An error here (a data file
    /// the channel needs cannot be read) stops the run before its first
    /// probe; the channels told before it hear how it ended in `on_end`.
    fn on_start(&mut self) -> Result<()> {
        Ok(())
    }

    /// The probes are recorded. An error here fails the run at once: no
    /// later channel hears of it and no summary is printed.
    fn on_recorded(&mut self, _run: &FinishedRun<'_>) -> Result<()> {
        Ok(())
    }

    /// Just before the summary is printed. An error here is reported after
    /// the summary, once every channel has been told.
    fn on_finish(&mut self, _run: &FinishedRun<'_>) -> Result<()> {
        Ok(())
    }

    /// The invocation ended, however it did (an error before the run
    /// started included). It cannot change the exit code.
    fn on_end(&mut self, _result: &Result<Ran>) {}
}

/// The channels of one invocation, in order.
#[derive(Default)]
pub struct Observers(Vec<Box<dyn RunObserver>>);

impl Observers {
    pub fn push(&mut self, o: impl RunObserver + 'static) {
        self.0.push(Box::new(o));
    }

    /// Stops at the first error.
    pub fn start(&mut self) -> Result<()> {
        self.0.iter_mut().try_for_each(|o| o.on_start())
    }

    /// Stops at the first error.
    pub fn recorded(&mut self, run: &FinishedRun<'_>) -> Result<()> {
        self.0.iter_mut().try_for_each(|o| o.on_recorded(run))
    }

    /// Tells every channel; the first error, if any.
    pub fn finish(&mut self, run: &FinishedRun<'_>) -> Result<()> {
        let mut first = Ok(());
        for o in &mut self.0 {
            if let Err(e) = o.on_finish(run)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    pub fn end(&mut self, result: &Result<Ran>) {
        self.0.iter_mut().for_each(|o| o.on_end(result));
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::error::Error;

    /// Logs each call as `name:event`; fails where told to.
    struct Probe {
        name: &'static str,
        log: Rc<RefCell<Vec<String>>>,
        fail_recorded: bool,
        fail_finish: bool,
    }

    impl RunObserver for Probe {
        fn on_start(&mut self) -> Result<()> {
            self.log.borrow_mut().push(format!("{}:start", self.name));
            Ok(())
        }
        fn on_recorded(&mut self, _: &FinishedRun<'_>) -> Result<()> {
            self.log
                .borrow_mut()
                .push(format!("{}:recorded", self.name));
            if self.fail_recorded {
                return Err(Error::config(format!("{} recorded", self.name)));
            }
            Ok(())
        }
        fn on_finish(&mut self, _: &FinishedRun<'_>) -> Result<()> {
            self.log.borrow_mut().push(format!("{}:finish", self.name));
            if self.fail_finish {
                return Err(Error::config(format!("{} finish", self.name)));
            }
            Ok(())
        }
        fn on_end(&mut self, r: &Result<Ran>) {
            let how = r.as_ref().map(|r| r.code()).unwrap_or(99);
            self.log
                .borrow_mut()
                .push(format!("{}:end {how}", self.name));
        }
    }

    fn run() -> FinishedRun<'static> {
        let t: DateTime<Utc> = "2026-12-01T10:00:00Z".parse().unwrap();
        FinishedRun {
            started_at: t,
            finished_at: t,
            exit_code: 0,
            entries: &[],
            state_changes: &[],
            offline: false,
            scope: &[],
            skipped: &[],
            stats_dir: Path::new("stats"),
            state_path: Path::new("stats/model_state.json"),
            summary: "",
        }
    }

    fn observers(fails: &[(bool, bool)]) -> (Observers, Rc<RefCell<Vec<String>>>) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut o = Observers::default();
        for (&(fail_recorded, fail_finish), name) in fails.iter().zip(["a", "b", "c"]) {
            o.push(Probe {
                name,
                log: log.clone(),
                fail_recorded,
                fail_finish,
            });
        }
        (o, log)
    }

    #[test]
    fn a_recorded_error_stops_at_once_and_a_finish_error_waits_for_the_rest() {
        let (mut o, log) = observers(&[(false, false), (true, true), (false, false)]);
        o.start().unwrap();
        let err = o.recorded(&run()).unwrap_err();
        assert_eq!(err.to_string(), "b recorded");
        let err = o.finish(&run()).unwrap_err();
        assert_eq!(err.to_string(), "b finish");
        o.end(&Ok(Ran::Completed(6)));
        assert_eq!(
            *log.borrow(),
            [
                "a:start",
                "b:start",
                "c:start",
                "a:recorded",
                "b:recorded",
                "a:finish",
                "b:finish",
                "c:finish",
                "a:end 6",
                "b:end 6",
                "c:end 6"
            ]
        );
    }

    #[test]
    fn a_skip_is_exit_0() {
        assert_eq!(Ran::NotDue.code(), exit::SUCCESS);
        assert_eq!(Ran::NotARun(2).code(), 2);
    }
}
