//! Scheduled `check` runs: the job every scheduler runs, written for cron
//! ([`cron`]), systemd user timers ([`systemd`]) and Windows Task Scheduler
//! ([`taskxml`]) from one description, [`Job`]; the marker file that says a
//! schedule is installed ([`Marker`]); and the staleness rule `brief` and
//! `schedule show` share ([`Health`]).
//!
//! Every path in a job is absolute, because a scheduler starts the job in
//! a directory of its choosing with an almost empty environment. Keys are
//! never written into a job: cron sources the env file and systemd reads it
//! (`--env-file`); Task Scheduler runs inherit the user's environment.
//!
//! **Why cron fires more often than it probes.** cron does not run a job
//! that fell due while the machine slept. So the cron entry fires every
//! [`Every::step`] (15 min for 1 h) and runs `check --if-due`, which probes
//! only when the last completed run is at least [`Every::if_due`] old
//! (every − step: 45 min for 1 h). A machine that slept through the hour
//! probes within a step of waking; an awake one probes once per interval,
//! on the step grid, as long as jitter plus the run take less than a step.
//! systemd (`Persistent=true`) and Task Scheduler (`StartWhenAvailable`)
//! catch up by themselves and run on the interval itself.

pub(crate) mod cron;
pub(crate) mod envfile;
pub(crate) mod systemd;
pub mod taskxml;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Error, Result};
use crate::fsutil;
use crate::lastrun::LastRun;

/// Which scheduler runs the job.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    clap::ValueEnum,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
    strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Backend {
    /// The user's crontab (Linux, macOS).
    Cron,
    /// systemd user units: a oneshot service and its timer.
    Systemd,
    /// Windows Task Scheduler.
    TaskScheduler,
}

crate::names::serde_via_strum!(Backend);

impl Backend {
    /// Task Scheduler on Windows, cron everywhere else.
    pub fn native() -> Backend {
        if cfg!(windows) {
            Backend::TaskScheduler
        } else {
            Backend::Cron
        }
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The minutes that divide an hour: the steps a cron minute field (and a
/// systemd calendar) repeats evenly.
const DIVISORS_OF_60: [u32; 12] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60];

/// How often `check` runs, in whole minutes, from 5 minutes to 7 days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Every {
    minutes: u32,
}

impl Every {
    pub const MIN_MINUTES: u32 = 5;
    pub const MAX_MINUTES: u32 = 7 * 24 * 60;

    /// `--every`, validated: whole minutes, within the bounds.
    pub fn from_flag(d: Duration) -> Result<Every> {
        let secs = d.as_secs();
        if d.subsec_nanos() != 0 || !secs.is_multiple_of(60) {
            return Err(Error::config(format!(
                "--every {}: must be whole minutes, like 1h, 30m or 90m",
                crate::duration::format_flag(d)
            )));
        }
        let minutes = u32::try_from(secs / 60).unwrap_or(u32::MAX);
        if !(Self::MIN_MINUTES..=Self::MAX_MINUTES).contains(&minutes) {
            return Err(Error::config(format!(
                "--every {}: must be from 5m to 168h (7 days)",
                crate::duration::format_flag(d)
            )));
        }
        Ok(Every { minutes })
    }

    /// From a marker's `every_secs`; `None` when out of bounds.
    pub fn from_secs(secs: u64) -> Option<Every> {
        Every::from_flag(Duration::from_secs(secs)).ok()
    }

    pub fn minutes(self) -> u32 {
        self.minutes
    }

    pub fn secs(self) -> u64 {
        u64::from(self.minutes) * 60
    }

    /// `1h`, `90m`, `24h`.
    pub fn label(self) -> String {
        crate::duration::format_flag(Duration::from_secs(self.secs()))
    }

    /// How often cron fires: the largest divisor of 60 minutes that is at
    /// most a quarter of the interval (15 min for 1 h), and hourly for
    /// intervals of 4 h and more. A machine that slept catches up within a
    /// step of waking.
    pub fn step(self) -> u32 {
        DIVISORS_OF_60
            .into_iter()
            .rev()
            .find(|&d| d <= self.minutes / 4)
            .unwrap_or(1)
    }

    /// The `--if-due` age: every − step, so that a trigger on the grid
    /// finds the previous run (which started on the grid and took less than
    /// a step) old enough, and the one a step earlier does not.
    pub fn if_due(self) -> Duration {
        Duration::from_secs(u64::from(self.minutes - self.step()) * 60)
    }

    /// The random delay before each run, so that many machines do not probe
    /// in lock-step: half a step, at most 5 minutes, so that the delay and
    /// the run itself fit in a step.
    pub fn jitter(self) -> Duration {
        Duration::from_secs((u64::from(self.step()) * 30).min(300))
    }

    /// The systemd `OnCalendar=` that repeats exactly every interval, when
    /// there is one: divisors of an hour, `hourly`, divisors of a day,
    /// `daily`, `weekly`.
    pub fn exact_calendar(self) -> Option<String> {
        let m = self.minutes;
        match m {
            60 => Some("hourly".into()),
            1440 => Some("daily".into()),
            10080 => Some("weekly".into()),
            _ if m < 60 && 60 % m == 0 => Some(format!("*:0/{m}")),
            _ if m.is_multiple_of(60) && m < 1440 && 1440 % m == 0 => {
                Some(format!("0/{}:00", m / 60))
            }
            _ => None,
        }
    }

    /// A calendar that fires every [`step`](Every::step), for intervals
    /// with no exact calendar (the job then runs `check --if-due`).
    pub fn step_calendar(self) -> String {
        match self.step() {
            60 => "hourly".into(),
            s => format!("*:0/{s}"),
        }
    }

    /// A run older than this is stale: twice the interval.
    pub fn stale_after(self) -> TimeDelta {
        TimeDelta::seconds(2 * self.secs() as i64)
    }
}

impl Default for Every {
    fn default() -> Every {
        Every { minutes: 60 }
    }
}

/// How often `check --paused` runs beside the scheduled `check`
/// (`schedule install --reprobe 10m`): whole minutes that divide an hour,
/// so that cron's `*/N` and systemd's `*:0/N` fire evenly, and shorter
/// than the interval of `check` itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reprobe {
    minutes: u32,
}

impl Reprobe {
    /// `--reprobe`, validated against `--every`.
    pub fn from_flag(d: Duration, every: Every) -> Result<Reprobe> {
        let label = crate::duration::format_flag(d);
        let divisors: Vec<String> = DIVISORS_OF_60
            .iter()
            .map(|m| crate::duration::format_flag(Duration::from_secs(u64::from(*m) * 60)))
            .collect();
        let minutes = u32::try_from(d.as_secs() / 60).unwrap_or(u32::MAX);
        if d.subsec_nanos() != 0
            || !d.as_secs().is_multiple_of(60)
            || !DIVISORS_OF_60.contains(&minutes)
        {
            return Err(Error::config(format!(
                "--reprobe {label}: must be whole minutes that divide an hour ({}), like 10m",
                divisors.join(", ")
            )));
        }
        if minutes >= every.minutes() {
            return Err(Error::config(format!(
                "--reprobe {label}: must be shorter than --every {} (each scheduled check probes paused models itself)",
                every.label()
            )));
        }
        Ok(Reprobe { minutes })
    }

    pub fn minutes(self) -> u32 {
        self.minutes
    }

    /// `10m`, `1h`.
    pub fn label(self) -> String {
        crate::duration::format_flag(Duration::from_secs(u64::from(self.minutes) * 60))
    }

    /// When cron and systemd fire it: `*/10` (minute field) or `*:0/10`.
    pub fn calendar(self) -> String {
        match self.minutes {
            60 => "hourly".into(),
            m => format!("*:0/{m}"),
        }
    }
}

/// A path as a job names it: a real absolute path, which each format
/// quotes its own way, or a placeholder for the example files under
/// `scripts/` (such as systemd's `%h/llmprobe/stats`), written as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathArg {
    Real(PathBuf),
    Placeholder(&'static str),
}

impl PathArg {
    /// The path for messages and for formats that take it whole.
    pub fn display(&self) -> String {
        match self {
            PathArg::Real(p) => p.display().to_string(),
            PathArg::Placeholder(s) => s.to_string(),
        }
    }
}

/// One word of the job's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word<'a> {
    /// A word that needs no quoting anywhere: `check`, `--if-due`, `45m`.
    Lit(String),
    Path(&'a PathArg),
}

impl Word<'_> {
    /// The word as a format writes it: bare when plain, else through
    /// `quote`; then through `escape` (cron's `%`, systemd's specifiers).
    /// A placeholder goes in as it is: it is written for the format.
    pub fn render(
        &self,
        quote: impl Fn(&str) -> String,
        escape: impl Fn(String) -> String,
    ) -> String {
        let s = match self {
            Word::Path(PathArg::Placeholder(s)) => return s.to_string(),
            Word::Path(PathArg::Real(p)) => p.display().to_string(),
            Word::Lit(s) => s.clone(),
        };
        let plain = !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@,=".contains(&b));
        escape(if plain { s } else { quote(&s) })
    }
}

/// What every scheduler runs: `check` with absolute paths.
#[derive(Debug, Clone)]
pub struct Job {
    pub exe: PathArg,
    pub stats_dir: PathArg,
    pub config: Option<PathArg>,
    pub prompts: Option<PathArg>,
    pub env_file: Option<PathArg>,
    pub every: Every,
    /// `--reprobe`: a second entry running `check --paused` this often.
    pub reprobe: Option<Reprobe>,
}

impl Job {
    /// `check`, then `extra` (such as `--if-due 45m`), then the stats
    /// directory, config and prompts as absolute paths.
    pub fn check_argv(&self, extra: &[String]) -> Vec<Word<'_>> {
        let mut w = vec![Word::Lit("check".into())];
        w.extend(extra.iter().cloned().map(Word::Lit));
        w.push(Word::Lit("--stats-dir".into()));
        w.push(Word::Path(&self.stats_dir));
        for (flag, p) in [("--config", &self.config), ("--prompts", &self.prompts)] {
            if let Some(p) = p {
                w.push(Word::Lit(flag.into()));
                w.push(Word::Path(p));
            }
        }
        w
    }
}

/// Whether `cmd` is an executable file on `PATH` (without running it).
pub fn on_path(cmd: &str) -> bool {
    find_on_path(cmd).is_some()
}

/// The file a shell would run for `cmd`: the first match on `PATH`
/// (`cmd.exe` too on Windows).
pub fn find_on_path(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|d| {
        let names = [
            Some(d.join(cmd)),
            cfg!(windows).then(|| d.join(format!("{cmd}.exe"))),
        ];
        names.into_iter().flatten().find(|p| p.is_file())
    })
}

/// The example files shipped under `scripts/`, generated by the same code
/// as the installed jobs, with example paths: (file name, contents).
pub fn templates() -> Vec<(&'static str, String)> {
    let real = |p: &str| PathArg::Real(PathBuf::from(p));
    let unix = Job {
        exe: real("/usr/local/bin/llmprobe"),
        stats_dir: real("/home/you/llmprobe/stats"),
        config: Some(real("/home/you/llmprobe/llmprobe.toml")),
        prompts: None,
        env_file: Some(real("/home/you/llmprobe/keys.env")),
        every: Every::default(),
        reprobe: None,
    };
    // systemd fills in the home directory itself (%h).
    let systemd = Job {
        stats_dir: PathArg::Placeholder("%h/llmprobe/stats"),
        config: Some(PathArg::Placeholder("%h/llmprobe/llmprobe.toml")),
        env_file: Some(PathArg::Placeholder("%h/llmprobe/keys.env")),
        ..unix.clone()
    };
    let windows = Job {
        exe: real(r"C:\llmprobe\llmprobe.exe"),
        stats_dir: real(r"C:\llmprobe\stats"),
        config: Some(real(r"C:\llmprobe\llmprobe.toml")),
        prompts: None,
        env_file: None,
        every: Every::default(),
        reprobe: None,
    };
    let crontab = format!(
        "# The crontab entry `llmprobe schedule install` writes, with example paths.\n\
         # Prefer that command; to install this by hand, change the paths and paste\n\
         # the lines into `crontab -e`. keys.env holds NAME=value lines (chmod 600).\n\
         {}",
        cron::block(&unix)
    );
    vec![
        ("crontab.example", crontab),
        (systemd::SERVICE, systemd::service(&systemd)),
        (systemd::TIMER, systemd::timer(&systemd)),
        (
            taskxml::XML_FILE,
            taskxml::xml(&taskxml::Fields::of(&windows)),
        ),
        ("install-task.ps1", taskxml::install_ps1()),
    ]
}

/// `stats/schedule.json`: what `schedule install` installed, so that
/// `brief` can tell a schedule is in place by reading one small file
/// (asking crontab or systemd would cost a process per brief).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub version: u32,
    pub backend: Backend,
    /// `1h`, as given to `--every`.
    pub every: String,
    pub every_secs: u64,
    pub installed_at: DateTime<Utc>,
    /// Where the job lives: `crontab`, the unit files, or the task name.
    pub location: String,
    /// `10m`, as given to `--reprobe`: `check --paused` runs this often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reprobe: Option<String>,
}

impl Marker {
    pub const VERSION: u32 = 1;
    pub const FILE: &'static str = "schedule.json";

    pub fn path(stats_dir: &Path) -> PathBuf {
        stats_dir.join(Self::FILE)
    }

    /// The interval it records, or the default (1 h) when out of bounds.
    pub fn interval(&self) -> Every {
        Every::from_secs(self.every_secs).unwrap_or_default()
    }

    /// The marker of `stats_dir`, or `None`. A file that does not parse is
    /// a data error (exit 4), left as it is.
    pub fn read(stats_dir: &Path) -> Result<Option<Marker>> {
        let p = Self::path(stats_dir);
        let Some(bytes) = fsutil::read_data_file(&p)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| DataError::new(&p, None, format!("not a schedule record: {e}")).into())
    }

    pub fn write(&self, stats_dir: &Path) -> Result<()> {
        fsutil::ensure_dir(stats_dir)?;
        let mut bytes = serde_json::to_vec_pretty(self).expect("a Marker always serialises");
        bytes.push(b'\n');
        fsutil::atomic_write_unlocked(&Self::path(stats_dir), &bytes)
    }

    /// Remove the marker of `stats_dir`; true when there was one.
    pub fn remove(stats_dir: &Path) -> Result<bool> {
        let p = Self::path(stats_dir);
        match std::fs::remove_file(&p) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(format!("cannot remove {}", p.display()), e)),
        }
    }
}

/// A warning about the schedule, for `brief` and `schedule show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// `schedule_not_installed`, `last_run_stale` or `schedule_unreadable`;
    /// `brief` adds `provider_stale` ([`crate::stale`]).
    pub kind: &'static str,
    pub message: String,
}

/// Whether scheduled runs are happening, from the marker and
/// `last_run.json` (two small files; nothing is spawned, the log is not
/// read).
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub installed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// The interval runs are expected at: the installed one, else 1 h.
    pub every: String,
    /// The same interval, for the staleness rules that follow it.
    #[serde(skip)]
    pub interval: Every,
    pub last_run: Option<LastRun>,
    pub last_run_stale: bool,
    #[serde(skip)]
    pub warnings: Vec<Warning>,
}

impl Health {
    /// Judge the schedule of `stats_dir` at `now`. `newest_probe` (from
    /// the log, when the caller has read it) stands in for a missing
    /// `last_run.json`, so that runs by an llmprobe older than that file
    /// are not taken for no runs at all.
    pub fn assess(stats_dir: &Path, now: DateTime<Utc>, newest_probe: Option<i64>) -> Health {
        let mut warnings = Vec::new();
        let marker = Marker::read(stats_dir).unwrap_or_else(|e| {
            warnings.push(Warning {
                kind: "schedule_unreadable",
                message: e.to_string(),
            });
            None
        });
        let last_run = crate::lastrun::read(stats_dir).unwrap_or_else(|e| {
            warnings.push(Warning {
                kind: "schedule_unreadable",
                message: e.to_string(),
            });
            None
        });
        let every = marker.as_ref().map(Marker::interval).unwrap_or_default();
        let last = last_run
            .as_ref()
            .map(|r| r.finished_at)
            .or_else(|| newest_probe.and_then(|t| DateTime::from_timestamp(t, 0)));
        let age = last.map(|t| (now - t).max(TimeDelta::zero()));
        let last_run_stale = age.is_none_or(|a| a > every.stale_after());
        let when = match age {
            Some(a) => format!(
                "the last check run was {}",
                crate::format::fmt_ago(a.num_seconds())
            ),
            None => "no check run is recorded".to_string(),
        };
        match &marker {
            None if last_run_stale => warnings.push(Warning {
                kind: "schedule_not_installed",
                message: format!(
                    "no schedule is installed and {when}: run `llmprobe schedule install` \
                     (or schedule `llmprobe check` yourself)"
                ),
            }),
            // Just installed: the first run is still to come.
            Some(m) if last_run_stale && now - m.installed_at > every.stale_after() => {
                let job = format!(
                    "the scheduled job ({}, installed {})",
                    m.backend.as_str(),
                    crate::format::fmt_minute(m.installed_at.timestamp())
                );
                let message = match age {
                    Some(_) => format!(
                        "{when}, more than 2 × {}: {job} may have stopped; \
                         see `llmprobe schedule show`",
                        every.label()
                    ),
                    None => format!(
                        "no check run has completed since {job}: see `llmprobe schedule show`"
                    ),
                };
                warnings.push(Warning {
                    kind: "last_run_stale",
                    message,
                })
            }
            _ => {}
        }
        Health {
            installed: marker.is_some(),
            backend: marker.as_ref().map(|m| m.backend),
            every: every.label(),
            interval: every,
            last_run,
            last_run_stale,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(s: &str) -> Every {
        Every::from_flag(crate::duration::parse(s).unwrap()).unwrap()
    }

    #[test]
    fn steps_divide_the_hour_and_leave_room_for_the_run() {
        for (e, step, if_due, jitter) in [
            ("1h", 15, "45m", "5m"),
            ("30m", 6, "24m", "3m"),
            ("5m", 1, "4m", "30s"),
            ("90m", 20, "70m", "5m"),
            ("4h", 60, "3h", "5m"),
            ("24h", 60, "23h", "5m"),
        ] {
            let ev = every(e);
            assert_eq!(ev.step(), step, "{e}");
            assert_eq!(crate::duration::format_flag(ev.if_due()), if_due, "{e}");
            assert_eq!(crate::duration::format_flag(ev.jitter()), jitter, "{e}");
            assert!(
                ev.jitter().as_secs() * 2 <= u64::from(ev.step()) * 60,
                "{e}"
            );
            assert!(60 % ev.step() == 0, "{e}");
        }
        for m in Every::MIN_MINUTES..=Every::MAX_MINUTES {
            let ev = Every { minutes: m };
            assert!(ev.step() < m && ev.jitter().as_secs() * 2 <= u64::from(ev.step()) * 60);
        }
    }

    #[test]
    fn exact_calendars_only_where_they_repeat_evenly() {
        assert_eq!(every("1h").exact_calendar().as_deref(), Some("hourly"));
        assert_eq!(every("15m").exact_calendar().as_deref(), Some("*:0/15"));
        assert_eq!(every("6h").exact_calendar().as_deref(), Some("0/6:00"));
        assert_eq!(every("24h").exact_calendar().as_deref(), Some("daily"));
        assert_eq!(every("168h").exact_calendar().as_deref(), Some("weekly"));
        assert_eq!(every("90m").exact_calendar(), None);
        assert_eq!(every("7h").exact_calendar(), None);
        assert_eq!(every("90m").step_calendar(), "*:0/20");
        assert_eq!(every("7h").step_calendar(), "hourly");
    }

    #[test]
    fn every_is_whole_minutes_within_bounds() {
        for bad in ["90s", "4m", "169h", "1m30s"] {
            let err = Every::from_flag(crate::duration::parse(bad).unwrap()).unwrap_err();
            assert_eq!(err.exit_code(), crate::exit::USAGE);
            assert!(err.to_string().contains("--every"), "{err}");
        }
        assert_eq!(every("168h").label(), "168h");
        assert_eq!(every("90m").label(), "90m");
        for d in ["45m", "150s", "23h"] {
            let parsed = crate::duration::parse(d).unwrap();
            assert_eq!(crate::duration::format_flag(parsed), d);
        }
    }

    fn run_at(t: DateTime<Utc>) -> LastRun {
        LastRun {
            version: LastRun::VERSION,
            started_at: t,
            finished_at: t,
            exit_code: 0,
            offline: false,
            probes: 1,
            ok: 1,
            skipped: Vec::new(),
            newest: None,
        }
    }

    #[test]
    fn health_nags_only_when_runs_are_missing() {
        let dir = tempfile::tempdir().unwrap();
        let now: DateTime<Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
        let kinds = |h: &Health| h.warnings.iter().map(|w| w.kind).collect::<Vec<_>>();
        // Nothing at all: not installed.
        let h = Health::assess(dir.path(), now, None);
        assert_eq!(kinds(&h), ["schedule_not_installed"]);
        // Scheduled by hand, running: no marker, but a fresh run. Quiet.
        crate::lastrun::write(dir.path(), &run_at(now - TimeDelta::minutes(50))).unwrap();
        let h = Health::assess(dir.path(), now, None);
        assert!(h.warnings.is_empty() && !h.last_run_stale, "{h:?}");
        // ... stopped: not installed, with the age.
        let h = Health::assess(dir.path(), now + TimeDelta::hours(2), None);
        assert_eq!(kinds(&h), ["schedule_not_installed"]);
        assert!(h.warnings[0].message.contains("2h ago"), "{h:?}");
        // Installed just now: the first run is still to come.
        let m = Marker {
            version: Marker::VERSION,
            backend: Backend::Cron,
            every: "1h".into(),
            every_secs: 3600,
            installed_at: now + TimeDelta::hours(2),
            location: "crontab".into(),
            reprobe: None,
        };
        m.write(dir.path()).unwrap();
        let h = Health::assess(dir.path(), now + TimeDelta::hours(2), None);
        assert!(h.warnings.is_empty() && h.installed, "{h:?}");
        // Installed, and no run for more than twice the interval since.
        let h = Health::assess(dir.path(), now + TimeDelta::hours(5), None);
        assert_eq!(kinds(&h), ["last_run_stale"]);
        // A probe in the log stands in for a missing last_run.json.
        std::fs::remove_file(crate::lastrun::path(dir.path())).unwrap();
        Marker::remove(dir.path()).unwrap();
        let h = Health::assess(
            dir.path(),
            now,
            Some((now - TimeDelta::minutes(5)).timestamp()),
        );
        assert!(h.warnings.is_empty(), "{h:?}");
        // A bad marker is a warning, never a failure.
        std::fs::write(Marker::path(dir.path()), "{oops").unwrap();
        let h = Health::assess(dir.path(), now, Some(now.timestamp()));
        assert_eq!(kinds(&h), ["schedule_unreadable"]);
        assert!(h.warnings[0].message.contains(Marker::FILE));
    }
}
