//! A `check` run that stops before its plan is done, through the real
//! binary: offline (no remote provider answered) it stops at once instead
//! of waiting out its spacing; SIGINT and SIGTERM stop it after recording
//! what it measured. And what the progress lines print off a terminal:
//! nothing.

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Env, Fake, config, lists_read_now, log_entries, provider_toml};

/// Wait for `child` to exit, at most `secs` (a deadline for a hang, never
/// a measure of speed); kill it and fail if it does not.
fn exits_within(mut child: Child, secs: u64, what: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {secs} s\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn spawn(env: &Env, args: &[&str]) -> Child {
    env.command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start check")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Three remote providers behind a dead proxy (a machine without a
/// network), two models each, and a loopback one, all an hour apart: the
/// run stops as soon as every remote provider's first probe failed, so it
/// takes seconds, not an hour. The loopback provider's first probe, due at
/// once, is recorded; nothing that would wait is sent.
#[test]
fn an_offline_run_stops_at_once_instead_of_waiting_out_its_spacing() {
    let mut env = Env::new();
    let fake = Fake::start(&env, &[]);
    crate::support::no_network(&mut env);
    let remotes = ["r1", "r2", "r3"];
    let mut tables: Vec<String> = remotes
        .iter()
        .map(|r| {
            provider_toml(
                r,
                "openai",
                &format!("https://{r}.example/v1"),
                &["a", "b"],
                "",
            )
        })
        .collect();
    tables.push(fake.provider("local", "openai", &["ok", "ok2"], ""));
    let cfg = config(&env, &tables);
    let urls: Vec<String> = remotes
        .iter()
        .map(|r| format!("https://{r}.example/v1"))
        .collect();
    let lists: Vec<(&str, &str, &[&str])> = remotes
        .iter()
        .zip(&urls)
        .map(|(r, u)| (*r, u.as_str(), &["a", "b"][..]))
        .collect();
    lists_read_now(&env, &lists);
    let args = ["--config", &cfg, "check", "--spacing", "3600", "--json"];
    let out = exits_within(spawn(&env, &args), 120, "an offline run");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert_eq!(
        stderr.lines().last(),
        Some(
            "offline: 3 remote providers could not be reached (connection refused); \
             their 3 results were not recorded; 1 result from loopback providers was recorded; \
             4 planned probes not done"
        ),
        "{stderr}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["offline"]["not_done"], 4, "{v}");
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["model"], "ok");
    let seen: Vec<String> = fake.seen().iter().map(|s| s.model().to_string()).collect();
    assert_eq!(seen, ["ok"], "nothing that would wait was sent");
    // Without fresh lists the run reads them first, and their failing is
    // enough: no remote probe is sent, the loopback's first one still is.
    std::fs::remove_file(env.stats().join("model_lists.json")).unwrap();
    let out = exits_within(spawn(&env, &args), 120, "an offline run");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.lines().last().is_some_and(|l| l.ends_with(
            "no probe was sent to them; 1 result from loopback providers was recorded; \
             7 planned probes not done"
        )),
        "{stderr}"
    );
    assert_eq!(log_entries(&env.log()).len(), 2);
}

/// SIGINT and SIGTERM, sent once the first result is in the log: the run
/// abandons the probe that hangs, sends nothing more, records what it
/// measured (the log entry, the state change, last_run.json), prints its
/// summary and a last line that says so, and exits 130 or 143.
#[cfg(unix)]
#[test]
fn a_signal_records_what_was_measured_and_says_so() {
    for (signal, code, name) in [("-INT", 130, "SIGINT"), ("-TERM", 143, "SIGTERM")] {
        let env = Env::new();
        let fake = Fake::start(&env, &[]);
        let cfg = env.write(
            "llmprobe.toml",
            format!(
                "include_default_catalog = false\n[defaults]\ntimeout_secs = 2\ndisable_after = 1\n\n{}\n{}",
                // A wrong answer disables f::wrong at once; f::ok waits an hour.
                fake.provider("f", "openai", &["wrong", "ok"], ""),
                // Never answers while the run lasts.
                fake.provider("g", "openai", &["hang-headers"], "timeout_secs = 600"),
            ),
        );
        let cfg = cfg.to_str().unwrap();
        let child = spawn(&env, &["--config", cfg, "check", "--spacing", "3600"]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !env.log().exists() || log_entries(&env.log()).is_empty() {
            assert!(Instant::now() < deadline, "{name}: no result was recorded");
            std::thread::sleep(Duration::from_millis(20));
        }
        let sent = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = exits_within(child, 60, name);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(code), "{name}: {stderr}");
        assert_eq!(
            stderr.lines().last(),
            Some(
                format!(
                    "interrupted ({name}): 1 result recorded, 1 state change (f::wrong → disabled); \
                     2 planned probes not done"
                )
                .as_str()
            ),
            "{stderr}"
        );
        assert!(stdout.contains("| wrong "), "{name}: {stdout}");
        assert!(stdout.contains("active → disabled"), "{name}: {stdout}");
        // Recorded whole: one entry, the state, and the run's record.
        let entries = log_entries(&env.log());
        assert_eq!(entries.len(), 1, "{name}");
        let state: Value =
            serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap()).unwrap();
        assert_eq!(state["f::wrong"]["state"], "disabled", "{name}");
        let last: Value = serde_json::from_str(
            &std::fs::read_to_string(env.stats().join("last_run.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(last["exit_code"], code, "{name}");
        // Nothing after the signal: f::ok was never sent.
        let seen: Vec<String> = fake.seen().iter().map(|s| s.model().to_string()).collect();
        assert!(!seen.iter().any(|m| m == "ok"), "{name}: {seen:?}");
        // An interrupted run does not count for --if-due.
        let r = env.run(&["--config", cfg, "check", "--dry-run", "--if-due", "1h"]);
        assert!(
            r.stdout
                .contains("due: the last run was stopped by a signal"),
            "{name}: {}",
            r.stdout
        );
    }
}

/// Off a terminal (here stderr is a pipe) the progress lines print
/// nothing: no countdown, no running count, no result as it lands. The
/// summary is all there is.
#[test]
fn a_run_off_a_terminal_prints_no_progress() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("f", "openai", &["ok", "wrong"], "spacing_secs = 1.5")],
    );
    let r = crate::support::check(&env, &cfg, &[]).ok();
    for progress in ["next:", "probing", " ok · ", "f::ok: ok", "done"] {
        assert!(
            !r.stderr.contains(progress),
            "{progress:?} in:\n{}",
            r.stderr
        );
        assert!(
            !r.stdout.contains(progress),
            "{progress:?} in:\n{}",
            r.stdout
        );
    }
    assert!(r.stdout.contains("1/2 probes passed"), "{}", r.stdout);
}
