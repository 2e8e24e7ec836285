//! Real clients of what llmprobe serves and writes: the official OpenAI
//! Python SDK against `route --serve`, and the official Prometheus client's
//! parser reading `check --prom-file` and `route --serve`'s `/metrics`.
//! They need `.ci/venv` (`.ci/run` makes it), so they run in the external
//! harness, which reports them as ignored where it is missing.

use serde_json::{Value, json};

use crate::Test;
use crate::support::need::{self, Need};
use crate::support::offline;
use crate::support::{
    Fake, RouteServer, advance, chat_body, check, clock_env, each_dialect_config, http,
    prometheus_samples, route_config, sdk_script,
};

/// The official OpenAI Python SDK against `route --serve`.
fn the_openai_python_sdk_as_a_client() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[
            fake.provider("a", "openai", &["e500"], "priority = 1"),
            fake.provider("b", "anthropic", &["ok"], "priority = 2"),
        ],
        "",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let v = sdk_script("openai_client.py", &[&format!("{}/v1", srv.url), "any-key"]);
    assert_eq!(v["plain"]["content"], "14", "{v}");
    assert_eq!(v["raw"]["routed_via"], "b::ok", "{v}");
    assert_eq!(v["stream"]["content"], "14", "{v}");
    assert_eq!(v["stream"]["finish_reason"], "stop", "{v}");
    let models: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(models.contains(&"auto") && models.contains(&"b::ok"), "{v}");
    assert_eq!(
        v["unknown_model"],
        json!({"status": 404, "code": "model_not_found"}),
        "{v}"
    );
}

/// The official OpenAI SDK calling tools and asking for JSON through
/// route, with each upstream dialect behind it (tests/sdk/openai_tools.py
/// says what it does), then an `auto` request with `n: 2` that passes over
/// the candidates whose dialect cannot return several choices.
fn the_openai_sdk_calls_tools_and_asks_for_json_through_each_dialect() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = each_dialect_config(&env, &fake);
    let srv = RouteServer::start(&env, &cfg, &[]);
    let v = sdk_script(
        "openai_tools.py",
        &[&format!("{}/v1", srv.url), "o::ok", "a::ok", "g::ok"],
    );
    for m in ["o::ok", "a::ok", "g::ok"] {
        let r = &v["models"][m];
        assert_eq!(r["call"]["name"], "add", "{m}: {r}");
        assert_eq!(
            r["call"]["arguments"],
            json!({"a": 12, "b": 30}),
            "{m}: {r}"
        );
        assert!(
            r["call"]["id"].as_str().is_some_and(|id| !id.is_empty()),
            "{m}: {r}"
        );
        assert_eq!(r["finish_reason"], "tool_calls", "{m}: {r}");
        let calls = r["stream"]["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1, "{m}: {r}");
        assert_eq!(calls[0]["name"], "add", "{m}: {r}");
        assert_eq!(calls[0]["arguments"], json!({"a": 12, "b": 30}), "{m}: {r}");
        assert_eq!(r["stream"]["finish_reason"], "tool_calls", "{m}: {r}");
        assert!(
            r["round_trip"]["content"]
                .as_str()
                .is_some_and(|c| c.contains("42")),
            "{m}: {r}"
        );
        assert_eq!(r["round_trip"]["finish_reason"], "stop", "{m}: {r}");
        assert!(r["json_object"].is_object(), "{m}: {r}");
        assert!(r["json_schema"]["answer"].is_i64(), "{m}: {r}");
        assert!(r["json_schema"]["unit"].is_string(), "{m}: {r}");
    }
    let skip = &v["skip"];
    assert_eq!(skip["routed_via"], "o::ok", "{skip}");
    assert_eq!(skip["fallback_attempts"], "0", "{skip}");
    let trail = skip["fallback_trail"].as_str().unwrap_or_default();
    assert!(
        trail.contains("a::ok") && trail.contains("g::ok") && trail.contains("skip:n"),
        "{trail}"
    );
    // What each upstream received: the tools in its own dialect.
    let bodies: Vec<Value> = fake.seen().into_iter().filter_map(|s| s.body).collect();
    let a = bodies
        .iter()
        .find(|b| b["tools"][0]["input_schema"].is_object())
        .unwrap_or_else(|| panic!("no Anthropic request with the tool: {bodies:?}"));
    assert_eq!(a["tools"][0]["name"], "add", "{a}");
    let g = bodies
        .iter()
        .find(|b| b["tools"][0]["functionDeclarations"].is_array())
        .unwrap_or_else(|| panic!("no Gemini request with the tool: {bodies:?}"));
    let decl = &g["tools"][0]["functionDeclarations"][0];
    assert_eq!(decl["name"], "add", "{g}");
    assert!(
        decl["parameters"].get("additionalProperties").is_none(),
        "{g}"
    );
    assert!(decl["parameters"].get("$schema").is_none(), "{g}");
}

/// `check --prom-file`, read by the official parser: every family, the
/// escaped label, and one sample per series.
fn the_prom_file_is_read_by_the_official_parser() {
    let (env, _fake, cfg) = crate::support::prom_fixture();
    let prom = env.path().join("llmprobe.prom");
    advance(&env, 1000);
    check(&env, &cfg, &["--prom-file", prom.to_str().unwrap()]).ok();
    let samples = prometheus_samples(&std::fs::read_to_string(&prom).unwrap());
    let names: std::collections::BTreeSet<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        [
            "llmprobe_last_run_offline",
            "llmprobe_last_run_timestamp_seconds",
            "llmprobe_model_state",
            "llmprobe_probe_latency_seconds",
            "llmprobe_probe_success",
        ]
    );
    let weird = samples
        .iter()
        .find(|s| s.name == "llmprobe_probe_success" && s.labels["model"] == "we\"ird")
        .unwrap();
    assert_eq!(weird.value, 1.0);
    assert_eq!(samples.len(), 3 + 3 + 4 * 3 + 2);
}

/// An offline run's prom file, read by the official parser.
fn an_offline_prom_file_is_read_by_the_official_parser() {
    let mut env = clock_env();
    let cfg = offline(&mut env, &["m"]);
    let prom = env.path().join("llmprobe.prom");
    check(&env, &cfg, &["--prom-file", prom.to_str().unwrap()]).code(6);
    let samples = prometheus_samples(&std::fs::read_to_string(&prom).unwrap());
    let offline = samples
        .iter()
        .find(|s| s.name == "llmprobe_last_run_offline")
        .unwrap();
    assert_eq!(offline.value, 1.0);
    assert!(!samples.iter().any(|s| s.name == "llmprobe_probe_success"));
}

/// `route --serve`'s `/metrics` after a fallback, read by the official
/// parser.
fn route_metrics_are_read_by_the_official_parser() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(
        &env,
        &[
            fake.provider("a", "openai", &["rate-limit"], "priority = 1"),
            fake.provider("b", "openai", &["ok"], "priority = 2"),
        ],
        "",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let body = chat_body("auto", false);
    for _ in 0..2 {
        let r = http(
            "POST",
            &format!("{}/v1/chat/completions", srv.url),
            &[("content-type", "application/json")],
            Some(&body),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let m = http("GET", &format!("{}/metrics", srv.url), &[], None);
    assert_eq!(m.status, 200);
    let samples = prometheus_samples(&m.body);
    assert!(samples.len() > 10, "{samples:?}");
    let served = samples
        .iter()
        .find(|s| s.name == "llmprobe_route_requests_total" && s.labels["outcome"] == "served")
        .unwrap_or_else(|| panic!("{samples:?}"));
    assert_eq!(served.value, 2.0);
}

/// The OpenAI and Anthropic SDK lines that `demo --serve` prints, run as
/// printed (with the venv's Python for `python3`).
#[cfg(unix)]
fn the_demo_serve_sdk_lines_work_as_printed() {
    let env = crate::support::Env::new();
    let demo = crate::support::DemoServer::start(&env);
    for (prefix, answer) in [
        ("python3 -c 'from openai", "4"),
        ("python3 -c 'import anthropic", "7"),
    ] {
        let line = demo.line(prefix);
        let line = line.replacen("python3", &need::python(), 1);
        let out = std::process::Command::new("sh")
            .args(["-c", &line])
            .env("NO_PROXY", "*")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{line}: {out:?}");
        assert!(said.trim_end().ends_with(answer), "{line}: {said}");
    }
    assert_eq!(demo.interrupt(), 0);
}

/// The README's Python block, against `route --serve` (its URL changed to
/// the server's free port), with a line that prints the answer.
fn the_readme_python_block_works() {
    let env = clock_env();
    let fake = Fake::start(&env, &[]);
    let cfg = route_config(&env, &[fake.provider("a", "openai", &["ok"], "")], "");
    let srv = RouteServer::start(&env, &cfg, &[]);
    let blocks = crate::support::readme_blocks("python");
    assert!(!blocks.is_empty(), "no python block in the README");
    for (start, text) in blocks {
        assert!(
            text.contains("http://127.0.0.1:8080/v1"),
            "README.md:{start}: {text}"
        );
        let script = format!(
            "{}print(r.choices[0].message.content)\n",
            text.replace("http://127.0.0.1:8080/v1", &format!("{}/v1", srv.url))
        );
        let out = std::process::Command::new(need::python())
            .args(["-c", &script])
            .env("NO_PROXY", "*")
            .output()
            .unwrap();
        assert!(out.status.success(), "README.md:{start}: {out:?}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
            "{out:?}"
        );
    }
    assert_eq!(fake.seen().iter().filter(|s| s.model() == "ok").count(), 1);
}

pub fn tests() -> Vec<Test> {
    let prom = &[Need::Python("prometheus_client")];
    vec![
        Test::new(
            "clients::the_openai_python_sdk_as_a_client",
            &[Need::Python("openai")],
            the_openai_python_sdk_as_a_client,
        ),
        Test::new(
            "clients::the_openai_sdk_calls_tools_and_asks_for_json_through_each_dialect",
            &[Need::Python("openai")],
            the_openai_sdk_calls_tools_and_asks_for_json_through_each_dialect,
        ),
        Test::new(
            "clients::the_readme_python_block_works",
            &[Need::Python("openai")],
            the_readme_python_block_works,
        ),
        #[cfg(unix)]
        Test::new(
            "clients::the_demo_serve_sdk_lines_work_as_printed",
            &[Need::Python("openai"), Need::Python("anthropic")],
            the_demo_serve_sdk_lines_work_as_printed,
        ),
        Test::new(
            "clients::the_prom_file_is_read_by_the_official_parser",
            prom,
            the_prom_file_is_read_by_the_official_parser,
        ),
        Test::new(
            "clients::an_offline_prom_file_is_read_by_the_official_parser",
            prom,
            an_offline_prom_file_is_read_by_the_official_parser,
        ),
        Test::new(
            "clients::route_metrics_are_read_by_the_official_parser",
            prom,
            route_metrics_are_read_by_the_official_parser,
        ),
    ]
}
