//! Windows Task Scheduler: the task as Task Scheduler XML (schema 1.2, the
//! version of Windows Vista and later), the `schtasks` commands that
//! install, query and remove it, and `scripts/install-task.ps1`, which
//! registers the same XML from PowerShell.
//!
//! The task repeats on the interval from a start boundary in the past;
//! `StartWhenAvailable` runs a start missed while the machine was off or
//! asleep as soon as it can, `MultipleInstancesPolicy` `IgnoreNew` never
//! lets two runs overlap, `RunOnlyIfNetworkAvailable` skips starts without
//! a network, and `RandomDelay` spreads many machines apart. It runs as the
//! user while they are logged on (no password is stored), with their
//! environment, which is where its keys come from.

use std::time::Duration;

use super::{Every, Job};
use crate::duration::format_flag as flag_dur;
use crate::markup::{escape, unescape};

pub const TASK_NAME: &str = "llmprobe-check";
/// The file `schedule install` writes the XML to, in the stats directory,
/// for `schtasks /Create /XML`.
pub const XML_FILE: &str = "llmprobe-check.xml";
/// `--reprobe`: the task that runs `check --paused`, and its XML file.
pub const REPROBE_TASK: &str = "llmprobe-reprobe";
pub const REPROBE_XML_FILE: &str = "llmprobe-reprobe.xml";
pub const NAMESPACE: &str = "http://schemas.microsoft.com/windows/2004/02/mit/task";
/// The first comment of the XML. No backticks: PowerShell would read them
/// as escapes in the script's here-string.
pub const MARK: &str =
    "Written by llmprobe schedule install; llmprobe schedule uninstall removes the task.";

/// The values the XML carries, each already escaped for XML text (or, in
/// the PowerShell script, a variable that holds such a value).
#[derive(Debug, Clone)]
pub struct Fields {
    pub description: String,
    pub command: String,
    pub arguments: String,
    pub working_directory: String,
    pub interval: String,
    pub random_delay: String,
    pub time_limit: String,
}

impl Fields {
    pub fn of(job: &Job) -> Fields {
        let args: Vec<String> = job
            .check_argv(&[])
            .iter()
            .map(|w| w.render(quote_arg, |s| s))
            .collect();
        Fields {
            description: escape(&description(job.every)),
            command: escape(&job.exe.display()),
            arguments: escape(&args.join(" ")),
            working_directory: escape(&job.stats_dir.display()),
            interval: iso(Duration::from_secs(job.every.secs())),
            random_delay: iso(job.every.jitter()),
            time_limit: iso(time_limit(job.every)),
        }
    }
}

/// The `check --paused` task of `job` (`--reprobe`), when it has one:
/// the same task every `reprobe` minutes, with a minute of random delay,
/// stopped after an hour, as [`REPROBE_TASK`].
pub fn reprobe_xml(job: &Job) -> Option<String> {
    let r = job.reprobe?;
    let args: Vec<String> = job
        .check_argv(&["--paused".to_string()])
        .iter()
        .map(|w| w.render(quote_arg, |s| s))
        .collect();
    let f = Fields {
        description: escape(&format!(
            "llmprobe check --paused every {}: re-probe the paused models whose turn has come",
            r.label()
        )),
        arguments: escape(&args.join(" ")),
        interval: iso(Duration::from_secs(u64::from(r.minutes()) * 60)),
        random_delay: iso(Duration::from_secs(60)),
        time_limit: iso(Duration::from_secs(3600)),
        ..Fields::of(job)
    };
    Some(task_xml(&f, REPROBE_TASK))
}

fn description(every: Every) -> String {
    format!(
        "llmprobe check every {}: probe every LLM provider and model once",
        every.label()
    )
}

/// How long a run may take before Task Scheduler stops it: twice the
/// interval, at least 2 h. A run that takes longer than the interval only
/// makes the next start wait (`IgnoreNew`); this stops one that hangs.
fn time_limit(every: Every) -> Duration {
    Duration::from_secs((2 * every.secs()).max(2 * 3600))
}

/// The task.
pub fn xml(f: &Fields) -> String {
    task_xml(f, TASK_NAME)
}

/// The task, registered as `name`.
fn task_xml(f: &Fields, name: &str) -> String {
    format!(
        r#"<?xml version="1.0"?>
<!-- {MARK} -->
<Task version="1.2" xmlns="{NAMESPACE}">
  <RegistrationInfo>
    <Description>{description}</Description>
    <URI>\{name}</URI>
  </RegistrationInfo>
  <Triggers>
    <TimeTrigger>
      <Enabled>true</Enabled>
      <StartBoundary>2026-01-01T00:00:00</StartBoundary>
      <Repetition>
        <Interval>{interval}</Interval>
        <StopAtDurationEnd>false</StopAtDurationEnd>
      </Repetition>
      <RandomDelay>{random_delay}</RandomDelay>
    </TimeTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <StartWhenAvailable>true</StartWhenAvailable>
    <RunOnlyIfNetworkAvailable>true</RunOnlyIfNetworkAvailable>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <ExecutionTimeLimit>{time_limit}</ExecutionTimeLimit>
    <Enabled>true</Enabled>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{command}</Command>
      <Arguments>{arguments}</Arguments>
      <WorkingDirectory>{working_directory}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"#,
        description = f.description,
        interval = f.interval,
        random_delay = f.random_delay,
        time_limit = f.time_limit,
        command = f.command,
        arguments = f.arguments,
        working_directory = f.working_directory,
    )
}

/// The command that installs the task `name` from the XML file (replacing
/// an earlier one: `/F`).
pub fn create_named(name: &str, xml_path: &str) -> Vec<String> {
    ["schtasks", "/Create", "/TN", name, "/XML", xml_path, "/F"]
        .map(String::from)
        .to_vec()
}

pub fn delete_command() -> Vec<String> {
    delete_named(TASK_NAME)
}

/// [`delete_command`] for the task `name`.
pub fn delete_named(name: &str) -> Vec<String> {
    ["schtasks", "/Delete", "/TN", name, "/F"]
        .map(String::from)
        .to_vec()
}

pub fn query_command() -> Vec<String> {
    query_named(TASK_NAME)
}

/// [`query_command`] for the task `name`.
pub fn query_named(name: &str) -> Vec<String> {
    ["schtasks", "/Query", "/TN", name, "/FO", "LIST", "/V"]
        .map(String::from)
        .to_vec()
}

/// A command line as cmd.exe and PowerShell read it.
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| quote_arg(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One argument of a Windows command line, quoted the way
/// `CommandLineToArgvW` (and the Rust and C runtimes) split it back:
/// backslashes are literal except before a quote.
pub fn quote_arg(s: &str) -> String {
    if !s.is_empty() && !s.contains([' ', '\t', '"']) {
        return s.to_string();
    }
    let mut out = String::from("\"");
    let mut backslashes = 0;
    for c in s.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.push_str(&"\\".repeat(backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            _ => {
                out.push_str(&"\\".repeat(backslashes));
                backslashes = 0;
                out.push(c);
            }
        }
    }
    out.push_str(&"\\".repeat(backslashes * 2));
    out.push('"');
    out
}

/// An XML duration: `PT1H`, `PT90M`, `PT30S`.
fn iso(d: Duration) -> String {
    format!("PT{}", flag_dur(d).to_uppercase())
}

/// The `WorkingDirectory` of an installed task's XML (as `schtasks /Query
/// /XML` prints it): the stats directory the task uses.
pub fn working_directory_of(xml: &str) -> Option<String> {
    let start = xml.find("<WorkingDirectory>")? + "<WorkingDirectory>".len();
    let len = xml[start..].find("</WorkingDirectory>")?;
    Some(unescape(&xml[start..start + len]))
}

/// `scripts/install-task.ps1`: the same XML, filled in by PowerShell.
pub fn install_ps1() -> String {
    let every = Every::default();
    let fields = Fields {
        description: "$xDescription".into(),
        command: "$xCommand".into(),
        arguments: "$xArguments".into(),
        working_directory: "$xWorkingDirectory".into(),
        interval: "$Interval".into(),
        random_delay: "$RandomDelay".into(),
        time_limit: "$TimeLimit".into(),
    };
    format!(
        r#"# Install the llmprobe check task in Windows Task Scheduler: the task that
# `llmprobe schedule install --with task-scheduler` installs, for people
# who prefer PowerShell. Generated from src/schedule/taskxml.rs: edit that,
# then regenerate (see the README, "Scheduling").
#
#   powershell -ExecutionPolicy Bypass -File install-task.ps1 `
#       -Exe C:\llmprobe\llmprobe.exe -StatsDir C:\llmprobe\stats [-Config C:\llmprobe\llmprobe.toml]
#
# -Interval, -RandomDelay and -TimeLimit are XML durations (PT1H, PT5M).
# Keys: set them as user environment variables (setx GROQ_API_KEY ...);
# the task runs as you, while you are logged on, and inherits them.
# Remove the task with: schtasks /Delete /TN {TASK_NAME} /F
param(
    [Parameter(Mandatory = $true)][string]$Exe,
    [Parameter(Mandatory = $true)][string]$StatsDir,
    [string]$Config = '',
    [string]$Interval = '{interval}',
    [string]$RandomDelay = '{random_delay}',
    [string]$TimeLimit = '{time_limit}'
)
$ErrorActionPreference = 'Stop'

# Absolute paths: Task Scheduler starts the task in a directory of its own.
$Exe = (Resolve-Path -LiteralPath $Exe).Path
New-Item -ItemType Directory -Force -Path $StatsDir | Out-Null
$StatsDir = (Resolve-Path -LiteralPath $StatsDir).Path

# One argument as CommandLineToArgvW splits it back.
function Quote([string]$s) {{
    if ($s -notmatch '[\s"]' -and $s -ne '') {{ return $s }}
    '"' + (($s -replace '(\\*)"', '$1$1\"') -replace '(\\+)$', '$1$1') + '"'
}}
$arguments = "check --stats-dir $(Quote $StatsDir)"
if ($Config -ne '') {{
    $Config = (Resolve-Path -LiteralPath $Config).Path
    $arguments += " --config $(Quote $Config)"
}}

function X([string]$s) {{ [System.Security.SecurityElement]::Escape($s) }}
$xDescription = X "llmprobe check every $Interval`: probe every LLM provider and model once"
$xCommand = X $Exe
$xArguments = X $arguments
$xWorkingDirectory = X $StatsDir

$xml = @"
{xml}"@

Register-ScheduledTask -TaskName '{TASK_NAME}' -Xml $xml -Force | Out-Null
Write-Output "installed the Task Scheduler task {TASK_NAME}: $Exe $arguments, every $Interval"
Write-Output "see it with: schtasks /Query /TN {TASK_NAME} /FO LIST /V"
"#,
        interval = iso(Duration::from_secs(every.secs())),
        random_delay = iso(every.jitter()),
        time_limit = iso(time_limit(every)),
        xml = xml(&fields),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_split_back_as_written() {
        assert_eq!(quote_arg(r"C:\llmprobe\stats"), r"C:\llmprobe\stats");
        assert_eq!(quote_arg(r"C:\Program Files\x"), r#""C:\Program Files\x""#);
        assert_eq!(quote_arg(r"C:\my dir\"), r#""C:\my dir\\""#);
        assert_eq!(quote_arg(r#"a"b"#), r#""a\"b""#);
        assert_eq!(quote_arg(""), r#""""#);
    }

    #[test]
    fn durations_and_escapes() {
        assert_eq!(iso(Duration::from_secs(3600)), "PT1H");
        assert_eq!(iso(Duration::from_secs(5400)), "PT90M");
        assert_eq!(iso(Duration::from_secs(30)), "PT30S");
        assert_eq!(escape(r#"a&b<c>"d"#), "a&amp;b&lt;c&gt;&quot;d");
        assert_eq!(
            working_directory_of("<WorkingDirectory>C:\\a&amp;b</WorkingDirectory>").as_deref(),
            Some("C:\\a&b")
        );
    }
}
