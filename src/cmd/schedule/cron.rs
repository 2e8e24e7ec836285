//! `schedule` with cron: the job is a marked block in the user's crontab,
//! read and written with `crontab -l` / `crontab -`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::TimeDelta;

use super::{Installed, Removal, Scheduler, ShowContext, Shown};
use crate::duration::format_flag as flag_dur;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::schedule::{Backend, Job, cron, on_path};

pub struct Cron;

impl Scheduler for Cron {
    fn install(&self, job: &Job, stats: &Path, dry_run: bool, _enable: bool) -> Result<Installed> {
        let block = cron::block(job);
        // A dry run changes nothing, so it needs no crontab(1): without
        // one (or one that fails) it shows the entry, uncompared.
        let current = match cron::read_installed() {
            Ok(c) => c,
            Err(e) if dry_run => {
                eprintln!("note: {e}; the entry below is not compared with your current crontab");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
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
            due = flag_dur(job.every.if_due()),
            jitter = flag_dur(job.every.jitter()),
            log = stats.join(cron::LOG).display(),
        );
        if !dry_run {
            fsutil::ensure_dir(stats)?;
            cron::write_installed(&new)?;
            // A crontab(1) that dropped or changed the entry must not pass
            // for an installed schedule.
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

    fn uninstall(&self, explicit: bool, dry_run: bool, verb: &str) -> Result<Option<Removal>> {
        if !explicit && !on_path("crontab") {
            return Ok(None);
        }
        let mut removal = Removal::looked_in("your crontab");
        let current = cron::read_installed()?;
        let Some(new) = cron::without_block(&current).map_err(cron::unparsable)? else {
            return Ok(Some(removal));
        };
        let block = cron::installed_block(&current).unwrap_or_default();
        if !dry_run {
            cron::write_installed(&new)?;
        }
        let _ = writeln!(removal.text, "{verb} from your crontab:\n\n{block}");
        removal
            .job_stats
            .extend(cron::stats_dir_of(&block).map(PathBuf::from));
        Ok(Some(removal))
    }

    fn show(&self, cx: &ShowContext<'_>) -> Result<Option<Shown>> {
        if !(cx.explicit || on_path("crontab")) {
            return Ok(None);
        }
        let text = cron::read_installed()?;
        let Some(block) = cron::installed_block(&text) else {
            return Ok(None);
        };
        let now = cx.now;
        let trigger = cron::Trigger::of_block(&block);
        let next_trigger = trigger.map(|t| t.next_after(now));
        // `--if-due` makes the first trigger from this time on probe.
        let if_due = cron::if_due_of(&block).unwrap_or_else(|| cx.every.if_due());
        let next_probe_from = cx
            .last
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
}
