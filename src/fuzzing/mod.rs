//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer).
//! Compiled only with the `fuzzing` feature, which only the fuzz crate
//! turns on; nothing else may call these.
//!
//! Each function takes the fuzzer's bytes, feeds them to one parser through
//! the same code the commands use, and panics only when an invariant that
//! must hold for *any* input breaks (a reader that crashes, hangs, or
//! disagrees with another reader of the same bytes). An `Err` for a bad
//! input is the right answer, not a finding.
//!
//! - [`files`]: the readers of files llmprobe keeps or is given (health log,
//!   state file, config) and the checks on probe answers;
//! - [`wire`]: what comes over HTTP (upstream streams and responses, inbound
//!   requests).

pub mod files;
pub mod wire;
