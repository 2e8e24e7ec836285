//! Prometheus text for node_exporter's textfile collector: the label
//! escaping that `rollup --format prom` and `check --prom-file` share, and
//! the metrics of one `check` run.
//!
//! node_exporter reads every `*.prom` file in its directory on each scrape,
//! so the file is replaced atomically (a temporary file in the same
//! directory, then a rename): a scrape sees the last run or this one, never
//! half of it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::catalog::model_key;
use crate::error::{Error, Result};
use crate::outcome::Entry;
use crate::run_observer::{FinishedRun, RunObserver};
use crate::state::{ModelState, States};

/// A label value escaped for the text exposition format: backslash, double
/// quote and newline.
pub fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The `# HELP` and `# TYPE … gauge` lines of a metric family.
pub fn gauge_header(out: &mut String, name: &str, help: &str) {
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

/// What one `check` run exports.
#[derive(Debug)]
pub struct RunMetrics<'a> {
    /// The probes the run recorded. An offline run recorded none of its
    /// remote probes (the offline rule, docs/formats.md), and exports none.
    pub probes: &'a [Entry],
    /// Every model in the run's scope (probed, or skipped as disabled),
    /// with its state after the run.
    pub states: Vec<(String, String, ModelState)>,
    pub finished_at: DateTime<Utc>,
    pub offline: bool,
}

const STATES: [ModelState; 3] = [ModelState::Active, ModelState::Paused, ModelState::Disabled];

impl RunMetrics<'_> {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let pm = |provider: &str, model: &str| {
            format!(
                "provider=\"{}\",model=\"{}\"",
                label(provider),
                label(model)
            )
        };
        gauge_header(
            &mut out,
            "llmprobe_probe_success",
            "1 if the model's probe in the last run answered right, else 0.",
        );
        for e in self.probes {
            let _ = writeln!(
                out,
                "llmprobe_probe_success{{{}}} {}",
                pm(&e.provider, &e.model),
                e.ok
            );
        }
        gauge_header(
            &mut out,
            "llmprobe_probe_latency_seconds",
            "Time to the full response of the model's probe in the last run (probes without a response have none).",
        );
        for e in self
            .probes
            .iter()
            .filter(|e| e.ok == 1 || e.status.is_some())
        {
            let _ = writeln!(
                out,
                "llmprobe_probe_latency_seconds{{{}}} {}",
                pm(&e.provider, &e.model),
                e.latency_ms as f64 / 1000.0
            );
        }
        gauge_header(
            &mut out,
            "llmprobe_model_state",
            "The model's state after the last run: 1 for its state, 0 for the others.",
        );
        for (provider, model, state) in &self.states {
            for s in STATES {
                let _ = writeln!(
                    out,
                    "llmprobe_model_state{{{},state=\"{s}\"}} {}",
                    pm(provider, model),
                    u8::from(s == *state)
                );
            }
        }
        gauge_header(
            &mut out,
            "llmprobe_last_run_timestamp_seconds",
            "Unix time at which the last check run finished.",
        );
        let ts = self.finished_at.timestamp_millis() as f64 / 1000.0;
        let _ = writeln!(out, "llmprobe_last_run_timestamp_seconds {ts}");
        gauge_header(
            &mut out,
            "llmprobe_last_run_offline",
            "1 if the last check run reached no remote provider (offline: only loopback providers' results were recorded), else 0.",
        );
        let _ = writeln!(out, "llmprobe_last_run_offline {}", u8::from(self.offline));
        out
    }
}

/// Replace `path` with `text` atomically. Errors name the flag.
pub fn write(path: &Path, text: &str) -> Result<()> {
    crate::fsutil::atomic_write_unlocked(path, text.as_bytes()).map_err(|e| match e {
        Error::Io { context, source } => {
            Error::io(format!("--prom-file {}: {context}", path.display()), source)
        }
        other => other,
    })
}

/// Refuse, before a run, a `--prom-file` whose directory does not exist
/// (exit 2), rather than after many minutes of probing.
pub fn check_path(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Error::config(format!(
            "--prom-file {}: the directory {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    if path.is_dir() {
        return Err(Error::config(format!(
            "--prom-file {} is a directory; name a file in it, such as llmprobe.prom",
            path.display()
        )));
    }
    Ok(())
}

/// `check --prom-file`: the run's probes, and each model's state after
/// it, written before the summary is printed.
#[derive(Debug)]
pub struct PromFile {
    path: PathBuf,
}

impl PromFile {
    /// Refuses a path that cannot be written (see [`check_path`]).
    pub fn new(path: &Path) -> Result<PromFile> {
        check_path(path)?;
        Ok(PromFile {
            path: path.to_path_buf(),
        })
    }
}

impl RunObserver for PromFile {
    fn on_finish(&mut self, run: &FinishedRun<'_>) -> Result<()> {
        let states = States::load(run.state_path)?;
        let metrics = RunMetrics {
            probes: run.entries,
            states: run
                .scope
                .iter()
                .map(|(p, m)| {
                    let state = states.state_of(&model_key(p, m));
                    (p.clone(), m.clone(), state)
                })
                .collect(),
            finished_at: run.finished_at,
            offline: run.offline,
        };
        write(&self.path, &metrics.render())?;
        tracing::info!(path = %self.path.display(), "--prom-file written");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{FailureType, Outcome};

    fn entry(
        provider: &str,
        model: &str,
        failure: Option<FailureType>,
        status: Option<u16>,
    ) -> Entry {
        let o = Outcome {
            failure,
            latency_ms: 1250,
            status,
            error: None,
            unreachable: status.is_none() && failure.is_some(),
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        Entry::new("2026-12-01T10:00:00Z".into(), provider, model, &o)
    }

    #[test]
    fn renders_each_family_with_escaped_labels() {
        let probes = vec![
            entry("groq", "llama", None, Some(200)),
            entry(
                "we\"ird",
                "a\\b\nc",
                Some(FailureType::WrongAnswer),
                Some(200),
            ),
            entry("down", "m", Some(FailureType::Error), None),
        ];
        let m = RunMetrics {
            probes: &probes,
            states: vec![
                ("groq".into(), "llama".into(), ModelState::Active),
                ("down".into(), "m".into(), ModelState::Paused),
            ],
            finished_at: "2026-12-01T10:00:30.5Z".parse().unwrap(),
            offline: false,
        };
        let text = m.render();
        for line in [
            "# TYPE llmprobe_probe_success gauge",
            "llmprobe_probe_success{provider=\"groq\",model=\"llama\"} 1",
            "llmprobe_probe_success{provider=\"we\\\"ird\",model=\"a\\\\b\\nc\"} 0",
            "llmprobe_probe_success{provider=\"down\",model=\"m\"} 0",
            "llmprobe_probe_latency_seconds{provider=\"groq\",model=\"llama\"} 1.25",
            "llmprobe_model_state{provider=\"down\",model=\"m\",state=\"active\"} 0",
            "llmprobe_model_state{provider=\"down\",model=\"m\",state=\"paused\"} 1",
            "llmprobe_model_state{provider=\"down\",model=\"m\",state=\"disabled\"} 0",
            "llmprobe_last_run_timestamp_seconds 1796119230.5",
            "llmprobe_last_run_offline 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        // No response, no latency.
        assert!(!text.contains("llmprobe_probe_latency_seconds{provider=\"down\""));
        assert_eq!(text.matches("# HELP ").count(), 5);
    }

    /// A reader polling the file while it is rewritten many times only ever
    /// sees a whole file: the old one or the new one. (With a plain
    /// truncate-and-write, this fails within a few rewrites.)
    #[test]
    fn a_reader_never_sees_a_half_written_file() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("llmprobe.prom");
        let whole = |n: usize| {
            // Files of different sizes, each ending in a line that names
            // its size, so a torn or mixed read cannot pass for whole.
            let body = format!("# {}\n", "x".repeat(n * 37 % 20_000));
            format!("{body}llmprobe_size {}\n", body.len())
        };
        write(&path, &whole(0)).unwrap();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let reader = {
            let (path, done) = (path.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0u32;
                while !done.load(Ordering::Relaxed) || reads == 0 {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let (body, last) = text.trim_end().rsplit_once('\n').unwrap();
                    let size: usize = last
                        .strip_prefix("llmprobe_size ")
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert_eq!(size, body.len() + 1, "a partial file was read");
                    reads += 1;
                }
                reads
            })
        };
        for n in 1..400 {
            write(&path, &whole(n)).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    /// The observer exports each model of the scope with its state as the
    /// state file has it after the run.
    #[test]
    fn the_observer_writes_the_scope_with_states_after_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let state_path = dir.path().join("model_state.json");
        let mut states = States::default();
        states
            .apply_probe(
                "down::m",
                crate::outcome::Verdict::Temporary("timeout"),
                "2026-12-01T10:00:00Z",
                3,
            )
            .unwrap();
        let lock = crate::fsutil::DataLock::acquire(dir.path()).unwrap();
        states.save(&state_path, &lock).unwrap();
        drop(lock);
        let probes = vec![entry("down", "m", Some(FailureType::Error), None)];
        let scope = [("down".to_string(), "m".to_string())];
        let prom = dir.path().join("llmprobe.prom");
        let mut observer = PromFile::new(&prom).unwrap();
        observer
            .on_finish(&FinishedRun {
                started_at: "2026-12-01T10:00:00Z".parse().unwrap(),
                finished_at: "2026-12-01T10:00:30.5Z".parse().unwrap(),
                exit_code: 0,
                entries: &probes,
                state_changes: &[],
                offline: false,
                scope: &scope,
                skipped: &[],
                stats_dir: dir.path(),
                state_path: &state_path,
                summary: "",
            })
            .unwrap();
        let text = std::fs::read_to_string(&prom).unwrap();
        for line in [
            "llmprobe_probe_success{provider=\"down\",model=\"m\"} 0",
            "llmprobe_model_state{provider=\"down\",model=\"m\",state=\"paused\"} 1",
            "llmprobe_last_run_timestamp_seconds 1796119230.5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        assert!(PromFile::new(&dir.path().join("nope/x.prom")).is_err());
    }

    #[test]
    fn a_missing_directory_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_path(&dir.path().join("nope/llmprobe.prom")).unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::USAGE);
        assert!(err.to_string().contains("--prom-file"), "{err}");
        assert!(check_path(dir.path()).is_err());
        assert!(check_path(&dir.path().join("llmprobe.prom")).is_ok());
    }
}
