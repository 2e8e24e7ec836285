//! The tests that need something beyond Rust on the machine: a
//! `redis-server`, the official Python clients, real coding agents and the
//! Vercel AI SDK from the npm registry, a shell to read completion
//! scripts, groff to render the manual page, headless Chromium to render
//! the status page and badges, a directory whose mode bits stop writes
//! (`tests/io_errors.rs`). Stable libtest cannot mark a
//! test skipped while it runs, so these have a harness of their own
//! (libtest-mimic): each test whose prerequisite is missing is reported as
//! *ignored*, tagged with what it needs, in `cargo test`'s normal output, and
//! a note before the run says how to get it. `.ci/run` installs everything
//! and sets `LLMPROBE_REQUIRE_ALL=1`, so there nothing is ignored and a
//! missing prerequisite fails its tests.

mod agents;
mod browser;
mod clients;
#[cfg(unix)]
mod io_errors;
mod sdk_anthropic;
mod sdk_legacy;
mod sdk_responses;
mod shared;
mod support;
mod tools;

use libtest_mimic::{Arguments, Trial};
use support::need::Need;

/// One test, what it needs, and its body (which panics to fail).
#[derive(Clone)]
pub struct Test {
    name: &'static str,
    needs: &'static [Need],
    run: fn(),
}

impl Test {
    pub fn new(name: &'static str, needs: &'static [Need], run: fn()) -> Test {
        Test { name, needs, run }
    }
}

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let tests: Vec<Test> = [
        agents::tests(),
        browser::tests(),
        clients::tests(),
        #[cfg(unix)]
        io_errors::tests(),
        sdk_legacy::tests(),
        sdk_anthropic::tests(),
        sdk_responses::tests(),
        shared::tests(),
        tools::tests(),
    ]
    .concat();
    let mut missing: Vec<(Need, usize)> = Vec::new();
    let trials = tests
        .into_iter()
        .map(|t| {
            let unmet: Vec<Need> = t
                .needs
                .iter()
                .copied()
                .filter(|n| !n.met() && !n.required())
                .collect();
            for n in &unmet {
                match missing.iter_mut().find(|(m, _)| m == n) {
                    Some((_, count)) => *count += 1,
                    None => missing.push((*n, 1)),
                }
            }
            let run = t.run;
            let trial = Trial::test(t.name, move || {
                run();
                Ok(())
            });
            if unmet.is_empty() {
                trial
            } else {
                let labels: Vec<String> = unmet.iter().map(|n| n.label()).collect();
                trial
                    .with_ignored_flag(true)
                    .with_kind(format!("needs {}", labels.join(", ")))
            }
        })
        .collect();
    if !missing.is_empty() && !args.list {
        println!(
            "\nnot run here: these tests need what this machine lacks (.ci/run installs it all):"
        );
        for (need, count) in &missing {
            let (tests, verb) = if *count == 1 {
                ("test", "needs")
            } else {
                ("tests", "need")
            };
            println!("  {count} {tests} {verb} {}: {}", need.label(), need.how());
        }
    }
    libtest_mimic::run(&args, trials).exit_code()
}
