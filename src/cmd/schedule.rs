//! `llmprobe schedule install | uninstall | show`: put the `check` job in
//! cron, systemd or Task Scheduler, take it out again, and say what is
//! installed and whether it runs. The job text comes from
//! [`crate::schedule`]; this file runs the tools (`crontab`, `systemctl`,
//! `schtasks`), writes the files, and records the install in
//! `stats/schedule.json` for `brief`.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::cli::{
    GlobalArgs, ScheduleAction, ScheduleArgs, ScheduleInstallArgs, ScheduleShowArgs,
    ScheduleUninstallArgs,
};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::exit;
use crate::format::{fmt_ago, fmt_minute};
use crate::fsutil;
use crate::fsutil::absolute;
use crate::output;
use crate::schedule::envfile::{self, EnvFile};
use crate::schedule::{
    Backend, Every, Health, Job, Marker, PathArg, cron, on_path, systemd, taskxml,
};
use crate::settings::{DEFAULT_STATS_DIR, Settings};

pub fn run(g: &GlobalArgs, a: ScheduleArgs) -> Result<u8> {
    match a.action {
        ScheduleAction::Install(i) => install(&Settings::load(g)?, g, i),
        // Neither needs the config: a broken one must not stand in the way
        // of removing or inspecting the job.
        ScheduleAction::Uninstall(u) => uninstall(&stats_dir(g), u),
        ScheduleAction::Show(s) => show(&stats_dir(g), s),
        ScheduleAction::Templates { dir } => templates(&dir),
    }
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
    let backend = a.backend.unwrap_or_else(Backend::native);
    if a.enable && backend != Backend::Systemd {
        return Err(Error::config(
            "--enable starts the systemd timer: it goes with --with systemd",
        ));
    }
    let env = a.env_file.as_deref().map(envfile::read).transpose()?;
    if env.is_some() && backend == Backend::TaskScheduler {
        return Err(Error::config(
            "--env-file: Task Scheduler runs inherit your user environment variables; \
             set the keys with `setx NAME value` instead",
        ));
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
    };
    for n in notes(s, &job, env.as_ref(), backend, &stats) {
        eprintln!("note: {n}");
    }
    let done = match backend {
        Backend::Cron => install_cron(&job, &stats, a.dry_run)?,
        Backend::Systemd => install_systemd(&job, &stats, a.dry_run, a.enable)?,
        Backend::TaskScheduler => install_task(&job, &stats, a.dry_run)?,
    };
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
        out.push(match backend {
            Backend::TaskScheduler => format!(
                "{list}: set in this shell; the task sees only your user environment \
                 variables (setx NAME value)"
            ),
            _ if env.is_some() => format!(
                "{list}: set in this shell but not in {}, so the job will not have {them}",
                job.env_file
                    .as_ref()
                    .map(PathArg::display)
                    .unwrap_or_default()
            ),
            _ => format!(
                "{list}: set in this shell, but the job will not have {them}: put {them} in a \
                 file of NAME=value lines (chmod 600) and pass it as --env-file"
            ),
        });
    }
    out
}

fn install_cron(job: &Job, stats: &Path, dry_run: bool) -> Result<Installed> {
    let block = cron::block(job);
    let current = cron::read_installed()?;
    let new = cron::with_block(&current, &block).map_err(cron::unparsable)?;
    let previous = cron::installed_block(&current);
    for line in cron::other_llmprobe_lines(&current) {
        eprintln!(
            "note: your crontab also runs llmprobe on a line of its own, which will run beside this entry: {line}"
        );
    }
    let mut text = format!(
        "{} your crontab{}:\n\n{block}\n",
        if dry_run {
            "would install in"
        } else {
            "installed in"
        },
        if previous.is_some() {
            ", replacing the earlier llmprobe entry"
        } else {
            ""
        },
    );
    let _ = writeln!(
        text,
        "check runs every {every}: cron fires every {step} min, and `check --if-due {due}` probes \
         once the last run is that old, after a random wait of up to {jitter}.\noutput: {log}",
        every = job.every.label(),
        step = job.every.step(),
        due = crate::duration::format_flag(job.every.if_due()),
        jitter = crate::duration::format_flag(job.every.jitter()),
        log = stats.join(cron::LOG).display(),
    );
    if !dry_run {
        fsutil::ensure_dir(stats)?;
        cron::write_installed(&new)?;
        // A crontab(1) that dropped or changed the entry must not pass for
        // an installed schedule.
        let back = cron::read_installed()?;
        if cron::installed_block(&back).as_deref() != Some(block.as_str()) {
            return Err(Error::io(
                "the crontab read back with `crontab -l`",
                std::io::Error::other("it does not hold the entry just installed"),
            ));
        }
    }
    Ok(Installed {
        text,
        location: "crontab".into(),
        previous_stats: previous.and_then(|b| cron::stats_dir_of(&b).map(Path::to_path_buf)),
    })
}

const SYSTEMD_START: [&[&str]; 2] = [&["daemon-reload"], &["enable", "--now", systemd::TIMER]];

fn install_systemd(job: &Job, stats: &Path, dry_run: bool, enable: bool) -> Result<Installed> {
    let dir = systemd::unit_dir()?;
    let units = [
        (dir.join(systemd::SERVICE), systemd::service(job)),
        (dir.join(systemd::TIMER), systemd::timer(job)),
    ];
    for (path, _) in &units {
        if systemd::is_ours(path)? == Some(false) {
            return Err(systemd::not_ours(path));
        }
    }
    let previous = std::fs::read_to_string(&units[0].0)
        .ok()
        .and_then(|s| systemd::stats_dir_of(&s));
    let mut text = String::new();
    for (path, content) in &units {
        let _ = writeln!(
            text,
            "{} {}:\n\n{content}",
            if dry_run { "would write" } else { "wrote" },
            path.display()
        );
    }
    if !dry_run {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        for (path, content) in &units {
            fsutil::atomic_write_unlocked(path, content.as_bytes())?;
        }
        fsutil::ensure_dir(stats)?;
    }
    let commands: Vec<String> = SYSTEMD_START
        .iter()
        .map(|a| format!("systemctl --user {}", a.join(" ")))
        .collect();
    if enable && !dry_run {
        for args in SYSTEMD_START {
            systemd::systemctl(args)
                .map_err(|e| Error::io("cannot start the timer", std::io::Error::other(e)))?;
        }
        let _ = writeln!(text, "started: {}", commands.join(" && "));
    } else {
        let _ = writeln!(
            text,
            "start it with:\n  {}\n(or install with --enable to have llmprobe run them)",
            commands.join(" && ")
        );
    }
    let _ = writeln!(
        text,
        "output: journalctl --user -u {}",
        systemd::SERVICE.trim_end_matches(".service")
    );
    Ok(Installed {
        text,
        location: dir.display().to_string(),
        previous_stats: previous,
    })
}

fn install_task(job: &Job, stats: &Path, dry_run: bool) -> Result<Installed> {
    let xml = taskxml::xml(&taskxml::Fields::of(job));
    let path = stats.join(taskxml::XML_FILE);
    let create = taskxml::create_command(&path.display().to_string());
    let previous = (!dry_run)
        .then(installed_task_xml)
        .flatten()
        .and_then(|x| taskxml::working_directory_of(&x))
        .map(PathBuf::from);
    let mut text = format!(
        "{} {}:\n\n{xml}\n",
        if dry_run { "would write" } else { "wrote" },
        path.display()
    );
    if !dry_run {
        fsutil::ensure_dir(stats)?;
        fsutil::atomic_write_unlocked(&path, xml.as_bytes())?;
        run_tool(&create)?;
    }
    let _ = writeln!(
        text,
        "{}: {}",
        if dry_run { "would run" } else { "ran" },
        taskxml::command_line(&create)
    );
    Ok(Installed {
        text,
        location: format!("Task Scheduler task {}", taskxml::TASK_NAME),
        previous_stats: previous,
    })
}

/// Run a tool (schtasks); its failure, with its first line of error, is
/// a system error.
fn run_tool(argv: &[String]) -> Result<String> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound && argv[0] == "schtasks" {
                ": Task Scheduler exists only on Windows (--dry-run prints the XML and the command)"
            } else {
                ""
            };
            Error::io(format!("cannot run {}{hint}", argv[0]), e)
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(Error::io(
        format!("`{}` failed ({})", taskxml::command_line(argv), out.status),
        std::io::Error::other(
            err.lines()
                .next()
                .unwrap_or("no message")
                .trim()
                .to_string(),
        ),
    ))
}

/// The XML of the installed task, or `None` when there is none (or no
/// schtasks).
fn installed_task_xml() -> Option<String> {
    if !on_path("schtasks") {
        return None;
    }
    let mut q = taskxml::query_command();
    q.truncate(4);
    q.push("/XML".into());
    run_tool(&q).ok()
}

/// The backends to look at: the one asked for, else all.
fn scope(asked: Option<Backend>) -> Vec<Backend> {
    asked.map(|b| vec![b]).unwrap_or(Backend::ALL.to_vec())
}

fn uninstall(stats: &Path, a: ScheduleUninstallArgs) -> Result<u8> {
    let explicit = a.backend.is_some();
    let verb = if a.dry_run { "would remove" } else { "removed" };
    let mut text = String::new();
    let mut looked = Vec::new();
    let mut job_stats: Vec<PathBuf> = Vec::new();
    for backend in scope(a.backend) {
        match backend {
            Backend::Cron => {
                if !explicit && !on_path("crontab") {
                    continue;
                }
                looked.push("your crontab".to_string());
                let current = cron::read_installed()?;
                let Some(new) = cron::without_block(&current).map_err(cron::unparsable)? else {
                    continue;
                };
                let block = cron::installed_block(&current).unwrap_or_default();
                if !a.dry_run {
                    cron::write_installed(&new)?;
                }
                let _ = writeln!(text, "{verb} from your crontab:\n\n{block}");
                job_stats.extend(cron::stats_dir_of(&block).map(Path::to_path_buf));
            }
            Backend::Systemd => {
                let dir = match systemd::unit_dir() {
                    Ok(d) => d,
                    Err(e) if explicit => return Err(e),
                    Err(_) => continue,
                };
                looked.push(dir.display().to_string());
                let mut ours = Vec::new();
                for name in [systemd::TIMER, systemd::SERVICE] {
                    let p = dir.join(name);
                    match systemd::is_ours(&p)? {
                        Some(true) => ours.push(p),
                        Some(false) => eprintln!(
                            "note: {} was not written by llmprobe schedule: left alone",
                            p.display()
                        ),
                        None => {}
                    }
                }
                if ours.is_empty() {
                    continue;
                }
                if let Some(d) = std::fs::read_to_string(dir.join(systemd::SERVICE))
                    .ok()
                    .and_then(|s| systemd::stats_dir_of(&s))
                {
                    job_stats.push(d);
                }
                if !a.dry_run {
                    remove_units(&dir, &ours)?;
                }
                for p in &ours {
                    let _ = writeln!(text, "{verb} {}", p.display());
                }
            }
            Backend::TaskScheduler => {
                if !explicit && !on_path("schtasks") {
                    continue;
                }
                looked.push(format!("Task Scheduler ({})", taskxml::TASK_NAME));
                let Some(xml) = installed_task_xml() else {
                    continue;
                };
                if !a.dry_run {
                    run_tool(&taskxml::delete_command())?;
                }
                let _ = writeln!(
                    text,
                    "{verb} the Task Scheduler task {}",
                    taskxml::TASK_NAME
                );
                job_stats.extend(taskxml::working_directory_of(&xml).map(PathBuf::from));
            }
        }
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

/// Stop the timer, and remove our units and the enable link to the timer.
fn remove_units(dir: &Path, ours: &[PathBuf]) -> Result<()> {
    let systemctl = on_path("systemctl");
    if systemctl && let Err(e) = systemd::systemctl(&["disable", "--now", systemd::TIMER]) {
        eprintln!("note: {e}");
    }
    // `disable` removes this link; without a user session it is left to us.
    let link = dir.join("timers.target.wants").join(systemd::TIMER);
    if link.is_symlink() {
        let _ = std::fs::remove_file(&link);
    }
    for p in ours {
        std::fs::remove_file(p)
            .map_err(|e| Error::io(format!("cannot remove {}", p.display()), e))?;
    }
    if systemctl {
        let _ = systemd::systemctl(&["daemon-reload"]);
    }
    Ok(())
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
    let mut jobs = Vec::new();
    for backend in scope(a.backend) {
        let shown = match backend {
            Backend::Cron if explicit || on_path("crontab") => {
                show_cron(now, every, health.last_run.as_ref())?
            }
            Backend::Systemd => show_systemd(explicit)?,
            Backend::TaskScheduler if explicit || on_path("schtasks") => show_task(stats),
            _ => None,
        };
        jobs.extend(shown);
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

fn show_cron(
    now: DateTime<Utc>,
    every: Every,
    last: Option<&crate::lastrun::LastRun>,
) -> Result<Option<Shown>> {
    let text = cron::read_installed()?;
    let Some(block) = cron::installed_block(&text) else {
        return Ok(None);
    };
    let trigger = cron::Trigger::of_block(&block);
    let next_trigger = trigger.map(|t| t.next_after(now));
    // `--if-due` makes the first trigger from this time on probe.
    let if_due = cron::if_due_of(&block).unwrap_or_else(|| every.if_due());
    let next_probe_from = last
        .map(|r| r.finished_at + TimeDelta::from_std(if_due).unwrap_or_default())
        .filter(|due| *due > now)
        .and_then(|due| trigger.map(|t| t.next_after(due - TimeDelta::seconds(1))));
    Ok(Some(Shown {
        backend: Backend::Cron,
        location: "your crontab (crontab -l)".into(),
        entry: block,
        next_trigger,
        next_probe_from,
        details: Vec::new(),
    }))
}

fn show_systemd(explicit: bool) -> Result<Option<Shown>> {
    let dir = match systemd::unit_dir() {
        Ok(d) => d,
        Err(e) if explicit => return Err(e),
        Err(_) => return Ok(None),
    };
    let mut entry = String::new();
    for name in [systemd::SERVICE, systemd::TIMER] {
        let p = dir.join(name);
        if systemd::is_ours(&p)? == Some(true) {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let _ = writeln!(entry, "{}:\n{text}", p.display());
        }
    }
    if entry.is_empty() {
        return Ok(None);
    }
    let details = match systemd::systemctl(&[
        "show",
        systemd::TIMER,
        "--property=ActiveState,UnitFileState,NextElapseUSecRealtime,LastTriggerUSec",
    ]) {
        Ok(out) => out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
        Err(e) => vec![format!("next run: unknown ({e})")],
    };
    Ok(Some(Shown {
        backend: Backend::Systemd,
        location: dir.display().to_string(),
        entry,
        next_trigger: None,
        next_probe_from: None,
        details,
    }))
}

fn show_task(stats: &Path) -> Option<Shown> {
    let xml = installed_task_xml()?;
    let details = run_tool(&taskxml::query_command())
        .map(|out| {
            out.lines()
                .map(str::trim)
                .filter(|l| {
                    [
                        "Next Run Time:",
                        "Status:",
                        "Last Run Time:",
                        "Last Result:",
                    ]
                    .iter()
                    .any(|k| l.starts_with(k))
                })
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_else(|e| vec![format!("next run: unknown ({e})")]);
    let file = stats.join(taskxml::XML_FILE);
    Some(Shown {
        backend: Backend::TaskScheduler,
        location: format!("Task Scheduler task {}", taskxml::TASK_NAME),
        entry: if file.exists() {
            format!("{} (as installed)\n{xml}", file.display())
        } else {
            xml
        },
        next_trigger: None,
        next_probe_from: None,
        details,
    })
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
                crate::duration::format_flag(every.if_due()),
                crate::duration::format_flag(every.jitter()),
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
                "recorded: {}, every {}, installed {} ({})",
                m.backend.as_str(),
                m.every,
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
