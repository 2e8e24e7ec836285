//! What some tests need from the machine beyond Rust and a shell: a
//! `redis-server`, the official Python clients in `.ci/venv`, zsh, groff,
//! systemd-analyze.
//! Those tests live in the `external` test binary (`tests/external.rs`),
//! whose harness reports each one it cannot run here as *ignored*, with
//! what it needs, in `cargo test`'s normal output, instead of letting it
//! pass without running. `.ci/run` installs everything and sets
//! `LLMPROBE_REQUIRE_ALL=1`: there a missing prerequisite fails the test.

use std::path::PathBuf;

/// One prerequisite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A `redis-server` binary (each test starts its own on a free port).
    Redis,
    /// The Python of `.ci/venv` (or `LLMPROBE_TEST_PYTHON`) with this
    /// module importable.
    Python(&'static str),
    /// A program on `PATH`.
    Program(&'static str),
}

impl Need {
    /// What it is, for the harness's report.
    pub fn label(self) -> String {
        match self {
            Need::Redis => "redis-server".into(),
            Need::Python(m) => format!("python: {m}"),
            Need::Program(p) => p.into(),
        }
    }

    /// How to get it.
    pub fn how(self) -> String {
        match self {
            Need::Redis => "apt-get install redis-server".into(),
            Need::Python(m) => format!(
                "python3 -m venv .ci/venv && .ci/venv/bin/pip install {}",
                match m {
                    "prometheus_client" => "prometheus-client",
                    other => other,
                }
            ),
            Need::Program("systemd-analyze") => "apt-get install systemd".into(),
            Need::Program(p) => format!("apt-get install {p}"),
        }
    }

    /// Whether the machine has it.
    pub fn met(self) -> bool {
        match self {
            Need::Redis => redis_server().is_some(),
            Need::Python(m) => std::process::Command::new(python())
                .args(["-c", &format!("import {m}")])
                .output()
                .is_ok_and(|o| o.status.success()),
            Need::Program(p) => on_path(p).is_some(),
        }
    }

    /// Whether a missing one must fail rather than be ignored: CI sets
    /// `LLMPROBE_REQUIRE_ALL=1` (and the older per-kind variables still
    /// work).
    pub fn required(self) -> bool {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty() && v != "0");
        set("LLMPROBE_REQUIRE_ALL")
            || match self {
                Need::Redis => set("LLMPROBE_REQUIRE_REDIS"),
                Need::Python(_) => set("LLMPROBE_REQUIRE_SDK"),
                Need::Program("systemd-analyze") => set("LLMPROBE_REQUIRE_SYSTEMD"),
                Need::Program(_) => false,
            }
    }
}

/// The Python that `.ci/run` prepares.
pub fn python() -> String {
    std::env::var("LLMPROBE_TEST_PYTHON")
        .unwrap_or_else(|_| format!("{}/.ci/venv/bin/python", env!("CARGO_MANIFEST_DIR")))
}

/// `name` on `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The `redis-server` binary: on `PATH`, or where Debian puts it.
pub fn redis_server() -> Option<PathBuf> {
    on_path("redis-server").or_else(|| {
        let p = PathBuf::from("/usr/bin/redis-server");
        p.is_file().then_some(p)
    })
}
