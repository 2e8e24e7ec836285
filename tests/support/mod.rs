//! A small builder around the real binary: each [`Env`] is a temporary
//! directory with its own stats directory and config, and [`Env::run`] runs
//! `llmprobe` there with a clean environment (no provider keys leak in from
//! the developer's shell).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

/// The compat log from the old Python tool.
pub fn compat_log() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/compat/the-brain-health_log.json")
}

pub struct Env {
    pub dir: tempfile::TempDir,
    envs: Vec<(String, String)>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn code(self, want: i32) -> Run {
        assert_eq!(
            self.code, want,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
            envs: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn stats(&self) -> PathBuf {
        self.dir.path().join("stats")
    }

    pub fn log(&self) -> PathBuf {
        self.stats().join("health_log.json")
    }

    pub fn state_file(&self) -> PathBuf {
        self.stats().join("model_state.json")
    }

    /// Write a file relative to the test directory; returns its path.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, contents).unwrap();
        p
    }

    pub fn env(&mut self, k: &str, v: &str) -> &mut Env {
        self.envs.push((k.into(), v.into()));
        self
    }

    /// A `Command` for llmprobe in this directory, with a scrubbed
    /// environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.current_dir(self.dir.path());
        c.env_clear();
        for k in ["PATH", "HOME", "TMPDIR", "LANG"] {
            if let Ok(v) = std::env::var(k) {
                c.env(k, v);
            }
        }
        c.env("LLMPROBE_STATS_DIR", self.stats());
        c.env("NO_COLOR", "1");
        for (k, v) in &self.envs {
            c.env(k, v);
        }
        c.args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().expect("run llmprobe"))
    }
}
