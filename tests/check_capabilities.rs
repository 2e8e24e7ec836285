//! Capability probes in `llmprobe check`, end to end: real binary, fake
//! providers on 127.0.0.1, real files. Which probes run (`--capabilities`,
//! `capabilities = false`, a model that just failed), where their results
//! go (`capability_log.json`, `capabilities.json`, never the health log or
//! the state file), and what a bad verdicts file does.

use serde_json::Value;

use crate::support::{Env, Fake, advance, check, clock_env, config, log_entries};

fn cap_log(env: &Env) -> std::path::PathBuf {
    env.stats().join("capability_log.json")
}

fn verdicts(env: &Env) -> std::path::PathBuf {
    env.stats().join("capabilities.json")
}

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A provider table for the fake with `model_info` listing `caps` for
/// each of `models`, and `extra` lines.
fn listing(fake: &Fake, name: &str, models: &[&str], caps: &str, extra: &str) -> String {
    let info: Vec<String> = models
        .iter()
        .map(|m| format!("{m:?} = {{ capabilities = {caps} }}"))
        .collect();
    fake.provider(
        name,
        "openai",
        models,
        &format!("model_info = {{ {} }}\n{extra}", info.join(", ")),
    )
}

#[test]
fn no_capability_probe_when_turned_off_or_after_a_failed_basic_probe() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            listing(&fake, "f", &["ok"], r#"["tools", "json"]"#, ""),
            listing(
                &fake,
                "optout",
                &["ok"],
                r#"["tools"]"#,
                "capabilities = false",
            ),
            // Not worth the tokens: its plain probe fails in this run.
            listing(&fake, "w", &["wrong"], r#"["tools"]"#, ""),
        ],
    );
    // The dry run says what the default would probe: f's first listed
    // capability, never the opted-out provider's.
    let dry = check(&env, &cfg, &["--dry-run"]).ok();
    assert!(
        dry.stdout
            .contains("capability probe: f::ok tools at +0s, if ok passes (never decided)"),
        "{}",
        dry.stdout
    );
    assert!(!dry.stdout.contains("optout::ok tools"), "{}", dry.stdout);
    let dry = check(
        &env,
        &cfg,
        &["--dry-run", "--json", "--capabilities", "all"],
    )
    .ok();
    let v: Value = serde_json::from_str(&dry.stdout).unwrap();
    let planned: Vec<(&str, &str)> = v["capability_probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["provider"].as_str().unwrap(),
                c["capability"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(planned, [("f", "tools"), ("w", "tools")]);
    assert!(fake.seen().is_empty(), "a dry run sends nothing");

    // --capabilities none: the basic probes only, and no capability file.
    let out = check(
        &env,
        &cfg,
        &["--capabilities", "none", "--provider", "f,optout"],
    )
    .ok();
    assert!(out.stdout.contains("2/2 probes passed"), "{}", out.stdout);
    assert!(!out.stdout.contains("capability"), "{}", out.stdout);
    assert_eq!(fake.seen().len(), 2, "one request per model");
    // capabilities = false, even under --capabilities all; and a model
    // whose basic probe failed is not probed for capabilities.
    check(
        &env,
        &cfg,
        &["--capabilities", "all", "--provider", "optout,w"],
    )
    .ok();
    assert_eq!(fake.seen().len(), 4, "one request per model");
    assert!(!cap_log(&env).exists());
    assert!(!verdicts(&env).exists());
    assert_eq!(log_entries(&env.log()).len(), 4);
}

/// Like a bad model_state.json: the run stops before the first probe with
/// exit 4 naming the file, which is left byte for byte; `--capabilities
/// none` runs without reading it.
#[test]
fn an_unparseable_verdicts_file_stops_the_run_and_is_left_alone() {
    let env = Env::new();
    let fake = Fake::start(&env, &[]);
    let cfg = config(&env, &[listing(&fake, "f", &["ok"], r#"["tools"]"#, "")]);
    std::fs::create_dir_all(env.stats()).unwrap();
    let bad = "{\"f::ok\": {\"tools\": {\"verdict\": \"maybe\"}}}";
    std::fs::write(verdicts(&env), bad).unwrap();
    let out = check(&env, &cfg, &[]).code(4);
    assert!(
        out.stderr.contains("capabilities.json") && out.stderr.contains("--capabilities none"),
        "{}",
        out.stderr
    );
    assert!(fake.seen().is_empty(), "probed despite a bad verdicts file");
    assert!(!env.log().exists());
    let out = check(&env, &cfg, &["--capabilities", "none"]).ok();
    assert!(out.stdout.contains("1/1 probes passed"), "{}", out.stdout);
    assert_eq!(std::fs::read(verdicts(&env)).unwrap(), bad.as_bytes());
    assert!(!cap_log(&env).exists());

    // A damaged capability log is refused the same way, before any probe.
    std::fs::remove_file(verdicts(&env)).unwrap();
    let damaged = "{\"not\": \"a log\"}\n";
    std::fs::write(cap_log(&env), damaged).unwrap();
    let out = check(&env, &cfg, &[]).code(4);
    assert!(out.stderr.contains("capability_log.json"), "{}", out.stderr);
    assert_eq!(fake.seen().len(), 1, "only the --capabilities none run");
    assert_eq!(std::fs::read_to_string(cap_log(&env)).unwrap(), damaged);
}

#[test]
fn a_passing_model_gets_one_capability_probe_a_run_into_its_own_files() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[listing(&fake, "f", &["ok"], r#"["tools", "json"]"#, "")],
    );
    // Run 1: the basic probe, then tools (never decided, first listed).
    let out = check(&env, &cfg, &[]).ok();
    assert!(out.stdout.contains("1/1 probes passed"), "{}", out.stdout);
    assert!(out.stdout.contains("f::ok tools ✔ ("), "{}", out.stdout);
    assert!(
        out.stdout.contains("1/1 capability probe passed"),
        "{}",
        out.stdout
    );
    let log = log_entries(&cap_log(&env));
    assert_eq!(log.len(), 1);
    let e = &log[0];
    assert_eq!(
        (&e["provider"], &e["model"], &e["ok"], &e["probe"]),
        (&"f".into(), &"ok".into(), &1.into(), &"tools".into())
    );
    for f in ["ts", "latency_ms", "failure_type"] {
        assert!(e.get(f).is_some(), "missing {f} in {e}");
    }
    let v = read(&verdicts(&env));
    assert_eq!(v["f::ok"]["tools"]["verdict"], "yes");
    assert_eq!(v["f::ok"]["tools"]["seen"], e["ts"]);
    assert!(v["f::ok"].get("json").is_none(), "one probe a run");
    // The tools request offered a function and had room for a call.
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let body = seen[1].body.as_ref().unwrap();
    assert!(body["tools"].is_array(), "{body}");
    assert_eq!(body["max_tokens"], 256, "[defaults] capability_max_tokens");

    // Run 2: json, the one left undecided; --json shows it apart.
    let out = check(&env, &cfg, &["--json"]).ok();
    let run: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(run["entries"].as_array().unwrap().len(), 1);
    assert_eq!(run["capabilities"][0]["probe"], "json");
    assert_eq!(run["capabilities"][0]["verdict"], "yes");
    assert_eq!(read(&verdicts(&env))["f::ok"]["json"]["verdict"], "yes");

    // Run 3: nothing is due; run 4, a day later: tools again.
    check(&env, &cfg, &[]).ok();
    assert_eq!(fake.seen().len(), 5, "runs 3 sent only the basic probe");
    advance(&env, 25 * 3600);
    check(&env, &cfg, &[]).ok();
    let log = log_entries(&cap_log(&env));
    let probes: Vec<&str> = log.iter().map(|e| e["probe"].as_str().unwrap()).collect();
    assert_eq!(probes, ["tools", "json", "tools"]);
    // The health log has the four basic probes, none with `probe`; no
    // state changed.
    let health = log_entries(&env.log());
    assert_eq!(health.len(), 4);
    assert!(health.iter().all(|e| e.get("probe").is_none()));
    assert!(!env.state_file().exists());
}

#[test]
fn a_rate_limited_capability_probe_leaves_the_verdict() {
    let env = Env::new();
    // The basic probe passes; the capability probe gets a 429.
    let fake = Fake::start(&env, &["rl=ok,rate-limit"]);
    let cfg = config(&env, &[listing(&fake, "f", &["rl"], r#"["tools"]"#, "")]);
    std::fs::create_dir_all(env.stats()).unwrap();
    let before = "{\n  \"f::rl\": {\n    \"tools\": {\n      \"verdict\": \"no\",\n      \"seen\": \"2026-01-01T00:00:00Z\",\n      \"reason\": \"wrong_answer: answered in text, no call of add\"\n    }\n  }\n}\n";
    std::fs::write(verdicts(&env), before).unwrap();
    let out = check(&env, &cfg, &["--fail-on-down"]).code(0);
    assert!(
        out.stdout
            .contains("f::rl tools ? rate_limit (429), verdict unchanged"),
        "{}",
        out.stdout
    );
    let log = log_entries(&cap_log(&env));
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["failure_type"], "rate_limit");
    assert_eq!(log[0]["status"], 429);
    // The verdict, its date and its reason stand; the try is noted (the
    // capability then waits behind those never tried).
    let after: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(verdicts(&env)).unwrap()).unwrap();
    let mut tools = after["f::rl"]["tools"].clone();
    assert_eq!(tools["tried"], log[0]["ts"], "{after}");
    tools.as_object_mut().unwrap().remove("tried");
    let was: serde_json::Value = serde_json::from_str(before).unwrap();
    assert_eq!(tools, was["f::rl"]["tools"]);
    assert!(
        !env.state_file().exists(),
        "a 429 to a capability probe pauses nothing"
    );
}

#[test]
fn a_model_that_cannot_call_tools_stays_active() {
    let env = clock_env();
    // Answers plain questions; refuses a request that offers tools.
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[listing(&fake, "f", &["no-tools"], r#"["tools"]"#, "")],
    );
    // Three runs a day apart: three "no"s, which as basic failures would
    // disable the model.
    for day in 0..3u64 {
        advance(&env, day * 25 * 3600);
        let out = check(&env, &cfg, &["--fail-on-down"]).code(0);
        assert!(
            out.stdout.contains("f::no-tools tools ✗ "),
            "{}",
            out.stdout
        );
        assert!(out.stdout.contains("1/1 probes passed"), "{}", out.stdout);
    }
    let v = read(&verdicts(&env));
    assert_eq!(v["f::no-tools"]["tools"]["verdict"], "no");
    let reason = v["f::no-tools"]["tools"]["reason"].as_str().unwrap();
    assert!(reason.contains("tool"), "{reason}");
    let log = log_entries(&cap_log(&env));
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|e| e["ok"] == 0 && e["probe"] == "tools"));
    assert!(!env.state_file().exists(), "never paused, never disabled");
}
