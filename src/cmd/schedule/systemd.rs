//! `schedule` with systemd user units: a oneshot service and its timer in
//! the user's unit directory, started with `systemctl --user` when asked
//! (`--enable`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{Installed, Removal, Scheduler, ShowContext, Shown};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::schedule::{Backend, Job, on_path, systemd};

pub struct Systemd;

const SYSTEMD_START: [&[&str]; 2] = [&["daemon-reload"], &["enable", "--now", systemd::TIMER]];
/// With `--reprobe`, after [`SYSTEMD_START`].
const REPROBE_START: &[&str] = &["enable", "--now", systemd::REPROBE_TIMER];
/// Every unit llmprobe may have written, timers first.
const UNITS: [&str; 4] = [
    systemd::TIMER,
    systemd::SERVICE,
    systemd::REPROBE_TIMER,
    systemd::REPROBE_SERVICE,
];

impl Scheduler for Systemd {
    fn takes_enable(&self) -> bool {
        true
    }

    fn install(&self, job: &Job, stats: &Path, dry_run: bool, enable: bool) -> Result<Installed> {
        let dir = systemd::unit_dir()?;
        let mut units = vec![
            (dir.join(systemd::SERVICE), systemd::service(job)),
            (dir.join(systemd::TIMER), systemd::timer(job)),
        ];
        units.extend(
            systemd::reprobe_units(job)
                .into_iter()
                .map(|(name, text)| (dir.join(name), text)),
        );
        for (path, _) in &units {
            if systemd::is_ours(path)? == Some(false) {
                return Err(systemd::not_ours(path));
            }
        }
        // Installed again without --reprobe: the re-probe units go.
        let mut stale = Vec::new();
        if job.reprobe.is_none() {
            for name in [systemd::REPROBE_TIMER, systemd::REPROBE_SERVICE] {
                let p = dir.join(name);
                if systemd::is_ours(&p)? == Some(true) {
                    stale.push(p);
                }
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
            if !stale.is_empty() {
                remove_units(&dir, &stale, &[systemd::REPROBE_TIMER])?;
            }
            fsutil::ensure_dir(stats)?;
        }
        for p in &stale {
            let _ = writeln!(
                text,
                "{} {} (no --reprobe)",
                if dry_run { "would remove" } else { "removed" },
                p.display()
            );
        }
        let mut start: Vec<&[&str]> = SYSTEMD_START.to_vec();
        if job.reprobe.is_some() {
            start.push(REPROBE_START);
        }
        let commands: Vec<String> = start
            .iter()
            .map(|a| format!("systemctl --user {}", a.join(" ")))
            .collect();
        if enable && !dry_run {
            for args in start {
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

    fn uninstall(&self, explicit: bool, dry_run: bool, verb: &str) -> Result<Option<Removal>> {
        let dir = match systemd::unit_dir() {
            Ok(d) => d,
            Err(e) if explicit => return Err(e),
            Err(_) => return Ok(None),
        };
        let mut removal = Removal::looked_in(&dir.display().to_string());
        let mut ours = Vec::new();
        for name in UNITS {
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
            return Ok(Some(removal));
        }
        if let Some(d) = std::fs::read_to_string(dir.join(systemd::SERVICE))
            .ok()
            .and_then(|s| systemd::stats_dir_of(&s))
        {
            removal.job_stats.push(d);
        }
        if !dry_run {
            remove_units(&dir, &ours, &[systemd::TIMER, systemd::REPROBE_TIMER])?;
        }
        for p in &ours {
            let _ = writeln!(removal.text, "{verb} {}", p.display());
        }
        Ok(Some(removal))
    }

    fn show(&self, cx: &ShowContext<'_>) -> Result<Option<Shown>> {
        let dir = match systemd::unit_dir() {
            Ok(d) => d,
            Err(e) if cx.explicit => return Err(e),
            Err(_) => return Ok(None),
        };
        let mut entry = String::new();
        for name in [
            systemd::SERVICE,
            systemd::TIMER,
            systemd::REPROBE_SERVICE,
            systemd::REPROBE_TIMER,
        ] {
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
}

/// Stop the `timers` among `ours`, and remove our units and the enable
/// links to those timers.
fn remove_units(dir: &Path, ours: &[PathBuf], timers: &[&str]) -> Result<()> {
    let systemctl = on_path("systemctl");
    let timers: Vec<&str> = timers
        .iter()
        .copied()
        .filter(|t| ours.iter().any(|p| p.ends_with(t)))
        .collect();
    for timer in &timers {
        if systemctl && let Err(e) = systemd::systemctl(&["disable", "--now", timer]) {
            eprintln!("note: {e}");
        }
        // `disable` removes this link; without a user session it is left to us.
        let link = dir.join("timers.target.wants").join(timer);
        if link.is_symlink() {
            let _ = std::fs::remove_file(&link);
        }
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
