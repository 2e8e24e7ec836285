//! `llmprobe route` end to end: the real binary, one-shot and `--serve`,
//! against fake providers on 127.0.0.1. Time is moved by the test through
//! the clock-offset file, never waited for; every cooldown rule is observed
//! through how many requests each fake model received.

use serde_json::Value;

use crate::support::Test;
#[cfg(unix)]
use crate::support::provider_view;
use crate::support::{
    Env, Fake, RouteServer, advance, chat_body, clock_env as env, http, provider_toml,
    route_config as config, usage_line,
};

const CANARY: &str = "sk-canary-5c1d9e7a3b2f4e6d8a";

/// How many requests the fake received for `model`.
fn calls(fake: &Fake, model: &str) -> usize {
    fake.seen().iter().filter(|s| s.model() == model).count()
}

fn route(env: &Env, cfg: &str, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["--config", cfg, "route"];
    all.extend_from_slice(args);
    env.run(&all)
}

const Q: &str = "What is 7 + 7? Reply with only the number.";

#[test]
fn one_shot_falls_back_and_remembers_cooldowns_between_calls() {
    let (env, fake, cfg) = Test::new()
        .provider("first", "openai", &["rate-limit"], "priority = 1")
        .provider("second", "anthropic", &["ok"], "priority = 2")
        .config();
    let r = route(&env, &cfg, &[Q]).ok();
    assert_eq!(r.stdout.trim(), "14");
    assert!(
        r.stderr
            .contains("via second::ok after 1 failed attempt(s): first::rate-limit=rate_limit"),
        "{}",
        r.stderr
    );
    assert_eq!(calls(&fake, "rate-limit"), 1);
    // The 429 benched first::rate-limit (no Retry-After: the 2 min ladder
    // step). The next call does not send to it.
    let r = route(&env, &cfg, &[Q]).ok();
    assert!(
        r.stderr.contains("first::rate-limit=cooldown:rate_limit"),
        "{}",
        r.stderr
    );
    assert_eq!(
        calls(&fake, "rate-limit"),
        1,
        "a benched model is not sent to"
    );
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(env.stats().join("route_state.json")).unwrap(),
    )
    .unwrap();
    assert!(state.to_string().contains("rate_limit"), "{state}");
    // Two minutes later it is tried again.
    advance(&env, 121);
    route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "rate-limit"), 2);
}

#[test]
fn one_shot_json_and_exit_codes() {
    let (env, _fake, cfg) = Test::new()
        .provider("p", "gemini", &["ok", "e500"], "")
        .config();
    let r = route(&env, &cfg, &["--json", "--model", "p::ok", Q]).ok();
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["routed_via"], "p::ok");
    assert_eq!(v["response"]["object"], "chat.completion");
    assert_eq!(v["response"]["choices"][0]["message"]["content"], "14");
    // Every candidate failed: exit 5, each attempt listed.
    let r = route(&env, &cfg, &["--model", "p::e500", Q]).code(5);
    assert!(
        r.stderr.contains("p::e500: server_error (500)"),
        "{}",
        r.stderr
    );
    // An unknown model can never succeed: a usage error.
    let r = route(&env, &cfg, &["--model", "nope", Q]).code(2);
    assert!(r.stderr.contains("\"nope\""), "{}", r.stderr);
    // The prompt from stdin.
    let mut child = env
        .command(&["--config", &cfg, "route", "--model", "p::ok"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(Q.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "14");
    // A route_state.json that cannot be parsed: exit 4, left as it was.
    std::fs::write(env.stats().join("route_state.json"), "{oops").unwrap();
    let r = route(&env, &cfg, &[Q]).code(4);
    assert!(r.stderr.contains("route_state.json"), "{}", r.stderr);
    assert_eq!(
        std::fs::read(env.stats().join("route_state.json")).unwrap(),
        b"{oops"
    );
}

#[test]
fn cooldown_rules_by_class() {
    let (env, fake, cfg) = Test::new()
        .provider("a", "openai", &["unauthorized"], "priority = 1")
        .provider("b", "openai", &["e500", "ok"], "priority = 2")
        .provider("c", "openai", &["ok"], "priority = 3")
        .config();
    // a: 401 benches the key (5 min); b: a 500 skips b for the rest of the
    // request (b::ok is not tried), c serves.
    let r = route(&env, &cfg, &[Q]).ok();
    assert!(r.stderr.contains("via c::ok"), "{}", r.stderr);
    assert_eq!(calls(&fake, "unauthorized"), 1);
    assert_eq!(calls(&fake, "e500"), 1);
    assert_eq!(
        fake.seen().iter().filter(|s| s.model() == "ok").count(),
        1,
        "b::ok skipped after b's 500; only c::ok served"
    );
    // Within 5 min a is not tried; after 5 min it is.
    advance(&env, 200);
    route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "unauthorized"), 1);
    advance(&env, 301);
    route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "unauthorized"), 2);
}

#[test]
fn a_model_failing_three_times_in_15_minutes_is_benched_for_10() {
    let (env, fake, cfg) = Test::new()
        .provider("a", "openai", &["e500"], "priority = 1")
        .provider("z", "openai", &["ok"], "priority = 2")
        .config();
    for i in 0..3 {
        advance(&env, i * 60);
        route(&env, &cfg, &[Q]).ok();
    }
    assert_eq!(calls(&fake, "e500"), 3);
    advance(&env, 180);
    route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "e500"), 3, "benched after the third failure");
    advance(&env, 120 + 601);
    route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "e500"), 4);
}

#[test]
fn a_context_overflow_falls_back_and_alone_is_a_400() {
    // A prompt too long for one model is not too long for every model
    // (docs/routing.md, "What a request needs"): the next one serves.
    let env = env();
    let fake = Fake::start(&env, &[]);
    for dialect in ["openai", "anthropic", "gemini"] {
        let cfg = config(
            &env,
            &[
                fake.provider("a", dialect, &["context-length"], "priority = 1"),
                fake.provider("b", "openai", &["ok"], "priority = 2"),
            ],
            "",
        );
        let before = calls(&fake, "ok");
        let r = route(&env, &cfg, &[Q]).ok();
        assert_eq!(r.stdout.trim(), "14", "{dialect}: {}", r.stderr);
        assert!(
            r.stderr.contains("a::context-length=context_length"),
            "{dialect}: {}",
            r.stderr
        );
        assert_eq!(calls(&fake, "ok"), before + 1, "{dialect}");
        // Nothing is benched: the next request tries it again. Alone, its
        // 400 is the answer, with OpenAI's code.
        let srv = RouteServer::start(&env, &cfg, &[]);
        let r = srv.chat("a::context-length", false);
        assert_eq!(r.status, 400, "{dialect}: {}", r.body);
        assert_eq!(
            r.json()["error"]["code"],
            "context_length_exceeded",
            "{}",
            r.body
        );
        route(&env, &cfg, &["--model", "a::context-length", Q]).code(2);
    }
    assert_eq!(calls(&fake, "context-length"), 9);
}

/// A chat completion with `extra` fields merged into the body.
fn chat_with(srv: &RouteServer, model: &str, extra: Value) -> crate::support::Http {
    let mut body: Value = serde_json::from_str(&chat_body(model, false)).unwrap();
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    http(
        "POST",
        &format!("{}/v1/chat/completions", srv.url),
        &[("content-type", "application/json")],
        Some(&body.to_string()),
    )
}

#[test]
fn what_a_model_cannot_take_is_skipped_before_sending() {
    let (_env, fake, srv) = Test::new()
        .provider("a", "anthropic", &["ok"], "priority = 1")
        .provider(
            "t",
            "openai",
            &["tiny"],
            "priority = 2\nmodel_info = { \"tiny\" = { context_window = 5 } }",
        )
        .provider("b", "openai", &["big"], "priority = 3")
        .serve(&[]);
    // n: 2 is more than the Anthropic dialect carries, and the prompt
    // (about 11 tokens) more than t::tiny's window: neither is sent to.
    let r = chat_with(&srv, "auto", serde_json::json!({"n": 2}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "b::big");
    assert_eq!(r.header("x-fallback-attempts"), "0");
    assert_eq!(
        r.header("x-fallback-trail"),
        "a::ok=skip:n, t::tiny=skip:context"
    );
    assert_eq!((calls(&fake, "ok"), calls(&fake, "tiny")), (0, 0));
    // No active model could ever take it: a 400 that says why, and
    // nothing sent.
    let r = chat_with(&srv, "a::ok", serde_json::json!({"n": 2}));
    assert_eq!(r.status, 400, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "no_capable_model", "{}", r.body);
    assert_eq!(
        e["message"],
        "no active model can take this request: it asks for several choices (n > 1), and the one active model cannot return several choices (a::ok: cannot return several choices (the anthropic dialect))"
    );
    assert!(r.header("retry-after").is_empty(), "{}", r.body);
    assert_eq!(calls(&fake, "ok"), 0);
    // Legacy `functions` are tools only the OpenAI dialect takes in that
    // form: skipped at the Anthropic model, served by an OpenAI one.
    let r = chat_with(
        &srv,
        "auto",
        serde_json::json!({"functions": [{"name": "add", "parameters": {"type": "object"}}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-fallback-attempts"), "0");
    assert!(
        r.header("x-fallback-trail").starts_with("a::ok=skip:tools"),
        "{}",
        r.header("x-fallback-trail")
    );
    assert_eq!(calls(&fake, "ok"), 0);
    // A content part the Anthropic dialect cannot express (a file) is not
    // sent there: passed over as skip:dialect, not counted, never called
    // an upstream's refusal.
    let file = serde_json::json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is 2+2?"},
        {"type": "file", "file": {"file_id": "file-abc"}}
    ]}]});
    let r = chat_with(&srv, "auto", file.clone());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-fallback-attempts"), "0");
    assert!(
        r.header("x-fallback-trail")
            .starts_with("a::ok=skip:dialect"),
        "{}",
        r.header("x-fallback-trail")
    );
    let r = chat_with(&srv, "a::ok", file);
    assert_eq!(r.status, 400, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "no_capable_model", "{}", r.body);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("no active model can take this request: its dialect cannot express it (a::ok: not sent: the anthropic dialect cannot express it"),
        "{message}"
    );
    assert_eq!(calls(&fake, "ok"), 0);
    // Without the need, the same model serves.
    let r = srv.chat("a::ok", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(calls(&fake, "ok"), 1);
}

#[test]
fn a_session_keeps_going_to_the_model_that_served_it() {
    let (env, _fake, srv) = Test::new()
        .provider("a", "openai", &["first"], "priority = 1")
        .provider("b", "openai", &["second"], "priority = 2")
        .serve(&[]);
    let post = |model: &str, session: &str| {
        let mut h = vec![("content-type", "application/json")];
        if !session.is_empty() {
            h.push(("x-session-id", session));
        }
        http(
            "POST",
            &format!("{}/v1/chat/completions", srv.url),
            &h,
            Some(&chat_body(model, false)),
        )
    };
    // The session's first turn went to b (pinned); its next turns, for
    // any model, try b first while b is healthy.
    assert_eq!(post("b::second", "s1").header("x-routed-via"), "b::second");
    assert_eq!(post("auto", "s1").header("x-routed-via"), "b::second");
    // Another session takes the usual order.
    assert_eq!(post("auto", "s2").header("x-routed-via"), "a::first");
    // Past the TTL (30 min after the last turn), the usual order again.
    advance(&env, 30 * 60);
    assert_eq!(post("auto", "s1").header("x-routed-via"), "a::first");
}

#[test]
fn max_tokens_over_the_catalog_cap_is_lowered_before_sending() {
    let (env, _fake, cfg) = Test::new()
        .provider(
            "a",
            "openai",
            &["ok"],
            "model_info = { \"ok\" = { max_output_tokens = 8 } }",
        )
        .config();
    let r = route(&env, &cfg, &["--max-tokens", "100", Q]).ok();
    assert!(
        r.stderr
            .lines()
            .any(|l| l.starts_with("via a::ok (max_tokens→8)")),
        "{}",
        r.stderr
    );
    let r = route(&env, &cfg, &["--max-tokens", "8", Q]).ok();
    assert!(
        r.stderr.starts_with("via a::ok\n") || r.stderr.trim() == "via a::ok",
        "{}",
        r.stderr
    );
}

#[test]
fn the_upstream_receives_the_translated_body() {
    let (_env, fake, srv) = Test::new()
        .provider("b", "anthropic", &["ok"], "")
        .serve(&[]);
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = fake.seen();
    let body = seen.last().and_then(|s| s.body.as_ref()).expect("a body");
    // In Anthropic's shape: the model id upstream, the question as a user
    // turn, and the max_tokens Anthropic requires.
    assert_eq!(body["model"], "ok", "{body}");
    assert_eq!(body["messages"][0]["role"], "user", "{body}");
    assert_eq!(body["messages"][0]["content"], Q, "{body}");
    assert!(body["max_tokens"].as_u64().is_some(), "{body}");
    assert!(
        body.get("choices").is_none() && body.get("n").is_none(),
        "{body}"
    );
}

#[test]
fn server_routes_streams_and_reports() {
    let (_env, fake, srv) = Test::new()
        .provider("a", "openai", &["e503"], "priority = 1")
        .provider("b", "anthropic", &["ok"], "priority = 2")
        .provider(
            "g",
            "gemini",
            &["stream-error", "stream-stall"],
            "priority = 3",
        )
        .extra("[route]\nidle_timeout_secs = 2\n")
        .serve(&[]);
    // Not streamed: falls over a's 503 to b.
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "b::ok");
    assert_eq!(r.header("x-fallback-attempts"), "1");
    assert_eq!(r.header("x-fallback-trail"), "a::e503=overloaded");
    assert_eq!(r.json()["choices"][0]["message"]["content"], "14");
    // Streamed: failover before the first byte is invisible; the answer
    // arrives as OpenAI chunks and ends with [DONE].
    let r = srv.chat("auto", true);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.header("content-type").starts_with("text/event-stream"));
    let text: String = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(text, "14", "{}", r.body);
    assert!(r.body.trim_end().ends_with("data: [DONE]"), "{}", r.body);
    // A failure after the first byte: an error event, then [DONE].
    let r = srv.chat("g::stream-error", true);
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("\"code\":\"upstream_stream_failed\""),
        "{}",
        r.body
    );
    assert!(r.body.trim_end().ends_with("data: [DONE]"), "{}", r.body);
    // A stall past the idle timeout counts as a failure the same way.
    let r = srv.chat("g::stream-stall", true);
    assert!(r.body.contains("sent nothing for 2s"), "{}", r.body);
    assert!(r.body.trim_end().ends_with("data: [DONE]"), "{}", r.body);
    // Failures after the first byte count against the model: the third in
    // 15 minutes benches it for 10.
    for _ in 0..2 {
        srv.chat("g::stream-error", true);
    }
    let r = srv.chat("g::stream-error", true);
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(calls(&fake, "stream-error"), 3);
    // Models, liveness, readiness.
    let m = http("GET", &format!("{}/v1/models", srv.url), &[], None).json();
    let ids: Vec<&str> = m["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"auto") && ids.contains(&"b::ok"), "{ids:?}");
    assert_eq!(
        http("GET", &format!("{}/livez", srv.url), &[], None).status,
        200
    );
    let ready = http("GET", &format!("{}/readyz", srv.url), &[], None);
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(fake.seen().iter().any(|s| s.model() == "e503"));
}

#[test]
fn bad_input_gets_openai_shaped_4xx_and_the_server_stays_up() {
    let (_env, _fake, srv) = Test::new()
        .provider("b", "openai", &["ok"], "")
        .extra("[route]\nmax_body_bytes = 2048\n")
        .serve(&[]);
    let url = format!("{}/v1/chat/completions", srv.url);
    let json_ct = [("content-type", "application/json")];
    let big = chat_body(&"x".repeat(4096), false);
    for (headers, body, status, code) in [
        (&json_ct[..], "{not json", 400, "invalid_request"),
        (&json_ct[..], "{\"model\":\"auto\"}", 400, "invalid_request"),
        (
            &[("content-type", "text/plain")][..],
            "{}",
            415,
            "unsupported_media_type",
        ),
        (&json_ct[..], big.as_str(), 413, "request_too_large"),
    ] {
        let r = http("POST", &url, headers, Some(body));
        assert_eq!(r.status, status, "{body:.40}: {}", r.body);
        let v = r.json();
        assert_eq!(v["error"]["code"], code, "{}", r.body);
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    let huge = "x".repeat(40 * 1024);
    let r = http(
        "POST",
        &url,
        &[
            ("content-type", "application/json"),
            ("x-pad", huge.as_str()),
        ],
        Some(&chat_body("auto", false)),
    );
    assert_eq!(r.status, 431, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "headers_too_large");
    let r = http("GET", &format!("{}/v2/nothing", srv.url), &[], None);
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "unknown_url");
    // A served path with the wrong method: a JSON error, not an empty 405.
    let r = http("GET", &url, &[], None);
    assert_eq!(r.status, 405, "{}", r.body);
    assert_eq!(
        r.json()["error"]["code"],
        "method_not_allowed",
        "{}",
        r.body
    );
    assert_eq!(
        r.json()["error"]["message"],
        "GET is not allowed on /v1/chat/completions"
    );
    let r = srv.chat("gpt-9", false);
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    // Still serving; the trail says nothing was passed over.
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-fallback-trail"), "none");
}

#[test]
fn inbound_auth_when_configured() {
    let mut env = env();
    env.env("ROUTE_TOKEN", "s3cret-token");
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("b", "openai", &["ok"], "")],
        "[route]\nauth_token_env = \"ROUTE_TOKEN\"\n",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let url = format!("{}/v1/chat/completions", srv.url);
    for auth in [None, Some("Bearer wrong"), Some("s3cret-token")] {
        let mut h = vec![("content-type", "application/json")];
        if let Some(a) = auth {
            h.push(("authorization", a));
        }
        let r = http("POST", &url, &h, Some(&chat_body("auto", false)));
        assert_eq!(r.status, 401, "{auth:?}: {}", r.body);
        assert_eq!(r.json()["error"]["type"], "authentication_error");
    }
    let r = http(
        "POST",
        &url,
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer s3cret-token"),
        ],
        Some(&chat_body("auto", false)),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Liveness needs no token.
    assert_eq!(
        http("GET", &format!("{}/livez", srv.url), &[], None).status,
        200
    );
}

#[test]
fn a_paused_model_stops_getting_traffic_without_a_restart() {
    let (env, _fake, cfg) = Test::new()
        .provider("a", "openai", &["ok"], "priority = 1")
        .provider("b", "openai", &["ok"], "priority = 2")
        .config();
    let srv = RouteServer::start(&env, &cfg, &[]);
    let r = srv.chat("auto", false);
    assert_eq!(r.header("x-routed-via"), "a::ok");
    env.run(&["--config", &cfg, "state", "pause", "a::ok"]).ok();
    // The server polls the state file; wait (bounded) for the change.
    crate::support::eventually("routing away from the paused model", || {
        let via = srv.chat("auto", false).header("x-routed-via").to_string();
        if via == "b::ok" {
            Ok(())
        } else {
            Err(format!("routed via {via}"))
        }
    });
}

/// Route keeps each requested model's candidates until the states
/// change (docs/performance.md): an id, a pinned model, an alias and
/// `auto`, each served once (kept), follow a pause, and then an enable,
/// without a restart.
#[test]
fn kept_candidates_follow_every_state_change() {
    let (env, _fake, cfg) = Test::new()
        .provider("a", "openai", &["ok", "other"], "priority = 1")
        .provider("b", "openai", &["ok"], "priority = 2")
        // The order and the conversation's model fixed: only the states move.
        .extra("[route]\norder = \"priority\"\naffinity_secs = 0\n[aliases]\nfast = [\"a::ok\", \"b::ok\"]\n")
        .config();
    let srv = RouteServer::start(&env, &cfg, &[]);
    let via = |model: &str| {
        let r = srv.chat(model, false);
        match r.status {
            200 => r.header("x-routed-via").to_string(),
            s => format!("{s}"),
        }
    };
    let all = || ["auto", "ok", "a::ok", "fast"].map(via);
    assert_eq!(all(), ["a::ok", "a::ok", "a::ok", "a::ok"]);
    env.run(&["--config", &cfg, "state", "pause", "a::ok"]).ok();
    crate::support::eventually("routing around the paused model", || match all() {
        seen if seen == ["a::other", "b::ok", "503", "b::ok"] => Ok(()),
        seen => Err(format!("{seen:?}")),
    });
    env.run(&["--config", &cfg, "state", "enable", "a::ok"])
        .ok();
    crate::support::eventually("routing to the enabled model again", || match all() {
        seen if seen == ["a::ok", "a::ok", "a::ok", "a::ok"] => Ok(()),
        seen => Err(format!("{seen:?}")),
    });
}

#[test]
fn an_echoed_key_never_reaches_the_client() {
    let mut env = env();
    env.env("CANARY_KEY", CANARY);
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("a", "openai", &["echo-key"], "api_key_env = \"CANARY_KEY\"")],
        "",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let r = srv.chat("auto", false);
    let all = format!("{:?}{}", r.headers, r.body);
    assert!(!all.contains(CANARY), "{all}");
    assert!(!all.contains("8a"), "not even its tail: {all}");
    // Nor in diagnostics: -vvv shows each attempt and its (redacted) error.
    // Past the key's 5-minute bench, which the server may already have
    // saved, so that the one-shot run sends an attempt whenever it starts.
    advance(&env, 301);
    let r = route(&env, &cfg, &["-vvv", "--json", Q]);
    assert!(r.stderr.contains("route: attempt failed"), "{}", r.stderr);
    assert!(
        !r.stdout.contains(CANARY) && !r.stderr.contains(CANARY),
        "{} {}",
        r.stdout,
        r.stderr
    );
    let state = std::fs::read_to_string(env.stats().join("route_state.json")).unwrap_or_default();
    assert!(!state.contains(CANARY), "{state}");
}

/// Connections the kernel had already accepted into the listen backlog
/// when SIGTERM came are served, not reset: a client that connected and
/// sent its request gets an answer. The server is stopped (SIGSTOP) while
/// the clients connect, so their connections wait in the backlog, then
/// gets SIGTERM and SIGCONT together; without the drain, dropping the
/// listener reset every connection still queued. Found by scripts/soak.
#[cfg(target_os = "linux")]
#[test]
fn sigterm_serves_the_connections_waiting_in_the_backlog() {
    use std::io::{Read, Write};
    let (_env, _fake, srv) = Test::new().provider("a", "openai", &["ok"], "").serve(&[]);
    assert_eq!(srv.chat("auto", false).status, 200);
    let pid = srv.child.id().to_string();
    let signal = |sig: &str| {
        assert!(
            std::process::Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        )
    };
    let addr = srv.url.trim_start_matches("http://").to_string();
    let body = chat_body("auto", false);
    signal("-STOP");
    let mut clients: Vec<std::net::TcpStream> = (0..16)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&addr).expect("the kernel accepts it");
            write!(
                c,
                "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            c
        })
        .collect();
    signal("-TERM");
    signal("-CONT");
    for (i, c) in clients.iter_mut().enumerate() {
        c.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let mut got = String::new();
        let r = c.read_to_string(&mut got);
        assert!(
            r.is_ok() && got.starts_with("HTTP/1.1 200"),
            "client {i}: {r:?} {got:?}"
        );
    }
    assert_eq!(srv.terminate_waited(), 0);
}

#[cfg(unix)]
#[test]
fn sigterm_saves_the_route_state() {
    let (env, _fake, srv) = Test::new()
        .provider("a", "openai", &["rate-limit"], "priority = 1")
        .provider("b", "openai", &["ok"], "priority = 2")
        .serve(&[]);
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 200);
    assert_eq!(srv.terminate(), 0);
    let state = std::fs::read_to_string(env.stats().join("route_state.json")).unwrap();
    assert!(state.contains("rate_limit"), "{state}");
}

#[test]
fn auto_prefers_the_healthier_model_from_the_log() {
    let (env, _fake, cfg) = Test::new()
        .provider("flaky", "openai", &["ok"], "")
        .provider("steady", "openai", &["ok"], "")
        .config();
    // The last 24 h: flaky passed 1 of 2 probes, steady 2 of 2. Same
    // priority, so uptime decides, whatever the catalog order.
    let now = chrono::Utc::now();
    let ts = |h: i64| {
        (now - chrono::Duration::hours(h))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    let e = |h: i64, p: &str, ok: u8| {
        format!(
            r#"{{"ts":"{}","provider":"{p}","model":"ok","ok":{ok},"latency_ms":100,"failure_type":"{}"}}"#,
            ts(h),
            if ok == 1 { "" } else { "timeout" }
        )
    };
    env.write(
        "stats/health_log.json",
        format!(
            "[\n{}\n]\n",
            [
                e(3, "flaky", 1),
                e(3, "steady", 1),
                e(2, "flaky", 0),
                e(2, "steady", 1)
            ]
            .join(",\n")
        ),
    );
    let r = route(&env, &cfg, &[Q]).ok();
    assert!(r.stderr.starts_with("via steady::ok"), "{}", r.stderr);
}

#[test]
fn keys_rotate_and_a_bad_key_is_benched_alone() {
    let mut env = env();
    env.env("K1", "key-one-aaaaaaaa")
        .env("K2", "key-two-bbbbbbbb");
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider(
                "a",
                "openai",
                &["unauthorized"],
                "api_key_env = [\"K1\", \"K2\"]\npriority = 1",
            ),
            fake.provider("z", "openai", &["ok"], "priority = 2"),
        ],
        "",
    );
    // Both keys of a are tried (each gets a 401 and a 5 min bench), then z.
    let r = route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "unauthorized"), 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("after 2 failed attempt(s)"),
        "{}",
        r.stderr
    );
    let state = std::fs::read_to_string(env.stats().join("route_state.json")).unwrap();
    assert!(
        state.contains("a#key0:") && state.contains("a#key1:"),
        "{state}"
    );
    assert!(
        !state.contains("key-one") && !state.contains("key-two"),
        "{state}"
    );
    // Both benched: no call until the 5 minutes have passed.
    route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "unauthorized"), 2);
    advance(&env, 301);
    route(&env, &cfg, &[Q]).ok();
    assert_eq!(calls(&fake, "unauthorized"), 4);
}

#[test]
fn the_attempt_budget_and_exhausted_statuses() {
    let (env, fake, cfg) = Test::new()
        .provider("a", "openai", &["e500"], "priority = 1")
        .provider("b", "openai", &["e500"], "priority = 2")
        .provider("c", "openai", &["e500"], "priority = 3")
        .config();
    // At most --max-attempts sends.
    let r = route(&env, &cfg, &["--max-attempts", "2", Q]).code(5);
    assert_eq!(calls(&fake, "e500"), 2, "{}", r.stderr);
    // Through the server: 502 when every candidate failed.
    let srv = RouteServer::start(&env, &cfg, &[]);
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "all_candidates_failed");
    assert_eq!(r.header("x-fallback-attempts"), "3");
    drop(srv);
    // 503 when nothing is active, and /readyz says why.
    for m in ["a::e500", "b::e500", "c::e500"] {
        env.run(&["--config", &cfg, "state", "pause", m]).ok();
    }
    let srv = RouteServer::start(&env, &cfg, &[]);
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "no_active_models");
    let ready = http("GET", &format!("{}/readyz", srv.url), &[], None);
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["reason"], "no_active_models");
}

#[test]
fn serve_says_when_no_routable_provider_is_reachable() {
    let env = env();
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let far = provider_toml(
        "far",
        "openai",
        &format!("http://127.0.0.1:{port}/v1"),
        &["m"],
        "",
    );
    let cfg = config(&env, std::slice::from_ref(&far), "");
    let srv = RouteServer::start(&env, &cfg, &[]);
    assert!(
        srv.line.contains(&format!(
            "(1 routable model); no routable provider is reachable from here: far (127.0.0.1:{port}: connection refused)"
        )),
        "{}",
        srv.line
    );
    let ready = http("GET", &format!("{}/readyz", srv.url), &[], None);
    assert_eq!(ready.status, 503, "{}", ready.body);
    let v = ready.json();
    assert_eq!(v["reason"], "all_unreachable");
    assert!(v["unreachable"]["far"].as_str().is_some(), "{v}");
    drop(srv);
    // With one reachable provider beside it, route is ready and names the
    // one it cannot reach.
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[far, fake.provider("near", "openai", &["ok"], "")],
        "",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    assert!(
        srv.line
            .contains("(2 routable models); unreachable from here: far (127.0.0.1:"),
        "{}",
        srv.line
    );
    let ready = http("GET", &format!("{}/readyz", srv.url), &[], None);
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(ready.json()["unreachable"]["far"].is_string());
}

#[test]
fn everything_cooling_down_is_a_429_with_retry_after() {
    let (_env, fake, srv) = Test::new()
        .provider("a", "openai", &["rate-limit"], "")
        .serve(&[]);
    srv.chat("auto", false);
    let r = srv.chat("auto", false);
    assert_eq!(r.status, 429, "{}", r.body);
    let v = r.json();
    assert_eq!(v["error"]["code"], "all_cooling_down");
    assert!(v["error"]["retryAtMs"].as_i64().is_some(), "{v}");
    let wait: u64 = r.header("retry-after").parse().unwrap();
    assert!((1..=120).contains(&wait), "{wait}");
    assert_eq!(calls(&fake, "rate-limit"), 1);
    let ready = http("GET", &format!("{}/readyz", srv.url), &[], None);
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["reason"], "all_cooling_down");
}

#[cfg(unix)]
#[test]
fn providers_metrics_status_and_brief_show_what_route_knows() {
    let mut env = env();
    env.env("K1", "key-one-aaaaaaaa");
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[
            fake.provider(
                "a",
                "openai",
                &["rate-limit"],
                "api_key_env = \"K1\"\npriority = 1",
            ),
            fake.provider("b", "openai", &["ok", "other"], "priority = 2"),
        ],
        // Both requests take the usual order: without affinity to b::ok
        // the second meets a's bench.
        "[route]\naffinity_secs = 0\n",
    );
    env.run(&["--config", &cfg, "state", "disable", "b::other"])
        .ok();
    let srv = RouteServer::start(&env, &cfg, &[]);
    for _ in 0..2 {
        let r = srv.chat("auto", false);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let v = srv.providers();
    let a = provider_view(&v, "a");
    assert_eq!(a["status"], "cooling_down", "{v}");
    assert_eq!(a["keys"]["total"], 1);
    assert!(a["resume_at"].is_string(), "{v}");
    assert_eq!(a["cooldowns"][0]["reason"], "rate_limit", "{v}");
    let b = provider_view(&v, "b");
    assert_eq!(b["status"], "active");
    assert_eq!(b["models"]["disabled"], serde_json::json!(["other"]));
    assert_eq!(v["counts"]["routable_models"], 1);
    assert!(!v.to_string().contains("key-one"), "{v}");
    // Metrics: requests, attempts by class, fallbacks, skips, latency.
    let m = http("GET", &format!("{}/metrics", srv.url), &[], None);
    assert_eq!(m.status, 200);
    for needle in [
        "llmprobe_route_requests_total{outcome=\"served\"} 2",
        "llmprobe_route_attempts_total{provider=\"a\",model=\"rate-limit\",class=\"rate_limit\"} 1",
        "llmprobe_route_attempts_total{provider=\"b\",model=\"ok\",class=\"ok\"} 2",
        "llmprobe_route_fallbacks_total{provider=\"a\",model=\"rate-limit\",class=\"rate_limit\"} 1",
        "llmprobe_route_skips_total{provider=\"a\",model=\"rate-limit\",reason=\"cooldown\"} 1",
        "llmprobe_route_cooldowns_active 1",
        "llmprobe_route_routable_models 1",
        "llmprobe_route_upstream_latency_seconds_bucket",
    ] {
        assert!(m.body.contains(needle), "{needle}\n{}", m.body);
    }
    // The official parser reading it: tests/clients.rs (external harness).
    // A graceful stop saves the route state (a kill might beat the
    // debounced save).
    assert_eq!(srv.terminate(), 0);
    // The same without a server, from route_state.json.
    let st = route(&env, &cfg, &["--status"]).ok();
    assert!(st.stdout.contains("cooling_down"), "{}", st.stdout);
    assert!(st.stdout.contains("rate_limit until"), "{}", st.stdout);
    let st = route(&env, &cfg, &["--status", "--json"]).ok();
    let v: Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(v["counts"]["cooling_down"], 1);
    // brief reads only route_state.json for its route section.
    let b = env.run(&["--config", &cfg, "brief"]).ok();
    assert!(b.stdout.contains("route: cooling down"), "{}", b.stdout);
    assert!(b.stdout.contains("rate_limit until"), "{}", b.stdout);
}

#[test]
fn limits_are_checked_before_sending() {
    let (env, fake, cfg) = Test::new()
        .provider("a", "openai", &["ok"], "priority = 1\nlimits = { rpm = 2 }")
        .provider(
            "b",
            "anthropic",
            &["ok"],
            "priority = 2\nlimits = { tpm = 5000 }\ndaily_cap = 3",
        )
        .extra("[route]\nreserve_max_tokens = 10000\n")
        .config();
    // The `via` line (the first run also announces the stats directory).
    let via = |r: &crate::support::Run| {
        r.stderr
            .lines()
            .find(|l| l.starts_with("via "))
            .unwrap_or("")
            .to_string()
    };
    // Two requests a minute go to a; the third is not sent there.
    for _ in 0..2 {
        let r = route(&env, &cfg, &["--max-tokens", "100", Q]).ok();
        assert!(via(&r).starts_with("via a::ok"), "{}", r.stderr);
    }
    let r = route(&env, &cfg, &["--max-tokens", "100", Q]).ok();
    assert!(
        r.stderr.contains("via b::ok: a::ok=limit:rpm"),
        "{}",
        r.stderr
    );
    let seen_a = fake.seen().iter().filter(|s| s.model() == "ok").count();
    assert_eq!(seen_a, 3, "two to a, one to b");
    // Usage persists between one-shot calls; after a minute a passes again.
    advance(&env, 61);
    let r = route(&env, &cfg, &["--max-tokens", "100", Q]).ok();
    assert!(via(&r).starts_with("via a::ok"), "{}", r.stderr);
    // Pinned to b: a request estimated over b's whole tpm is never sent.
    let r = route(&env, &cfg, &["--model", "b::ok", "--max-tokens", "9000", Q]).code(5);
    assert!(r.stderr.contains("limit:tpm"), "{}", r.stderr);
    // Without max_tokens, a request reserves [route] reserve_max_tokens.
    let r = route(&env, &cfg, &["--model", "b::ok", Q]).code(5);
    assert!(r.stderr.contains("limit:tpm"), "{}", r.stderr);
    // b's provider-wide daily cap: 3 requests a day (one already used).
    for _ in 0..2 {
        route(&env, &cfg, &["--model", "b::ok", "--max-tokens", "100", Q]).ok();
    }
    let r = route(&env, &cfg, &["--model", "b::ok", "--max-tokens", "100", Q]).code(5);
    assert!(r.stderr.contains("limit:daily_cap"), "{}", r.stderr);
    assert!(r.stderr.contains("usable again at"), "{}", r.stderr);
    let state = std::fs::read_to_string(env.stats().join("route_state.json")).unwrap();
    assert!(state.contains("\"budget\""), "{state}");
    // The status shows the usage against each limit, from that file.
    let st = route(&env, &cfg, &["--status", "--json"]).ok();
    let v: Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(v["state"], "local", "{v}");
    let line = |kind: &str| usage_line(&v, "b", kind).unwrap_or_else(|| panic!("{kind}: {v}"));
    let cap = line("daily_cap");
    assert_eq!(
        (&cap["scope"], &cap["used"], &cap["limit"]),
        (&"b".into(), &3.into(), &3.into())
    );
    assert_eq!(line("tpm")["limit"], 5000);
    let st = route(&env, &cfg, &["--status"]).ok();
    assert!(st.stdout.contains("b daily_cap 3/3"), "{}", st.stdout);
}

/// With no key set, route names the variable to set, for the CLI and the
/// server alike, and the stats directory it creates is announced.
#[test]
fn a_model_without_its_key_names_the_variable_to_set() {
    let (env, _fake, cfg) = Test::new()
        .provider("p", "openai", &["m"], "api_key_env = \"P_UNSET_KEY\"")
        .provider("r", "openai", &["rate-limit"], "priority = 1")
        .provider("q", "openai", &["ok"], "priority = 2")
        .config();
    assert!(!env.stats().exists());
    let r = route(&env, &cfg, &["--model", "p::m", Q]).code(2);
    assert!(
        r.stderr
            .contains("not served by any provider with a key set: set P_UNSET_KEY (p)"),
        "{}",
        r.stderr
    );
    // A plain id finds the same provider.
    let r = route(&env, &cfg, &["--model", "m", Q]).code(2);
    assert!(r.stderr.contains("set P_UNSET_KEY (p)"), "{}", r.stderr);
    // Served by q after r's 429, whose cooldown route saves: the stats
    // directory it creates for that is announced, once.
    let r = route(&env, &cfg, &[Q]).ok();
    assert!(
        r.stderr.contains(&format!(
            "created stats directory {}",
            env.stats().display()
        )),
        "{}",
        r.stderr
    );
    let r = route(&env, &cfg, &[Q]).ok();
    assert!(
        !r.stderr.contains("created stats directory"),
        "{}",
        r.stderr
    );
    // The server says the same in its 404.
    let srv = RouteServer::start(&env, &cfg, &[]);
    let r = srv.chat("p::m", false);
    assert_eq!(r.status, 404);
    assert!(r.body.contains("set P_UNSET_KEY (p)"), "{}", r.body);
}

/// A field an upstream's dialect cannot carry, and that may change the
/// answer, is named in `X-Llmprobe-Dropped`, streamed or not; an OpenAI
/// upstream gets every field, so nothing is named.
#[test]
fn dropped_fields_are_named_in_a_header() {
    let (_env, _fake, srv) = Test::new()
        .provider("o", "openai", &["ok"], "priority = 1")
        .provider("b", "anthropic", &["ok"], "priority = 2")
        .provider("g", "gemini", &["ok"], "priority = 3")
        .serve(&[]);
    let send = |model: &str, stream: bool| {
        let mut body: Value = serde_json::from_str(&chat_body(model, stream)).unwrap();
        body["seed"] = 7.into();
        body["logit_bias"] = serde_json::json!({"50256": -100});
        // Harmless to leave out for both: never named.
        body["user"] = "u-1".into();
        body["x_vendor_knob"] = true.into();
        http(
            "POST",
            &format!("{}/v1/chat/completions", srv.url),
            &[("content-type", "application/json")],
            Some(&body.to_string()),
        )
    };
    for stream in [false, true] {
        let r = send("b::ok", stream);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            r.header("x-llmprobe-dropped"),
            "seed, logit_bias, x_vendor_knob"
        );
        // Gemini has a seed.
        let r = send("g::ok", stream);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("x-llmprobe-dropped"), "logit_bias, x_vendor_knob");
        let r = send("o::ok", stream);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.headers.get("x-llmprobe-dropped").is_none());
    }
}
