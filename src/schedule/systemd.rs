//! systemd user units: `llmprobe-check.service`, a oneshot that runs
//! `check` once, and `llmprobe-check.timer`, which starts it on the
//! interval. `Persistent=true` runs a start missed while the machine was
//! off or asleep as soon as it is back; `RandomizedDelaySec=` spreads many
//! machines apart. Output goes to the journal (`journalctl --user -u
//! llmprobe-check`), which caps its own size.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Job, PathArg, Word};
use crate::duration::format_flag as flag_dur;
use crate::error::{DataError, Error, Result};

pub const SERVICE: &str = "llmprobe-check.service";
pub const TIMER: &str = "llmprobe-check.timer";
/// `--reprobe`: the oneshot that runs `check --paused`, and its timer.
pub const REPROBE_SERVICE: &str = "llmprobe-reprobe.service";
pub const REPROBE_TIMER: &str = "llmprobe-reprobe.timer";
/// The first line of both units: what tells ours from a file someone
/// wrote by hand, which install and uninstall leave alone.
pub const MARK: &str =
    "# Written by `llmprobe schedule install`; `llmprobe schedule uninstall` removes it.";

/// The service unit.
pub fn service(job: &Job) -> String {
    // Without an exact calendar the timer fires every step, and
    // `--if-due` probes once per interval (as the cron entry does).
    let extra = match job.every.exact_calendar() {
        Some(_) => Vec::new(),
        None => vec!["--if-due".to_string(), flag_dur(job.every.if_due())],
    };
    oneshot(
        job,
        "llmprobe check: probe every LLM provider and model once",
        &extra,
    )
}

/// A oneshot service unit, `description`, that runs `check EXTRA…` of
/// `job` in its stats directory, with the keys of its `--env-file`.
fn oneshot(job: &Job, description: &str, extra: &[String]) -> String {
    let mut exec = vec![word(&Word::Path(&job.exe))];
    exec.extend(job.check_argv(extra).iter().map(word));
    let env = match &job.env_file {
        Some(p) => format!("EnvironmentFile={}\n", path_value(p)),
        None => String::new(),
    };
    format!(
        "{MARK}\n\
         [Unit]\n\
         Description={description}\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         WorkingDirectory={dir}\n\
         {env}\
         ExecStart={exec}\n",
        dir = path_value(&job.stats_dir),
        exec = exec.join(" "),
    )
}

/// The units `job` has beside the check's own: `llmprobe-reprobe.service`
/// and `.timer` with `--reprobe`, as (file name, contents); none without.
pub fn reprobe_units(job: &Job) -> Vec<(&'static str, String)> {
    let Some(r) = job.reprobe else {
        return Vec::new();
    };
    let service = oneshot(
        job,
        "llmprobe check --paused: re-probe the paused models whose turn has come",
        &["--paused".to_string()],
    );
    // No Persistent=: a slot missed while asleep is the next run's.
    let timer = format!(
        "{MARK}\n\
         [Unit]\n\
         Description=Run llmprobe check --paused every {label}\n\
         \n\
         [Timer]\n\
         OnCalendar={calendar}\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n",
        label = r.label(),
        calendar = r.calendar(),
    );
    vec![(REPROBE_SERVICE, service), (REPROBE_TIMER, timer)]
}

/// The timer unit.
pub fn timer(job: &Job) -> String {
    let every = job.every;
    let calendar = every
        .exact_calendar()
        .unwrap_or_else(|| every.step_calendar());
    format!(
        "{MARK}\n\
         [Unit]\n\
         Description=Run llmprobe check every {label}\n\
         \n\
         [Timer]\n\
         OnCalendar={calendar}\n\
         Persistent=true\n\
         RandomizedDelaySec={delay}\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n",
        label = every.label(),
        delay = flag_dur(every.jitter()),
    )
}

/// A path setting's value: specifiers (`%`) escaped; a placeholder as it is.
fn path_value(p: &PathArg) -> String {
    match p {
        PathArg::Placeholder(s) => s.to_string(),
        PathArg::Real(p) => p.display().to_string().replace('%', "%%"),
    }
}

/// One word of `ExecStart=`: bare when plain, else in double quotes with
/// `\` and `"` escaped; `%` and `$` escaped either way, since systemd
/// expands specifiers and variables there.
fn word(w: &Word) -> String {
    w.render(
        |s| format!("\"{}\"", s.replace('\\', r"\\").replace('"', "\\\"")),
        |s| s.replace('%', "%%").replace('$', "$$"),
    )
}

/// Where user units live: `$XDG_CONFIG_HOME/systemd/user`, else
/// `~/.config/systemd/user`.
pub fn unit_dir() -> Result<PathBuf> {
    let abs = |k: &str| {
        std::env::var_os(k)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    abs("XDG_CONFIG_HOME")
        .or_else(|| abs("HOME").map(|h| h.join(".config")))
        .map(|c| c.join("systemd").join("user"))
        .ok_or_else(|| {
            Error::config("neither XDG_CONFIG_HOME nor HOME is set: cannot find the systemd user unit directory")
        })
}

/// Whether the unit at `path` is ours: `None` when there is no file.
pub fn is_ours(path: &Path) -> Result<Option<bool>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.starts_with(MARK))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::unreadable(path, e)),
    }
}

/// A unit file someone else wrote: never replaced or removed.
pub fn not_ours(path: &Path) -> Error {
    DataError::new(
        path,
        None,
        "was not written by `llmprobe schedule install` (its first line is not ours); \
         move it away to let llmprobe manage it",
    )
    .into()
}

/// The stats directory the service names (its `WorkingDirectory=`).
pub fn stats_dir_of(service: &str) -> Option<PathBuf> {
    service
        .lines()
        .find_map(|l| l.strip_prefix("WorkingDirectory="))
        .map(|v| PathBuf::from(v.replace("%%", "%")))
}

/// Run `systemctl --user ARGS`; `Err` says why it could not (not
/// installed, no user session), in one line.
pub fn systemctl(args: &[&str]) -> std::result::Result<String, String> {
    let out = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run systemctl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "`systemctl --user {}` failed ({}): {}",
            args.join(" "),
            out.status,
            err.lines().next().unwrap_or("no message").trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Every;

    fn job(every: &str) -> Job {
        Job {
            exe: PathArg::Real("/opt/llm probe/llmprobe".into()),
            stats_dir: PathArg::Real("/srv/100%/stats".into()),
            config: None,
            prompts: None,
            env_file: Some(PathArg::Real("/srv/keys.env".into())),
            every: Every::from_flag(crate::duration::parse(every).unwrap()).unwrap(),
            reprobe: None,
        }
    }

    #[test]
    fn units_quote_and_escape_for_systemd() {
        let s = service(&job("1h"));
        assert!(s.starts_with(MARK));
        assert!(s.contains("\nType=oneshot\n"));
        assert!(s.contains("\nWorkingDirectory=/srv/100%%/stats\n"), "{s}");
        assert!(s.contains("\nEnvironmentFile=/srv/keys.env\n"), "{s}");
        assert!(
            s.contains(
                "\nExecStart=\"/opt/llm probe/llmprobe\" check --stats-dir \"/srv/100%%/stats\"\n"
            ),
            "{s}"
        );
        assert_eq!(stats_dir_of(&s), Some(PathBuf::from("/srv/100%/stats")));
        let t = timer(&job("1h"));
        for line in [
            "OnCalendar=hourly",
            "Persistent=true",
            "RandomizedDelaySec=5m",
        ] {
            assert!(t.contains(&format!("\n{line}\n")), "{t}");
        }
    }

    #[test]
    fn an_interval_without_a_calendar_fires_every_step_and_runs_if_due() {
        let s = service(&job("90m"));
        assert!(s.contains(" check --if-due 70m --stats-dir "), "{s}");
        assert!(timer(&job("90m")).contains("\nOnCalendar=*:0/20\n"));
        assert!(!service(&job("2h")).contains("--if-due"));
        assert!(timer(&job("2h")).contains("\nOnCalendar=0/2:00\n"));
    }
}
