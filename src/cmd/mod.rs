//! The command entry points, one file per subcommand. Each takes validated
//! settings and its own arguments and returns an exit code; the libraries
//! beside `cmd/` (the log, the state machine, the catalog, the dialects)
//! do the work, and [`crate::report`] what the read commands show.

pub mod brief;
pub mod check;
pub mod completions;
pub mod demo;
pub mod docs;
pub mod fake;
pub mod models;
pub mod notify;
pub mod providers;
pub mod rollup;
pub mod route;
pub mod schedule;
pub mod state;
