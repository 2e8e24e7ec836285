//! The command entry points, one file per subcommand. Each takes validated
//! settings and its own arguments and returns an exit code; the libraries
//! beside `cmd/` (the log, the state machine, the catalog, the dialects)
//! do the work. [`capview`] is what `state` and `brief` show of each
//! model's capabilities.

pub mod brief;
pub mod capview;
pub mod check;
pub mod completions;
pub mod demo;
pub mod docs;
pub mod fake;
pub mod nextprobe;
pub mod notify;
pub mod providers;
pub mod rollup;
pub mod route;
pub mod schedule;
pub mod state;
