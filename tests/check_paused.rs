//! `check --paused`: only paused models whose re-probe slot has come (5
//! min after the pause, then 10, 20… by `state::reprobe`), never before
//! the `Retry-After` the pausing failure carried, recorded with
//! `"source": "reprobe"`; silent when there is nothing to do, one line when
//! another check holds the run lock. Time is moved with the clock file.

use serde_json::Value;

use crate::support::offline;
use crate::support::{
    Env, Fake, PingServer, advance, ago, check, clock_env, config, eventually, log_entries,
};

fn state(env: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap()).unwrap()
}

fn secs(ts: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(ts.as_str().unwrap())
        .unwrap()
        .timestamp()
}

#[test]
fn a_model_paused_by_a_429_comes_back_on_its_first_slot() {
    let env = clock_env();
    let fake = Fake::start(&env, &["m=rate-limit,ok"]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["m", "ok"], "")]);
    check(&env, &cfg, &[]).ok();
    let s = state(&env);
    assert_eq!(s["f::m"]["state"], "paused", "{s}");
    // The fake's Retry-After (7 s) is recorded, counted from the response.
    let wait = secs(&s["f::m"]["retry_at"]) - secs(&s["f::m"]["since"]);
    assert!((7..=8).contains(&wait), "{s}");
    let last_run = std::fs::read(env.stats().join("last_run.json")).unwrap();
    assert_eq!(fake.seen().len(), 2);

    // Before the slot: nothing probed, nothing said; brief tells when.
    advance(&env, 240);
    let b = env.run(&["--config", &cfg, "brief"]).ok();
    let line = b
        .stdout
        .lines()
        .find(|l| l.starts_with("  f::m: "))
        .unwrap_or_default();
    assert!(
        line.starts_with("  f::m: next re-probe ") && line.ends_with(" (in 1m)"),
        "{}",
        b.stdout
    );
    let r = check(&env, &cfg, &["--paused"]).ok();
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("", ""));
    assert_eq!(fake.seen().len(), 2);

    // Five minutes after the pause: m alone is probed, and passes.
    advance(&env, 300);
    let r = check(&env, &cfg, &["--paused"]).ok();
    assert!(r.stdout.contains("1/1 probes passed"), "{}", r.stdout);
    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[2].model(), "m");
    let s = state(&env);
    assert_eq!(s["f::m"]["state"], "active", "{s}");
    assert!(s["f::m"]["recovered_at"].is_string(), "{s}");
    assert!(s["f::m"].get("retry_at").is_none(), "{s}");
    let entries = log_entries(&env.log());
    let last = entries.last().unwrap();
    assert_eq!(
        (last["model"].as_str(), last["ok"].as_u64()),
        (Some("m"), Some(1))
    );
    assert_eq!(last["source"], "reprobe");
    assert!(entries[..2].iter().all(|e| e.get("source").is_none()));
    // A --paused run is no heartbeat: last_run.json is the hourly run's.
    assert_eq!(
        std::fs::read(env.stats().join("last_run.json")).unwrap(),
        last_run
    );

    // Nothing paused any more: silent again.
    let r = check(&env, &cfg, &["--paused"]).ok();
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("", ""));
    assert_eq!(fake.seen().len(), 3);
}

#[test]
fn a_retry_after_holds_the_model_back_past_its_slot() {
    let env = clock_env();
    let fake = Fake::start(&env, &["m=retry-after:600,ok"]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["m"], "")]);
    check(&env, &cfg, &[]).ok();
    let s = state(&env);
    assert_eq!(s["f::m"]["state"], "paused", "{s}");
    assert_eq!(s["f::m"]["reason"], "rate_limit");
    // Retry-After: 600, counted from the response (a second may tick
    // between the probe's ts and its answer).
    let wait = secs(&s["f::m"]["retry_at"]) - secs(&s["f::m"]["since"]);
    assert!((600..=601).contains(&wait), "{s}");

    // state and brief say when it comes, and why.
    let st = env.run(&["--config", &cfg, "state", "--json"]).ok();
    let rows: Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(rows[0]["next_reprobe"], s["f::m"]["retry_at"], "{rows}");
    assert_eq!(rows[0]["retry_at"], s["f::m"]["retry_at"]);
    let b = env.run(&["--config", &cfg, "brief", "--json"]).ok();
    let b: Value = serde_json::from_str(&b.stdout).unwrap();
    assert_eq!(
        b["out_of_rotation"][0]["next_reprobe"], s["f::m"]["retry_at"],
        "{b}"
    );
    let st = env.run(&["--config", &cfg, "state"]).ok();
    assert!(
        st.stdout.contains("\npaused:\n  f::m: next re-probe ")
            && st.stdout.contains(", the provider's Retry-After)"),
        "{}",
        st.stdout
    );

    // The 5-minute slot has come, but the provider said 10 minutes.
    advance(&env, 300);
    let r = check(&env, &cfg, &["--paused", "-v"]).ok();
    assert_eq!(r.stdout, "");
    assert!(
        r.stderr
            .contains("check --paused: 0 of 1 paused model due; the next falls due at "),
        "{}",
        r.stderr
    );
    assert_eq!(fake.seen().len(), 1);

    advance(&env, 660);
    let b = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(
        b.stdout
            .contains("  f::m: re-probe due (by route --serve or check --paused)"),
        "{}",
        b.stdout
    );
    check(&env, &cfg, &["--paused"]).ok();
    assert_eq!(fake.seen().len(), 2);
    assert_eq!(state(&env)["f::m"]["state"], "active");
}

#[test]
fn nothing_paused_is_silent_and_a_running_check_is_one_line() {
    let env = clock_env();
    let fake = Fake::start(&env, &["m=e503,ok"]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["m"], "")]);
    // No state file, no log: nothing to do, nothing said, nothing created.
    let r = check(&env, &cfg, &["--paused"]).ok();
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("", ""));
    assert!(!env.state_file().exists());
    assert!(fake.seen().is_empty());

    check(&env, &cfg, &[]).ok();
    assert_eq!(state(&env)["f::m"]["state"], "paused");
    advance(&env, 300);
    // Another check holds the run lock: it probes paused models itself.
    let lock = hold_run_lock(&env, "");
    let r = check(&env, &cfg, &["--paused"]).ok();
    assert_eq!(r.stdout, "");
    assert_eq!(
        r.stderr,
        "check --paused: another check is running, and it probes paused models itself\n"
    );
    assert_eq!(fake.seen().len(), 1);
    // A plain check still refuses to run beside it.
    check(&env, &cfg, &[]).code(3);
    drop(lock);
    check(&env, &cfg, &["--paused"]).ok();
    assert_eq!(fake.seen().len(), 2);
    assert_eq!(state(&env)["f::m"]["state"], "active");
}

#[test]
fn offline_it_records_nothing_and_no_channel_hears_of_it() {
    let mut env = clock_env();
    let cfg = offline(&mut env, &["m"]);
    let ping = PingServer::start();
    env.env("LLMPROBE_PING_URL", &ping.url);
    let paused = r#"{"remote::m": {"state": "paused", "reason": "rate_limit", "since": "2026-01-01T00:00:00Z", "consecutive_failures": 0}}"#;
    env.write("stats/model_state.json", paused);
    let prom = env.path().join("llmprobe.prom");
    let r = check(
        &env,
        &cfg,
        &["--paused", "--prom-file", prom.to_str().unwrap()],
    )
    .code(6);
    assert!(
        r.stderr
            .contains("offline: 1 remote provider could not be reached"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(env.state_file()).unwrap(), paused);
    assert!(!env.log().exists() || log_entries(&env.log()).is_empty());
    // The hourly run's heartbeat channels hear nothing of it.
    assert!(ping.calls().is_empty(), "{:?}", ping.calls());
    assert!(!prom.exists());
    assert!(!env.stats().join("last_run.json").exists());
}

/// Hold the run lock of `env` from the test, with `note` in the lock file
/// as the holder writes it (a `check --paused` run adds a line saying so).
fn hold_run_lock(env: &Env, note: &str) -> std::fs::File {
    use std::io::Write;
    std::fs::create_dir_all(env.stats()).unwrap();
    let mut lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(env.stats().join(".check.lock"))
        .unwrap();
    lock.lock().unwrap();
    lock.set_len(0).unwrap();
    lock.write_all(note.as_bytes()).unwrap();
    lock
}

#[test]
fn a_whole_run_waits_for_a_paused_run_that_holds_the_lock() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["m"], "")]);
    // The hourly run starts while a `check --paused` line probes.
    let lock = hold_run_lock(
        &env,
        "pid 1, started 2026-12-02T10:00:00Z\ncheck --paused\n",
    );
    let err_path = env.path().join("check.err");
    let mut child = env
        .command(&["--config", &cfg, "check"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    eventually("the whole run waits for the paused run", || {
        let err = std::fs::read_to_string(&err_path).unwrap_or_default();
        if let Some(status) = child.try_wait().unwrap() {
            panic!("check exited ({status}) while a paused run held the lock:\n{err}");
        }
        if err.contains("waiting for it") {
            Ok(())
        } else {
            Err(err)
        }
    });
    assert!(fake.seen().is_empty());
    // The paused run ends: the whole run takes the lock and runs.
    drop(lock);
    let out = child.wait_with_output().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1/1 probes passed"),
        "{out:?}"
    );
    assert_eq!(
        err,
        "check: a check --paused run holds the run lock (pid 1, started 2026-12-02T10:00:00Z, \
         check --paused); waiting for it (up to 15m)\n"
    );
    assert_eq!(fake.seen().len(), 1);
    assert!(env.stats().join("last_run.json").exists());
    // Its note is gone with the lock.
    assert_eq!(
        std::fs::read_to_string(env.stats().join(".check.lock")).unwrap(),
        ""
    );

    // Another whole run holding the lock: exit 3 at once, as before.
    let lock = hold_run_lock(&env, "pid 1, started 2026-12-02T10:00:00Z\n");
    let r = check(&env, &cfg, &[]).code(3);
    assert!(
        r.stderr
            .contains("another check is already running (pid 1, started 2026-12-02T10:00:00Z)"),
        "{}",
        r.stderr
    );
    drop(lock);
    assert_eq!(fake.seen().len(), 1);
}

#[test]
fn a_paused_run_leaves_the_lost_keys_warning_to_the_hourly_run() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider(
                "keyed",
                "openai",
                &["m"],
                "api_key_env = \"PAUSED_TEST_LOST_KEY\"",
            ),
            fake.provider("keyless", "openai", &["m"], ""),
        ],
    );
    // Both paused an hour ago and probed then; keyed's key is gone since.
    let since = ago(3600);
    let entry = |p: &str| {
        format!(
            r#"{{"ts":"{since}","provider":"{p}","model":"m","ok":0,"latency_ms":3,"failure_type":"rate_limit"}}"#
        )
    };
    env.write(
        "stats/health_log.json",
        format!("[\n{},\n{}\n]\n", entry("keyed"), entry("keyless")),
    );
    let paused = |p: &str| {
        format!(
            r#""{p}::m": {{"state": "paused", "reason": "rate_limit", "since": "{since}", "consecutive_failures": 0}}"#
        )
    };
    env.write(
        "stats/model_state.json",
        format!("{{{}, {}}}", paused("keyed"), paused("keyless")),
    );
    let r = check(&env, &cfg, &["--paused", "--fail-on-skipped"]).ok();
    assert!(r.stdout.contains("1/1 probes passed"), "{}", r.stdout);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert_eq!(fake.seen().len(), 1);
    assert_eq!(state(&env)["keyless::m"]["state"], "active");
    // The hourly run says it, and fails for it.
    let r = check(&env, &cfg, &["--fail-on-skipped"]).code(1);
    assert!(
        r.stderr.contains(
            "warning: probed in the last 7 days, skipped now for a missing key: keyed (PAUSED_TEST_LOST_KEY unset)"
        ),
        "{}",
        r.stderr
    );
}
