//! Diagnostics on stderr through `tracing`: what llmprobe is doing, for
//! someone finding out why (`-v`, `-vv`, `RUST_LOG`). They are separate from
//! the routine output (tables, JSON, the usual one-line notes on stderr),
//! which never changes with these settings, so scripts that read it are not
//! disturbed.
//!
//! Events never carry a key: upstream text goes through the
//! [`crate::upstream::secret::Redactor`] before it reaches an event, as it does before
//! it reaches the log.

use tracing_subscriber::EnvFilter;

use crate::cli::LogArgs;

/// The filter `-v`/`-q` choose: warnings of llmprobe's own by default (it
/// emits none in routine runs), more with each `-v`, less with each `-q`.
/// Other crates stay at info or quieter even at `-vvv`: their debug events
/// are about connections, not about llmprobe, and are not vetted for keys.
fn directives(log: LogArgs) -> &'static str {
    match (log.verbose, log.quiet) {
        (_, q) if q >= 2 => "off",
        (_, 1) => "error",
        (0, _) => "error,llmprobe=warn",
        (1, _) => "warn,llmprobe=info",
        (2, _) => "warn,llmprobe=debug",
        _ => "info,llmprobe=trace",
    }
}

/// The filter in force: `RUST_LOG` as written when it is set (it is the
/// finer tool), else what the flags say. A `RUST_LOG` that does not parse
/// is ignored with a warning.
fn filter(log: LogArgs, rust_log: Option<&str>) -> (EnvFilter, Option<String>) {
    if let Some(spec) = rust_log.filter(|s| !s.trim().is_empty()) {
        match EnvFilter::try_new(spec) {
            Ok(f) => return (f, None),
            Err(e) => {
                let warning = format!("warning: ignoring RUST_LOG={spec:?}: {e}");
                return (EnvFilter::new(directives(log)), Some(warning));
            }
        }
    }
    (EnvFilter::new(directives(log)), None)
}

/// Send diagnostics to stderr. Called once, after the arguments parsed.
pub fn init(log: LogArgs) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let (filter, warning) = filter(log, rust_log.as_deref());
    if let Some(w) = warning {
        eprintln!("{w}");
    }
    // Fails only when a subscriber is already set (a test that calls
    // `run` twice): the first one stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(verbose: u8, quiet: u8) -> LogArgs {
        LogArgs { verbose, quiet }
    }

    #[test]
    fn flags_choose_the_level_and_rust_log_wins() {
        assert_eq!(directives(log(0, 0)), "error,llmprobe=warn");
        assert_eq!(directives(log(2, 0)), "warn,llmprobe=debug");
        assert_eq!(directives(log(9, 0)), "info,llmprobe=trace");
        assert_eq!(directives(log(0, 1)), "error");
        assert_eq!(directives(log(0, 3)), "off");
        let (f, w) = filter(log(0, 0), Some("llmprobe::cmd::check=debug"));
        assert!(w.is_none());
        assert_eq!(f.to_string(), "llmprobe::cmd::check=debug");
        let (f, w) = filter(log(1, 0), Some("  "));
        assert!(w.is_none());
        assert_eq!(
            f.to_string(),
            EnvFilter::new("warn,llmprobe=info").to_string()
        );
        let (f, w) = filter(log(0, 0), Some("llmprobe=loud"));
        assert!(w.unwrap().contains("RUST_LOG=\"llmprobe=loud\""));
        assert_eq!(
            f.to_string(),
            EnvFilter::new("error,llmprobe=warn").to_string()
        );
    }
}
