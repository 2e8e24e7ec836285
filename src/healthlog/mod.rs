//! `stats/health_log.json`: the append-only history of every probe.
//!
//! - [`append`] adds entries in place, under the data lock, touching only the
//!   tail, and repairs a torn tail left by a crash.
//! - [`scan`] walks the top-level array element by element with a small,
//!   fixed buffer, so no reader ever holds the whole log in memory.

pub mod append;
pub mod scan;

pub use append::{AppendReport, append, preflight};
