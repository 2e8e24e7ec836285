//! Scheduled `check` runs: `--if-due` and `--jitter` (time moved with the
//! clock file, never waited for), and the monitoring hooks `--ping-url` (a
//! healthchecks.io stand-in on 127.0.0.1) and `--prom-file` (also parsed
//! by the official Prometheus client, in tests/clients.rs).

use std::io::BufRead;

use serde_json::Value;

use crate::support::offline;
use crate::support::{Env, Fake, PingServer, advance, check, clock_env, closed_port, config};

/// `text` contains `needle`; else the text is shown.
#[track_caller]
fn has(text: &str, needle: &str) {
    assert!(text.contains(needle), "no {needle:?} in:\n{text}");
}

/// `text` starts with `prefix`; else the text is shown.
#[track_caller]
fn starts(text: &str, prefix: &str) {
    assert!(
        text.starts_with(prefix),
        "not {prefix:?} at the start of:\n{text}"
    );
}

fn last_run(env: &Env) -> Vec<u8> {
    std::fs::read(env.stats().join("last_run.json")).unwrap()
}

#[test]
fn if_due_skips_a_recent_run_without_the_lock_and_runs_an_old_one() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    // No completed run yet: due.
    check(&env, &cfg, &["--if-due"]).ok();
    assert_eq!(fake.seen().len(), 1);
    let before = last_run(&env);

    // Another process holds the run lock: a skip neither takes nor waits
    // for it (a run would exit 3).
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(env.stats().join(".check.lock"))
        .unwrap();
    lock.lock().unwrap();
    let r = check(&env, &cfg, &["--if-due", "1h"]).ok();
    // (Real time passes too, so the ages shown are checked to the minute.)
    starts(&r.stderr, "not due: the last check finished ");
    has(&r.stderr, "; --if-due 1h runs again in ");
    assert_eq!(r.stdout, "");
    assert_eq!(fake.seen().len(), 1, "nothing probed");
    assert_eq!(last_run(&env), before, "last_run.json untouched");
    check(&env, &cfg, &[]).code(3);
    drop(lock);

    // Half an hour later, the default interval (1h) is not over.
    advance(&env, 1800);
    let r = check(&env, &cfg, &["--if-due"]).ok();
    has(&r.stderr, "finished 30m");
    assert!(
        ["runs again in 30m", "runs again in 29m"]
            .iter()
            .any(|n| r.stderr.contains(n)),
        "{}",
        r.stderr
    );
    // A dry run says what a run would do, and stops either way.
    let r = check(&env, &cfg, &["--dry-run", "--if-due"]).ok();
    starts(&r.stdout, "not due: the last check finished 30m");
    has(&r.stdout, "(a run now would stop here)");
    let r = check(&env, &cfg, &["--dry-run", "--json", "--if-due", "10m"]).ok();
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["if_due"]["due"], true);
    assert_eq!(v["if_due"]["interval_secs"], 600.0);
    assert_eq!(fake.seen().len(), 1);

    // An hour after the last run: due, and it runs.
    advance(&env, 3600);
    let r = check(&env, &cfg, &["--if-due"]).ok();
    has(&r.stdout, "1/1 probes passed");
    assert_eq!(fake.seen().len(), 2);
    assert_ne!(last_run(&env), before);
    let r = check(&env, &cfg, &["--if-due", "5m"]).ok();
    starts(&r.stderr, "not due");
    assert_eq!(fake.seen().len(), 2);
}

#[test]
fn an_offline_run_is_no_reason_to_wait_and_a_bad_record_stops_the_run() {
    let mut env = Env::new();
    let cfg = offline(&mut env, &["m"]);
    check(&env, &cfg, &[]).code(6);
    // It recorded nothing, so the next trigger tries again at once.
    let r = check(&env, &cfg, &["--if-due", "1h"]).code(6);
    has(&r.stderr, "offline: 1 remote provider could not be reached");

    // A last_run.json that cannot be parsed is a data error, left as it is.
    let bad = "{\"version\": 1, \"finished_at\": tru";
    let path = env.write("stats/last_run.json", bad);
    let r = check(&env, &cfg, &["--if-due"]).code(4);
    has(&r.stderr, "last_run.json");
    has(&r.stderr, "check --if-due reads it");
    assert_eq!(std::fs::read_to_string(path).unwrap(), bad);
}

#[test]
fn jitter_waits_before_probing_and_the_clock_ends_the_wait() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    let mut child = env
        .command(&["--config", &cfg, "check", "--jitter", "1h"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    // `waiting 12m34s (--jitter 1h) before probing`
    let wait = line
        .strip_prefix("waiting ")
        .and_then(|l| l.strip_suffix(" (--jitter 1h) before probing\n"))
        .unwrap_or_else(|| panic!("{line:?}"));
    let secs = llmprobe::duration::parse(wait).unwrap().as_secs();
    assert!((1..=3600).contains(&secs), "{line}");
    if secs >= 5 {
        // Nothing is probed during the wait. (A wait this short may be
        // over already.)
        assert!(fake.seen().is_empty());
    }
    // Time moves past the wait: the run goes on at once.
    advance(&env, 3601);
    let out = child.wait_with_output().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(out.status.code(), Some(0), "{rest}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1/1 probes passed"),
        "{rest}"
    );
    assert_eq!(fake.seen().len(), 1);

    // A dry run reports the jitter instead of waiting.
    let r = check(&env, &cfg, &["--dry-run", "--jitter", "5m"]).ok();
    starts(
        &r.stdout,
        "--jitter 5m: a random wait of up to 5m before the first probe (a dry run does not wait)\n",
    );
    assert!(!r.stderr.contains("waiting"), "{}", r.stderr);
    let r = check(&env, &cfg, &["--dry-run", "--json", "--jitter", "90s"]).ok();
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["jitter_secs"], 90.0);
    // Nonsense is refused, naming the flag.
    for bad in [
        ["--jitter", "25h"],
        ["--jitter", "soon"],
        ["--if-due", "9000h"],
    ] {
        let r = check(&env, &cfg, &bad).code(2);
        has(&r.stderr, bad[0]);
    }
    assert_eq!(fake.seen().len(), 1);
}

#[test]
fn ping_url_reports_start_then_success_or_fail_with_the_summary() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let ping = PingServer::start();
    let url = format!("{}/ping/abc-123", ping.url);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok", "wrong"], "")]);

    // A failed probe is data: the run succeeded.
    check(&env, &cfg, &["--ping-url", &url]).ok();
    assert_eq!(
        ping.calls(),
        ["GET /ping/abc-123/start", "POST /ping/abc-123"]
    );
    let body = &ping.seen()[1].body;
    starts(body, "llmprobe check: exit 0 (success)\n");
    has(body, "1/2 probes passed");
    has(body, "failed f::wrong: wrong_answer (200)");

    // --fail-on-down makes a failed probe a failure.
    check(&env, &cfg, &["--ping-url", &url, "--fail-on-down"]).code(1);
    assert_eq!(
        ping.calls()[2..],
        ["GET /ping/abc-123/start", "POST /ping/abc-123/fail"]
    );
    assert!(ping.seen()[3].body.starts_with("llmprobe check: exit 1"));

    // Not runs: a dry run, a listing, and a run that is not due.
    check(&env, &cfg, &["--ping-url", &url, "--dry-run"]).ok();
    check(&env, &cfg, &["--ping-url", &url, "--list"]).ok();
    check(&env, &cfg, &["--ping-url", &url, "--if-due"]).ok();
    assert_eq!(ping.calls().len(), 4);

    // A data error fails the run after it started.
    let log = env.write("stats/health_log.json", "{\"not\": \"an array\"}\n");
    check(&env, &cfg, &["--ping-url", &url]).code(4);
    assert_eq!(
        ping.calls()[4..],
        ["GET /ping/abc-123/start", "POST /ping/abc-123/fail"]
    );
    let body = &ping.seen()[5].body;
    starts(body, "llmprobe check: exit 4");
    has(body, "health_log.json");
    std::fs::remove_file(log).unwrap();

    // A config that cannot be read fails it before it starts; the URL may
    // come from the environment.
    let r = env
        .command(&["--config", "missing.toml", "check"])
        .env("LLMPROBE_PING_URL", &url)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert_eq!(ping.calls()[6..], ["POST /ping/abc-123/fail"]);
    assert!(ping.seen()[6].body.contains("missing.toml"));
    // So is a --prom-file that cannot be written; a dry run pings nothing,
    // even when it fails.
    check(
        &env,
        &cfg,
        &["--ping-url", &url, "--prom-file", "no/such/dir.prom"],
    )
    .code(2);
    assert_eq!(ping.calls()[7..], ["POST /ping/abc-123/fail"]);
    has(&ping.seen()[7].body, "--prom-file no/such/dir.prom");
    check(&env, &cfg, &["--ping-url", &url, "--dry-run", "-p", "nope"]).code(2);
    assert_eq!(ping.calls().len(), 8);
}

#[test]
fn an_offline_run_pings_fail_and_the_monitor_is_reached_past_the_proxy() {
    // HTTP(S)_PROXY point at a dead proxy, as on a machine without a
    // network; the monitor on loopback is still reached directly.
    let mut env = Env::new();
    let cfg = offline(&mut env, &["m"]);
    let ping = PingServer::start();
    let r = check(&env, &cfg, &["--ping-url", &ping.url]).code(6);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert_eq!(ping.calls(), ["GET /start", "POST /fail"]);
    let body = &ping.seen()[1].body;
    assert!(
        body.starts_with("llmprobe check: exit 6 (offline"),
        "{body}"
    );
    has(
        body,
        "offline: 1 remote provider could not be reached (connection refused); no probe was sent to them; nothing was recorded; 1 planned probe not done",
    );
}

#[test]
fn a_monitor_that_is_down_never_changes_the_exit_code() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    let down = format!("{}/secret-uuid", closed_port());
    let r = check(&env, &cfg, &["--ping-url", &down]).ok();
    has(&r.stdout, "1/1 probes passed");
    let host = down.trim_end_matches("/secret-uuid");
    for what in ["start", "success"] {
        let warning = format!(
            "warning: --ping-url: the {what} ping to {host} failed (connection refused); the run's result is unchanged"
        );
        has(&r.stderr, &warning);
    }
    // The path is the monitor's secret: never printed.
    assert!(!r.stderr.contains("secret-uuid"), "{}", r.stderr);
    check(&env, &cfg, &["--ping-url", &down, "--fail-on-down"]).ok();
    let r = check(&env, &cfg, &["--ping-url", "hc-ping.com/uuid"]).code(2);
    has(&r.stderr, "--ping-url");
}

/// The value of the sample `series` (name and labels) in Prometheus text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn prom_file_is_prometheus_text_with_every_family() {
    let (env, fake, cfg) = crate::support::prom_fixture();
    std::fs::create_dir(env.path().join("textfile")).unwrap();
    let prom = env.path().join("textfile/llmprobe.prom");
    advance(&env, 1000);
    check(&env, &cfg, &["--prom-file", prom.to_str().unwrap()]).ok();
    let text = std::fs::read_to_string(&prom).unwrap();
    let get = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    assert_eq!(
        get("llmprobe_probe_success{provider=\"f\",model=\"ok\"}"),
        1.0
    );
    assert_eq!(
        get("llmprobe_probe_success{provider=\"f\",model=\"wrong\"}"),
        0.0
    );
    assert_eq!(
        get("llmprobe_probe_success{provider=\"f\",model=\"we\\\"ird\"}"),
        1.0
    );
    assert!(get("llmprobe_probe_latency_seconds{provider=\"f\",model=\"ok\"}") >= 0.0);
    assert_eq!(
        sample(
            &text,
            "llmprobe_probe_success{provider=\"f\",model=\"off\"}"
        ),
        None
    );
    for (state, v) in [("active", 0.0), ("paused", 0.0), ("disabled", 1.0)] {
        let series =
            format!("llmprobe_model_state{{provider=\"f\",model=\"off\",state=\"{state}\"}}");
        assert_eq!(get(&series), v, "{series}");
    }
    assert_eq!(get("llmprobe_last_run_offline"), 0.0);
    // The run's finishing time, by the clock that moved 1000 s ahead.
    let finished: Value = serde_json::from_slice(&last_run(&env)).unwrap();
    let finished: chrono::DateTime<chrono::Utc> =
        finished["finished_at"].as_str().unwrap().parse().unwrap();
    let ts = get("llmprobe_last_run_timestamp_seconds");
    assert!(
        (ts - finished.timestamp_millis() as f64 / 1000.0).abs() < 0.001,
        "{ts}"
    );
    assert!(ts > chrono::Utc::now().timestamp() as f64 + 900.0, "{ts}");
    // The official parser reading it: tests/clients.rs (external harness).
    // Only the file itself is left in its directory.
    assert_eq!(
        std::fs::read_dir(env.path().join("textfile"))
            .unwrap()
            .count(),
        1
    );

    // A directory that does not exist is refused before any probe.
    let before = fake.seen().len();
    let r = check(&env, &cfg, &["--prom-file", "nowhere/llmprobe.prom"]).code(2);
    has(&r.stderr, "--prom-file nowhere/llmprobe.prom");
    assert_eq!(fake.seen().len(), before);
}

#[test]
fn an_offline_run_exports_that_it_was_offline() {
    let mut env = Env::new();
    let cfg = offline(&mut env, &["m"]);
    let prom = env.path().join("llmprobe.prom");
    check(&env, &cfg, &["--prom-file", prom.to_str().unwrap()]).code(6);
    let text = std::fs::read_to_string(&prom).unwrap();
    assert_eq!(sample(&text, "llmprobe_last_run_offline"), Some(1.0));
    // Nothing was recorded, so no probe is exported; the state is.
    assert!(!text.contains("llmprobe_probe_success{"), "{text}");
    assert_eq!(
        sample(
            &text,
            "llmprobe_model_state{provider=\"remote\",model=\"m\",state=\"active\"}"
        ),
        Some(1.0)
    );
    // The official parser reading it: tests/clients.rs (external harness).
}
