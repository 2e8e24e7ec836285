//! What some tests need from the machine beyond Rust and a shell: a
//! `redis-server`, the official Python clients in `.ci/venv`, zsh, groff,
//! systemd-analyze, a directory whose mode bits stop writes.
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
    /// A real client from the npm registry, by its role in
    /// `tests/agents/clients.txt` ([`npm_client`]), installed by `.ci/run`
    /// under `.ci/npm/`.
    Npm(&'static str),
    /// A directory of mode 0555 that stops a child's writes: any user but
    /// root, or root able to drop the capabilities that override mode bits
    /// ([`bound_by_permissions`]).
    ReadOnlyDirs,
}

impl Need {
    /// What it is, for the harness's report.
    pub fn label(self) -> String {
        match self {
            Need::Redis => "redis-server".into(),
            Need::Python(m) => format!("python: {m}"),
            Need::Program(p) => p.into(),
            Need::Npm(role) => match npm_client(role) {
                Some(c) => format!("npm: {}", c.name),
                None => format!("npm: {role} (not in tests/agents/clients.txt)"),
            },
            Need::ReadOnlyDirs => "a read-only directory that stops writes".into(),
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
            Need::Program("script") => "apt-get install bsdutils".into(),
            Need::Program(p) => format!("apt-get install {p}"),
            Need::Npm(role) => match npm_client(role) {
                Some(c) => format!(
                    "npm install --prefix .ci/npm/{} {}",
                    c.name,
                    c.packages.join(" ")
                ),
                None => "add it to tests/agents/clients.txt".into(),
            },
            Need::ReadOnlyDirs => {
                "run as a user other than root, or as root allowed to drop capabilities (CAP_SETPCAP)"
                    .into()
            }
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
            Need::Npm(role) => npm_client(role).is_some_and(|c| c.installed()),
            Need::ReadOnlyDirs => read_only_dirs_stop_writes(),
        }
    }

    /// Whether a missing one must fail rather than be ignored: CI sets
    /// `LLMPROBE_REQUIRE_ALL=1` (and the older per-kind variables still
    /// work).
    pub fn required(self) -> bool {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty() && v != "0");
        // Nothing installs this one: how the machine runs the tests decides.
        if self == Need::ReadOnlyDirs {
            return false;
        }
        set("LLMPROBE_REQUIRE_ALL")
            || match self {
                Need::Redis => set("LLMPROBE_REQUIRE_REDIS"),
                Need::Python(_) => set("LLMPROBE_REQUIRE_SDK"),
                Need::Program("systemd-analyze") => set("LLMPROBE_REQUIRE_SYSTEMD"),
                Need::Program(_) | Need::Npm(_) | Need::ReadOnlyDirs => false,
            }
    }
}

/// Whether a directory of mode 0555 stops a child run through
/// [`bound_by_permissions`] from writing in it.
#[cfg(unix)]
fn read_only_dirs_stop_writes() -> bool {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let probe = dir.path().join("can-i-write");
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", "echo > \"$1\"", "sh"]).arg(&probe);
    let status = bound_by_permissions(sh)
        .stderr(std::process::Stdio::null())
        .status();
    let stopped = status.is_ok() && !probe.exists();
    // Writable again, so that the temporary directory can be removed.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    stopped
}

#[cfg(not(unix))]
fn read_only_dirs_stop_writes() -> bool {
    false
}

/// Bounding-set capabilities a root child drops so that permission bits
/// stop it (linux/capability.h).
#[cfg(unix)]
const CAP_DAC_OVERRIDE: libc::c_int = 1;
#[cfg(unix)]
const CAP_DAC_READ_SEARCH: libc::c_int = 2;
#[cfg(unix)]
const CAP_FOWNER: libc::c_int = 3;

/// `cmd` run so that a directory's permission bits stop it: as root, it
/// drops the capabilities that override them (from its bounding set, so
/// the program it runs never has them).
#[cfg(unix)]
pub fn bound_by_permissions(mut cmd: std::process::Command) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: only prctl, async-signal-safe, runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            if libc::geteuid() != 0 {
                return Ok(());
            }
            for cap in [CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER] {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd
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

/// One real client of `tests/agents/clients.txt`: its directory under
/// `.ci/npm/` and the packages installed there.
#[derive(Debug, Clone)]
pub struct NpmClient {
    pub name: String,
    pub packages: Vec<String>,
}

impl NpmClient {
    /// `.ci/npm/NAME` (or under `LLMPROBE_NPM_DIR`).
    pub fn dir(&self) -> PathBuf {
        let root = std::env::var_os("LLMPROBE_NPM_DIR").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/npm"),
            PathBuf::from,
        );
        root.join(&self.name)
    }

    /// The version the name pins (`claude-code-2.1.197` → `2.1.197`).
    pub fn version(&self) -> &str {
        self.name.rsplit('-').next().unwrap_or("")
    }

    /// Whether every package is installed at its pinned version.
    pub fn installed(&self) -> bool {
        self.packages.iter().all(|spec| {
            let (name, version) = spec.rsplit_once('@').unwrap_or((spec, ""));
            let manifest = self
                .dir()
                .join("node_modules")
                .join(name)
                .join("package.json");
            std::fs::read_to_string(manifest)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some_and(|v| v["version"] == version)
        })
    }

    /// A program the client installs (`claude`, `codex`).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir().join("node_modules/.bin").join(name)
    }
}

/// Every client `tests/agents/clients.txt` pins.
pub fn npm_clients() -> Vec<NpmClient> {
    include_str!("../agents/clients.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            NpmClient {
                name: words.next().unwrap(),
                packages: words.collect(),
            }
        })
        .collect()
}

/// The client that plays `role`: a name of `clients.txt` as it is
/// (`claude-code-2.1.197`), or a family's newest pin (`claude-code-newest`),
/// or a family's one pin (`codex`, `ai-sdk`).
pub fn npm_client(role: &str) -> Option<NpmClient> {
    let all = npm_clients();
    if let Some(c) = all.iter().find(|c| c.name == role) {
        return Some(c.clone());
    }
    let family = role.strip_suffix("-newest").unwrap_or(role);
    let version = |c: &NpmClient| -> Vec<u64> {
        c.version()
            .split('.')
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    all.into_iter()
        .filter(|c| {
            c.name
                .strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('-'))
        })
        .max_by_key(version)
}
