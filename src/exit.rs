//! The process exit codes, in one place. They are part of the public contract
//! (docs/formats.md, "Exit codes") and are documented in the README.

use std::process::ExitCode;

/// The run completed.
pub const SUCCESS: u8 = 0;
/// The run completed, but a condition asked about with `--fail-on-…` holds
/// (`notify test`: a channel did not take the test message).
pub const CONDITION: u8 = 1;
/// Bad command line or bad configuration (config file, prompts file).
pub const USAGE: u8 = 2;
/// Another `check` holds the run lock.
pub const LOCKED: u8 = 3;
/// A data file (health log, state file) could not be read; it was left untouched.
pub const DATA: u8 = 4;
/// `route` exhausted every candidate.
pub const EXHAUSTED: u8 = 5;
/// `check` reached no remote provider at all: the machine is offline. The
/// remote providers' results were not recorded; loopback providers' were
/// (the offline rule, docs/formats.md).
pub const OFFLINE: u8 = 6;
/// The system failed the command: a directory or file could not be created,
/// written or locked, or the async runtime or HTTP client could not start.
pub const IO: u8 = 7;
/// A bug: a part of the run panicked. The message says where.
pub const INTERNAL: u8 = 8;
/// `check` stopped on SIGINT (Ctrl-C, and Ctrl-Break on Windows) after
/// recording what it had measured: 128 + 2, as a shell reports a process
/// that SIGINT ended.
pub const INTERRUPTED: u8 = 130;
/// `check` stopped on SIGTERM after recording what it had measured:
/// 128 + 15.
pub const TERMINATED: u8 = 143;

/// What an exit code means, in a few words (for a monitor's ping body).
pub fn meaning(c: u8) -> &'static str {
    match c {
        SUCCESS => "success",
        CONDITION => "a --fail-on-… condition holds",
        USAGE => "usage or configuration error",
        LOCKED => "another check holds the run lock",
        DATA => "a data file is unreadable (left untouched)",
        EXHAUSTED => "every candidate failed",
        OFFLINE => "offline: no remote provider reached, their results not recorded",
        IO => "system error",
        INTERNAL => "internal error",
        INTERRUPTED => "interrupted (SIGINT): what was measured is recorded",
        TERMINATED => "terminated (SIGTERM): what was measured is recorded",
        _ => "unknown",
    }
}

pub fn code(c: u8) -> ExitCode {
    ExitCode::from(c)
}
