//! The Anthropic Messages surface end to end: `POST /v1/messages` and
//! `/v1/messages/count_tokens` on the real binary, against fake upstreams
//! of each dialect, read as an Anthropic client reads them.

use serde_json::{Value, json};

use crate::support::Test;
use crate::support::{Fake, Http, RouteServer, clock_env as env, http, route_config as config};

const Q: &str = "What is 7 + 7? Reply with only the number.";
const TOOL_Q: &str = "What is 12 + 30? Use the add tool.";

/// One fake with a model `ok` behind a provider of each dialect, and route
/// in front of them.
fn three_dialects() -> (crate::support::Env, Fake, RouteServer) {
    let (env, fake, srv) = Test::new()
        .provider("o", "openai", &["ok"], "priority = 1")
        .provider("a", "anthropic", &["ok"], "priority = 2")
        .provider("g", "gemini", &["ok"], "priority = 3")
        .serve(&[]);
    (env, fake, srv)
}

const MODELS: [&str; 3] = ["o::ok", "a::ok", "g::ok"];

/// A Messages request as the SDK sends it.
fn post(srv: &RouteServer, path: &str, body: &Value, extra: &[(&str, &str)]) -> Http {
    let mut h = vec![
        ("content-type", "application/json"),
        ("anthropic-version", "2023-06-01"),
    ];
    h.extend_from_slice(extra);
    http(
        "POST",
        &format!("{}{path}", srv.url),
        &h,
        Some(&body.to_string()),
    )
}

fn ask(model: &str, question: &str, more: Value) -> Value {
    let mut v = json!({
        "model": model,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": question}],
    });
    for (k, x) in more.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn add_tool() -> Value {
    json!([{
        "name": "add",
        "description": "Add two numbers.",
        "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    }])
}

/// A server-sent event stream as (event name, data) pairs.
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            let mut name = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = n.trim().to_string();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            let data = serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {block}"));
            (name, data)
        })
        .collect()
}

/// What a stream's events put together, as the SDK's `get_final_message`
/// does, after checking their order: `message_start` first, each block
/// opened, filled and closed before the next, then `message_delta` and
/// `message_stop`.
fn assemble(evs: &[(String, Value)]) -> Value {
    let names: Vec<&str> = evs
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| *n != "ping")
        .collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(
        &names[names.len() - 2..],
        ["message_delta", "message_stop"],
        "{names:?}"
    );
    let mut message = Value::Null;
    let mut open: Option<u64> = None;
    let mut json_bufs: Vec<String> = Vec::new();
    for (name, d) in evs {
        assert_eq!(d["type"], name.as_str(), "{d}");
        match name.as_str() {
            "message_start" => message = d["message"].clone(),
            "content_block_start" => {
                assert_eq!(
                    open, None,
                    "a block opened before the last closed: {names:?}"
                );
                let i = d["index"].as_u64().unwrap();
                assert_eq!(i as usize, message["content"].as_array().unwrap().len());
                open = Some(i);
                message["content"]
                    .as_array_mut()
                    .unwrap()
                    .push(d["content_block"].clone());
                json_bufs.push(String::new());
            }
            "content_block_delta" => {
                let i = d["index"].as_u64().unwrap();
                assert_eq!(open, Some(i), "{names:?}");
                let block = &mut message["content"][i as usize];
                match d["delta"]["type"].as_str() {
                    Some("text_delta") => {
                        let t = format!(
                            "{}{}",
                            block["text"].as_str().unwrap(),
                            d["delta"]["text"].as_str().unwrap()
                        );
                        block["text"] = json!(t);
                    }
                    Some("input_json_delta") => {
                        json_bufs[i as usize]
                            .push_str(d["delta"]["partial_json"].as_str().unwrap());
                    }
                    other => panic!("delta {other:?}"),
                }
            }
            "content_block_stop" => {
                let i = d["index"].as_u64().unwrap();
                assert_eq!(open.take(), Some(i));
                let block = &mut message["content"][i as usize];
                if block["type"] == "tool_use" && !json_bufs[i as usize].is_empty() {
                    block["input"] = serde_json::from_str(&json_bufs[i as usize]).unwrap();
                }
            }
            "message_delta" => {
                assert_eq!(open, None);
                message["stop_reason"] = d["delta"]["stop_reason"].clone();
                message["usage"]["output_tokens"] = d["usage"]["output_tokens"].clone();
            }
            "message_stop" | "ping" => {}
            other => panic!("unexpected event {other}: {d}"),
        }
    }
    message
}

#[test]
fn messages_are_answered_through_each_dialect_plain_and_streamed() {
    let (_env, fake, srv) = three_dialects();
    for model in MODELS {
        let r = post(&srv, "/v1/messages", &ask(model, Q, json!({})), &[]);
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        assert_eq!(r.header("x-routed-via"), model);
        assert_eq!(r.header("x-fallback-trail"), "none");
        let v = r.json();
        assert!(v["id"].as_str().unwrap().starts_with("msg_"), "{v}");
        assert_eq!(v["type"], "message");
        assert_eq!(v["role"], "assistant");
        assert_eq!(
            v["content"],
            json!([{"type": "text", "text": "14"}]),
            "{model}: {v}"
        );
        assert_eq!(v["stop_reason"], "end_turn", "{v}");
        assert_eq!(v["stop_sequence"], Value::Null);
        assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0, "{v}");
        assert!(v["usage"]["output_tokens"].is_u64(), "{v}");

        let r = post(
            &srv,
            "/v1/messages?beta=true",
            &ask(model, Q, json!({"stream": true})),
            &[],
        );
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        assert!(r.header("content-type").starts_with("text/event-stream"));
        assert_eq!(r.header("x-routed-via"), model);
        let m = assemble(&events(&r.body));
        assert_eq!(
            m["content"],
            json!([{"type": "text", "text": "14"}]),
            "{model}: {}",
            r.body
        );
        assert_eq!(m["stop_reason"], "end_turn");
        assert!(m["id"].as_str().unwrap().starts_with("msg_"));
        assert!(m["usage"]["input_tokens"].as_u64().unwrap() > 0);
    }
    // Each upstream was asked in its own dialect.
    let seen = fake.seen();
    assert_eq!(seen.iter().filter(|s| s.model() == "ok").count(), 6);
}

#[test]
fn a_tool_call_and_its_result_round_trip_through_each_dialect() {
    let (_env, fake, srv) = three_dialects();
    for model in MODELS {
        let body = ask(model, TOOL_Q, json!({"tools": add_tool()}));
        let r = post(&srv, "/v1/messages", &body, &[]);
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        let v = r.json();
        assert_eq!(v["stop_reason"], "tool_use", "{model}: {v}");
        let content = v["content"].as_array().unwrap();
        assert!(
            content
                .iter()
                .all(|b| b["type"] != "text" || b["text"] != ""),
            "{v}"
        );
        let call = content.iter().find(|b| b["type"] == "tool_use").unwrap();
        assert_eq!(call["name"], "add");
        assert_eq!(call["input"], json!({"a": 12, "b": 30}), "{model}: {v}");
        let id = call["id"].as_str().unwrap();
        assert!(!id.is_empty());

        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        let r = post(&srv, "/v1/messages", &streamed, &[]);
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        let evs = events(&r.body);
        assert!(
            evs.iter()
                .any(|(_, d)| d["delta"]["type"] == "input_json_delta"),
            "{}",
            r.body
        );
        let m = assemble(&evs);
        assert_eq!(m["stop_reason"], "tool_use", "{model}: {}", r.body);
        let call = m["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_use")
            .unwrap()
            .clone();
        assert_eq!(
            call["input"],
            json!({"a": 12, "b": 30}),
            "{model}: {}",
            r.body
        );

        let mut back = body.clone();
        back["messages"] = json!([
            {"role": "user", "content": TOOL_Q},
            {"role": "assistant", "content": v["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "42"}]},
        ]);
        let r = post(&srv, "/v1/messages", &back, &[]);
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        let v = r.json();
        assert_eq!(v["stop_reason"], "end_turn", "{v}");
        assert!(
            v["content"][0]["text"].as_str().unwrap().contains("42"),
            "{model}: {v}"
        );
    }
    // The Anthropic upstream got the tool back as a tool_result block.
    let bodies: Vec<Value> = fake.seen().into_iter().filter_map(|s| s.body).collect();
    assert!(
        bodies
            .iter()
            .any(|b| b["messages"][2]["content"][0]["type"] == "tool_result"),
        "{bodies:?}"
    );
}

#[test]
fn count_tokens_is_routes_estimate_of_the_prompt() {
    let (_env, fake, srv) = three_dialects();
    let body = ask("o::ok", Q, json!({}));
    let r = post(&srv, "/v1/messages/count_tokens", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    // 42 characters, four a token, rounded up.
    assert_eq!(r.json(), json!({"input_tokens": Q.len().div_ceil(4)}));
    let mut no_max = ask(
        "o::ok",
        Q,
        json!({"tools": add_tool(), "system": "Be brief."}),
    );
    no_max.as_object_mut().unwrap().shift_remove("max_tokens");
    let r = post(&srv, "/v1/messages/count_tokens", &no_max, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["input_tokens"].as_u64().unwrap() > (Q.len().div_ceil(4) as u64) + 10);
    assert!(
        fake.seen().iter().all(|s| s.body.is_none()),
        "count_tokens asked an upstream"
    );
}

#[test]
fn x_api_key_is_the_inbound_token_and_a_wrong_one_an_anthropic_401() {
    let mut env = env();
    env.env("ROUTE_TOKEN", "s3cret-token");
    let fake = Fake::start(&env, &[]);
    let cfg = config(
        &env,
        &[fake.provider("o", "openai", &["ok"], "")],
        "[route]\nauth_token_env = \"ROUTE_TOKEN\"\n",
    );
    let srv = RouteServer::start(&env, &cfg, &[]);
    let body = ask("auto", Q, json!({}));
    for key in [None, Some("wrong")] {
        let h: Vec<(&str, &str)> = key.map(|k| ("x-api-key", k)).into_iter().collect();
        let r = post(&srv, "/v1/messages", &body, &h);
        assert_eq!(r.status, 401, "{}", r.body);
        assert_eq!(r.json()["type"], "error");
        assert_eq!(r.json()["error"]["type"], "authentication_error");
        // It names the header this client sends.
        let said = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(said.contains("x-api-key"), "{said}");
        assert!(!said.contains("s3cret-token"), "{said}");
    }
    let r = post(
        &srv,
        "/v1/messages",
        &body,
        &[("x-api-key", "s3cret-token")],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["content"][0]["text"], "14");
    let r = post(
        &srv,
        "/v1/messages",
        &body,
        &[("authorization", "Bearer s3cret-token")],
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn errors_are_anthropic_shaped() {
    let (_env, _fake, srv) = Test::new()
        .provider("o", "openai", &["ok"], "priority = 1")
        .provider("r", "openai", &["rate-limit"], "priority = 2")
        .serve(&[]);
    let r = post(
        &srv,
        "/v1/messages",
        &ask("no-such-model", Q, json!({})),
        &[],
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let v = r.json();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "not_found_error", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-model")
    );

    let mut no_max = ask("auto", Q, json!({}));
    no_max.as_object_mut().unwrap().shift_remove("max_tokens");
    let r = post(&srv, "/v1/messages", &no_max, &[]);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json(),
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}})
    );
    let bad = ask(
        "auto",
        "x",
        json!({"messages": [{"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
        ]}]}),
    );
    let r = post(&srv, "/v1/messages", &bad, &[]);
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("messages.0.content.0.source.type: documents of source type \"base64\""),
        "{}",
        r.body
    );
    let r = http(
        "POST",
        &format!("{}/v1/messages", srv.url),
        &[("content-type", "application/json")],
        Some("{not json"),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    let r = http("GET", &format!("{}/v1/messages", srv.url), &[], None);
    assert_eq!(r.status, 405, "{}", r.body);
    assert_eq!(r.json()["type"], "error", "{}", r.body);

    // The rate-limited model benches itself; then nothing is left.
    let r = post(
        &srv,
        "/v1/messages",
        &ask("r::rate-limit", Q, json!({})),
        &[],
    );
    assert_eq!(r.status, 429, "{}", r.body);
    let r = post(
        &srv,
        "/v1/messages",
        &ask("r::rate-limit", Q, json!({})),
        &[],
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.json()["error"]["type"], "rate_limit_error", "{}", r.body);
    let wait: u64 = r.header("retry-after").parse().unwrap();
    assert!((1..=120).contains(&wait), "{wait}");
}

/// A client's own model name, aliased onto a free model.
#[test]
fn a_clients_model_name_resolves_through_an_alias() {
    let (_env, _fake, srv) = Test::new()
        .provider("o", "openai", &["ok"], "priority = 1")
        .provider("g", "gemini", &["ok"], "priority = 2")
        .extra("[aliases]\n\"claude-sonnet-4-5\" = [\"g::ok\", \"o::ok\"]\n")
        .serve(&[]);
    let r = post(
        &srv,
        "/v1/messages",
        &ask("claude-sonnet-4-5", Q, json!({})),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-routed-via"), "g::ok");
    assert_eq!(r.json()["content"][0]["text"], "14");
}

#[test]
fn a_stream_that_fails_after_the_first_byte_ends_with_an_error_event() {
    let (_env, _fake, srv) = Test::new()
        .provider("a", "anthropic", &["stream-error"], "")
        .serve(&[]);
    let r = post(
        &srv,
        "/v1/messages",
        &ask("auto", Q, json!({"stream": true})),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let evs = events(&r.body);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(names.last(), Some(&"error"), "{names:?}");
    assert!(!names.contains(&"message_stop"), "{names:?}");
    let (_, e) = evs.last().unwrap();
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "api_error");
    assert!(e["error"]["message"].is_string());
}

#[test]
fn thinking_and_server_tools_are_reported_as_dropped() {
    let (_env, fake, srv) = three_dialects();
    let tools = json!([
        add_tool()[0].clone(),
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    ]);
    let body = ask(
        "o::ok",
        Q,
        json!({"thinking": {"type": "enabled", "budget_tokens": 1024}, "tools": tools,
               "tool_choice": {"type": "none"}, "metadata": {"user_id": "user-7"}}),
    );
    let r = post(&srv, "/v1/messages", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("x-llmprobe-dropped"),
        "tools[web_search], thinking"
    );
    assert_eq!(r.json()["content"][0]["text"], "14");
    // The OpenAI upstream got the custom tool only, and the user id as `user`.
    let sent = fake.seen().pop().unwrap().body.unwrap();
    assert_eq!(sent["tools"].as_array().unwrap().len(), 1, "{sent}");
    assert_eq!(sent["tools"][0]["function"]["name"], "add");
    assert_eq!(sent["user"], "user-7", "{sent}");
    assert!(
        sent.get("metadata").is_none() && sent.get("thinking").is_none(),
        "{sent}"
    );

    let mut forced = body.clone();
    forced["tool_choice"] = json!({"type": "tool", "name": "web_search"});
    let r = post(&srv, "/v1/messages", &forced, &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("tool_choice: ")
    );
}

/// What a coding agent sends: a long system prompt in text blocks with
/// cache marks, dozens of tools with large schemas, beta headers, a query
/// string, fields route has never heard of.
#[test]
fn a_real_clients_request_is_served() {
    let (_env, fake, srv) = three_dialects();
    let long = "You are a careful coding agent. Follow the repository's conventions. ".repeat(400);
    let tools: Vec<Value> = (0..36)
        .map(|i| {
            let props: serde_json::Map<String, Value> = (0..25)
                .map(|p| {
                    (
                        format!("param_{p}"),
                        json!({"type": "string", "description": format!("Parameter {p} of tool {i}: {}", "details ".repeat(10)),
                               "enum": ["a", "b", "c"]}),
                    )
                })
                .collect();
            json!({
                "name": format!("tool_{i}"),
                "description": format!("Tool number {i}. {}", "It does many useful things. ".repeat(20)),
                "input_schema": {"type": "object", "properties": props, "required": ["param_0"],
                                 "additionalProperties": false, "$schema": "http://json-schema.org/draft-07/schema#"},
                "cache_control": {"type": "ephemeral"},
            })
        })
        .collect();
    for model in MODELS {
        let body = json!({
            "model": model,
            "max_tokens": 32000,
            "system": [
                {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
                {"type": "text", "text": long, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
            ],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": Q},
                    {"type": "text", "text": "<system-reminder>Be brief.</system-reminder>", "cache_control": {"type": "ephemeral"}}
                ]}
            ],
            "tools": tools,
            "tool_choice": {"type": "none"},
            "metadata": {"user_id": "user_abc_account_def_session_123"},
            "temperature": 1,
            "stream": true,
            "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
            "service_tier": "auto",
            "some_future_field": {"x": [1, 2]},
        });
        let r = post(
            &srv,
            "/v1/messages?beta=true",
            &body,
            &[
                (
                    "anthropic-beta",
                    "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
                ),
                ("x-app", "cli"),
                ("anthropic-dangerous-direct-browser-access", "true"),
            ],
        );
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        let m = assemble(&events(&r.body));
        assert_eq!(m["content"][0]["text"], "14", "{model}: {}", r.body);
    }
    // The Anthropic upstream got the system prompt and every tool.
    let a = fake
        .seen()
        .into_iter()
        .filter_map(|s| s.body)
        .find(|b| b["system"].is_string() || b["system"].is_array())
        .unwrap();
    assert_eq!(a["tools"].as_array().unwrap().len(), 36);
    let system = a["system"].to_string();
    assert!(
        system.contains("Claude Code") && system.contains("careful coding agent"),
        "{system:.200}"
    );
}

#[test]
fn interleaved_parallel_calls_from_an_openai_upstream_stream_as_sequential_blocks() {
    let env = env();
    let srv = crate::support::route_over_canned_stream(&env, crate::support::INTERLEAVED_CALLS);
    let body = ask("o::m", TOOL_Q, json!({"tools": add_tool(), "stream": true}));
    let r = post(&srv, "/v1/messages", &body, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    // `assemble` checks one block at a time and no delta outside its block.
    let m = assemble(&events(&r.body));
    assert_eq!(
        m["content"],
        json!([
            {"type": "text", "text": "Both."},
            {"type": "tool_use", "id": "call_a", "name": "add", "input": {"a": 1, "b": 2}},
            {"type": "tool_use", "id": "call_b", "name": "add", "input": {"a": 3, "b": 4}},
        ]),
        "{}",
        r.body
    );
    assert_eq!(m["stop_reason"], "tool_use");
    assert_eq!(m["usage"]["output_tokens"], 30);
}

/// Claude Code 2.1.197 sends its instructions as a `system` message after
/// the question (`messages.1.role`, which route used to refuse). Each
/// dialect gets them where it takes them: folded into the leading system
/// message for OpenAI, in place (under Anthropic's beta) for Anthropic, in
/// `systemInstruction` for Gemini.
#[test]
fn a_system_message_inside_messages_is_served_through_each_dialect() {
    let (_env, fake, srv) = three_dialects();
    for model in MODELS {
        let body = json!({
            "model": model,
            "max_tokens": 256,
            "system": [{"type": "text", "text": "You are Claude."}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": Q, "cache_control": {"type": "ephemeral"}}]},
                {"role": "system", "content": [{"type": "text", "text": "Answer with the number only."}]}
            ],
        });
        let r = post(
            &srv,
            "/v1/messages?beta=true",
            &body,
            &[("anthropic-beta", "mid-conversation-system-2026-04-07")],
        );
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        assert_eq!(r.json()["content"][0]["text"], "14", "{model}: {}", r.body);
        assert_eq!(r.header("x-llmprobe-dropped"), "", "{model}");
    }
    let bodies: Vec<Value> = fake.seen().into_iter().filter_map(|s| s.body).collect();
    let o = bodies
        .iter()
        .find(|b| b["messages"][0]["role"] == "system")
        .expect("the OpenAI upstream's body");
    assert_eq!(
        o["messages"][0]["content"],
        "You are Claude.\n\nAnswer with the number only."
    );
    assert_eq!(o["messages"].as_array().unwrap().len(), 2, "{o}");
    let a = bodies
        .iter()
        .find(|b| b["system"].is_string())
        .expect("the Anthropic upstream's body");
    assert_eq!(a["system"], "You are Claude.");
    assert_eq!(
        a["messages"][1],
        json!({"role": "system", "content": "Answer with the number only."})
    );
    let g = bodies
        .iter()
        .find(|b| b.get("contents").is_some())
        .expect("the Gemini upstream's body");
    assert_eq!(
        g["systemInstruction"]["parts"][0]["text"],
        "You are Claude.\n\nAnswer with the number only."
    );
}

/// The Anthropic SDK's `tool_runner` threads its conversation on the
/// server (`thread`), which route cannot: the 400 it gets is the one the
/// SDKs fall back on, and a lone `tool_result` (a threaded `continue`) is
/// refused too. Neither reaches an upstream.
#[test]
fn a_thread_and_a_lone_tool_result_are_refused_before_any_upstream() {
    let (_env, fake, srv) = three_dialects();
    let threaded = ask(
        "auto",
        TOOL_Q,
        json!({"tools": add_tool(), "thread": {"type": "create"}}),
    );
    let r = post(
        &srv,
        "/v1/messages?beta=true",
        &threaded,
        &[("anthropic-beta", "message-threads-2026-08-12")],
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let v = r.json();
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert_eq!(
        v["error"]["details"],
        json!({"error_code": "thread_unsupported_request"}),
        "{v}"
    );
    let lone = ask(
        "auto",
        "",
        json!({"tools": add_tool(), "thread": null, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "42"}
        ]}]}),
    );
    let r = post(&srv, "/v1/messages", &lone, &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.starts_with(
            "messages.0.content.0.tool_use_id: no tool_use block before it has the id \"toolu_01\""
        ),
        "{msg}"
    );
    // Route's reachability checks at start carry no body; no request did.
    let sent: Vec<Value> = fake.seen().into_iter().filter_map(|s| s.body).collect();
    assert!(sent.is_empty(), "{sent:?}");
}

/// Blocks, roles and fields route does not know are never a 400 by
/// themselves: they are left out and named in `X-Llmprobe-Dropped`, and
/// the request is served.
#[test]
fn unknown_blocks_roles_and_fields_are_reported_and_the_request_served() {
    let (_env, fake, srv) = three_dialects();
    for model in MODELS {
        let body = json!({
            "model": model,
            "max_tokens": 256,
            "messages": [
                {"role": "user", "content": [{"type": "a_new_block", "data": 1}, {"type": "text", "text": Q}]},
                {"role": "narrator", "content": "An aside."}
            ],
            "a_new_field": true,
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "output_config": {"effort": "high"},
            "thinking": {"type": "adaptive"},
        });
        let r = post(&srv, "/v1/messages", &body, &[]);
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        assert_eq!(r.json()["content"][0]["text"], "14", "{model}");
        assert_eq!(
            r.header("x-llmprobe-dropped"),
            "content[a_new_block], role[narrator], thinking, output_config.effort, a_new_field",
            "{model}"
        );
    }
    for b in fake.seen().into_iter().filter_map(|s| s.body) {
        let text = b.to_string();
        assert!(
            !text.contains("a_new") && !text.contains("An aside"),
            "{text}"
        );
    }
}

/// A system message between a call and its result (instructions given as
/// the tool ran) is no gap in the pairing: each dialect gets the result
/// right after the call, and the instructions after the result, which the
/// strict fakes accept as the real providers would.
#[test]
fn a_system_message_between_a_call_and_its_result_follows_the_result() {
    let (_env, _fake, srv) = three_dialects();
    for model in MODELS {
        let body = json!({
            "model": model,
            "max_tokens": 256,
            "tools": add_tool(),
            "messages": [
                {"role": "user", "content": TOOL_Q},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 12, "b": 30}}
                ]},
                {"role": "system", "content": "Answer with the number only."},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}]}
            ],
        });
        let r = post(&srv, "/v1/messages", &body, &[]);
        assert_eq!(r.status, 200, "{model}: {}", r.body);
        let text = r.json()["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(text.contains("42"), "{model}: {}", r.body);
    }
}
