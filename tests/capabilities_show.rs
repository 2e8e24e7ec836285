//! Issue 18, showing capabilities: `state` and `brief`'s capability
//! column and JSON, `rollup --capabilities` in every format, files that
//! cannot be parsed (named, left byte-for-byte), and uptime that never
//! counts capability probes. Fixtures are written by hand in the stats
//! directory: `check` writing them is tested elsewhere.

use serde_json::Value;

use crate::support::{Env, ago};

const LONG: &str = "meta-llama/llama-3.3-70b-instruct:free";

/// Two groq models (one documented, one not), and one with a long id.
const CONFIG: &str = r#"
include_default_catalog = false

[[providers]]
name = "groq"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "GROQ_API_KEY"
models = ["llama-3.1-8b-instant", "llama-3.3-70b-versatile"]
model_info = { "llama-3.1-8b-instant" = { context_window = 131072, capabilities = ["tools", "json"] } }

[[providers]]
name = "openrouter"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "OPENROUTER_API_KEY"
models = ["meta-llama/llama-3.3-70b-instruct:free"]
"#;

const H: i64 = 3600;

fn env() -> Env {
    let mut e = Env::new();
    let cfg = e.write("llmprobe.toml", CONFIG);
    e.env("LLMPROBE_CONFIG", cfg.to_str().unwrap());
    e
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// groq's small model: tools passed 3½ h ago, json failed 5½ h ago; the
/// long-named model: tools passed 1½ days ago.
fn findings() -> String {
    format!(
        r#"{{
  "groq::llama-3.1-8b-instant": {{
    "tools": {{"verdict": "yes", "seen": "{}"}},
    "json": {{"verdict": "no", "seen": "{}", "reason": "wrong_answer: not JSON"}}
  }},
  "openrouter::{LONG}": {{
    "tools": {{"verdict": "yes", "seen": "{}"}},
    "vision": {{"verdict": "unknown"}}
  }}
}}
"#,
        ago(3 * H + 1800),
        ago(5 * H + 1800),
        ago(36 * H),
    )
}

/// route_state.json with a window an upstream stated for the large groq
/// model, in force for another 20 hours.
fn route_state() -> String {
    format!(
        r#"{{"version":1,"saved_at":null,"cooldowns":{{}},"verdicts":{{"groq::llama-3.3-70b-versatile":{{"context_window":{{"until":"{}","limit":8192,"message":"maximum context length is 8192 tokens"}}}}}}}}
"#,
        ago(-20 * H)
    )
}

/// One capability log entry as check writes it.
fn cap_entry(secs_ago: i64, provider: &str, model: &str, probe: &str, failure: &str) -> String {
    format!(
        r#"{{"ts":"{}","provider":"{provider}","model":"{model}","ok":{},"latency_ms":300,"failure_type":"{failure}","probe":"{probe}"}}"#,
        ago(secs_ago),
        failure.is_empty() as u8
    )
}

/// One health log entry as check writes it.
fn health_entry(secs_ago: i64, provider: &str, model: &str, ok: bool) -> String {
    format!(
        r#"{{"ts":"{}","provider":"{provider}","model":"{model}","ok":{},"latency_ms":200,"failure_type":"{}"}}"#,
        ago(secs_ago),
        ok as u8,
        if ok { "" } else { "timeout" }
    )
}

fn log_of(lines: &[String]) -> String {
    format!("[\n{}\n]\n", lines.join(",\n"))
}

fn model<'a>(rows: &'a Value, key: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["model"] == key)
        .unwrap_or_else(|| panic!("no {key} in {rows}"))
}

fn table_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with('|')).collect()
}

#[test]
fn state_and_brief_show_verdicts_ages_and_windows() {
    let env = env();
    env.write("stats/capabilities.json", findings());
    env.write("stats/route_state.json", route_state());
    env.write(
        "stats/health_log.json",
        log_of(&[health_entry(600, "groq", "llama-3.1-8b-instant", true)]),
    );

    let out = env.run(&["state"]).ok().stdout;
    // The last cell of a model's row.
    let line = |m: &str| {
        let l = out
            .lines()
            .find(|l| l.starts_with(&format!("| {m} ")))
            .unwrap_or_else(|| panic!("no {m} in {out}"));
        let cell = l.trim_end_matches('|').rsplit('|').next().unwrap().trim();
        format!("| {cell} |")
    };
    assert!(
        out.lines().next().unwrap().contains("| CAPABILITIES"),
        "{out}"
    );
    // Listed or recorded capabilities; ? for unknown; the oldest verdict's
    // age; the catalog's window.
    assert!(
        line("groq::llama-3.1-8b-instant").ends_with("| tools ✔ json ✗ (5h) 128k |"),
        "{out}"
    );
    // Nothing probed, nothing listed: the window route learned, and its
    // source.
    assert!(
        line("groq::llama-3.3-70b-versatile").ends_with("| 8k learned |"),
        "{out}"
    );
    assert!(
        line(&format!("openrouter::{LONG}")).ends_with("| tools ✔ vision ? (36h) |"),
        "{out}"
    );

    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    let small = model(&v, "groq::llama-3.1-8b-instant");
    assert_eq!(small["capabilities"]["tools"]["verdict"], "yes");
    assert_eq!(small["capabilities"]["tools"]["listed"], true);
    assert_eq!(small["capabilities"]["json"]["verdict"], "no");
    assert_eq!(
        small["capabilities"]["json"]["reason"],
        "wrong_answer: not JSON"
    );
    assert_eq!(small["capabilities"]["vision"]["verdict"], "unknown");
    assert!(small["capabilities"]["vision"]["seen"].is_null());
    assert!(small["capabilities"]["vision"].get("reason").is_none());
    assert_eq!(
        small["context_window"],
        serde_json::json!({"tokens": 131072, "source": "catalog"})
    );
    let large = model(&v, "groq::llama-3.3-70b-versatile");
    assert_eq!(
        large["context_window"],
        serde_json::json!({"tokens": 8192, "source": "learned"})
    );
    assert_eq!(large["capabilities"]["tools"]["verdict"], "unknown");
    // The state fields are as they were.
    assert_eq!(small["last_probe"]["result"], "ok");

    let out = env.run(&["brief"]).ok().stdout;
    let section = out
        .split("\ncapabilities:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no capabilities section in {out}"));
    assert!(
        section.contains("| groq::llama-3.1-8b-instant ")
            && section.contains("| tools ✔ json ✗ (5h) 128k "),
        "{out}"
    );
    // Only models the verdicts file or the catalog says something about.
    assert!(!section.contains("llama-3.3-70b-versatile"), "{out}");
    assert!(section.contains("✔ passed · ✗ failed · ? unknown"), "{out}");
    // Every catalog model, keys or not (the large model's provider has
    // none, and it was not probed).
    let v = json(&env.run(&["brief", "--json", "--all"]).ok().stdout);
    let small = model(&v["models"], "groq::llama-3.1-8b-instant");
    assert_eq!(small["capabilities"]["json"]["verdict"], "no");
    assert_eq!(small["context_window"]["tokens"], 131072);
    let large = model(&v["models"], "groq::llama-3.3-70b-versatile");
    assert_eq!(large["context_window"]["source"], "learned");
    assert!(v.get("capabilities_error").is_none(), "{v}");
}

#[test]
fn tables_with_capabilities_fit_80_columns() {
    let mut env = env();
    env.env("COLUMNS", "80");
    env.write("stats/capabilities.json", findings());
    env.write("stats/route_state.json", route_state());
    for args in [&["state"][..], &["brief", "--all"]] {
        let out = env.run(args).ok().stdout;
        let lines = table_lines(&out);
        assert!(lines.iter().any(|l| l.contains("CAPABILITIES")), "{out}");
        for l in lines {
            assert!(l.chars().count() <= 80, "{args:?}: {l:?} in\n{out}");
        }
        // A table that hid columns says which, and how to see them.
        if args == ["state"] {
            assert!(
                out.contains("hidden to fit 80 columns: ") && out.contains("--json shows them"),
                "{out}"
            );
        }
        // Wrapped or not, every verdict is there.
        let flat: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
        for part in ["tools ✔", "json ✗", "(5h)", "128k", "vision ?", "(36h)"] {
            assert!(flat.contains(part), "{args:?}: {part} in\n{out}");
        }
    }
}

#[test]
fn without_verdicts_the_output_has_no_capability_column() {
    let env = env();
    env.write(
        "stats/health_log.json",
        log_of(&[health_entry(600, "groq", "llama-3.1-8b-instant", true)]),
    );
    // A learned window and a catalog one alone add no column.
    env.write("stats/route_state.json", route_state());
    let state = env.run(&["state"]).ok().stdout;
    let brief = env.run(&["brief"]).ok().stdout;
    assert!(
        !state.contains("CAPABILITIES") && !state.contains("128k"),
        "{state}"
    );
    assert!(
        !brief.contains("capabilities") && !brief.contains("CAPABILITIES"),
        "{brief}"
    );
    // An empty verdicts file is the same as none.
    env.write("stats/capabilities.json", "{}\n");
    assert_eq!(env.run(&["state"]).ok().stdout, state);
    // The JSON has the data all the same.
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    assert_eq!(
        model(&v, "groq::llama-3.1-8b-instant")["context_window"]["tokens"],
        131072
    );
}

#[test]
fn an_unparseable_capabilities_file_is_named_and_left_alone() {
    let env = env();
    let bad = "{\"groq::llama-3.1-8b-instant\": {\"tools\": {\"verdict\": \"maybe\"}}}\n";
    let path = env.write("stats/capabilities.json", bad);
    env.write(
        "stats/health_log.json",
        log_of(&[health_entry(600, "groq", "llama-3.1-8b-instant", true)]),
    );
    env.write(
        "stats/capability_log.json",
        log_of(&[cap_entry(600, "groq", "llama-3.1-8b-instant", "tools", "")]),
    );

    // state: the listing, and a warning on stderr naming the file; exit 0,
    // as brief treats an unreadable route_state.json.
    let r = env.run(&["state"]).ok();
    assert!(
        r.stdout.contains("| groq::llama-3.1-8b-instant "),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("warning: ")
            && r.stderr.contains("capabilities.json")
            && r.stderr.contains("not a valid capabilities file")
            && r.stderr.contains("left untouched"),
        "{}",
        r.stderr
    );
    let r = env.run(&["state", "--json"]).ok();
    let v = json(&r.stdout);
    assert_eq!(
        model(&v, "groq::llama-3.1-8b-instant")["capabilities"]["tools"]["verdict"],
        "unknown"
    );
    assert!(r.stderr.contains("capabilities.json"), "{}", r.stderr);

    // brief: a line naming it, and not healthy.
    let r = env.run(&["brief"]).ok();
    assert!(
        r.stdout.contains("\ncapabilities: ") && r.stdout.contains("capabilities.json"),
        "{}",
        r.stdout
    );
    let v = json(&env.run(&["brief", "--json"]).ok().stdout);
    assert!(
        v["capabilities_error"]
            .as_str()
            .unwrap()
            .contains("capabilities.json"),
        "{v}"
    );
    assert_eq!(v["healthy"], false);
    // --quiet-if-healthy still speaks.
    assert!(
        env.run(&["brief", "--quiet-if-healthy"])
            .ok()
            .stdout
            .contains("capabilities.json")
    );

    // rollup --capabilities: the pass rates, the verdict unknown.
    let r = env.run(&["rollup", "--capabilities", "--json"]).ok();
    assert!(r.stderr.contains("capabilities.json"), "{}", r.stderr);
    let v = json(&r.stdout);
    assert_eq!(v["rows"][0]["verdict"], "unknown");
    assert_eq!(v["rows"][0]["pass_rate"], 1.0);

    assert_eq!(std::fs::read(&path).unwrap(), bad.as_bytes());
}

#[test]
fn an_unparseable_route_state_only_hides_learned_windows() {
    let env = env();
    env.write("stats/capabilities.json", findings());
    let bad = "{\"verdicts\": 7\n";
    let path = env.write("stats/route_state.json", bad);
    let r = env.run(&["state"]).ok();
    assert!(
        r.stderr.contains("route_state.json") && r.stderr.contains("learned context windows"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("| tools ✔ json ✗ (5h) 128k |"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("learned"), "{}", r.stdout);
    // brief says so in its route line, as before.
    let out = env.run(&["brief"]).ok().stdout;
    assert!(
        out.contains("\nroute: ") && out.contains("route_state.json"),
        "{out}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bad.as_bytes());
}

fn capability_log() -> String {
    log_of(&[
        cap_entry(
            30 * H,
            "groq",
            "llama-3.1-8b-instant",
            "tools",
            "wrong_answer",
        ),
        cap_entry(5 * H, "groq", "llama-3.1-8b-instant", "tools", ""),
        cap_entry(
            4 * H,
            "groq",
            "llama-3.1-8b-instant",
            "json",
            "wrong_answer",
        ),
        cap_entry(3 * H, "groq", "llama-3.1-8b-instant", "tools", ""),
        cap_entry(2 * H, "groq", "llama-3.1-8b-instant", "json", "rate_limit"),
        cap_entry(H, "openrouter", LONG, "tools", ""),
    ])
}

#[test]
fn rollup_capabilities_in_every_format() {
    let env = env();
    env.write("stats/capability_log.json", capability_log());
    env.write("stats/capabilities.json", findings());

    let v = json(&env.run(&["rollup", "--capabilities", "--json"]).ok().stdout);
    let rows = v["rows"].as_array().unwrap();
    let got: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["provider"].as_str().unwrap().into(),
                r["model"].as_str().unwrap().into(),
                r["capability"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("groq".into(), "llama-3.1-8b-instant".into(), "tools".into()),
            ("groq".into(), "llama-3.1-8b-instant".into(), "json".into()),
            ("openrouter".into(), LONG.into(), "tools".into()),
        ]
    );
    // The 30-hour-old failure is outside the 24 h window.
    assert_eq!(rows[0]["probes"], 2);
    assert_eq!(rows[0]["passed"], 2);
    assert_eq!(rows[0]["pass_rate"], 1.0);
    assert_eq!(rows[0]["verdict"], "yes");
    assert_eq!(rows[0]["last_result"], "ok");
    assert_eq!(rows[1]["probes"], 2);
    assert_eq!(rows[1]["pass_rate"], 0.0);
    assert_eq!(rows[1]["verdict"], "no");
    assert_eq!(rows[1]["last_result"], "rate_limit");
    assert_eq!(v["window"], "24h");
    let v = json(
        &env.run(&["rollup", "--capabilities", "--json", "--window", "all"])
            .ok()
            .stdout,
    );
    assert_eq!(v["rows"][0]["probes"], 3);
    assert_eq!(v["rows"][0]["passed"], 2);

    let md = env.run(&["rollup", "--capabilities"]).ok().stdout;
    assert!(md.contains("## Capabilities (Last 24h)"), "{md}");
    assert!(
        md.contains("| **groq** | llama-3.1-8b-instant | tools | 100% | 2 | ok, "),
        "{md}"
    );
    assert!(md.contains("| json | 0% | 2 | rate_limit, "), "{md}");
    assert!(md.contains("| ✗ no |") && md.contains("| ✔ yes |"), "{md}");

    let csv = env
        .run(&["rollup", "--capabilities", "--format", "csv"])
        .ok()
        .stdout;
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "provider,model,capability,probes,passed,pass_rate_pct,last_probe,last_result,verdict,verdict_seen"
    );
    assert!(
        lines[2].starts_with("groq,llama-3.1-8b-instant,json,2,0,0.0,")
            && lines[2].contains(",rate_limit,no,"),
        "{csv}"
    );
    assert_eq!(lines.len(), 4, "{csv}");

    let prom = env
        .run(&["rollup", "--capabilities", "--format", "prom"])
        .ok()
        .stdout;
    let labels = "provider=\"groq\",model=\"llama-3.1-8b-instant\",capability=\"json\"";
    assert!(
        prom.contains(&format!(
            "llmprobe_capability_pass_ratio{{{labels},window=\"24h\"}} 0\n"
        )),
        "{prom}"
    );
    assert!(
        prom.contains(&format!(
            "llmprobe_capability_probes{{{labels},window=\"24h\"}} 2\n"
        )),
        "{prom}"
    );
    assert!(
        prom.contains(&format!("llmprobe_capability_verdict{{{labels}}} 0\n")),
        "{prom}"
    );
    assert!(
        prom.contains("# TYPE llmprobe_capability_verdict gauge"),
        "{prom}"
    );

    // A README block needs markers of its own.
    let readme = env.write("README.md", "x\n<!-- C -->\n<!-- /C -->\n");
    let r = env
        .run(&[
            "rollup",
            "--capabilities",
            "--readme",
            readme.to_str().unwrap(),
        ])
        .code(2);
    assert!(r.stderr.contains("--markers"), "{}", r.stderr);
    let args = [
        "rollup",
        "--capabilities",
        "--readme",
        readme.to_str().unwrap(),
        "--markers",
        "<!-- C -->",
        "<!-- /C -->",
    ];
    let r = env.run(&args).ok();
    assert!(
        r.stdout.contains("capability block updated"),
        "{}",
        r.stdout
    );
    let text = std::fs::read_to_string(&readme).unwrap();
    assert!(
        text.starts_with("x\n<!-- C -->\n*Last capability probe: ")
            && text.contains("## Capabilities (Last 24h)")
            && text.ends_with("<!-- /C -->\n"),
        "{text}"
    );
}

#[test]
fn rollup_capabilities_without_a_log_says_there_are_none_yet() {
    let env = env();
    let r = env.run(&["rollup", "--capabilities"]).ok();
    assert!(
        r.stdout.contains("*No capability probes yet.*"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("no capability probes yet in ")
            && r.stderr.contains("capability_log.json"),
        "{}",
        r.stderr
    );
    let v = json(&env.run(&["rollup", "--capabilities", "--json"]).ok().stdout);
    assert_eq!(v["rows"], serde_json::json!([]));
    assert!(v["newest_probe"].is_null());
    for f in ["csv", "prom"] {
        env.run(&["rollup", "--capabilities", "--format", f]).ok();
    }
    assert!(!env.stats().join("capability_log.json").exists());
}

#[test]
fn a_damaged_capability_log_is_a_data_error_and_untouched() {
    let env = env();
    let good = capability_log();
    let bad = good.replacen("\"ok\":1", "\"ok\":tru", 1);
    let path = env.write("stats/capability_log.json", &bad);
    let r = env.run(&["rollup", "--capabilities"]).code(4);
    assert!(
        r.stderr.contains("capability_log.json") && r.stderr.contains("byte offset"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
    // The health-log commands never read it.
    env.run(&["rollup"]).ok();
    env.run(&["brief"]).ok();
}

#[test]
fn uptime_ignores_the_capability_log() {
    let env = env();
    let health: Vec<String> = (1..=4)
        .map(|i| health_entry(i * H, "groq", "llama-3.1-8b-instant", true))
        .collect();
    env.write("stats/health_log.json", log_of(&health));
    // Many failed capability probes, newer than every health entry.
    let caps: Vec<String> = (0..10)
        .map(|i| {
            cap_entry(
                60 + i,
                "groq",
                "llama-3.1-8b-instant",
                "tools",
                "wrong_answer",
            )
        })
        .collect();
    env.write("stats/capability_log.json", log_of(&caps));
    let figures = || {
        let rollup = json(&env.run(&["rollup", "--json"]).ok().stdout);
        let brief = json(&env.run(&["brief", "--json"]).ok().stdout);
        (
            rollup["rows"].clone(),
            brief["providers"].clone(),
            brief["newest_probe"].clone(),
        )
    };
    let (rows, providers, newest) = figures();
    assert_eq!(rows[0]["samples"], 4);
    assert_eq!(rows[0]["uptime"], 1.0);
    assert_eq!(providers[0]["uptime"], 1.0);
    assert_eq!(providers[0]["checks"], 4);
    assert_eq!(providers[0]["last_result"], "ok");
    // The same as with no capability log at all.
    std::fs::remove_file(env.stats().join("capability_log.json")).unwrap();
    let (rows2, providers2, newest2) = figures();
    assert_eq!(rows, rows2);
    assert_eq!(providers, providers2);
    assert_eq!(newest, newest2);
}

#[test]
fn a_provider_that_opted_out_lists_no_capability() {
    let mut env = Env::new();
    let cfg = env.write(
        "llmprobe.toml",
        r#"
include_default_catalog = false

[[providers]]
name = "paid"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "PAID_API_KEY"
capabilities = false
models = ["big"]
model_info = { "big" = { context_window = 200000, capabilities = ["tools", "vision"] } }

[[providers]]
name = "free"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "FREE_API_KEY"
models = ["small"]
model_info = { "small" = { capabilities = ["tools"] } }
"#,
    );
    env.env("LLMPROBE_CONFIG", cfg.to_str().unwrap());
    env.write(
        "stats/capabilities.json",
        format!(
            r#"{{"free::small": {{"tools": {{"verdict": "yes", "seen": "{}"}}}}}}"#,
            ago(3 * 3600 + 1800)
        ),
    );
    let v = json(&env.run(&["state", "--json"]).ok().stdout);
    let big = model(&v, "paid::big");
    assert_eq!(big["capabilities"]["tools"]["listed"], false);
    assert_eq!(big["capabilities"]["vision"]["listed"], false);
    assert_eq!(
        model(&v, "free::small")["capabilities"]["tools"]["listed"],
        true
    );
    let out = env.run(&["state"]).ok().stdout;
    let cell = |m: &str| {
        let l = out
            .lines()
            .find(|l| l.starts_with(&format!("| {m} ")))
            .unwrap();
        l.trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(cell("paid::big"), "200k", "{out}");
    assert_eq!(cell("free::small"), "tools ✔ (3h)", "{out}");
}

/// brief lists the capabilities of the models probed in its window and of
/// those whose provider has its key set; a line counts the others, which
/// `--all` lists. `--provider` keeps one provider, as `state --provider`.
#[test]
fn brief_lists_the_models_probed_or_keyed_and_counts_the_rest() {
    let mut env = env();
    env.write("stats/capabilities.json", findings());
    env.write(
        "stats/health_log.json",
        log_of(&[
            health_entry(600, "groq", "llama-3.1-8b-instant", true),
            health_entry(40 * H, "openrouter", LONG, true),
        ]),
    );
    let section = |out: &str| {
        out.split("\ncapabilities:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("no capabilities section in {out}"))
            .to_string()
    };
    const HIDDEN: &str = "1 model not shown (not probed in the last 24h and no key set for its provider); --all shows them";
    // No key is set: the groq model probed 10 minutes ago is listed; the
    // openrouter one, probed 36 h ago, is counted.
    let out = env.run(&["brief"]).ok().stdout;
    let caps = section(&out);
    assert!(caps.contains("| groq::llama-3.1-8b-instant "), "{out}");
    assert!(!caps.contains(LONG), "{out}");
    assert!(caps.contains(HIDDEN), "{out}");
    let v = json(&env.run(&["brief", "--json"]).ok().stdout);
    let listed: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["groq::llama-3.1-8b-instant"], "{v}");
    // The large groq model, never probed, is left out of the JSON too.
    assert_eq!(v["models_hidden"], 2);
    // --all lists every one, and hides nothing.
    let out = env.run(&["brief", "--all"]).ok().stdout;
    assert!(
        section(&out).contains(&format!("| openrouter::{LONG} ")),
        "{out}"
    );
    assert!(!out.contains("not shown"), "{out}");
    let v = json(&env.run(&["brief", "--all", "--json"]).ok().stdout);
    assert_eq!(v["models"].as_array().unwrap().len(), 3);
    assert_eq!(v["models_hidden"], 0);
    // A window that reaches its probe lists it.
    let out = env.run(&["brief", "--window", "7d"]).ok().stdout;
    assert!(
        section(&out).contains(&format!("| openrouter::{LONG} ")),
        "{out}"
    );
    assert!(!out.contains("not shown"), "{out}");
    // So does its provider's key.
    env.env("OPENROUTER_API_KEY", "k");
    let out = env.run(&["brief"]).ok().stdout;
    assert!(
        section(&out).contains(&format!("| openrouter::{LONG} ")),
        "{out}"
    );
    assert!(!out.contains("not shown"), "{out}");

    // --provider: that provider's rows and models only.
    env.write(
        "stats/model_state.json",
        format!(
            r#"{{"openrouter::{LONG}": {{"state": "paused", "reason": "timeout", "since": "{}", "consecutive_failures": 1}}, "gone::x": {{"state": "disabled"}}}}"#,
            ago(H)
        ),
    );
    let all = env.run(&["brief", "--window", "7d"]).ok().stdout;
    assert!(
        all.contains("| openrouter ") && all.contains("| groq "),
        "{all}"
    );
    assert!(
        all.contains(&format!("| openrouter::{LONG} | paused")),
        "{all}"
    );
    let out = env
        .run(&["brief", "--window", "7d", "--provider", "groq"])
        .ok()
        .stdout;
    assert!(out.contains("| groq "), "{out}");
    assert!(!out.contains("openrouter"), "{out}");
    assert!(out.contains("out of rotation: none"), "{out}");
    let v = json(
        &env.run(&["brief", "--json", "-p", "openrouter", "--all"])
            .ok()
            .stdout,
    );
    assert_eq!(v["providers"], serde_json::json!([]), "{v}");
    assert_eq!(v["models"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        v["out_of_rotation"][0]["model"],
        format!("openrouter::{LONG}")
    );
    // A typo is an error naming the closest provider; a provider only the
    // state file still names is known.
    let r = env.run(&["brief", "--provider", "grok"]).code(2);
    assert!(
        r.stderr
            .contains("unknown provider \"grok\" in --provider; did you mean \"groq\"?"),
        "{}",
        r.stderr
    );
    let out = env.run(&["brief", "--provider", "gone"]).ok().stdout;
    assert!(out.contains("| gone::x "), "{out}");
    assert!(out.contains("no samples of gone in the last 24h"), "{out}");
}
