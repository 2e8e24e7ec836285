//! `stats/health_log.json`: the append-only history of every probe.
//!
//! - [`append`] adds entries in place, under the data lock, touching only the
//!   tail, and repairs a torn tail left by a crash.
//! - [`scan`] walks the top-level array element by element with a small,
//!   fixed buffer, so no reader ever holds the whole log in memory.
//! - [`read`] turns entries of every format into [`read::Record`]s, fast,
//!   on up to two threads; [`tail`] does the same backwards from the end,
//!   for readers that only want the most recent entries.
//! - [`recent`] is the policy those readers share: the tail when the file
//!   allows, else a forward read; [`summary`] the uptime, latency and
//!   percentile accumulators every report computes; [`rollup`] those
//!   figures per provider and per model over a window; [`last`] the last
//!   probe of each of some models.

/// The health log's name in the stats directory.
pub const LOG_FILE: &str = "health_log.json";

pub(crate) mod append;
pub(crate) mod last;
#[cfg(test)]
mod props;
pub(crate) mod read;
pub(crate) mod recent;
pub(crate) mod rollup;
pub mod scan;
pub(crate) mod summary;
pub(crate) mod tail;

pub use append::{AppendReport, append, preflight, undo};

/// A [`DataError`](crate::error::DataError) about the log at `path`, saying
/// what the user can do next: llmprobe never rewrites a log it cannot read.
pub(crate) fn log_error(
    path: &std::path::Path,
    offset: Option<u64>,
    message: impl std::fmt::Display,
) -> crate::error::DataError {
    crate::error::DataError::new(
        path,
        offset,
        format!(
            "{message}; llmprobe never rewrites a log: fix it by hand, or move it aside (and keep it) so that the next check starts a new one"
        ),
    )
    .with_line()
}
