//! cron: our entry in the user's crontab, between two marker comments, read
//! and written through `crontab -l` and `crontab -` as the crontab(1) of
//! every Unix allows.
//!
//! Installing replaces the block in place (or puts it first, where no
//! `SHELL=` or `MAILTO=` line of the user's applies to it); uninstalling
//! removes exactly its lines. Every other byte of the crontab, line endings
//! and a missing final newline included, goes back as it came. A crontab
//! whose markers do not pair up is not ours to guess about: it is left
//! alone, and the error says which line.

use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::process::{Command, Stdio};

use chrono::{DateTime, Timelike, Utc};

#[cfg(test)]
use super::PathArg;
use super::{Job, Word};
use crate::duration::format_flag as flag_dur;
use crate::error::{DataError, Error, Result};

pub const BEGIN: &str = "# >>> llmprobe schedule >>>";
pub const END: &str = "# <<< llmprobe schedule <<<";
/// The start of the comment line that names the stats directory, so that
/// `uninstall` finds the marker file of the job it removes.
const STATS_LINE: &str = "# stats directory: ";
/// The job's output, in the stats directory.
pub const LOG: &str = "check.log";
/// Past this size the log moves to `check.log.1` (replacing an older one)
/// before the next run, so the two never take more than about 2 MiB.
pub const LOG_CAP_BYTES: u64 = 1 << 20;

/// The block for `job`: the markers, a comment that explains the entry, and
/// the entry itself. Every line ends with a newline.
pub fn block(job: &Job) -> String {
    let every = job.every;
    let step = every.step();
    let when = if step == 60 {
        "0 * * * *".to_string()
    } else {
        format!("*/{step} * * * *")
    };
    let extra = [
        "--if-due".to_string(),
        flag_dur(every.if_due()),
        "--jitter".to_string(),
        flag_dur(every.jitter()),
    ];
    let exe = word(&Word::Path(&job.exe));
    let rotate = format!(
        "{{ [ -z \"$(find {LOG} -size +{LOG_CAP_BYTES}c 2>/dev/null)\" ] || mv -f {LOG} {LOG}.1; }}"
    );
    // `check EXTRA… --stats-dir …`, with the keys, its output to the log.
    let run = |extra: &[String]| {
        let check = job
            .check_argv(extra)
            .iter()
            .map(word)
            .collect::<Vec<_>>()
            .join(" ");
        match &job.env_file {
            Some(env) => format!(
                "{{ set -a && . {} && set +a && exec {exe} {check}; }} >>{LOG} 2>&1",
                word(&Word::Path(env))
            ),
            None => format!("exec {exe} {check} >>{LOG} 2>&1"),
        }
    };
    let dir = word(&Word::Path(&job.stats_dir));
    // `--reprobe`: a second line, inside the same markers, so that install,
    // uninstall and show treat the two as one job.
    let reprobe = job.reprobe.map_or(String::new(), |r| {
        let when = match r.minutes() {
            60 => "0 * * * *".to_string(),
            m => format!("*/{m} * * * *"),
        };
        format!(
            "# paused models: `check --paused` every {label} re-probes those whose turn has come\n\
             # (5, 10, 20… min after the pause, never before a Retry-After); silent when none is.\n\
             {when} cd {dir} && {rotate} && {run}\n",
            label = r.label(),
            run = run(&["--paused".to_string()]),
        )
    });
    let stats = job.stats_dir.display();
    let keys = match &job.env_file {
        Some(env) => format!("keys from {} (NAME=value lines)", env.display()),
        None => "no --env-file: only keys cron's own environment has".to_string(),
    };
    format!(
        "{BEGIN} written by `llmprobe schedule install`; `llmprobe schedule uninstall` removes it\n\
         # check every {label}: this fires every {step} min, and `check --if-due {due}` probes only\n\
         # when the last run is that old, so a machine that slept catches up within {step} min.\n\
         # Output in {LOG} ({cap} MiB, then {LOG}.1); {keys}.\n\
         {STATS_LINE}{stats}\n\
         {when} cd {dir} && {rotate} && {run}\n\
         {reprobe}\
         {END}\n",
        label = every.label(),
        due = flag_dur(every.if_due()),
        cap = LOG_CAP_BYTES >> 20,
        run = run(&extra),
    )
}

/// A word for /bin/sh inside a crontab: bare when it is plain, else in
/// single quotes; then cron's `%` (a newline to cron) escaped.
fn word(w: &Word) -> String {
    w.render(
        |s| format!("'{}'", s.replace('\'', r"'\''")),
        |s| s.replace('%', r"\%"),
    )
}

/// Where the blocks are: the byte range of each, from the start of its
/// begin line to the end of its end line. `Err` names the line at fault
/// when the markers do not pair up.
fn blocks(text: &[u8]) -> std::result::Result<Vec<Range<usize>>, String> {
    let mut found = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    let mut off = 0;
    for (i, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let t = line.trim_ascii();
        if t.starts_with(BEGIN.as_bytes()) {
            if let Some((_, begun)) = open {
                return Err(format!(
                    "line {n}: a second `{BEGIN}` before the end of the block begun on line {begun}"
                ));
            }
            open = Some((off, n));
        } else if t.starts_with(END.as_bytes()) {
            match open.take() {
                Some((start, _)) => found.push(start..off + line.len()),
                None => return Err(format!("line {n}: `{END}` without a `{BEGIN}` before it")),
            }
        }
        off += line.len();
    }
    match open {
        Some((_, begun)) => Err(format!(
            "line {begun}: the llmprobe block has no `{END}` line"
        )),
        None => Ok(found),
    }
}

/// The crontab with `block` installed: in place of the first of our
/// blocks (any others removed), or first of all when there is none.
pub fn with_block(text: &[u8], block: &str) -> std::result::Result<Vec<u8>, String> {
    let found = blocks(text)?;
    let mut out = Vec::with_capacity(text.len() + block.len());
    match found.first() {
        None => {
            out.extend_from_slice(block.as_bytes());
            out.extend_from_slice(text);
        }
        Some(first) => {
            let mut at = 0;
            for r in &found {
                out.extend_from_slice(&text[at..r.start]);
                if r == first {
                    out.extend_from_slice(block.as_bytes());
                }
                at = r.end;
            }
            out.extend_from_slice(&text[at..]);
        }
    }
    Ok(out)
}

/// The crontab without our blocks, or `None` when it has none.
pub fn without_block(text: &[u8]) -> std::result::Result<Option<Vec<u8>>, String> {
    let found = blocks(text)?;
    if found.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    for r in &found {
        out.extend_from_slice(&text[at..r.start]);
        at = r.end;
    }
    out.extend_from_slice(&text[at..]);
    Ok(Some(out))
}

/// Our block as installed (the first one), as text.
pub fn installed_block(text: &[u8]) -> Option<String> {
    let r = blocks(text).ok()?.into_iter().next()?;
    Some(String::from_utf8_lossy(&text[r]).into_owned())
}

/// The stats directory a block names.
pub fn stats_dir_of(block: &str) -> Option<&Path> {
    block
        .lines()
        .find_map(|l| l.strip_prefix(STATS_LINE))
        .map(|p| Path::new(p.trim_end_matches('\r')))
}

/// The `--if-due` age of the entry in `block`.
pub fn if_due_of(block: &str) -> Option<std::time::Duration> {
    let entry = block.lines().find(|l| !l.trim_start().starts_with('#'))?;
    let mut words = entry.split_whitespace();
    words.find(|w| *w == "--if-due")?;
    crate::duration::parse(words.next()?).ok()
}

/// Lines outside our block that run `llmprobe … check`: a hand-made entry
/// that would run beside ours.
pub fn other_llmprobe_lines(text: &[u8]) -> Vec<String> {
    let without = without_block(text).ok().flatten();
    let rest = without.as_deref().unwrap_or(text);
    String::from_utf8_lossy(rest)
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && l.contains("llmprobe") && l.contains(" check"))
        .map(str::to_string)
        .collect()
}

/// When cron fires our entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `*/N * * * *`
    EveryMinutes(u32),
    /// `M * * * *`
    HourlyAt(u32),
}

impl Trigger {
    /// The trigger of the entry in `block`, when it is one we write.
    pub fn of_block(block: &str) -> Option<Trigger> {
        let entry = block.lines().find(|l| !l.trim_start().starts_with('#'))?;
        let fields: Vec<&str> = entry.split_whitespace().take(5).collect();
        if fields.len() < 5 || fields[1..].iter().any(|f| *f != "*") {
            return None;
        }
        match fields[0].strip_prefix("*/") {
            Some(n) => n
                .parse()
                .ok()
                .filter(|n| (1..60).contains(n))
                .map(Trigger::EveryMinutes),
            None => fields[0]
                .parse()
                .ok()
                .filter(|m| *m < 60)
                .map(Trigger::HourlyAt),
        }
    }

    /// The first time after `now` that cron fires it. cron reads the
    /// minute field in local time, which matters where the UTC offset is
    /// not whole hours.
    pub fn next_after(self, now: DateTime<Utc>) -> DateTime<Utc> {
        let start = now
            .with_second(0)
            .unwrap_or(now)
            .with_nanosecond(0)
            .unwrap_or(now)
            + chrono::TimeDelta::minutes(1);
        (0..24 * 60)
            .map(|i| start + chrono::TimeDelta::minutes(i))
            .find(|t| {
                let m = t.with_timezone(&chrono::Local).minute();
                match self {
                    Trigger::EveryMinutes(n) => m % n == 0,
                    Trigger::HourlyAt(at) => m == at,
                }
            })
            .unwrap_or(start)
    }
}

/// The user's crontab, through `crontab -l`; empty when they have none.
pub fn read_installed() -> Result<Vec<u8>> {
    let out = crontab(&["-l"], None)?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("no crontab for") {
        return Ok(Vec::new());
    }
    Err(failed("crontab -l", &out))
}

/// Replace the user's crontab through `crontab -`, or remove it with
/// `crontab -r` when nothing is left (as it was before a first install).
pub fn write_installed(text: &[u8]) -> Result<()> {
    let (args, stdin): (&[&str], _) = if text.is_empty() {
        (&["-r"], None)
    } else {
        (&["-"], Some(text))
    };
    let out = crontab(args, stdin)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(failed(&format!("crontab {}", args[0]), &out))
    }
}

/// A crontab we cannot make sense of: left alone (exit 4).
pub fn unparsable(why: String) -> Error {
    DataError::new(Path::new("your crontab (crontab -l)"), None, why).into()
}

fn crontab(args: &[&str], stdin: Option<&[u8]>) -> Result<std::process::Output> {
    let mut cmd = Command::new("crontab");
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            ": not found on PATH; install cron (the cron or cronie package), or use --with systemd"
        } else {
            ""
        };
        Error::io(format!("cannot run `crontab {}`{hint}", args.join(" ")), e)
    })?;
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(bytes)
            .map_err(|e| Error::io("cannot write the new crontab to `crontab -`", e))?;
    }
    child
        .wait_with_output()
        .map_err(|e| Error::io(format!("`crontab {}` failed", args.join(" ")), e))
}

fn failed(what: &str, out: &std::process::Output) -> Error {
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("").trim();
    Error::io(
        format!("`{what}` failed ({})", out.status),
        std::io::Error::other(if first.is_empty() {
            "no message".to_string()
        } else {
            first.to_string()
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Every;

    fn job(env: bool) -> Job {
        Job {
            exe: PathArg::Real("/opt/llm probe/llmprobe".into()),
            stats_dir: PathArg::Real("/home/me/llmprobe/stats".into()),
            config: Some(PathArg::Real("/home/me/it's/llmprobe.toml".into())),
            prompts: None,
            env_file: env.then(|| PathArg::Real("/home/me/100%/keys.env".into())),
            every: Every::default(),
            reprobe: None,
        }
    }

    #[test]
    fn the_entry_quotes_for_sh_and_escapes_percent_for_cron() {
        let b = block(&job(true));
        let entry = b.lines().find(|l| l.starts_with("*/")).unwrap();
        assert!(
            entry.starts_with("*/15 * * * * cd /home/me/llmprobe/stats && "),
            "{entry}"
        );
        assert!(entry.contains("exec '/opt/llm probe/llmprobe' check --if-due 45m --jitter 5m"));
        assert!(
            entry.contains(r"--config '/home/me/it'\''s/llmprobe.toml'"),
            "{entry}"
        );
        assert!(entry.contains(r". '/home/me/100\%/keys.env'"), "{entry}");
        // The only % in the entry is escaped.
        assert_eq!(entry.matches('%').count(), entry.matches(r"\%").count());
        assert_eq!(Trigger::of_block(&b), Some(Trigger::EveryMinutes(15)));
        assert_eq!(if_due_of(&b), Some(std::time::Duration::from_secs(45 * 60)));
        assert_eq!(stats_dir_of(&b), Some(Path::new("/home/me/llmprobe/stats")));
        let b = block(&job(false));
        assert!(b.contains("exec /opt/") || b.contains("exec '/opt/"), "{b}");
        assert!(!b.contains("set -a"), "{b}");
    }

    #[test]
    fn install_replaces_and_uninstall_restores_every_byte() {
        let b = block(&job(false));
        for user in [
            &b""[..],
            b"MAILTO=me\n0 3 * * * backup\n",
            b"# no final newline\n5 * * * * x",
            b"\r\n\r\n# crlf\r\n*/5 * * * * y\r\n",
        ] {
            let once = with_block(user, &b).unwrap();
            assert!(once.starts_with(b.as_bytes()));
            let twice = with_block(&once, &b).unwrap();
            assert_eq!(once, twice, "installing again changes nothing");
            assert_eq!(without_block(&twice).unwrap().unwrap(), user);
            assert_eq!(without_block(user).unwrap(), None);
        }
        // A block the user moved stays where it is; a copy goes.
        let user = format!("A\n{b}B\n{b}C\n");
        let fresh = with_block(
            user.as_bytes(),
            "# >>> llmprobe schedule >>>\nnew\n# <<< llmprobe schedule <<<\n",
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(fresh).unwrap(),
            "A\n# >>> llmprobe schedule >>>\nnew\n# <<< llmprobe schedule <<<\nB\nC\n"
        );
    }

    #[test]
    fn unpaired_markers_are_refused_with_the_line() {
        for (text, line) in [
            (format!("x\n{BEGIN}\ny\n"), "line 2"),
            (format!("{END}\n"), "line 1"),
            (format!("{BEGIN}\n{BEGIN}\n{END}\n"), "line 2"),
        ] {
            let err = with_block(text.as_bytes(), "b\n").unwrap_err();
            assert!(err.starts_with(line), "{err}");
            assert!(without_block(text.as_bytes()).is_err());
        }
    }

    #[test]
    fn next_trigger_is_on_the_grid() {
        let now: DateTime<Utc> = "2026-06-01T10:07:30Z".parse().unwrap();
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        // These hold wherever the UTC offset is whole quarter hours, as it
        // is in the test environment (and almost everywhere).
        assert_eq!(
            Trigger::EveryMinutes(15).next_after(now),
            at("2026-06-01T10:15:00Z")
        );
        assert_eq!(
            Trigger::EveryMinutes(15).next_after(at("2026-06-01T10:15:00Z")),
            at("2026-06-01T10:30:00Z")
        );
        assert_eq!(Trigger::of_block("0 * * * * x"), Some(Trigger::HourlyAt(0)));
        assert_eq!(Trigger::of_block("0 3 * * * x"), None);
        assert_eq!(
            Trigger::of_block("# c\n*/7 * * * * x"),
            Some(Trigger::EveryMinutes(7))
        );
    }
}
