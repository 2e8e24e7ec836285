//! `llmprobe schedule install | uninstall | show`: put the `check` job in
//! cron, systemd or Task Scheduler, take it out again, and say what is
//! installed and whether it runs. The job text comes from
//! [`crate::schedule`]; this file runs the tools (`crontab`, `systemctl`,
//! `schtasks`), writes the files, and records the install in
//! `stats/schedule.json` for `brief`.
//!
//! Each scheduler is a [`Scheduler`] in a file of its own ([`cron`],
//! [`systemd`], [`task_scheduler`]); this file holds what they share: the
//! flags, the notes, the marker, and the text of `show`. Another scheduler
//! (launchd) is one more file and one arm in [`scheduler`].

mod cron;
mod systemd;
mod task_scheduler;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;
use strum::IntoEnumIterator as _;

use crate::cli::{
    GlobalArgs, ScheduleAction, ScheduleArgs, ScheduleInstallArgs, ScheduleShowArgs,
    ScheduleUninstallArgs,
};
use crate::clock::Clock;
use crate::duration::format_flag as flag_dur;
use crate::error::{Error, Result};
use crate::exit;
use crate::format::{fmt_ago, fmt_minute};
use crate::fsutil;
use crate::fsutil::absolute;
use crate::lastrun::LastRun;
use crate::output;
use crate::schedule::envfile::{self, EnvFile};
use crate::schedule::{Backend, Every, Health, Job, Marker, PathArg, Reprobe};
use crate::settings::{DEFAULT_STATS_DIR, Settings};

pub fn run(g: &GlobalArgs, a: ScheduleArgs) -> Result<u8> {
    match a.action {
        ScheduleAction::Install(i) => {
            refuse_secret_flags(&i)?;
            install(&Settings::load(g)?, g, i)
        }
        // Neither needs the config: a broken one must not stand in the way
        // of removing or inspecting the job.
        ScheduleAction::Uninstall(u) => uninstall(&stats_dir(g), u),
        ScheduleAction::Show(s) => show(&stats_dir(g), s),
        ScheduleAction::Templates { dir } => templates(&dir),
    }
}

/// `--notify` and `--ping-url` exist on `schedule install` only to be
/// refused (exit 2): a webhook's or a monitor's URL is a secret (its path
/// is the credential), and a job's command line is readable by anyone who
/// can read the crontab, the unit or the task. The job reads them from the
/// environment instead (`LLMPROBE_NOTIFY`, `LLMPROBE_PING_URL`), which
/// its env file sets. The error never quotes the value.
fn refuse_secret_flags(a: &ScheduleInstallArgs) -> Result<()> {
    let given: Vec<(&str, &str)> = [
        (!a.notify.is_empty()).then_some(("--notify", crate::notify::channel::NOTIFY_VAR)),
        a.ping_url
            .is_some()
            .then_some(("--ping-url", "LLMPROBE_PING_URL")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if given.is_empty() {
        return Ok(());
    }
    let flags: Vec<&str> = given.iter().map(|(f, _)| *f).collect();
    let lines: Vec<String> = given
        .iter()
        .map(|(_, var)| match a.backend.unwrap_or_else(Backend::native) {
            Backend::TaskScheduler => format!("setx {var} \"URL\""),
            _ => format!("{var}=URL"),
        })
        .collect();
    let how = match a.backend.unwrap_or_else(Backend::native) {
        Backend::TaskScheduler => format!(
            "set it as a user environment variable instead, which the task inherits: {}",
            lines.join(" and ")
        ),
        _ => format!(
            "put it in the env file instead, as {} (a line of its own; several notify URLs \
             separated by spaces), and pass that file as --env-file: the job reads it from there",
            lines.join(" and ")
        ),
    };
    Err(Error::config(format!(
        "schedule install {}: the URL is a secret (its path is the credential), and the job's \
         command line would show it to anyone who can read the job; {how}",
        flags.join(" and ")
    )))
}

fn stats_dir(g: &GlobalArgs) -> PathBuf {
    absolute(
        g.stats_dir
            .as_deref()
            .unwrap_or(Path::new(DEFAULT_STATS_DIR)),
    )
}

/// A path for a job: UTF-8 and on one line, since it is written into a
/// crontab line, a unit file or XML.
fn job_path(p: PathBuf, what: &str) -> Result<PathArg> {
    match p.to_str() {
        Some(s) if !s.contains(['\n', '\r']) => Ok(PathArg::Real(p)),
        _ => Err(Error::config(format!(
            "{what} {}: a path with a line break, or that is not UTF-8, cannot go into a scheduled job",
            p.display()
        ))),
    }
}

/// One scheduler's side of `schedule install | uninstall | show`.
trait Scheduler: Sync {
    /// Whether `--enable` (start the job now) means something here.
    fn takes_enable(&self) -> bool {
        false
    }

    /// Why `--env-file` cannot be used, if it cannot.
    fn env_file_refusal(&self) -> Option<&'static str> {
        None
    }

    /// The note for variables set in this shell that the job will not see,
    /// when this scheduler's jobs see the environment differently from an
    /// env file's; `list` names them.
    fn missing_vars_note(&self, _list: &str) -> Option<String> {
        None
    }

    /// Install `job` (or, with `dry_run`, say what would be installed).
    fn install(&self, job: &Job, stats: &Path, dry_run: bool, enable: bool) -> Result<Installed>;

    /// Remove the job, saying so with `verb`; `None` when this scheduler is
    /// not here to look in. `explicit`: the user named this scheduler, so
    /// its absence is an error rather than a skip.
    fn uninstall(&self, explicit: bool, dry_run: bool, verb: &str) -> Result<Option<Removal>>;

    /// The installed job, if any.
    fn show(&self, cx: &ShowContext<'_>) -> Result<Option<Shown>>;
}

/// The scheduler behind `b`.
fn scheduler(b: Backend) -> &'static dyn Scheduler {
    match b {
        Backend::Cron => &cron::Cron,
        Backend::Systemd => &systemd::Systemd,
        Backend::TaskScheduler => &task_scheduler::TaskScheduler,
    }
}

/// What an uninstall found in one scheduler.
struct Removal {
    /// Where it looked, for "no llmprobe schedule found".
    looked: String,
    /// What it removed (or would remove); empty when nothing.
    text: String,
    /// The stats directories of the jobs removed, whose markers go too.
    job_stats: Vec<PathBuf>,
}

impl Removal {
    fn looked_in(place: &str) -> Removal {
        Removal {
            looked: place.to_string(),
            text: String::new(),
            job_stats: Vec::new(),
        }
    }
}

/// What `show` knows before asking the schedulers.
struct ShowContext<'a> {
    now: DateTime<Utc>,
    /// The recorded interval, or the default.
    every: Every,
    last: Option<&'a LastRun>,
    stats: &'a Path,
    /// The user named the scheduler (`--with`).
    explicit: bool,
}

/// What an install did (or would do).
struct Installed {
    /// What to print.
    text: String,
    /// Where the job lives, for the marker.
    location: String,
    /// The stats directory of the job it replaced, if any.
    previous_stats: Option<PathBuf>,
}

fn install(s: &Settings, g: &GlobalArgs, a: ScheduleInstallArgs) -> Result<u8> {
    let every = Every::from_flag(a.every)?;
    let reprobe = a
        .reprobe
        .map(|d| Reprobe::from_flag(d, every))
        .transpose()?;
    let backend = a.backend.unwrap_or_else(Backend::native);
    let sched = scheduler(backend);
    if a.enable && !sched.takes_enable() {
        return Err(Error::config(
            "--enable starts the systemd timer: it goes with --with systemd",
        ));
    }
    let env = a.env_file.as_deref().map(envfile::read).transpose()?;
    if let Some(refusal) = sched.env_file_refusal().filter(|_| env.is_some()) {
        return Err(Error::config(refusal));
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find the path of the llmprobe binary", e))?;
    let stats = absolute(&s.stats_dir);
    let job = Job {
        exe: job_path(exe, "the llmprobe binary")?,
        stats_dir: job_path(stats.clone(), "--stats-dir")?,
        config: s
            .config
            .as_ref()
            .map(|c| job_path(c.path.clone(), "--config"))
            .transpose()?,
        prompts: g
            .prompts
            .as_deref()
            .map(|p| job_path(absolute(p), "--prompts"))
            .transpose()?,
        env_file: env
            .as_ref()
            .map(|e| job_path(e.path.clone(), "--env-file"))
            .transpose()?,
        every,
        reprobe,
    };
    for n in notes(s, &job, env.as_ref(), backend, &stats) {
        eprintln!("note: {n}");
    }
    let done = sched.install(&job, &stats, a.dry_run, a.enable)?;
    let mut text = done.text;
    if a.dry_run {
        text.push_str("\n--dry-run: nothing was changed.\n");
    } else {
        if let Some(old) = done.previous_stats.filter(|p| *p != stats) {
            // The job that pointed there is gone.
            Marker::remove(&old)?;
        }
        let marker = Marker {
            version: Marker::VERSION,
            backend,
            every: every.label(),
            every_secs: every.secs(),
            installed_at: Clock::from_env().now(),
            location: done.location,
            reprobe: reprobe.map(Reprobe::label),
        };
        marker.write(&stats)?;
        let _ = writeln!(
            text,
            "\nrecorded in {} for `llmprobe brief`; `llmprobe schedule show` shows it, \
             `llmprobe schedule uninstall` removes it",
            Marker::path(&stats).display()
        );
    }
    output::print(&text)?;
    Ok(exit::SUCCESS)
}

/// Things the user should know before relying on the job.
fn notes(
    s: &Settings,
    job: &Job,
    env: Option<&EnvFile>,
    backend: Backend,
    stats: &Path,
) -> Vec<String> {
    let mut out: Vec<String> = env.map(|e| e.warnings.clone()).unwrap_or_default();
    let exe = job.exe.display();
    if [
        "/target/debug/",
        "/target/release/",
        r"\target\debug\",
        r"\target\release\",
    ]
    .iter()
    .any(|t| exe.contains(t))
    {
        out.push(format!(
            "the job runs {exe}, a build inside a cargo target directory, which a rebuild \
             changes and `cargo clean` deletes; `cargo install --path .` and install the \
             schedule from the installed binary"
        ));
    }
    // The variables the catalog reads (keys, local hosts, URL parts) that
    // this shell has and the job will not: the classic "works by hand,
    // skipped from cron". Names only; values are never read.
    let have: HashSet<&str> = env
        .map(|e| e.names.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let mut missing: Vec<&str> = Vec::new();
    for p in s
        .catalog
        .providers
        .iter()
        .filter(|p| p.enabled != Some(false))
    {
        let vars = p
            .api_key_env
            .iter()
            .chain(p.host_env.iter())
            .chain(p.url_vars.values());
        for v in vars {
            if std::env::var_os(v).is_some()
                && !have.contains(v.as_str())
                && !missing.contains(&v.as_str())
            {
                missing.push(v);
            }
        }
    }
    // The alert and ping URLs the job reads from its environment.
    let urls = [crate::notify::channel::NOTIFY_VAR, "LLMPROBE_PING_URL"];
    for v in urls
        .into_iter()
        .chain(s.catalog.notify.url_env.iter().map(String::as_str))
    {
        if std::env::var_os(v).is_some() && !have.contains(v) && !missing.contains(&v) {
            missing.push(v);
        }
    }
    if let Ok(Some(m)) = Marker::read(stats)
        && m.backend != backend
    {
        out.push(format!(
            "{} says a {} job is installed too; both would run: \
             `llmprobe schedule uninstall --with {}` removes that one",
            Marker::FILE,
            m.backend.as_str(),
            m.backend.as_str()
        ));
    }
    if !missing.is_empty() {
        let them = if missing.len() == 1 { "it" } else { "them" };
        let list = missing.join(", ");
        out.push(match scheduler(backend).missing_vars_note(&list) {
            Some(note) => note,
            None if env.is_some() => format!(
                "{list}: set in this shell but not in {}, so the job will not have {them}",
                job.env_file
                    .as_ref()
                    .map(PathArg::display)
                    .unwrap_or_default()
            ),
            None => format!(
                "{list}: set in this shell, but the job will not have {them}: put {them} in a \
                 file of NAME=value lines (chmod 600) and pass it as --env-file"
            ),
        });
    }
    out
}

/// The backends to look at: the one asked for, else all.
fn scope(asked: Option<Backend>) -> Vec<Backend> {
    asked.map(|b| vec![b]).unwrap_or(Backend::iter().collect())
}

fn uninstall(stats: &Path, a: ScheduleUninstallArgs) -> Result<u8> {
    let explicit = a.backend.is_some();
    let verb = if a.dry_run { "would remove" } else { "removed" };
    let mut text = String::new();
    let mut looked = Vec::new();
    let mut job_stats: Vec<PathBuf> = Vec::new();
    for backend in scope(a.backend) {
        let Some(r) = scheduler(backend).uninstall(explicit, a.dry_run, verb)? else {
            continue;
        };
        looked.push(r.looked);
        text.push_str(&r.text);
        job_stats.extend(r.job_stats);
    }
    let removed_job = !text.is_empty();
    job_stats.push(stats.to_path_buf());
    let mut seen = HashSet::new();
    for d in job_stats.into_iter().filter(|d| seen.insert(d.clone())) {
        if Marker::path(&d).exists() {
            if !a.dry_run {
                Marker::remove(&d)?;
            }
            let _ = writeln!(text, "{verb} {}", Marker::path(&d).display());
        }
    }
    if !removed_job {
        let _ = writeln!(
            text,
            "no llmprobe schedule found (looked in: {})",
            if looked.is_empty() {
                "nothing: no crontab, systemd or schtasks here".to_string()
            } else {
                looked.join(", ")
            }
        );
    }
    if a.dry_run {
        text.push_str("--dry-run: nothing was changed.\n");
    }
    output::print(&text)?;
    Ok(exit::SUCCESS)
}

/// One installed job, as `show` reports it.
#[derive(Debug, Serialize)]
struct Shown {
    backend: Backend,
    location: String,
    /// The cron block, the units, or the task's XML file.
    entry: String,
    /// When the scheduler starts the job next, where it can tell.
    next_trigger: Option<DateTime<Utc>>,
    /// cron: when a started job will actually probe (`--if-due`).
    #[serde(skip_serializing_if = "Option::is_none")]
    next_probe_from: Option<DateTime<Utc>>,
    /// What the scheduler itself says (systemctl, schtasks), line by line.
    details: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ShowReport {
    now: DateTime<Utc>,
    /// Every job found: normally one.
    jobs: Vec<Shown>,
    marker: Option<Marker>,
    #[serde(flatten)]
    health: Health,
    warnings: Vec<crate::schedule::Warning>,
}

fn show(stats: &Path, a: ScheduleShowArgs) -> Result<u8> {
    let explicit = a.backend.is_some();
    let now = Clock::from_env().now();
    let health = Health::assess(stats, now, None);
    let marker = Marker::read(stats).ok().flatten();
    let every = marker.as_ref().map(Marker::interval).unwrap_or_default();
    let cx = ShowContext {
        now,
        every,
        last: health.last_run.as_ref(),
        stats,
        explicit,
    };
    let mut jobs = Vec::new();
    for backend in scope(a.backend) {
        jobs.extend(scheduler(backend).show(&cx)?);
    }
    let mut warnings = health.warnings.clone();
    if let Some(m) = marker
        .as_ref()
        .filter(|_| jobs.is_empty() && a.backend.is_none())
    {
        warnings.push(crate::schedule::Warning {
            kind: "schedule_missing",
            message: format!(
                "{} says {} (every {}) was installed, but no llmprobe job was found: \
                 `llmprobe schedule install` again, or `llmprobe schedule uninstall` to forget it",
                Marker::FILE,
                m.backend.as_str(),
                m.every
            ),
        });
    }
    let report = ShowReport {
        now,
        jobs,
        marker,
        warnings,
        health,
    };
    if a.json {
        output::print_json(&report)?;
    } else {
        output::print(&show_text(&report, stats, every))?;
    }
    Ok(exit::SUCCESS)
}

/// `in 7m`, `in 2h`, for a time `secs` from now.
fn fmt_in(secs: i64) -> String {
    match secs.max(0) {
        0..60 => "in under a minute".into(),
        s @ 60..7200 => format!("in {}m", s / 60),
        s => format!("in {}h", s / 3600),
    }
}

fn show_text(r: &ShowReport, stats: &Path, every: Every) -> String {
    let mut out = String::new();
    let now = r.now.timestamp();
    if r.jobs.is_empty() {
        out.push_str(
            "no llmprobe schedule is installed: `llmprobe schedule install` installs one\n",
        );
    }
    for s in &r.jobs {
        let _ = writeln!(out, "{}: {}\n", s.backend.as_str(), s.location);
        for line in s.entry.lines() {
            let _ = writeln!(out, "  {line}");
        }
        out.push('\n');
        if let Some(t) = s.next_trigger {
            let _ = writeln!(
                out,
                "next trigger: {} ({})",
                fmt_minute(t.timestamp()),
                fmt_in(t.timestamp() - now)
            );
        }
        if let Some(t) = s.next_probe_from {
            let _ = writeln!(
                out,
                "next probing run: {} ({}), {} after the last run (`--if-due`), plus up to {} of jitter",
                fmt_minute(t.timestamp()),
                fmt_in(t.timestamp() - now),
                flag_dur(every.if_due()),
                flag_dur(every.jitter()),
            );
        }
        for d in &s.details {
            let _ = writeln!(out, "{d}");
        }
        out.push('\n');
    }
    match &r.marker {
        Some(m) => {
            let _ = writeln!(
                out,
                "recorded: {}, every {}{}, installed {} ({})",
                m.backend.as_str(),
                m.every,
                m.reprobe
                    .as_ref()
                    .map(|r| format!(", paused models re-probed every {r} (`check --paused`)"))
                    .unwrap_or_default(),
                fmt_minute(m.installed_at.timestamp()),
                Marker::path(stats).display()
            );
        }
        None => {
            let _ = writeln!(
                out,
                "recorded: nothing in {}",
                Marker::path(stats).display()
            );
        }
    }
    match &r.health.last_run {
        Some(run) => {
            let t = run.finished_at.timestamp();
            let _ = writeln!(
                out,
                "last run: finished {} ({}), exit {}{}, {} probes, {} ok: {}",
                fmt_minute(t),
                fmt_ago(now - t),
                run.exit_code,
                if run.offline { " (offline)" } else { "" },
                run.probes,
                run.ok,
                if r.health.last_run_stale {
                    format!("STALE (older than 2 × {})", every.label())
                } else {
                    format!("fresh (stale after 2 × {})", every.label())
                }
            );
        }
        None => {
            let _ = writeln!(
                out,
                "last run: none recorded in {}",
                crate::lastrun::path(stats).display()
            );
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "WARNING: {}", w.message);
    }
    out
}

fn templates(dir: &Path) -> Result<u8> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let mut text = String::new();
    for (name, content) in crate::schedule::templates() {
        let p = dir.join(name);
        fsutil::atomic_write_unlocked(&p, content.as_bytes())?;
        let _ = writeln!(text, "wrote {}", p.display());
    }
    output::print(&text)?;
    Ok(exit::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scheduler_says_which_flags_it_takes() {
        let enable: Vec<Backend> = Backend::iter()
            .filter(|&b| scheduler(b).takes_enable())
            .collect();
        assert_eq!(enable, [Backend::Systemd]);
        let refuse_env: Vec<Backend> = Backend::iter()
            .filter(|&b| scheduler(b).env_file_refusal().is_some())
            .collect();
        assert_eq!(refuse_env, [Backend::TaskScheduler]);
        for b in Backend::iter() {
            let note = scheduler(b).missing_vars_note("A_KEY");
            assert_eq!(note.is_some(), b == Backend::TaskScheduler, "{b:?}");
            assert!(note.is_none_or(|n| n.starts_with("A_KEY: ")), "{b:?}");
        }
    }
}
