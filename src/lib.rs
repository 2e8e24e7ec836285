//! llmprobe keeps an honest record of which LLM provider/model pairs really
//! work, and sends traffic only to those.
//!
//! The modules follow the data flow of DESIGN.md:
//!
//! - [`catalog`] and [`prompts`] are the inputs;
//! - [`probe`] asks one model one question through a [`dialect`] and
//!   [`classify`]s the result;
//! - [`check`] schedules probes, appends to the [`healthlog`] and drives the
//!   [`state`] machine;
//! - [`rollup`], [`brief`] and [`statecmd`] read the history back;
//! - [`fake`] is a scriptable fake provider for tests, demos and benchmarks.

pub mod brief;
pub mod catalog;
pub mod check;
pub mod classify;
pub mod cli;
pub mod demo;
pub mod dialect;
pub mod error;
pub mod exit;
pub mod fake;
pub mod fsutil;
pub mod grade;
pub mod healthlog;
pub mod http;
pub mod outcome;
pub mod output;
pub mod probe;
pub mod prompts;
pub mod rollup;
pub mod secret;
pub mod settings;
pub mod state;
pub mod statecmd;
pub mod time;
pub mod window;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::Error;

/// The whole program: parse arguments, run the command, map the result to an
/// exit code. Errors are printed as `error: …` on stderr.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
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
        Command::Check(a) => check::run(&settings::Settings::load(&g)?, a),
        Command::Providers(a) => check::list(&settings::Settings::load(&g)?, a.json),
        Command::Rollup(a) => rollup::run(&settings::Settings::load(&g)?, a),
        Command::Brief(a) => brief::run(&settings::Settings::load(&g)?, a),
        Command::State(a) => statecmd::run(&settings::Settings::load(&g)?, a),
        Command::Demo(a) => demo::run(&g, a),
        Command::FakeProvider(a) => fake::run(&g, a),
    }
}
