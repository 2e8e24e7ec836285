//! llmprobe keeps an honest record of which LLM provider/model pairs really
//! work, and sends traffic only to those.
//!
//! The modules follow the data flow of docs/ARCHITECTURE.md:
//!
//! - [`catalog`] and [`prompts`] are the inputs;
//! - [`probe`] asks one model one question through a dialect and
//!   classifies the result ([`upstream`] holds what check and route share);
//! - [`upstream::hints`] reads what an upstream asked us to wait, and
//!   [`route::cooldown`] decides how long `route` benches a provider, key or
//!   model after a failure;
//! - [`healthlog`] is the append-only record, [`state`] the state machine;
//! - [`check`] is a probe run (plan, lanes, writer, report), and
//!   [`run_observer`] the trait through which `last_run.json` ([`lastrun`]),
//!   [`ping`] and [`textfile`] hear how a run went;
//! - [`schedule`] writes the scheduled `check` job for cron, systemd and
//!   Task Scheduler, and judges whether scheduled runs are happening;
//! - [`cmd`] holds one entry point per subcommand (`check`, `rollup`,
//!   `brief`, `state`, `schedule`, `demo`), which only wire these libraries
//!   together;
//! - [`format`] and [`grade`] show the record the same way everywhere;
//! - [`duration`] reads every duration flag and spells durations back;
//! - [`http_server`] serves HTTP (the fake provider, and `route`) and builds the
//!   runtime;
//! - [`fake`] is a scriptable fake provider for tests, demos and benchmarks
//!   (its command glue is `cmd::fake`);
//! - [`due`], [`ping`] and [`textfile`] make scheduled `check` runs safe and
//!   watched (`--if-due`, `--jitter`, `--ping-url`, `--prom-file`);
//! - [`stale`] is the one rule for when a provider's record is too old
//!   (`brief` shows it; `check` warns when it skips such a provider);
//! - [`capabilities`] probes and keeps what each model can do beyond a
//!   plain answer (tools, JSON, vision);
//! - [`notify`] sends alerts to webhooks when a model or provider changes
//!   state;
//! - [`webhook`] sends one request to a monitor or a webhook with bounded
//!   retries, for [`ping`] and [`notify`];
//! - [`logging`] sends diagnostics to stderr (`-v`, `-q`, `RUST_LOG`).

pub(crate) mod badge;
pub(crate) mod capabilities;
pub mod catalog;
pub(crate) mod check;
pub(crate) mod cli;
pub(crate) mod clock;
pub(crate) mod cmd;
pub(crate) mod discovery;
pub(crate) mod due;
pub mod duration;
pub(crate) mod error;
pub(crate) mod exit;
pub(crate) mod fake;
pub(crate) mod format;
pub mod fsutil;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod grade;
pub mod healthlog;
pub mod http_server;
pub(crate) mod lastrun;
pub(crate) mod logging;
pub(crate) mod markup;
pub(crate) mod names;
pub(crate) mod notify;
pub mod outcome;
pub(crate) mod output;
pub(crate) mod ping;
pub(crate) mod probe;
pub(crate) mod prompts;
pub(crate) mod report;
pub(crate) mod route;
pub(crate) mod run_observer;
pub mod schedule;
pub(crate) mod settings;
pub(crate) mod stale;
pub(crate) mod state;
pub(crate) mod status_page;
pub(crate) mod textfile;
pub(crate) mod time;
pub mod upstream;
pub(crate) mod usage;
pub(crate) mod webhook;
pub(crate) mod window;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::cmd::{brief, demo, rollup, state as statecmd};
use crate::error::Error;

/// Answer a shell's completion request (`LLMPROBE_COMPLETE=SHELL`) and
/// exit; otherwise do nothing. `main` calls it before anything else.
pub fn complete_if_asked() {
    cmd::completions::complete_if_asked()
}

/// The whole program: parse arguments, run the command, map the result to an
/// exit code. Errors are printed as `error: …` on stderr.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    fsutil::ignore_file_size_signal();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            };
            let _ = e.print();
            return exit::code(code);
        }
    };
    logging::init(cli.log);
    output::set_wide(cli.global.wide);
    match dispatch(cli) {
        Ok(code) => exit::code(code),
        Err(e) if e.is_broken_pipe() => exit::code(exit::SUCCESS),
        Err(e) => {
            eprintln!("error: {e}");
            exit::code(e.exit_code())
        }
    }
}

fn dispatch(cli: Cli) -> Result<u8, Error> {
    let g = cli.global;
    match cli.command {
        Command::Check(a) => cmd::check::main(&g, a),
        Command::Providers(a) => cmd::providers::list(&settings::Settings::load(&g)?, a.json),
        Command::Models(a) => cmd::models::run(&g, a),
        Command::Rollup(a) => rollup::run(&settings::Settings::load(&g)?, a),
        Command::Brief(a) => brief::run(&settings::Settings::load(&g)?, a),
        Command::State(a) => statecmd::run(&settings::Settings::load(&g)?, a),
        Command::Route(a) => cmd::route::run(&settings::Settings::load(&g)?, a),
        Command::Schedule(a) => cmd::schedule::run(&g, a),
        Command::Notify(a) => cmd::notify::run(&settings::Settings::load(&g)?, a),
        Command::Demo(a) => demo::run(&g, a),
        Command::Completions(a) => cmd::completions::completions(a),
        Command::Man(_) => cmd::docs::man(),
        Command::FakeProvider(a) => cmd::fake::run(&g, a),
    }
}
