//! Streamed probes end to end (issue 35, part 1): real binary, fake
//! providers on 127.0.0.1, real files. The time to the first token in the
//! health log, a stalled or unfinished stream as a timeout, a provider
//! that refuses streams asked again whole (and counted), and the speed
//! probe's figures in the capability log and the verdicts file.

use serde_json::Value;

use crate::support::{Env, Fake, check, config, log_entries, model_key};

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_basic_probe_records_its_first_token_in_every_dialect() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider("o", "openai", &["ok"], ""),
            fake.provider("a", "anthropic", &["ok"], ""),
            fake.provider("g", "gemini", &["ok"], ""),
        ],
    );
    check(&env, &cfg, &[]).ok();
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 3, "{entries:#?}");
    for e in &entries {
        assert_eq!(e["ok"], 1, "{e}");
        let ttft = e["ttft_ms"].as_u64().unwrap_or_else(|| panic!("{e}"));
        assert!(
            ttft >= 1 && ttft <= e["latency_ms"].as_u64().unwrap(),
            "{e}"
        );
        // The rate is the speed probe's alone.
        assert!(e.get("tokens_per_s").is_none(), "{e}");
    }
    // Every probe went streamed.
    for s in fake.seen() {
        let body = s.body.clone().unwrap_or_default();
        let streamed = body["stream"] == true || s.path.contains(":streamGenerateContent");
        assert!(streamed, "{s:?}");
    }
}

#[test]
fn a_stalled_or_unfinished_stream_is_a_timeout_naming_its_bytes() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            // Stalls forever: only the stall limit ends it.
            fake.provider(
                "o",
                "openai",
                &["stream-stall", "no-done"],
                "stall_secs = 0.3",
            ),
            fake.provider("a", "anthropic", &["no-done-hang"], "stall_secs = 0.3"),
        ],
    );
    check(&env, &cfg, &[]).ok();
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 3, "{entries:#?}");
    for e in &entries {
        assert_eq!(e["failure_type"], "timeout", "{e}");
        let error = e["error"].as_str().unwrap();
        let n: u64 = error
            .strip_prefix("stalled after ")
            .and_then(|r| r.strip_suffix(" bytes"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{e}"));
        assert!(n > 0, "{e}");
        assert!(
            e.get("ttft_ms").is_none(),
            "a failure has no first token: {e}"
        );
    }
    // A timeout is temporary: paused, never disabled.
    let state = read(&env.state_file());
    assert_eq!(state["o::stream-stall"]["state"], "paused", "{state}");
}

/// Every day count of requests in the probe ledger.
fn day_requests(v: &Value, out: &mut Vec<u64>) {
    match v {
        Value::Object(m) => {
            if m.contains_key("resets_at")
                && let Some(n) = m.get("requests").and_then(Value::as_u64)
            {
                out.push(n);
            }
            m.values().for_each(|x| day_requests(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| day_requests(x, out)),
        _ => {}
    }
}

#[test]
fn a_provider_that_refuses_streams_is_probed_whole_and_both_requests_count() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("r", "openai", &["no-stream"], "limits = { rpd = 1000 }")],
    );
    check(&env, &cfg, &[]).ok();
    let entries = log_entries(&env.log());
    assert_eq!(entries.len(), 1, "{entries:#?}");
    assert_eq!(entries[0]["ok"], 1, "{}", entries[0]);
    assert!(entries[0].get("ttft_ms").is_none(), "{}", entries[0]);
    let seen: Vec<Value> = fake
        .seen()
        .iter()
        .map(|s| s.body.clone().unwrap_or_default()["stream"].clone())
        .collect();
    assert_eq!(
        seen,
        [Value::Bool(true), Value::Null],
        "streamed, then whole"
    );
    let usage = read(&env.stats().join("probe_usage.json"));
    let mut counts = Vec::new();
    day_requests(&usage, &mut counts);
    assert!(!counts.is_empty(), "{usage:#}");
    assert!(counts.iter().all(|n| *n == 2), "{counts:?} {usage:#}");
}

/// A provider of `models`, each listing `caps`.
fn listing(fake: &Fake, name: &str, dialect: &str, models: &[&str], caps: &str) -> String {
    let info: Vec<String> = models
        .iter()
        .map(|m| format!("{m:?} = {{ capabilities = {caps} }}"))
        .collect();
    fake.provider(
        name,
        dialect,
        models,
        &format!("model_info = {{ {} }}", info.join(", ")),
    )
}

#[test]
fn the_speed_probe_records_its_figures_and_fails_a_wrong_count() {
    let env = Env::new();
    // `countwrong` answers its basic probe, then miscounts.
    let fake = Fake::start(&env, &["countwrong=ok,wrong"]);
    let cfg = config(
        &env,
        &[
            listing(&fake, "o", "openai", &["ok"], r#"["speed"]"#),
            listing(&fake, "a", "anthropic", &["ok"], r#"["speed"]"#),
            listing(&fake, "g", "gemini", &["ok"], r#"["speed"]"#),
            listing(&fake, "w", "openai", &["countwrong"], r#"["speed"]"#),
        ],
    );
    check(&env, &cfg, &[]).ok();
    let log = log_entries(&env.stats().join("capability_log.json"));
    assert_eq!(log.len(), 4, "{log:#?}");
    let verdicts = read(&env.stats().join("capabilities.json"));
    for e in &log {
        let key = model_key(e);
        assert_eq!(e["probe"], "speed", "{e}");
        let speed = &verdicts[&key]["speed"];
        if key == "w::countwrong" {
            assert_eq!(e["failure_type"], "wrong_answer", "{e}");
            assert_eq!(speed["verdict"], "no", "{verdicts:#}");
            assert!(speed.get("tokens_per_s").is_none(), "{verdicts:#}");
            continue;
        }
        assert_eq!(e["ok"], 1, "{e}");
        for field in ["ttft_ms", "output_tokens", "tokens_per_s"] {
            assert!(
                e[field].as_f64().is_some_and(|x| x > 0.0),
                "{key} {field}: {e}"
            );
            assert_eq!(speed[field], e[field], "{key} {field}: {verdicts:#}");
        }
        assert_eq!(speed["verdict"], "yes", "{verdicts:#}");
        assert_eq!(speed["seen"], e["ts"], "{verdicts:#}");
    }
    // The health log keeps the basic probes only.
    assert!(
        log_entries(&env.log())
            .iter()
            .all(|e| e.get("probe").is_none())
    );
}

#[test]
fn a_capability_the_catalog_lists_is_probed_before_one_it_does_not() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[listing(&fake, "f", "openai", &["ok"], r#"["speed"]"#)],
    );
    // All four are never decided: speed, listed, goes before tools.
    let dry = check(&env, &cfg, &["--dry-run", "--capabilities", "all"]).ok();
    assert!(
        dry.stdout.contains("capability probe: f::ok speed at "),
        "{}",
        dry.stdout
    );
    check(&env, &cfg, &["--capabilities", "all"]).ok();
    let log = log_entries(&env.stats().join("capability_log.json"));
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0]["probe"], "speed", "{}", log[0]);
    // Once speed is decided, the rest follow in their order.
    check(&env, &cfg, &["--capabilities", "all"]).ok();
    let log = log_entries(&env.stats().join("capability_log.json"));
    assert_eq!(log[1]["probe"], "tools", "{log:#?}");
}
