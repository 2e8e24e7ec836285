//! The `check` run as a library: probe every model once, append each
//! result to the health log as soon as it is known, and drive the state machine.
//! Each provider may add one capability probe after its basic probes; its
//! result goes to the capability log and the verdicts file, never to the
//! health log or the state file ([`crate::capabilities`]).
//!
//! Providers run concurrently; a provider's models run one after another with
//! starts at least `spacing` apart. One writer thread serialises the appends
//! and state updates, each under the data lock, so entries land in the order
//! probes finished and a crash loses nothing that was already written. The
//! whole run holds the run lock, so a second `check` exits at once with
//! code 3.
//!
//! A run is offline when every probe to a remote (non-loopback) provider
//! failed to reach its host. Those results say nothing about the providers,
//! so the writer holds remote unreachable results back until some remote
//! host answers; if none ever does, they are dropped, no remote model's
//! state changes, and the run exits 6. Loopback providers are judged on
//! their own, and their results are recorded. Once every remote provider
//! due has failed its first probe (or its model list) so, the writer says
//! the run is offline and the lanes stop ([`lanes::Stop::Offline`]).
//!
//! SIGINT (Ctrl-C) and SIGTERM stop the lanes at once: the results already
//! measured are recorded as usual, the probes under way are abandoned, and
//! the summary says what the run recorded ([`report::Interrupted`]).
//!
//! Probes go through the [`lanes::Prober`] trait, so the scheduler
//! (spacing, parallel lanes, errors) is tested with tokio's paused time and
//! a mock.
//!
//! [`plan`] decides what runs, [`lanes`] runs it, [`writer`] records it and
//! [`report`] shows it; `cmd/check.rs` only handles the flags and the order
//! of a run, and [`crate::run_observer`] tells the channels how it went.

pub mod budget;
pub mod lanes;
pub mod paused;
pub mod plan;
pub mod report;
pub mod writer;

use std::sync::Arc;
use std::sync::mpsc;

use indicatif::ProgressBar;
use tokio::sync::watch;

use self::lanes::{HttpProber, Probed, Progress, Stop, panic_text, run_lanes};
pub use self::plan::Plan;
pub use self::report::RunSummary;
use self::writer::{Writer, Written};
use crate::error::{Error, Result};
use crate::settings::Settings;

/// Run the plan: probes in parallel lanes, results through one writer
/// (one that marks its entries with a `source`, for `check --paused`),
/// each probe admitted and counted by `book` ([`budget::apply`], which
/// also made `skips`: what the budget and traffic left out).
pub fn execute(
    s: &Settings,
    plan: Plan,
    mut writer: Writer,
    book: Option<Arc<budget::Book>>,
    skips: budget::Skips,
) -> Result<RunSummary> {
    let started = crate::time::format_ts(crate::clock::Clock::from_env().now());
    let progress = Progress::new(&plan.lanes);
    let (tx, rx) = mpsc::channel::<Probed>();
    // Told when the writer stops on an error (a full disk, a stats
    // directory removed): nothing more can be recorded, so the lanes stop.
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<()>();
    // Told when the run is known to be offline, or a signal came.
    let (stop_tx, stop_rx) = watch::channel(Stop::Running);
    let stop_tx = Arc::new(stop_tx);
    let offline = {
        let stop = stop_tx.clone();
        move || {
            stop.send_if_modified(|s| {
                let running = *s == Stop::Running;
                if running {
                    *s = Stop::Offline;
                }
                running
            });
        }
    };
    writer.watch_offline(
        plan.lanes
            .iter()
            .filter(|l| !l.resolved.is_loopback())
            .map(|l| l.resolved.provider.name.clone())
            .collect(),
    );
    // Every remote provider's model list failed for want of a network:
    // no remote probe would say more.
    if writer.offline_now() {
        offline();
    }
    // The writer: one append and one state update per batch of results,
    // each under the data lock, so that `state` commands can interleave
    // with a run.
    let writer = std::thread::spawn(move || -> Result<Written> {
        // Results that arrive together (many providers finishing at once) go
        // out in one append and one state write: one fsync each, not one per
        // entry, so the writer keeps up with any number of providers.
        while let Ok(first) = rx.recv() {
            let batch: Vec<Probed> = std::iter::once(first).chain(rx.try_iter()).collect();
            if let Err(e) = writer.accept(batch) {
                let _ = failed_tx.send(());
                return Err(e);
            }
            if writer.offline_now() {
                offline();
            }
        }
        Ok(writer.finish())
    });

    let rt = crate::http_server::runtime(2)?;
    let mut prober = HttpProber::new(
        crate::upstream::http::client()?,
        s.prompts.clone(),
        s.catalog.redactor(),
        s.catalog.defaults.capability_max_tokens,
    );
    if let Some(book) = book {
        prober = prober.with_book(book);
    }
    let mut budget = skips;
    let bars: Vec<ProgressBar> = (0..plan.lanes.len()).map(|i| progress.bar(i)).collect();
    let book = prober.book().cloned();
    let lanes_result = rt.block_on(async {
        // Caught from here on: a signal before the first probe ends the
        // process as usual, since nothing has been measured yet.
        let signals = crate::http_server::StopSignals::listen()
            .inspect_err(|e| tracing::warn!("{e}; Ctrl-C will end the run without its summary"))
            .ok();
        let on_signal = async {
            let Some(mut signals) = signals else {
                return std::future::pending().await;
            };
            loop {
                let signal = signals.recv().await;
                tracing::info!(signal = signal.name(), "check: stopping");
                stop_tx.send_replace(Stop::Signal(signal));
            }
        };
        tokio::select! {
            r = run_lanes(plan.lanes, Arc::new(prober), tx, bars, stop_rx) => r,
            // No probe whose result cannot be recorded is sent (or waited
            // for): the lanes end with the runtime, the writer's error is
            // the run's.
            Ok(()) = failed_rx => Ok(0),
            () = on_signal => Ok(0),
        }
    });
    drop(rt);
    progress.clear();
    // The writer has every result sent before a lane failed: wait for it
    // first, so nothing already probed is lost, then report the failure.
    let written = writer
        .join()
        .map_err(|p| Error::Internal(format!("the log writer panicked: {}", panic_text(&*p))))?;
    let not_done = lanes_result?;
    let written = written?;
    if let Some(e) = written.findings_error {
        return Err(e);
    }
    if let Some(book) = book {
        budget.budget.extend(book.spent());
    }
    let stopped = *stop_tx.borrow();
    let recorded = written.entries.len() + written.capabilities.len();
    Ok(RunSummary {
        budget: budget.budget,
        traffic: budget.traffic,
        started,
        finished: crate::time::format_ts(crate::clock::Clock::from_env().now()),
        entries: written.entries,
        capabilities: written.capabilities,
        state_changes: written.changes,
        hard_failures: written
            .hard
            .into_iter()
            .map(|(k, (in_a_row, disable_after))| {
                (
                    k,
                    report::HardFailures {
                        in_a_row,
                        disable_after,
                    },
                )
            })
            .collect(),
        skipped: plan.skipped,
        not_probed: plan.not_probed,
        interrupted: match stopped {
            Stop::Signal(signal) => Some(report::Interrupted {
                signal: signal.name(),
                exit_code: signal.exit_code(),
                recorded,
                not_done,
            }),
            _ => None,
        },
        offline: written.offline.map(|mut o| {
            if stopped == Stop::Offline {
                o.not_done = not_done;
            }
            o
        }),
        missing_keys_said_before: false,
    })
}
