//! `schedule` with Windows Task Scheduler: the task's XML is written to the
//! stats directory and registered with `schtasks /Create`. Tasks inherit
//! the user's environment, so there is no env file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Installed, Removal, Scheduler, ShowContext, Shown};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::schedule::{Backend, Job, on_path, taskxml};

pub struct TaskScheduler;

impl Scheduler for TaskScheduler {
    fn env_file_refusal(&self) -> Option<&'static str> {
        Some(
            "--env-file: Task Scheduler runs inherit your user environment variables; \
             set the keys with `setx NAME value` instead",
        )
    }

    fn missing_vars_note(&self, list: &str) -> Option<String> {
        Some(format!(
            "{list}: set in this shell; the task sees only your user environment \
             variables (setx NAME value)"
        ))
    }

    fn install(&self, job: &Job, stats: &Path, dry_run: bool, _enable: bool) -> Result<Installed> {
        let xml = taskxml::xml(&taskxml::Fields::of(job));
        let previous = (!dry_run)
            .then(installed_task_xml)
            .flatten()
            .and_then(|x| taskxml::working_directory_of(&x))
            .map(PathBuf::from);
        if !dry_run {
            fsutil::ensure_dir(stats)?;
        }
        let mut text = String::new();
        let path = stats.join(taskxml::XML_FILE);
        create_task(taskxml::TASK_NAME, &xml, &path, dry_run, &mut text)?;
        reprobe_task(job, stats, dry_run, &mut text)?;
        Ok(Installed {
            text,
            location: format!("Task Scheduler task {}", taskxml::TASK_NAME),
            previous_stats: previous,
        })
    }

    fn uninstall(&self, explicit: bool, dry_run: bool, verb: &str) -> Result<Option<Removal>> {
        if !explicit && !on_path("schtasks") {
            return Ok(None);
        }
        let mut removal = Removal::looked_in(&format!("Task Scheduler ({})", taskxml::TASK_NAME));
        let Some(xml) = installed_task_xml() else {
            return Ok(Some(removal));
        };
        if !dry_run {
            run_tool(&taskxml::delete_command())?;
        }
        let _ = writeln!(
            removal.text,
            "{verb} the Task Scheduler task {}",
            taskxml::TASK_NAME
        );
        if installed_named(taskxml::REPROBE_TASK).is_some() {
            if !dry_run {
                run_tool(&taskxml::delete_named(taskxml::REPROBE_TASK))?;
            }
            let _ = writeln!(
                removal.text,
                "{verb} the Task Scheduler task {}",
                taskxml::REPROBE_TASK
            );
        }
        removal
            .job_stats
            .extend(taskxml::working_directory_of(&xml).map(PathBuf::from));
        Ok(Some(removal))
    }

    fn show(&self, cx: &ShowContext<'_>) -> Result<Option<Shown>> {
        if !(cx.explicit || on_path("schtasks")) {
            return Ok(None);
        }
        let Some(xml) = installed_task_xml() else {
            return Ok(None);
        };
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
        let file = cx.stats.join(taskxml::XML_FILE);
        let mut entry = if file.exists() {
            format!("{} (as installed)\n{xml}", file.display())
        } else {
            xml
        };
        if let Some(reprobe) = installed_named(taskxml::REPROBE_TASK) {
            entry.push_str(&format!(
                "\n{} (check --paused):\n{reprobe}",
                taskxml::REPROBE_TASK
            ));
        }
        Ok(Some(Shown {
            backend: Backend::TaskScheduler,
            location: format!("Task Scheduler task {}", taskxml::TASK_NAME),
            entry,
            next_trigger: None,
            next_probe_from: None,
            details,
        }))
    }
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
    installed_named(taskxml::TASK_NAME)
}

/// [`installed_task_xml`] for the task `name`.
fn installed_named(name: &str) -> Option<String> {
    if !on_path("schtasks") {
        return None;
    }
    let mut q = taskxml::query_named(name);
    q.truncate(4);
    q.push("/XML".into());
    run_tool(&q).ok()
}

/// `--reprobe`: install the `check --paused` task beside the check's (or
/// say it would); without it, remove one an earlier install left.
fn reprobe_task(job: &Job, stats: &Path, dry_run: bool, text: &mut String) -> Result<()> {
    let Some(xml) = taskxml::reprobe_xml(job) else {
        // A dry run asks no tool, as the check's own task asks none.
        if !dry_run && installed_named(taskxml::REPROBE_TASK).is_some() {
            let delete = taskxml::delete_named(taskxml::REPROBE_TASK);
            if !dry_run {
                run_tool(&delete)?;
            }
            let _ = writeln!(
                text,
                "{} (no --reprobe): {}",
                if dry_run { "would run" } else { "ran" },
                taskxml::command_line(&delete)
            );
        }
        return Ok(());
    };
    text.push('\n');
    let path = stats.join(taskxml::REPROBE_XML_FILE);
    create_task(taskxml::REPROBE_TASK, &xml, &path, dry_run, text)
}

/// Write `xml` to `path` and register it as the task `name` with
/// `schtasks /Create` (on a dry run, neither), adding to `text` what was
/// (or would be) written and run.
fn create_task(name: &str, xml: &str, path: &Path, dry_run: bool, text: &mut String) -> Result<()> {
    let create = taskxml::create_named(name, &path.display().to_string());
    let _ = writeln!(
        text,
        "{} {}:\n\n{xml}",
        if dry_run { "would write" } else { "wrote" },
        path.display()
    );
    if !dry_run {
        fsutil::atomic_write_unlocked(path, xml.as_bytes())?;
        run_tool(&create)?;
    }
    let _ = writeln!(
        text,
        "{}: {}",
        if dry_run { "would run" } else { "ran" },
        taskxml::command_line(&create)
    );
    Ok(())
}
