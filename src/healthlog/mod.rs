//! `stats/health_log.json`: the append-only history of every probe.
//!
//! - [`append`] adds entries in place, under the data lock, touching only the
//!   tail, and repairs a torn tail left by a crash.
//! - [`scan`] walks the top-level array element by element with a small,
//!   fixed buffer, so no reader ever holds the whole log in memory.
//! - [`read`] turns entries of every format into [`read::Record`]s, fast,
//!   on up to two threads; [`tail`] does the same backwards from the end,
//!   for readers that only want the most recent entries.

pub mod append;
pub mod read;
pub mod scan;
pub mod tail;

pub use append::{AppendReport, append, preflight};
