# Install the llmprobe check task in Windows Task Scheduler: the task that
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
# Remove the task with: schtasks /Delete /TN llmprobe-check /F
param(
    [Parameter(Mandatory = $true)][string]$Exe,
    [Parameter(Mandatory = $true)][string]$StatsDir,
    [string]$Config = '',
    [string]$Interval = 'PT1H',
    [string]$RandomDelay = 'PT5M',
    [string]$TimeLimit = 'PT2H'
)
$ErrorActionPreference = 'Stop'

# Absolute paths: Task Scheduler starts the task in a directory of its own.
$Exe = (Resolve-Path -LiteralPath $Exe).Path
New-Item -ItemType Directory -Force -Path $StatsDir | Out-Null
$StatsDir = (Resolve-Path -LiteralPath $StatsDir).Path

# One argument as CommandLineToArgvW splits it back.
function Quote([string]$s) {
    if ($s -notmatch '[\s"]' -and $s -ne '') { return $s }
    '"' + (($s -replace '(\\*)"', '$1$1\"') -replace '(\\+)$', '$1$1') + '"'
}
$arguments = "check --stats-dir $(Quote $StatsDir)"
if ($Config -ne '') {
    $Config = (Resolve-Path -LiteralPath $Config).Path
    $arguments += " --config $(Quote $Config)"
}

function X([string]$s) { [System.Security.SecurityElement]::Escape($s) }
$xDescription = X "llmprobe check every $Interval`: probe every LLM provider and model once"
$xCommand = X $Exe
$xArguments = X $arguments
$xWorkingDirectory = X $StatsDir

$xml = @"
<?xml version="1.0"?>
<!-- Written by llmprobe schedule install; llmprobe schedule uninstall removes the task. -->
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>$xDescription</Description>
    <URI>\llmprobe-check</URI>
  </RegistrationInfo>
  <Triggers>
    <TimeTrigger>
      <Enabled>true</Enabled>
      <StartBoundary>2026-01-01T00:00:00</StartBoundary>
      <Repetition>
        <Interval>$Interval</Interval>
        <StopAtDurationEnd>false</StopAtDurationEnd>
      </Repetition>
      <RandomDelay>$RandomDelay</RandomDelay>
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
    <ExecutionTimeLimit>$TimeLimit</ExecutionTimeLimit>
    <Enabled>true</Enabled>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>$xCommand</Command>
      <Arguments>$xArguments</Arguments>
      <WorkingDirectory>$xWorkingDirectory</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"@

Register-ScheduledTask -TaskName 'llmprobe-check' -Xml $xml -Force | Out-Null
Write-Output "installed the Task Scheduler task llmprobe-check: $Exe $arguments, every $Interval"
Write-Output "see it with: schtasks /Query /TN llmprobe-check /FO LIST /V"
