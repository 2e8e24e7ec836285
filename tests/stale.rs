//! Per-provider staleness (issue 19 §3), through the real binary: a cron
//! job that lost one key, while a keyless provider still answers, does not
//! look healthy. `check` says so in one line (and exits 1 with
//! `--fail-on-skipped`, which `--ping-url` reports as a failure),
//! `last_run.json` names the skip, and `brief` shows the provider stale with
//! the reason.

use serde_json::Value;

use crate::support::*;

/// The key variable of the keyed fake: set for the first run only.
const KEY: &str = "STALE_TEST_GROQ_KEY";
/// Four and a half hours: "4h" as brief words it, whatever the seconds
/// the test takes.
const OLD: i64 = 4 * 3600 + 1800;

/// The warning `check` prints once the keyed provider lost its key.
const LOST: &str = "warning: probed in the last 7 days, skipped now for a missing key: keyed (STALE_TEST_GROQ_KEY unset)";

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// Rewrite the health log with `provider`'s entries moved to `secs` ago,
/// one entry per line as llmprobe writes it, and `extra` entries added.
/// The history is rewritten, so `last_run.json`'s carried newest probes
/// (which would contradict it) are dropped: readers then read the log, as
/// they do in a stats directory from before that field.
fn age_entries(env: &Env, providers: &[&str], secs: i64, extra: &[Value]) {
    let mut entries = log_entries(&env.log());
    for e in &mut entries {
        if providers.contains(&e["provider"].as_str().unwrap()) {
            e["ts"] = Value::String(ago(secs));
        }
    }
    entries.extend(extra.iter().cloned());
    let lines: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
    env.write(
        "stats/health_log.json",
        format!("[\n{}\n]\n", lines.join(",\n")),
    );
    let last_run = env.stats().join("last_run.json");
    if let Ok(text) = std::fs::read_to_string(&last_run) {
        let mut v = json(&text);
        v.as_object_mut().unwrap().remove("newest");
        std::fs::write(&last_run, v.to_string()).unwrap();
    }
}

fn row<'a>(v: &'a Value, provider: &str) -> &'a Value {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == provider)
        .unwrap_or_else(|| panic!("no row for {provider}: {v}"))
}

fn line<'a>(out: &'a str, provider: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(&format!("| {provider} ")))
        .unwrap_or_else(|| panic!("no row for {provider}:\n{out}"))
}

#[test]
fn a_job_that_lost_a_key_is_stale_per_provider_while_a_keyless_one_answers() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider("keyed", "openai", &["m"], &format!("api_key_env = {KEY:?}")),
            // Pollinations' stand-in: no key, still answers.
            fake.provider("keyless", "openai", &["m"], ""),
            // Every model disabled: retired, never stale.
            fake.provider("alldisabled", "openai", &["m"], ""),
            // Turned off: retired, never stale.
            fake.provider("retired", "openai", &["m"], "enabled = false"),
            // Its key was never set: skipped, never probed, never stale.
            fake.provider(
                "never",
                "openai",
                &["m"],
                "api_key_env = \"STALE_TEST_NEVER_KEY\"",
            ),
        ],
    );

    // With the key: everything probed, nothing stale, brief is quiet.
    let out = env
        .command(&["--config", &cfg, "check"])
        .env(KEY, "sk-test-not-a-real-key")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning:"),
        "{out:?}"
    );
    let quiet = env
        .run(&["--config", &cfg, "brief", "--quiet-if-healthy"])
        .ok();
    assert_eq!(quiet.stdout, "", "nothing to say while all is fresh");

    // Four and a half hours later the key is gone; alldisabled was retired
    // meanwhile, and retired was probed once before it was turned off.
    let retired_probe = serde_json::json!({
        "ts": ago(OLD), "provider": "retired", "model": "m", "ok": 1,
        "latency_ms": 5, "failure_type": ""
    });
    age_entries(&env, &["keyed", "alldisabled"], OLD, &[retired_probe]);
    env.run(&["--config", &cfg, "state", "disable", "alldisabled::m"])
        .ok();

    // check: exit 0 (the keyless provider answered), and one line that
    // names the key variable, never its value.
    let r = check(&env, &cfg, &[]).ok();
    assert!(r.stdout.contains("1/1 probes passed"), "{}", r.stdout);
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings, [LOST], "stderr:\n{}", r.stderr);
    assert!(!r.stderr.contains("STALE_TEST_NEVER_KEY"), "{}", r.stderr);

    // last_run.json names both skips and why; a key value never.
    let last_run = std::fs::read_to_string(env.stats().join("last_run.json")).unwrap();
    assert!(!last_run.contains("sk-test"), "{last_run}");
    let skipped = &json(&last_run)["skipped"];
    assert_eq!(
        *skipped,
        serde_json::json!([
            {"provider": "keyed", "reason": "skipped: set STALE_TEST_GROQ_KEY", "unset": ["STALE_TEST_GROQ_KEY"]},
            {"provider": "never", "reason": "skipped: set STALE_TEST_NEVER_KEY", "unset": ["STALE_TEST_NEVER_KEY"]}
        ]),
        "{last_run}"
    );

    // --fail-on-skipped: exit 1, which --ping-url reports as a failure.
    let ping = PingServer::start();
    let r = check(&env, &cfg, &["--fail-on-skipped", "--ping-url", &ping.url]).code(1);
    assert_eq!(
        r.stderr
            .lines()
            .filter(|l| l.contains("warning"))
            .collect::<Vec<_>>(),
        [LOST]
    );
    assert_eq!(ping.calls(), ["GET /start", "POST /fail"]);
    let body = &ping.seen()[1].body;
    assert!(body.starts_with("llmprobe check: exit 1"), "{body}");
    assert!(body.contains(LOST), "{body}");
    assert_eq!(
        json(&std::fs::read_to_string(env.stats().join("last_run.json")).unwrap())["exit_code"],
        1
    );

    // brief: keyed is stale in its row, with the reason; the keyless one is
    // OK; the retired ones and the never-probed one are not stale.
    let b = env.run(&["--config", &cfg, "brief"]).ok().stdout;
    assert!(
        !b.contains("!!! STALE: NO PROBE"),
        "the record as a whole is fresh:\n{b}"
    );
    assert!(line(&b, "keyed").contains("[STALE]"), "{b}");
    assert!(line(&b, "keyless").contains("[ OK ]"), "{b}");
    assert!(!line(&b, "alldisabled").contains("[STALE]"), "{b}");
    assert!(!line(&b, "retired").contains("[STALE]"), "{b}");
    assert!(
        b.contains(
            "WARNING: keyed is stale: no probe for 4h (more than 2 × 1h); skipped: STALE_TEST_GROQ_KEY unset in the last run\n"
        ),
        "{b}"
    );
    assert_eq!(b.matches("WARNING").count(), 1, "{b}");

    // --quiet-if-healthy speaks.
    let quiet = env
        .run(&["--config", &cfg, "brief", "--quiet-if-healthy"])
        .ok();
    assert!(
        quiet.stdout.contains("WARNING: keyed is stale"),
        "{}",
        quiet.stdout
    );

    // --json: not healthy, though the record as a whole is fresh.
    let v = json(&env.run(&["--config", &cfg, "brief", "--json"]).ok().stdout);
    assert_eq!(v["healthy"], false, "{v}");
    assert_eq!(v["stale"], false, "{v}");
    assert_eq!(row(&v, "keyed")["stale"], true);
    assert_eq!(
        row(&v, "keyed")["stale_reason"],
        "skipped: STALE_TEST_GROQ_KEY unset in the last run"
    );
    assert_eq!(row(&v, "keyed")["icon"], "[STALE]");
    assert_eq!(row(&v, "keyed")["status"], "ok", "the figures' grade stays");
    for p in ["keyless", "alldisabled", "retired"] {
        assert_eq!(row(&v, p)["stale"], false, "{p}: {v}");
    }
    let stale: Vec<&str> = v["stale_providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["provider"].as_str().unwrap())
        .collect();
    assert_eq!(stale, ["keyed"], "{v}");
    // A warning like the schedule's, for whoever reads `warnings`.
    assert_eq!(v["warnings"][0]["kind"], "provider_stale", "{v}");
    assert!(
        v["warnings"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("keyed is stale: no probe for 4h"),
        "{v}"
    );

    // A last_run.json from before the field existed still reads: keyed is
    // still stale, without a reason.
    env.write(
        "stats/last_run.json",
        format!(
            r#"{{"version": 1, "started_at": "{}", "finished_at": "{}", "exit_code": 0, "offline": false, "probes": 1, "ok": 1}}"#,
            ago(60),
            ago(30)
        ),
    );
    let v = json(&env.run(&["--config", &cfg, "brief", "--json"]).ok().stdout);
    assert_eq!(v["healthy"], false, "{v}");
    assert_eq!(row(&v, "keyed")["stale"], true);
    assert_eq!(row(&v, "keyed")["stale_reason"], Value::Null);

    // The key is back: fresh again, and brief is quiet.
    let out = env
        .command(&["--config", &cfg, "check"])
        .env(KEY, "sk-test-not-a-real-key")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning:"),
        "{out:?}"
    );
    let quiet = env
        .run(&["--config", &cfg, "brief", "--quiet-if-healthy"])
        .ok();
    assert_eq!(quiet.stdout, "", "fresh again");
}

/// A provider probed this week but not in the window has no row: it is
/// still stale, in a line of its own and in `stale_providers`.
#[test]
fn a_provider_probed_this_week_but_not_in_the_window_is_stale_without_a_row() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider("keyed", "openai", &["m"], &format!("api_key_env = {KEY:?}")),
            fake.provider("keyless", "openai", &["m"], ""),
        ],
    );
    check(&env, &cfg, &[]).ok();
    let three_days = serde_json::json!({
        "ts": ago(3 * 86_400 + 3600), "provider": "keyed", "model": "m", "ok": 1,
        "latency_ms": 5, "failure_type": ""
    });
    age_entries(&env, &[], 0, &[three_days]);
    let b = env.run(&["--config", &cfg, "brief"]).ok().stdout;
    assert!(!b.contains("| keyed "), "no row outside the window:\n{b}");
    assert!(
        b.contains("WARNING: keyed is stale: no probe for 3d (more than 2 × 1h); skipped: STALE_TEST_GROQ_KEY unset in the last run\n"),
        "{b}"
    );
    let v = json(&env.run(&["--config", &cfg, "brief", "--json"]).ok().stdout);
    assert_eq!(v["healthy"], false);
    assert_eq!(v["stale_providers"][0]["provider"], "keyed");
    // Eight days: no longer a provider the user probes.
    let entries: Vec<Value> = log_entries(&env.log())
        .into_iter()
        .filter(|e| e["provider"] != "keyed")
        .collect();
    let eight_days = serde_json::json!({
        "ts": ago(8 * 86_400), "provider": "keyed", "model": "m", "ok": 1,
        "latency_ms": 5, "failure_type": ""
    });
    let lines: Vec<String> = std::iter::once(eight_days)
        .chain(entries)
        .map(|e| e.to_string())
        .collect();
    env.write(
        "stats/health_log.json",
        format!("[\n{}\n]\n", lines.join(",\n")),
    );
    let quiet = env
        .run(&["--config", &cfg, "brief", "--quiet-if-healthy"])
        .ok();
    assert_eq!(quiet.stdout, "", "a week-old provider is quiet");
    // And check no longer warns about it.
    let r = check(&env, &cfg, &["--fail-on-skipped"]).ok();
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);

    // Three hours on, nothing probed: the whole record is stale, which the
    // banner says once; the rows and stale_providers still say which.
    advance(&env, 3 * 3600);
    let b = env.run(&["--config", &cfg, "brief"]).ok().stdout;
    assert!(b.contains("!!! STALE: NO PROBE IN THE LAST 2 HOURS"), "{b}");
    assert!(!b.contains("WARNING: keyless is stale"), "{b}");
    assert!(line(&b, "keyless").contains("[STALE]"), "{b}");
    let v = json(&env.run(&["--config", &cfg, "brief", "--json"]).ok().stdout);
    assert_eq!(v["stale"], true);
    assert_eq!(v["stale_providers"][0]["provider"], "keyless", "{v}");
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["kind"] != "provider_stale"),
        "{v}"
    );
}

/// In steady state nothing reads a week of the log: each run carries every
/// provider's newest probe forward in `last_run.json`. A key lost between
/// two runs four and a half hours apart (by the test clock) is found from
/// that record alone: the log's old entries are not read back.
#[test]
fn the_last_run_carries_each_providers_newest_probe_forward() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider("keyed", "openai", &["m"], &format!("api_key_env = {KEY:?}")),
            fake.provider("keyless", "openai", &["m"], ""),
        ],
    );
    let out = env
        .command(&["--config", &cfg, "check"])
        .env(KEY, "sk-test-not-a-real-key")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let first = json(&std::fs::read_to_string(env.stats().join("last_run.json")).unwrap());
    let keyed_at = first["newest"]["keyed"].as_str().unwrap().to_string();
    assert!(first["newest"]["keyless"].is_string(), "{first}");

    advance(&env, OLD as u64);
    let r = check(&env, &cfg, &[]).ok();
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings, [LOST], "stderr:\n{}", r.stderr);
    let second = json(&std::fs::read_to_string(env.stats().join("last_run.json")).unwrap());
    assert_eq!(
        second["newest"]["keyed"],
        keyed_at.as_str(),
        "carried: {second}"
    );

    // Hide the keyed provider's entries from the log: brief still finds
    // its newest probe in last_run.json, and calls it stale.
    let entries: Vec<String> = log_entries(&env.log())
        .into_iter()
        .filter(|e| e["provider"] != "keyed")
        .map(|e| e.to_string())
        .collect();
    env.write(
        "stats/health_log.json",
        format!("[\n{}\n]\n", entries.join(",\n")),
    );
    let v = json(&env.run(&["--config", &cfg, "brief", "--json"]).ok().stdout);
    assert_eq!(v["healthy"], false, "{v}");
    // (Probes are stamped by the real clock, so keyless, probed a second
    // ago, looks 4 h old to the advanced test clock too.)
    let keyed = v["stale_providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "keyed")
        .unwrap_or_else(|| panic!("keyed is not stale: {v}"));
    assert_eq!(keyed["newest_probe"], keyed_at.as_str(), "{v}");
    assert_eq!(
        keyed["reason"],
        "skipped: STALE_TEST_GROQ_KEY unset in the last run"
    );

    // Older than a week: dropped from the record, and never stale.
    advance(&env, 8 * 86_400);
    check(&env, &cfg, &[]).ok();
    let third = json(&std::fs::read_to_string(env.stats().join("last_run.json")).unwrap());
    assert!(third["newest"].get("keyed").is_none(), "{third}");
}
