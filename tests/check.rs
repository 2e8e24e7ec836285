//! `llmprobe check` end to end: real binary, real HTTP to fake providers on
//! 127.0.0.1, real files and locks.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, Fake, closed_port, log_entries, model_key};

/// A config with only the given provider tables and a fast default spacing.
pub use crate::support::{check, config};

fn states(env: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.state_file()).unwrap_or_else(|_| "{}".into()))
        .unwrap()
}

#[test]
fn probes_all_three_dialects_and_records_every_field() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider("oa", "openai", &["ok", "think", "wrong"], ""),
            fake.provider("an", "anthropic", &["ok", "overloaded"], ""),
            fake.provider("ge", "gemini", &["ok", "rate-limit"], ""),
        ],
    );
    let out = check(&env, &cfg, &[]).ok();
    assert!(out.stdout.contains("4/7 probes passed"), "{}", out.stdout);
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 7);
    let by: BTreeMap<String, &Value> = entries.iter().map(|e| (model_key(e), e)).collect();
    for e in &entries {
        for f in [
            "ts",
            "provider",
            "model",
            "ok",
            "latency_ms",
            "failure_type",
        ] {
            assert!(e.get(f).is_some(), "missing {f} in {e}");
        }
        let ts = e["ts"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 20, "{ts}");
    }
    assert_eq!(by["oa::ok"]["ok"], 1);
    assert_eq!(by["oa::ok"]["failure_type"], "");
    assert_eq!(by["oa::think"]["ok"], 1);
    assert_eq!(by["oa::wrong"]["failure_type"], "wrong_answer");
    assert_eq!(by["an::ok"]["ok"], 1);
    assert_eq!(by["an::overloaded"]["failure_type"], "http_error");
    assert_eq!(by["an::overloaded"]["status"], 529);
    assert_eq!(by["ge::ok"]["ok"], 1);
    assert_eq!(by["ge::rate-limit"]["failure_type"], "rate_limit");
    assert_eq!(by["ge::rate-limit"]["status"], 429);
    // The state file reflects the failures.
    let s = states(&env);
    assert_eq!(s["an::overloaded"]["state"], "paused");
    assert_eq!(s["oa::wrong"]["consecutive_failures"], 1);
}

#[test]
fn state_machine_through_repeated_runs() {
    let env = Env::new();
    let fake = Fake::start(
        &env,
        &[
            // pauses on a temporary failure and recovers on the next pass
            "temp=rate-limit,ok",
            // hard, temporary, hard, hard: temporary failures neither count
            // nor reset; the third hard failure disables
            "hard=wrong,e500,not-found,unauthorized,ok",
            // two hard failures, a pass resets, two more: still active
            "reset=wrong,wrong,ok,wrong,wrong",
            // three hard failures straight from active
            "dis=wrong,not-found,garbage",
        ],
    );
    let cfg = config(
        &env,
        &[fake.provider("f", "openai", &["temp", "hard", "reset", "dis"], "")],
    );
    let get = |s: &Value, m: &str, f: &str| s[format!("f::{m}")][f].clone();

    check(&env, &cfg, &[]).ok();
    let s = states(&env);
    assert_eq!(get(&s, "temp", "state"), "paused");
    assert_eq!(get(&s, "temp", "reason"), "rate_limit");
    assert_eq!(get(&s, "hard", "state"), "active");
    assert_eq!(get(&s, "hard", "consecutive_failures"), 1);

    // Run 2: the paused model is probed again and recovers (old defect 1).
    let out = check(&env, &cfg, &[]).ok();
    assert!(out.stdout.contains("paused → active"), "{}", out.stdout);
    let s = states(&env);
    assert_eq!(get(&s, "temp", "state"), "active");
    assert!(get(&s, "temp", "recovered_at").is_string());
    // A 500 pauses but does not count (old defect 2).
    assert_eq!(get(&s, "hard", "state"), "paused");
    assert_eq!(get(&s, "hard", "consecutive_failures"), 1);

    let out = check(&env, &cfg, &[]).ok();
    assert!(out.stdout.contains("active → disabled"), "{}", out.stdout);
    let s = states(&env);
    assert_eq!(get(&s, "dis", "state"), "disabled");
    assert_eq!(get(&s, "dis", "consecutive_failures"), 3);
    assert_eq!(get(&s, "hard", "state"), "paused");
    assert_eq!(get(&s, "hard", "consecutive_failures"), 2);
    assert_eq!(get(&s, "reset", "consecutive_failures"), 0);

    let out = check(&env, &cfg, &[]).ok();
    assert!(out.stdout.contains("paused → disabled"), "{}", out.stdout);
    let s = states(&env);
    assert_eq!(get(&s, "hard", "state"), "disabled");
    assert_eq!(get(&s, "hard", "reason"), "error");
    assert_eq!(get(&s, "reset", "state"), "active");
    assert_eq!(get(&s, "reset", "consecutive_failures"), 1);

    // Run 5: the disabled model is neither probed nor logged (old defect 3).
    let before = log_entries(&env.log()).len();
    let requests_before = fake.seen().iter().filter(|r| r.model() == "hard").count();
    let out = check(&env, &cfg, &[]).ok();
    assert!(
        out.stdout.contains("f::hard: not probed (disabled"),
        "{}",
        out.stdout
    );
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), before + 2);
    assert!(
        entries[before..]
            .iter()
            .all(|e| e["model"] != "hard" && e["model"] != "dis")
    );
    assert_eq!(
        fake.seen().iter().filter(|r| r.model() == "hard").count(),
        requests_before
    );
    let s = states(&env);
    // wrong, wrong, ok, wrong, wrong: the pass reset the count.
    assert_eq!(get(&s, "reset", "state"), "active");
    assert_eq!(get(&s, "reset", "consecutive_failures"), 2);

    // Re-enabled by hand (editing the file), it is probed again and passes.
    let mut s = states(&env);
    s["f::hard"]["state"] = "active".into();
    s["f::hard"]["consecutive_failures"] = 0.into();
    std::fs::write(env.state_file(), serde_json::to_string_pretty(&s).unwrap()).unwrap();
    check(&env, &cfg, &["--model", "hard"]).ok();
    let entries = log_entries(&env.log());
    assert_eq!(entries.last().unwrap()["model"], "hard");
    assert_eq!(entries.last().unwrap()["ok"], 1);
}

#[test]
fn providers_run_in_parallel_with_spacing_per_provider() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let models = ["a1", "a2", "a3", "a4"];
    let tables: Vec<String> = ["p1", "p2", "p3"]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ms: Vec<String> = models.iter().map(|m| format!("{p}-{m}")).collect();
            let ms: Vec<&str> = ms.iter().map(|s| s.as_str()).collect();
            // p3 has its own, longer spacing.
            let extra = if i == 2 { "spacing_secs = 1.1" } else { "" };
            fake.provider(p, "openai", &ms, extra)
        })
        .collect();
    let cfg = config(&env, &tables);
    // The schedule itself (spacing, parallel lanes) is asserted exactly
    // under paused time in `check::tests`; here, that the flags and config
    // reach it: --spacing overrides every provider, including p3.
    let dry = check(&env, &cfg, &["--spacing", "0.4", "--dry-run"]).ok();
    assert!(
        dry.stdout
            .contains("12 probes on 3 providers in parallel; the last starts at +1.20s"),
        "{}",
        dry.stdout
    );
    let dry = check(&env, &cfg, &["--dry-run"]).ok();
    assert!(
        dry.stdout.contains("the last starts at +3.30s"),
        "{}",
        dry.stdout
    );
    check(&env, &cfg, &["--spacing", "0.4"]).ok();
    let seen = fake.seen();
    assert_eq!(seen.len(), 12);
    let mut order: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &seen {
        order
            .entry(r.model()[..2].to_string())
            .or_default()
            .push(r.model().to_string());
    }
    for (p, ms) in &order {
        let want: Vec<String> = models.iter().map(|m| format!("{p}-{m}")).collect();
        assert_eq!(ms, &want, "each provider's models in catalog order");
    }

    // Per-provider spacing from config, checked on the log's own `ts`
    // (second precision): p3's probes are ≥ 1.1 s apart, so their ts differ.
    let env2 = Env::new();
    let cfg2 = config(&env2, &tables);
    check(&env2, &cfg2, &["--provider", "p3"]).ok();
    let entries = log_entries(&env2.log());
    let ts: Vec<i64> = entries
        .iter()
        .map(|e| {
            chrono::DateTime::parse_from_rfc3339(e["ts"].as_str().unwrap())
                .unwrap()
                .timestamp()
        })
        .collect();
    assert_eq!(ts.len(), 4);
    for w in ts.windows(2) {
        assert!(w[1] - w[0] >= 1, "ts {ts:?}");
    }
    assert!(ts[3] - ts[0] >= 3, "ts {ts:?}");
}

#[test]
fn a_second_check_exits_3_and_the_log_stays_valid() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider(
            "f",
            "openai",
            &["ok", "ok:50", "wrong"],
            "spacing_secs = 0.5",
        )],
    );
    let a = env
        .command(&["--config", &cfg, "check"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let b = env
        .command(&["--config", &cfg, "check"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let a = a.wait_with_output().unwrap();
    let b = b.wait_with_output().unwrap();
    let mut codes = [a.status.code().unwrap(), b.status.code().unwrap()];
    codes.sort();
    assert_eq!(codes, [0, 3], "a: {:?} b: {:?}", a, b);
    let loser = if a.status.code() == Some(3) { &a } else { &b };
    let msg = String::from_utf8_lossy(&loser.stderr);
    assert!(
        msg.contains("another check is already running") && msg.contains("pid "),
        "{msg}"
    );
    assert_eq!(log_entries(&env.log()).len(), 3);
}

#[test]
fn a_killed_check_does_not_block_the_next_run() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("f", "openai", &["ok", "ok"], "spacing_secs = 30")],
    );
    let mut child = env.command(&["--config", &cfg, "check"]).spawn().unwrap();
    // Wait until it holds the lock and has probed the first model.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while fake.seen().is_empty() {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let cfg2 = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    check(&env, &cfg2, &[]).ok();
}

#[test]
fn sigkill_during_appends_never_loses_a_complete_entry() {
    use llmprobe::healthlog::scan::{End, scan_file};
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let models: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let models: Vec<&str> = models.iter().map(|s| s.as_str()).collect();
    let cfg = config(&env, &[fake.provider("f", "openai", &models, "")]);
    let read = |path: &std::path::Path| -> (Vec<String>, End) {
        let mut v = Vec::new();
        let end = scan_file(path, |_, b| {
            v.push(String::from_utf8(b.to_vec()).unwrap());
            Ok(())
        })
        .expect("log readable after a crash");
        (v, end)
    };
    let mut seen: Vec<String> = Vec::new();
    let mut torn = 0;
    let mut rng_state = 0x2545F4914F6CDD1Du64;
    for round in 0..12 {
        let mut child = env
            .command(&["--config", &cfg, "check"])
            .env("LLMPROBE_TEST_APPEND_DELAY_MS", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        std::thread::sleep(Duration::from_millis(150 + rng_state % 400));
        child.kill().unwrap();
        child.wait().unwrap();
        let (now, end) = read(&env.log());
        if end.is_torn() {
            torn += 1;
        }
        assert!(
            now.len() >= seen.len(),
            "round {round}: entries went from {} to {}",
            seen.len(),
            now.len()
        );
        assert_eq!(
            now[..seen.len()],
            seen[..],
            "round {round}: an entry changed"
        );
        seen = now;
    }
    assert!(
        torn > 0,
        "no kill landed in the middle of an append; the test proves nothing"
    );
    // The next full run repairs the tail and leaves a valid array.
    let out = check(&env, &cfg, &[]).ok();
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), seen.len() + 40, "{}", out.stderr);
    let texts: Vec<String> = entries[..seen.len()]
        .iter()
        .map(|v| v.to_string())
        .collect();
    let seen_norm: Vec<String> = seen
        .iter()
        .map(|s| serde_json::from_str::<Value>(s).unwrap().to_string())
        .collect();
    assert_eq!(texts, seen_norm);
}

#[test]
fn compat_log_accepts_appends_and_keeps_its_248_entries() {
    let env = Env::new();
    let original = std::fs::read(crate::support::compat_log()).unwrap();
    std::fs::create_dir_all(env.stats()).unwrap();
    std::fs::write(env.log(), &original).unwrap();
    let old: Vec<Value> = serde_json::from_slice(&original).unwrap();
    assert_eq!(old.len(), 248);
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok", "wrong"], "")]);
    check(&env, &cfg, &[]).ok();
    check(&env, &cfg, &[]).ok();
    let now = log_entries(&env.log());
    assert_eq!(now.len(), 252);
    assert_eq!(now[..248], old[..]);
    // Only the tail was touched: the old bytes up to the last entry are intact.
    let bytes = std::fs::read(env.log()).unwrap();
    let keep = original.iter().rposition(|&c| c == b'}').unwrap() + 1;
    assert_eq!(bytes[..keep], original[..keep]);
}

#[test]
fn bad_files_give_clear_errors_and_stay_untouched() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    std::fs::create_dir_all(env.stats()).unwrap();

    // A log that is not an array, and one damaged near its end.
    for bad in [
        "{\"oops\": true}\n",
        "[\n{\"ts\":\"2026-01-01T00:00:00Z\"}\n{\"ts\":\"x\"}\n]\n",
    ] {
        std::fs::write(env.log(), bad).unwrap();
        let out = check(&env, &cfg, &[]).code(4);
        assert!(
            out.stderr.contains("health_log.json") && out.stderr.contains("byte offset"),
            "{}",
            out.stderr
        );
        assert_eq!(std::fs::read_to_string(env.log()).unwrap(), bad);
        assert!(fake.seen().is_empty(), "probed despite a bad log");
    }
    std::fs::remove_file(env.log()).unwrap();

    let bad_state = "{\"f::ok\": {\"state\": \"paused\",";
    std::fs::write(env.state_file(), bad_state).unwrap();
    let out = check(&env, &cfg, &[]).code(4);
    assert!(out.stderr.contains("model_state.json"), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(env.state_file()).unwrap(),
        bad_state
    );
    assert!(!env.log().exists());
    std::fs::remove_file(env.state_file()).unwrap();

    let bad_cfg = env.write("bad.toml", "[defaults]\nspacing_secs = 1\ntimeout = 3\n");
    let out = env
        .run(&["--config", bad_cfg.to_str().unwrap(), "check"])
        .code(2);
    assert!(
        out.stderr.contains("bad.toml")
            && out.stderr.contains("timeout")
            && out.stderr.contains("line 3"),
        "{}",
        out.stderr
    );

    let bad_prompts = env.write(
        "prompts.toml",
        "[[template]]\nquestion = \"What is {a} + {b}?\"\n",
    );
    let out = env
        .run(&[
            "--config",
            &cfg,
            "--prompts",
            bad_prompts.to_str().unwrap(),
            "check",
        ])
        .code(2);
    assert!(out.stderr.contains("prompts.toml"), "{}", out.stderr);
    assert!(!env.log().exists());

    let out = env
        .run(&["--config", "/nonexistent/llmprobe.toml", "check"])
        .code(2);
    assert!(
        out.stderr.contains("/nonexistent/llmprobe.toml"),
        "{}",
        out.stderr
    );
    let out = check(&env, &cfg, &["--spacing", "-1"]).code(2);
    assert!(out.stderr.contains("--spacing"), "{}", out.stderr);
    let out = check(&env, &cfg, &["--provider", "nope"]).code(2);
    assert!(out.stderr.contains("nope"), "{}", out.stderr);
}

#[test]
fn a_canary_key_never_leaks() {
    const CANARY: &str = "sk-canary-7f3a9c2e4b1d8f6a0e5c";
    let mut env = Env::new();
    env.env("CANARY_KEY", CANARY);
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider(
                "oa",
                "openai",
                &["echo-key", "ok"],
                "api_key_env = \"CANARY_KEY\"",
            ),
            fake.provider(
                "an",
                "anthropic",
                &["echo-key"],
                "api_key_env = \"CANARY_KEY\"",
            ),
            fake.provider(
                "ge",
                "gemini",
                &["echo-key"],
                "api_key_env = \"CANARY_KEY\"",
            ),
        ],
    );
    let ping = crate::support::PingServer::start();
    let prom = env.path().join("llmprobe.prom");
    let runs = [
        check(&env, &cfg, &[]),
        check(&env, &cfg, &["--json"]),
        env.run(&["--config", &cfg, "check", "--list"]),
        env.run(&["--config", &cfg, "providers", "--json"]),
        // Every diagnostic there is, the monitor's pings and the metrics.
        check(
            &env,
            &cfg,
            &[
                "-vvv",
                "--ping-url",
                &ping.url,
                "--prom-file",
                prom.to_str().unwrap(),
            ],
        ),
    ];
    let pinged: String = ping
        .seen()
        .iter()
        .map(|p| format!("{} {}\n", p.path, p.body))
        .collect();
    assert!(pinged.contains("failed oa::echo-key: error"), "{pinged}");
    assert!(
        !pinged.contains(CANARY) && !pinged.contains("7f3a9c2e"),
        "{pinged}"
    );
    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(
        !metrics.contains(CANARY) && !metrics.contains("7f3a9c2e"),
        "{metrics}"
    );
    for r in &runs {
        assert!(
            !r.stdout.contains(CANARY) && !r.stderr.contains(CANARY),
            "leak:\n{}\n{}",
            r.stdout,
            r.stderr
        );
        assert!(!r.stdout.contains("7f3a9c2e4b1d8f6a0e5c"));
    }
    let log = std::fs::read_to_string(env.log()).unwrap();
    assert!(!log.contains(CANARY) && !log.contains("7f3a9c2e"), "{log}");
    let state = std::fs::read_to_string(env.state_file()).unwrap();
    assert!(!state.contains(CANARY), "{state}");
    // The key did reach the upstream, and the failure was recorded.
    assert!(fake.seen().iter().all(|r| r.auth));
    let entries = log_entries(&env.log());
    assert!(
        entries
            .iter()
            .filter(|e| e["model"] == "echo-key")
            .all(|e| e["failure_type"] == "error")
    );
}

#[test]
fn dry_run_and_filters() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider("a", "openai", &["ok", "wrong"], "spacing_secs = 90"),
            fake.provider("b", "openai", &["ok"], "api_key_env = \"UNSET_KEY_VAR\""),
        ],
    );
    let out = check(&env, &cfg, &["--dry-run"]).ok();
    assert!(out.stdout.contains("+90s"), "{}", out.stdout);
    assert!(
        out.stdout.contains("b: skipped: set UNSET_KEY_VAR"),
        "{}",
        out.stdout
    );
    assert!(!env.log().exists());
    assert!(fake.seen().is_empty());
    check(&env, &cfg, &["--model", "a::wrong", "--json"]).ok();
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["model"], "wrong");
    let out = check(&env, &cfg, &["--model", "a::ok", "--fail-on-down"]).code(0);
    assert!(out.stdout.contains("1/1 probes passed"));
    check(&env, &cfg, &["--model", "wrong", "--fail-on-down"]).code(1);
}

#[test]
fn every_failure_shape_is_classified_end_to_end() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let want = [
        ("ok", ""),
        ("think", ""),
        ("wrong", "wrong_answer"),
        ("truncated", "wrong_answer"),
        ("rate-limit", "rate_limit"),
        ("error-in-200", "rate_limit"),
        ("e500", "http_error"),
        ("overloaded", "http_error"),
        ("e503", "http_error"),
        ("html", "http_error"),
        ("unauthorized", "error"),
        ("forbidden", "error"),
        ("not-found", "error"),
        ("empty-choices", "error"),
        ("garbage", "error"),
        ("html200", "error"),
        ("huge", "error"),
        ("reset", "error"),
        ("slow:60000", "timeout"),
    ];
    let models: Vec<&str> = want.iter().map(|(m, _)| *m).collect();
    let closed = closed_port();
    let cfg = config(
        &env,
        &[
            fake.provider("oa", "openai", &models, "timeout_secs = 4"),
            fake.provider(
                "an",
                "anthropic",
                &["rate-limit", "overloaded", "empty-choices"],
                "",
            ),
            fake.provider("ge", "gemini", &["rate-limit", "unauthorized", "e503"], ""),
            crate::support::provider_toml("refused", "openai", &format!("{closed}/v1"), &["m"], ""),
            // TLS spoken to a plain-HTTP server.
            crate::support::provider_toml(
                "tls",
                "openai",
                &format!("{}/v1", fake.url.replace("http://", "https://")),
                &["m"],
                "",
            ),
        ],
    );
    check(&env, &cfg, &[]).ok();
    let entries = log_entries(&env.log());
    let got: BTreeMap<String, (String, Value, String)> = entries
        .iter()
        .map(|e| {
            (
                model_key(e),
                (
                    e["failure_type"].as_str().unwrap().to_string(),
                    e["status"].clone(),
                    e["error"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect();
    for (m, ft) in want {
        assert_eq!(
            got[&format!("oa::{m}")].0,
            ft,
            "oa::{m}: {:?}",
            got[&format!("oa::{m}")]
        );
    }
    assert_eq!(got["an::rate-limit"].0, "rate_limit");
    assert_eq!(got["an::overloaded"].1, 529);
    assert_eq!(got["an::empty-choices"].0, "error");
    assert_eq!(got["ge::rate-limit"].0, "rate_limit");
    assert_eq!(got["ge::unauthorized"].0, "error");
    assert_eq!(got["ge::unauthorized"].1, 400);
    assert_eq!(got["ge::e503"].0, "http_error");
    assert_eq!(got["refused::m"].0, "error");
    assert!(
        got["refused::m"].2.contains("connection refused"),
        "{:?}",
        got["refused::m"]
    );
    assert_eq!(got["tls::m"].0, "error");
    assert!(
        got["tls::m"].2.to_lowercase().contains("tls"),
        "{:?}",
        got["tls::m"]
    );
    // Errors are short and never raw HTML.
    for (k, (_, _, err)) in &got {
        assert!(err.chars().count() <= 200, "{k}: {err}");
        assert!(
            !err.contains("<html") && !err.contains("<body"),
            "{k}: {err}"
        );
    }
    assert_eq!(got["oa::html"].1, 502);
}

#[test]
fn state_changes_made_during_a_run_are_kept() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            // The last probe hangs until the fake is stopped, so the run is
            // certainly still going when the hand edit lands.
            fake.provider(
                "f",
                "openai",
                &["ok", "e500", "wrong", "slow"],
                "timeout_secs = 600",
            ),
            fake.provider("g", "openai", &["other"], ""),
        ],
    );
    let child = env
        .command(&["--config", &cfg, "check", "--provider", "f"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While the run writes its own state changes, a person disables another
    // model by hand; the run re-reads the file under the lock, so both land.
    let mut child = child;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fake.seen().len() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    env.run(&[
        "--config", &cfg, "state", "disable", "g::other", "--reason", "by hand",
    ])
    .ok();
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before the change; the test proves nothing"
    );
    // Stopping the fake breaks the hanging probe (a reset on loopback: a
    // temporary failure), and the run ends.
    drop(fake);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = states(&env);
    assert_eq!(s["g::other"]["state"], "disabled");
    assert_eq!(s["g::other"]["reason"], "by hand");
    assert_eq!(s["f::e500"]["state"], "paused");
    assert_eq!(s["f::wrong"]["consecutive_failures"], 1);
    assert_eq!(s["f::slow"]["reason"], "unreachable");
    assert_eq!(log_entries(&env.log()).len(), 4);
}

/// Remote providers without leaving the machine: every remote request goes
/// through a proxy on 127.0.0.1 (the client honours HTTP(S)_PROXY for every
/// non-loopback host), so a dead proxy is a machine that cannot reach
/// anything, and a proxy that is a fake provider is a remote that answers.
/// The `.example` names are never resolved.
fn remote(name: &str, scheme: &str, models: &[&str]) -> String {
    crate::support::provider_toml(
        name,
        "openai",
        &format!("{scheme}://{name}.example/v1"),
        models,
        "",
    )
}

/// The offline rule: no remote provider answered, so their results are
/// shown but not recorded; the loopback provider is judged on its own and
/// recorded; exit 6; the last line says so with counts.
#[test]
fn an_offline_run_records_only_loopback_results_and_says_so() {
    let mut env = Env::new();
    let fake = Fake::start(&env, &[]);
    crate::support::no_network(&mut env);
    let cfg = config(
        &env,
        &[
            // alpha's second probe would wait 90 s: the run stops instead.
            crate::support::provider_toml(
                "alpha",
                "openai",
                "https://alpha.example/v1",
                &["m1", "m2"],
                "spacing_secs = 90",
            ),
            remote("beta", "http", &["m1"]),
            // A local server is judged on its own: it answers, and is recorded.
            fake.provider("local", "openai", &["ok"], ""),
        ],
    );
    // The remote lists were read a minute ago: the run probes at once.
    let lists = || {
        crate::support::lists_read_now(
            &env,
            &[
                ("alpha", "https://alpha.example/v1", &["m1", "m2"]),
                ("beta", "http://beta.example/v1", &["m1"]),
            ],
        )
    };
    let line = "offline: 2 remote providers could not be reached (connection refused); \
                their 2 results were not recorded; 1 result from loopback providers was recorded; \
                1 planned probe not done";
    for run in 0..3 {
        lists();
        let r = check(&env, &cfg, &[]).code(6);
        assert_eq!(
            r.stderr.lines().last(),
            Some(line),
            "run {run}: {}",
            r.stderr
        );
        for row in [
            "| alpha    | m1    | not recorded (offline) | no response |",
            "| beta     | m1    | not recorded (offline) | no response |",
            "| local    | ok    | ok ",
        ] {
            assert!(r.stdout.contains(row), "run {run}: {row}\n{}", r.stdout);
        }
        assert!(r.stdout.contains("1/1 probes passed"), "{}", r.stdout);
    }
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 3, "only the local provider's probes");
    assert!(
        entries
            .iter()
            .all(|e| e["provider"] == "local" && e["ok"] == 1)
    );
    assert_eq!(states(&env), serde_json::json!({}), "no state changed");
    // --json says so too, and --fail-on-down does not hide it.
    lists();
    let r = check(&env, &cfg, &["--json", "--fail-on-down"]).code(6);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let off = &v["offline"];
    assert_eq!(
        (
            &off["providers"],
            &off["probes"],
            &off["recorded"],
            &off["not_done"]
        ),
        (&2.into(), &2.into(), &1.into(), &1.into()),
        "{off}"
    );
    // In the order they came.
    let mut held: Vec<String> = off["not_recorded"]
        .as_array()
        .unwrap()
        .iter()
        .map(model_key)
        .collect();
    held.sort();
    assert_eq!(held, ["alpha::m1", "beta::m1"]);
    assert_eq!(off["not_recorded"][0]["error"], "connection refused");
    assert_eq!(v["entries"].as_array().unwrap().len(), 1);
    // Without fresh lists, check reads them first: their failing to reach
    // the remote hosts is enough, and no remote probe is sent at all.
    std::fs::remove_file(env.stats().join("model_lists.json")).unwrap();
    let r = check(&env, &cfg, &[]).code(6);
    assert_eq!(
        r.stderr.lines().last(),
        Some(
            "offline: 2 remote providers could not be reached (connection refused); \
             no probe was sent to them; 1 result from loopback providers was recorded; \
             3 planned probes not done"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("not recorded"), "{}", r.stdout);
    assert_eq!(log_entries(&env.log()).len(), 5);
}

#[test]
fn one_unreachable_provider_among_answering_ones_is_recorded_and_only_paused() {
    let mut env = Env::new();
    let fake = Fake::start(&env, &[]);
    // http:// remotes reach the fake through the proxy; https:// ones hit a
    // dead proxy.
    env.env("HTTP_PROXY", &fake.url)
        .env("HTTPS_PROXY", &closed_port());
    let cfg = config(
        &env,
        &[
            remote("alpha", "http", &["ok", "wrong"]),
            remote("beta", "https", &["m"]),
        ],
    );
    for _ in 0..4 {
        check(&env, &cfg, &[]).ok();
    }
    let entries = log_entries(&env.log());
    // alpha::wrong is disabled after three runs and not probed in the fourth.
    assert_eq!(entries.len(), 11);
    let beta: Vec<&Value> = entries.iter().filter(|e| e["provider"] == "beta").collect();
    assert_eq!(beta.len(), 4);
    for e in &beta {
        // The log keeps the five classes; the cause is in `error`.
        assert_eq!(e["failure_type"], "error");
        assert_eq!(e["error"], "connection refused");
    }
    let s = states(&env);
    assert_eq!(s["beta::m"]["state"], "paused");
    assert_eq!(s["beta::m"]["reason"], "unreachable");
    assert_eq!(s["beta::m"]["consecutive_failures"], 0);
    // A wrong answer is still a hard failure: the model is disabled.
    assert_eq!(s["alpha::wrong"]["state"], "disabled");
    assert!(s.get("alpha::ok").is_none());
}

#[test]
fn a_stopped_local_server_is_paused_never_disabled() {
    let env = Env::new();
    let cfg = config(
        &env,
        &[crate::support::provider_toml(
            "ollama-ish",
            "openai",
            &format!("{}/v1", closed_port()),
            &["llama"],
            "",
        )],
    );
    for _ in 0..4 {
        check(&env, &cfg, &[]).ok();
    }
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 4, "a loopback refusal is data, not offline");
    let s = states(&env);
    assert_eq!(s["ollama-ish::llama"]["state"], "paused");
    assert_eq!(s["ollama-ish::llama"]["consecutive_failures"], 0);
}

#[test]
fn keyless_defaults_with_no_keys_and_no_network_record_nothing() {
    // The embedded catalog, an empty environment, and no network (a dead
    // proxy): three hourly runs later nothing is disabled and nothing was
    // logged as a failure.
    let mut env = Env::new();
    let dead = closed_port();
    env.env("HTTP_PROXY", &dead).env("HTTPS_PROXY", &dead);
    // Without a key nothing is probed: pollinations, which needs none, is
    // named beside the providers without a key, and sent nothing.
    let r = env.run(&["check", "--spacing", "0"]).code(2);
    assert!(r.stderr.contains("nothing to probe"), "{}", r.stderr);
    assert!(r.stderr.contains("pollinations"), "{}", r.stderr);
    let dry = env.run(&["check", "--dry-run"]).code(2);
    assert!(!dry.stdout.contains("| pollinations"), "{}", dry.stdout);
    // Turned on, it is probed, and a run without network records nothing.
    let cfg = env.write(
        "llmprobe.toml",
        "[[providers]]\nname = \"pollinations\"\nenabled = true\n",
    );
    env.env("LLMPROBE_CONFIG", cfg.to_str().unwrap());
    for _ in 0..3 {
        let r = env.run(&["check", "--spacing", "0"]).code(6);
        assert!(
            r.stderr
                .contains("offline: 1 remote provider could not be reached"),
            "{}",
            r.stderr
        );
    }
    assert!(!env.log().exists(), "nothing recorded");
    assert!(!env.state_file().exists(), "no state changed");
    // Local servers are off by default, and the listing says how to turn
    // them on.
    let list = env.run(&["check", "--list"]).ok();
    for (p, var) in [
        ("ollama", "OLLAMA_HOST"),
        ("llamacpp", "LLAMACPP_HOST"),
        ("vllm", "VLLM_HOST"),
    ] {
        let line = list
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {p} ")))
            .unwrap_or_else(|| panic!("{p} not listed:\n{}", list.stdout));
        assert!(
            line.contains(&format!(
                "off: a local server; set {var}, or enabled = true"
            )),
            "{line}"
        );
    }
    let dry = env.run(&["check", "--dry-run"]).ok();
    assert!(dry.stdout.contains("pollinations"), "{}", dry.stdout);
    assert!(!dry.stdout.contains("ollama"), "{}", dry.stdout);
}

#[test]
fn xai_is_keyed_like_the_others_and_logs_under_its_name() {
    let mut env = Env::new();
    let xai_line = |stdout: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with("| xai "))
            .unwrap_or_else(|| panic!("xai not listed:\n{stdout}"))
            .to_string()
    };
    let line = xai_line(&env.run(&["check", "--list"]).ok().stdout);
    assert!(line.contains("| openai "), "{line}");
    assert!(line.contains("XAI_API_KEY (unset)"), "{line}");
    assert!(line.contains("skipped: set XAI_API_KEY"), "{line}");

    // A user file moves only xai's base URL, to a fake on 127.0.0.1: the
    // dialect, key variable and models stay the embedded catalog's.
    let fake = Fake::start(&env, &[]);
    env.env("XAI_API_KEY", "xai-fake-test-key-0000");
    let cfg = env.write(
        "llmprobe.toml",
        format!(
            "[[providers]]\nname = \"xai\"\nbase_url = \"{}/v1\"\n",
            fake.url
        ),
    );
    let cfg = cfg.to_str().unwrap();
    let line = xai_line(&env.run(&["--config", cfg, "check", "--list"]).ok().stdout);
    assert!(line.contains("| ready "), "{line}");
    let catalog = llmprobe::catalog::Catalog::embedded();
    let mut models: Vec<&str> = catalog
        .provider("xai")
        .unwrap()
        .models
        .iter()
        .map(String::as_str)
        .collect();
    models.sort();
    check(&env, cfg, &["--provider", "xai", "--spacing", "0"]).ok();
    let mut seen: Vec<String> = fake.seen().iter().map(|s| s.model().to_string()).collect();
    seen.sort();
    assert_eq!(seen, models);
    assert!(fake.seen().iter().all(|s| s.auth), "the key was sent");
    let entries = log_entries(&env.log());
    let mut logged: Vec<&str> = entries
        .iter()
        .map(|e| {
            assert_eq!(e["provider"], "xai", "{e}");
            assert_eq!(e["ok"], 1, "{e}");
            e["model"].as_str().unwrap()
        })
        .collect();
    logged.sort();
    assert_eq!(logged, models);
}

#[test]
fn a_host_variable_turns_a_local_server_on() {
    let mut env = Env::new();
    let fake = Fake::start(&env, &[]);
    let hostport = fake.url.trim_start_matches("http://").to_string();
    env.env("OLLAMA_HOST", &hostport);
    env.run(&["check", "--provider", "ollama"]).ok();
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].model(), "llama3.2:3b");
    let entries = log_entries(&env.log());
    assert_eq!(entries[0]["provider"], "ollama");
    assert_eq!(entries[0]["ok"], 1);
    // enabled = false in a config wins over the variable.
    let cfg = env.write(
        "off.toml",
        "[[providers]]\nname = \"ollama\"\nenabled = false\n",
    );
    let r = env
        .run(&[
            "--config",
            cfg.to_str().unwrap(),
            "check",
            "--provider",
            "ollama",
        ])
        .code(2);
    assert!(
        r.stderr.contains("ollama: off (enabled = false in config)"),
        "{}",
        r.stderr
    );
}

#[test]
fn nothing_to_probe_is_an_error_that_says_what_to_do() {
    let env = Env::new();
    // Keys lost: every keyed provider skipped.
    let r = env.run(&["check", "--provider", "groq,openai"]).code(2);
    assert!(r.stderr.contains("nothing to probe"), "{}", r.stderr);
    assert!(
        r.stderr.contains("2 skipped for a missing key"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("groq: skipped: set GROQ_API_KEY"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("llmprobe check --list"), "{}", r.stderr);
    // Every selected model disabled.
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    env.run(&["--config", &cfg, "state", "disable", "f::ok"])
        .ok();
    let r = check(&env, &cfg, &[]).code(2);
    assert!(r.stderr.contains("1 model(s) disabled"), "{}", r.stderr);
    assert!(r.stderr.contains("llmprobe state enable"), "{}", r.stderr);
    assert!(fake.seen().is_empty());
}

#[test]
fn absurd_settings_are_usage_errors() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok", "ok"], "")]);
    for (args, needle) in [
        (
            vec!["--spacing", "1e19"],
            "--spacing 10000000000000000000 is out of range",
        ),
        (vec!["--spacing", "1e19", "--dry-run"], "--spacing"),
        (vec!["--spacing", "-1"], "--spacing -1 is out of range"),
        (vec!["--spacing", "NaN"], "--spacing NaN is out of range"),
        (vec!["--timeout", "0"], "--timeout 0 is out of range"),
        (vec!["--timeout", "1e9"], "--timeout"),
    ] {
        let r = check(&env, &cfg, &args).code(2);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
    }
    for (table, needle) in [
        ("[defaults]\nspacing_secs = 1e19\n", "defaults.spacing_secs"),
        ("[defaults]\ntimeout_secs = 0\n", "defaults.timeout_secs"),
        (
            "[defaults]\nmax_tokens = 0\n",
            "defaults.max_tokens 0 is out of range",
        ),
        ("[defaults]\nmax_tokens = 1000000\n", "defaults.max_tokens"),
        ("[defaults]\ndisable_after = 0\n", "defaults.disable_after"),
        (
            "[[providers]]\nname = \"groq\"\nspacing_secs = 1e19\n",
            "provider \"groq\": spacing_secs",
        ),
        (
            "[[providers]]\nname = \"groq\"\nmax_tokens = 0\n",
            "provider \"groq\": max_tokens",
        ),
    ] {
        let bad = env.write("bad.toml", table);
        let r = env
            .run(&["--config", bad.to_str().unwrap(), "check", "--dry-run"])
            .code(2);
        assert!(r.stderr.contains(needle), "{table}: {}", r.stderr);
        assert!(r.stderr.contains("bad.toml"), "{table}: {}", r.stderr);
    }
    assert!(fake.seen().is_empty(), "nothing was probed");
}

#[test]
fn exit_codes_match_their_meaning() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    // A stats "directory" that is a file cannot be created: a system error
    // (7), not "a data file is unreadable" (4).
    let blocker = env.write("blocker", "not a directory");
    let r = env
        .run(&[
            "--config",
            &cfg,
            "--stats-dir",
            &blocker.join("stats").display().to_string(),
            "check",
        ])
        .code(7);
    assert!(
        r.stderr.contains("cannot create stats directory"),
        "{}",
        r.stderr
    );
    // The first run says once that it created the stats directory.
    let r = check(&env, &cfg, &[]).ok();
    assert!(r.stderr.contains("created stats directory"), "{}", r.stderr);
    let r = check(&env, &cfg, &[]).ok();
    assert!(
        !r.stderr.contains("created stats directory"),
        "{}",
        r.stderr
    );
    // A log that cannot be parsed is a data error (4), left as it was.
    std::fs::write(env.log(), "{not an array").unwrap();
    check(&env, &cfg, &[]).code(4);
    assert_eq!(std::fs::read(env.log()).unwrap(), b"{not an array");
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_is_success_and_quiet() {
    let env = Env::new();
    std::fs::create_dir_all(env.stats()).unwrap();
    std::fs::copy(crate::support::compat_log(), env.log()).unwrap();
    for args in [
        &["rollup", "--window", "all", "--by", "model"][..],
        &["state"][..],
        &["check", "--list"][..],
        &["brief"][..],
    ] {
        // The reading end is closed before the process starts, so its first
        // write meets a broken pipe, every time.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = env
            .command(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn check_and_brief_name_one_place_in_a_damaged_log() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], "")]);
    std::fs::create_dir_all(env.stats()).unwrap();
    // Within brief's window, so that its backward read reaches it.
    let ts = crate::support::ago(3600);
    let good = format!(
        r#"{{"ts":"{ts}","provider":"f","model":"ok","ok":1,"latency_ms":5,"failure_type":""}}"#
    );
    let bad = good.replace(r#""provider":"f""#, r#""provider":XX"f""#);
    let log = format!("[\n{good},\n{good},\n{bad},\n{good}\n]\n");
    std::fs::write(env.log(), &log).unwrap();
    // The X is the error: its line and byte offset, whoever reads.
    let at = log.find("XX").unwrap();
    let want = format!("(line 4, byte offset {at}): invalid JSON in an entry");
    let out = check(&env, &cfg, &[]).code(4);
    assert!(out.stderr.contains(&want), "{want}\n{}", out.stderr);
    let out = env.run(&["--config", &cfg, "brief"]).code(4);
    assert!(out.stderr.contains(&want), "{want}\n{}", out.stderr);
    assert_eq!(std::fs::read_to_string(env.log()).unwrap(), log);
    assert!(fake.seen().is_empty(), "probed despite a bad log");
}

#[test]
fn the_result_column_says_how_far_a_hard_failure_moved_a_model_toward_disabled() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("f", "openai", &["unauthorized", "rate-limit"], "")],
    );
    let row = |out: &str, model: &str| {
        out.lines()
            .find(|l| l.contains(&format!(" {model} ")))
            .unwrap_or_else(|| panic!("no row for {model} in\n{out}"))
            .to_string()
    };
    let first = check(&env, &cfg, &[]).stdout;
    assert!(
        row(&first, "unauthorized").contains("error (401) hard 1/3"),
        "{first}"
    );
    // A rate limit pauses; it never counts toward disabled.
    let limited = row(&first, "rate-limit");
    assert!(
        limited.contains("rate_limit (429)") && !limited.contains("hard"),
        "{first}"
    );
    let second = check(&env, &cfg, &["--provider", "f"]).stdout;
    assert!(
        row(&second, "unauthorized").contains("hard 2/3"),
        "{second}"
    );
    let third = check(&env, &cfg, &["--provider", "f"]).stdout;
    let disabled = row(&third, "unauthorized");
    assert!(
        disabled.contains("hard 3/3") && disabled.contains("→ disabled"),
        "{third}"
    );
}

#[test]
fn providers_without_a_key_are_said_once_per_stats_directory() {
    let mut env = Env::new();
    let fake = Fake::start(&env, &[]);
    let keyed = |name: &str| {
        format!(
            "[[providers]]\nname = \"{name}\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"LLMPROBE_TEST_{}_KEY\"\nmodels = [\"m\"]\n",
            name.to_uppercase()
        )
    };
    let mut tables = vec![fake.provider("f", "openai", &["ok"], "")];
    tables.extend(["k1", "k2", "k3", "k4"].map(keyed));
    let cfg = config(&env, &tables);
    let said = "4 providers skipped for a missing key (k1, k2, k3, k4)";
    // The first run says it.
    let first = check(&env, &cfg, &[]).ok();
    assert!(first.stdout.contains(said), "{}", first.stdout);
    // The next, with the same set, does not; --list and --json still do.
    let second = check(&env, &cfg, &[]).ok();
    assert!(!second.stdout.contains("missing key"), "{}", second.stdout);
    let list = check(&env, &cfg, &["--list"]).ok();
    assert!(
        list.stdout.contains("skipped: set LLMPROBE_TEST_K1_KEY"),
        "{}",
        list.stdout
    );
    let json = check(&env, &cfg, &["--json"]).ok();
    assert!(
        json.stdout.contains("LLMPROBE_TEST_K1_KEY"),
        "{}",
        json.stdout
    );
    // A key set changes the set: said again, for the three left.
    env.env("LLMPROBE_TEST_K4_KEY", "k4-test-value");
    let third = check(&env, &cfg, &["--provider", "f,k1,k2,k3"]).ok();
    assert!(
        third
            .stdout
            .contains("k1: skipped: set LLMPROBE_TEST_K1_KEY"),
        "{}",
        third.stdout
    );
}

#[test]
fn a_keyless_remote_provider_is_probed_only_once_turned_on_or_keyed() {
    let mut env = Env::new();
    let fake = Fake::start(&env, &[]);
    // A remote provider that works without a key. Nothing is sent to it:
    // the rule shows in the listing, the plan and the state view.
    let remote = "[[providers]]\nname = \"freebie\"\ndialect = \"openai\"\nbase_url = \"https://free.example.invalid/v1\"\napi_key_env = \"LLMPROBE_TEST_FREEBIE_KEY\"\nkey_optional = true\nmodels = [\"m\"]\n".to_string();
    let cfg = config(
        &env,
        &[fake.provider("f", "openai", &["ok"], ""), remote.clone()],
    );
    let list = check(&env, &cfg, &["--list"]).ok();
    assert!(
        list.stdout
            .contains("off: works without a key; enabled = true in llmprobe.toml turns it on"),
        "{}",
        list.stdout
    );
    let dry = check(&env, &cfg, &["--dry-run"]).ok();
    assert!(!dry.stdout.contains("| freebie"), "{}", dry.stdout);
    let state = env.run(&["--config", &cfg, "state"]).ok();
    assert!(
        state.stdout.contains("off (needs no key"),
        "{}",
        state.stdout
    );
    // Its key, or enabled = true, turns it on.
    env.env("LLMPROBE_TEST_FREEBIE_KEY", "freebie-test-value");
    let dry = check(&env, &cfg, &["--dry-run"]).ok();
    assert!(dry.stdout.contains("freebie"), "{}", dry.stdout);
    env.env("LLMPROBE_TEST_FREEBIE_KEY", "");
    let on = remote.replace(
        "key_optional = true\n",
        "key_optional = true\nenabled = true\n",
    );
    let cfg = config(&env, &[fake.provider("f", "openai", &["ok"], ""), on]);
    let dry = check(&env, &cfg, &["--dry-run"]).ok();
    assert!(dry.stdout.contains("freebie"), "{}", dry.stdout);
}
