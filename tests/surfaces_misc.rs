//! The rest of what clients call on `route --serve`, end to end through the
//! real binary against fake providers: legacy Completions
//! (`POST /v1/completions`) over each upstream dialect, `GET
//! /v1/models/{id}` and Anthropic-shaped model lists, the embeddings 404,
//! method errors, refused requests in `/metrics`, and `X-Fallback-Detail`.

use serde_json::{Value, json};

use crate::support::Test;
use crate::support::{
    Fake, Http, RouteServer, chat_body, clock_env as env, http, route_config as config,
};

const Q: &str = "What is 7 + 7? Reply with only the number.";
const CANARY: &str = "sk-canary-misc-0f3e9d2c1b4a";

fn post(srv: &RouteServer, path: &str, headers: &[(&str, &str)], body: &Value) -> Http {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    http(
        "POST",
        &format!("{}{path}", srv.url),
        &all,
        Some(&body.to_string()),
    )
}

fn get(srv: &RouteServer, path: &str, headers: &[(&str, &str)]) -> Http {
    http("GET", &format!("{}{path}", srv.url), headers, None)
}

fn completion(srv: &RouteServer, body: Value) -> Http {
    post(srv, "/v1/completions", &[], &body)
}

/// How many requests the fake received for `model` (its reachability
/// probes name none).
fn calls(fake: &Fake, model: &str) -> usize {
    fake.seen().iter().filter(|s| s.model() == model).count()
}

/// The `data:` payloads of an event stream, `[DONE]` included.
fn data_lines(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

#[test]
fn completions_are_served_through_each_dialect_plain_and_streamed() {
    let (_env, fake, srv) = Test::new()
        .provider("o", "openai", &["ok"], "")
        .provider("a", "anthropic", &["ok"], "")
        .provider("g", "gemini", &["ok"], "")
        .serve(&[]);
    for m in ["o::ok", "a::ok", "g::ok"] {
        let r = completion(
            &srv,
            json!({"model": m, "prompt": Q, "max_tokens": 16, "temperature": 0, "stop": ["\n\n"], "user": "u"}),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        assert_eq!(r.header("x-routed-via"), m);
        assert_eq!(r.header("x-fallback-trail"), "none");
        let v = r.json();
        assert!(v["id"].as_str().unwrap().starts_with("cmpl-"), "{v}");
        assert_eq!(v["object"], "text_completion", "{v}");
        assert_eq!(v["model"], "ok", "{v}");
        assert!(v["created"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(
            v["choices"],
            json!([{"text": "14", "index": 0, "logprobs": null, "finish_reason": "stop"}]),
            "{m}: {v}"
        );
        let u = &v["usage"];
        assert_eq!(
            u["total_tokens"].as_u64(),
            Some(u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()),
            "{m}: {v}"
        );

        let r = completion(
            &srv,
            json!({"model": m, "prompt": [Q], "stream": true, "stream_options": {"include_usage": true}}),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        assert!(r.header("content-type").starts_with("text/event-stream"));
        assert_eq!(r.header("x-routed-via"), m);
        let lines = data_lines(&r.body);
        assert_eq!(
            lines.last().map(String::as_str),
            Some("[DONE]"),
            "{}",
            r.body
        );
        let chunks: Vec<Value> = lines[..lines.len() - 1]
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let id = &chunks[0]["id"];
        assert!(id.as_str().unwrap().starts_with("cmpl-"), "{}", r.body);
        let mut text = String::new();
        let mut finishes = Vec::new();
        for c in &chunks {
            assert_eq!(c["object"], "text_completion", "{c}");
            assert_eq!(&c["id"], id, "one id per stream: {}", r.body);
            let Some(choice) = c["choices"].get(0) else {
                continue;
            };
            assert_eq!(choice["index"], 0, "{c}");
            assert_eq!(choice["logprobs"], Value::Null, "{c}");
            text.push_str(choice["text"].as_str().unwrap());
            finishes.push(choice["finish_reason"].clone());
        }
        assert_eq!(text, "14", "{m}: {}", r.body);
        // Only the last choice chunk has a finish reason.
        assert_eq!(finishes.last(), Some(&json!("stop")), "{}", r.body);
        assert!(
            finishes[..finishes.len() - 1].iter().all(Value::is_null),
            "{}",
            r.body
        );
        // The usage chunk the client asked for: no choices.
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"], json!([]), "{m}: {}", r.body);
        assert!(
            last["usage"]["total_tokens"].as_u64().unwrap() > 0,
            "{last}"
        );
    }
    // What the upstreams got: a chat request, the prompt as its one user
    // message.
    let bodies: Vec<Value> = fake
        .seen()
        .into_iter()
        .filter(|s| s.model() == "ok")
        .filter_map(|s| s.body)
        .collect();
    assert_eq!(bodies.len(), 6, "{bodies:?}");
    let openai = &bodies[0];
    assert_eq!(
        openai["messages"],
        json!([{"role": "user", "content": Q}]),
        "{openai}"
    );
    assert!(openai.get("prompt").is_none(), "{openai}");
    assert_eq!(openai["max_tokens"], 16, "{openai}");
    assert_eq!(openai["stop"], "\n\n", "{openai}");
}

#[test]
fn a_completion_stream_that_breaks_ends_with_an_error_event_then_done() {
    let (_env, _fake, srv) = Test::new()
        .provider("a", "anthropic", &["stream-error"], "")
        .serve(&[]);
    let r = completion(&srv, json!({"prompt": Q, "stream": true}));
    assert_eq!(r.status, 200, "{}", r.body);
    let lines = data_lines(&r.body);
    assert_eq!(
        lines.last().map(String::as_str),
        Some("[DONE]"),
        "{}",
        r.body
    );
    let first: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["object"], "text_completion", "{}", r.body);
    let err: Value = serde_json::from_str(&lines[lines.len() - 2]).unwrap();
    assert_eq!(err["error"]["code"], "upstream_stream_failed", "{}", r.body);
}

#[test]
fn a_suffix_is_a_need_no_chat_model_meets() {
    let (_env, fake, srv) = Test::new()
        .provider("o", "openai", &["ok"], "priority = 1")
        .provider("a", "anthropic", &["ok"], "priority = 2")
        .serve(&[]);
    let r = completion(
        &srv,
        json!({"model": "auto", "prompt": "fn add(a: i32, b: i32) -> i32 {", "suffix": "}\n", "max_tokens": 32}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "no_capable_model", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("complete with a suffix"),
        "{e}"
    );
    let trail = r.header("x-fallback-trail");
    assert!(
        trail.contains("o::ok=skip:suffix") && trail.contains("a::ok=skip:suffix"),
        "{trail}"
    );
    assert_eq!(r.header("x-fallback-attempts"), "0");
    assert_eq!(calls(&fake, "ok"), 0, "nothing was sent");
    // An empty suffix (what editors send at the end of a file) asks for
    // nothing: served.
    let r = completion(&srv, json!({"prompt": Q, "suffix": ""}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["choices"][0]["text"], "14");
}

#[test]
fn completions_refuse_what_a_chat_model_cannot_give_and_metrics_count_refusals() {
    let (_env, fake, srv) = Test::new().provider("o", "openai", &["ok"], "").serve(&[]);
    let cases = [
        (json!({"prompt": Q, "echo": true}), "'echo'"),
        (json!({"prompt": Q, "best_of": 2}), "'best_of'"),
        (json!({"prompt": Q, "logprobs": 1}), "'logprobs'"),
        (json!({"prompt": Q, "n": 2}), "'n'"),
        (json!({"prompt": [Q, Q]}), "several prompts"),
        (json!({"prompt": [[1, 2, 3]]}), "token ids"),
        (json!({"model": "auto"}), "'prompt'"),
    ];
    for (body, says) in &cases {
        let r = completion(&srv, body.clone());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let e = &r.json()["error"];
        assert_eq!(e["type"], "invalid_request_error", "{e}");
        assert!(e["message"].as_str().unwrap().contains(says), "{body}: {e}");
    }
    // Bad JSON and an unknown model, on the chat surface and this one.
    let bad = http(
        "POST",
        &format!("{}/v1/completions", srv.url),
        &[("content-type", "application/json")],
        Some("{\"prompt\": "),
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    let r = completion(&srv, json!({"model": "no-such-model", "prompt": Q}));
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    let bad = http(
        "POST",
        &format!("{}/v1/chat/completions", srv.url),
        &[("content-type", "application/json")],
        Some("{\"messages\": "),
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    let r = post(
        &srv,
        "/v1/chat/completions",
        &[],
        &serde_json::from_str(&chat_body("no-such-model", false)).unwrap(),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    // One served, so the counts are told apart.
    assert_eq!(completion(&srv, json!({"prompt": Q})).status, 200);
    let m = get(&srv, "/metrics", &[]);
    let count = |outcome: &str| -> f64 {
        let head = format!("llmprobe_route_requests_total{{outcome=\"{outcome}\"}} ");
        m.body
            .lines()
            .find_map(|l| l.strip_prefix(head.as_str()))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    };
    assert_eq!(count("refused"), (cases.len() + 4) as f64, "{}", m.body);
    assert_eq!(count("served"), 1.0, "{}", m.body);
    assert_eq!(calls(&fake, "ok"), 1, "only the served one was sent");
}

#[test]
fn embeddings_get_a_404_naming_what_is_served_in_the_clients_shape() {
    let (_env, _fake, srv) = Test::new().provider("o", "openai", &["ok"], "").serve(&[]);
    let body = json!({"model": "auto", "input": "hello"});
    let r = post(&srv, "/v1/embeddings", &[], &body);
    assert_eq!(r.status, 404, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["type"], "invalid_request_error", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.starts_with("embeddings are not served yet"), "{msg}");
    for path in [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/responses",
        "/v1/models/{id}",
        "/metrics",
        "/readyz",
    ] {
        assert!(msg.contains(path), "{path}: {msg}");
    }
    let r = post(
        &srv,
        "/v1/embeddings",
        &[("anthropic-version", "2023-06-01")],
        &body,
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "not_found_error", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/messages"),
        "{v}"
    );
    // An unknown path is named, with every served one too.
    let r = get(&srv, "/v1/nothing", &[]);
    assert_eq!(r.status, 404);
    let said = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        said.starts_with("unknown path /v1/nothing:")
            && said.contains("/v1/completions, /v1/messages")
            && said.contains("/status, /badge/{provider}.svg"),
        "{said}"
    );
    // Every path it names is served: none of them is an unknown path.
    for path in ["/status", "/badge/groq.svg", "/metrics", "/livez"] {
        let r = get(&srv, path, &[]);
        assert!(!r.body.contains("unknown_url"), "{path}: {}", r.body);
    }
    // The usual mistake, a base URL ending in /v1 given to the Anthropic
    // SDK, is said so, in Anthropic's shape for a client that speaks it.
    let r = get(
        &srv,
        "/v1/v1/messages",
        &[("anthropic-version", "2023-06-01")],
    );
    assert_eq!(r.status, 404);
    let v = r.json();
    assert_eq!(v["error"]["type"], "not_found_error", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("base URL one with /v1 at the end"),
        "{v}"
    );
}

#[test]
fn a_served_path_asked_with_another_method_gets_a_json_405() {
    let (_env, _fake, srv) = Test::new().provider("o", "openai", &["ok"], "").serve(&[]);
    for (method, path) in [
        ("GET", "/v1/completions"),
        ("GET", "/v1/embeddings"),
        ("POST", "/v1/models"),
        ("DELETE", "/v1/models/o::ok"),
    ] {
        let r = http(method, &format!("{}{path}", srv.url), &[], None);
        assert_eq!(r.status, 405, "{method} {path}: {}", r.body);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "method_not_allowed", "{method} {path}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(path),
            "{method} {path}: {e}"
        );
    }
}

#[test]
fn one_model_by_id_and_anthropic_shaped_lists() {
    let (_env, _fake, srv) = Test::new()
        .provider("groq", "openai", &["llama-3.1-8b-instant", "ok"], "")
        .provider("or", "openai", &["meta-llama/llama-3.3-70b:free"], "")
        .extra("[aliases]\nfast = [\"groq::ok\"]\n")
        .serve(&[]);
    for (path, id, owner) in [
        (
            "/v1/models/groq::llama-3.1-8b-instant",
            "groq::llama-3.1-8b-instant",
            "groq",
        ),
        (
            "/v1/models/groq%3A%3Allama-3.1-8b-instant",
            "groq::llama-3.1-8b-instant",
            "groq",
        ),
        (
            "/v1/models/or::meta-llama/llama-3.3-70b:free",
            "or::meta-llama/llama-3.3-70b:free",
            "or",
        ),
        (
            "/v1/models/or%3A%3Ameta-llama%2Fllama-3.3-70b%3Afree",
            "or::meta-llama/llama-3.3-70b:free",
            "or",
        ),
        ("/v1/models/auto", "auto", "llmprobe"),
        ("/v1/models/fast", "fast", "llmprobe"),
        ("/v1/models/ok", "ok", "llmprobe"),
    ] {
        let r = get(&srv, path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let mut want = json!({"id": id, "object": "model", "created": 0, "owned_by": owner});
        if id.contains("::") {
            // What route knows of one model (docs/routing.md, "What route knows of each model").
            want["capabilities"] =
                json!({"tools": "unknown", "json": "unknown", "vision": "unknown"});
            want["supported_parameters"] = json!([]);
        }
        assert_eq!(r.json(), want, "{path}");
    }
    // The same entry as in the list.
    let list = get(&srv, "/v1/models", &[]).json();
    let listed = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "groq::ok")
        .cloned();
    assert_eq!(
        listed,
        Some(get(&srv, "/v1/models/groq::ok", &[]).json()),
        "{list}"
    );
    for path in [
        "/v1/models/nope",
        "/v1/models/other::ok",
        "/v1/models/groq::nope",
    ] {
        let r = get(&srv, path, &[]);
        assert_eq!(r.status, 404, "{path}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], "model_not_found", "{path}");
    }

    // Anthropic's shape for a client that says anthropic-version.
    let av = [("anthropic-version", "2023-06-01")];
    let v = get(&srv, "/v1/models", &av).json();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "auto",
            // An alias is listed: a client picking from the list sees it.
            "fast",
            "groq::llama-3.1-8b-instant",
            "groq::ok",
            "or::meta-llama/llama-3.3-70b:free"
        ],
        "{v}"
    );
    assert_eq!(v["has_more"], false, "{v}");
    assert_eq!(v["first_id"], "auto", "{v}");
    assert_eq!(v["last_id"], "or::meta-llama/llama-3.3-70b:free", "{v}");
    assert_eq!(
        v["data"][3],
        json!({"type": "model", "id": "groq::ok", "display_name": "groq::ok", "created_at": "1970-01-01T00:00:00Z", "lifecycle": "active"}),
        "{v}"
    );
    let r = get(&srv, "/v1/models/fast", &av);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["type"], "model");
    assert_eq!(r.json()["id"], "fast");
    let r = get(&srv, "/v1/models/nope", &av);
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.json()["error"]["type"], "not_found_error", "{}", r.body);
}

/// `X-Fallback-Detail`: on with `[route] detail_header = true`, it names
/// each failed attempt's class and short reason, never a key; off by
/// default.
#[test]
fn the_fallback_detail_header_names_each_failure_when_on() {
    for on in [true, false] {
        let mut env = env();
        env.env("CANARY_KEY", CANARY);
        let fake = Fake::start(&env, &[]);
        let cfg = config(
            &env,
            &[
                fake.provider(
                    "a",
                    "openai",
                    &["echo-key"],
                    "api_key_env = \"CANARY_KEY\"\npriority = 1",
                ),
                fake.provider("b", "openai", &["e500"], "priority = 2"),
                fake.provider("c", "anthropic", &["ok"], "priority = 3"),
            ],
            if on {
                "[route]\ndetail_header = true\n"
            } else {
                ""
            },
        );
        let srv = RouteServer::start(&env, &cfg, &[]);
        let r = completion(&srv, json!({"prompt": Q}));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("x-routed-via"), "c::ok");
        assert_eq!(r.header("x-fallback-attempts"), "2");
        let detail = r.header("x-fallback-detail");
        if !on {
            assert!(r.headers.get("x-fallback-detail").is_none(), "{detail}");
            continue;
        }
        let items: Vec<&str> = detail.split("; ").collect();
        assert_eq!(items.len(), 2, "{detail}");
        // The key the upstream echoed is redacted out of its reason.
        assert!(
            items[0].starts_with("a::echo-key=auth (HTTP 401: "),
            "{detail}"
        );
        assert!(items[0].contains("[REDACTED]"), "{detail}");
        assert!(
            items[1].starts_with("b::e500=server_error (HTTP 500: ")
                && items[1].contains("The server had an error"),
            "{detail}"
        );
        // The status is said once, not as `500: HTTP 500: …`.
        assert!(!detail.contains("500: HTTP 500"), "{detail}");
        let all = format!("{:?}{}", r.headers, r.body);
        assert!(!all.contains(CANARY), "{all}");
        assert!(!all.contains("0f3e9d2c1b4a"), "not even its tail: {all}");
    }
}

/// A chat `tool` message that answers no earlier call is refused before
/// any upstream is asked, in OpenAI's words; an unknown role and content
/// part reach an OpenAI-dialect upstream as they came, and the other
/// dialects leave them out and say so.
#[test]
fn chat_refuses_a_lone_tool_message_and_reports_unknown_roles_and_parts() {
    let (_env, fake, srv) = Test::new()
        .provider("o", "openai", &["ok"], "")
        .provider("a", "anthropic", &["ok"], "")
        .serve(&[]);
    let lone = json!({"model": "o::ok", "messages": [
        {"role": "user", "content": Q},
        {"role": "tool", "tool_call_id": "call_9", "content": "14"}
    ]});
    let r = post(&srv, "/v1/chat/completions", &[], &lone);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("messages with role 'tool' must be a response to a preceeding message"),
        "{}",
        r.body
    );
    assert_eq!(calls(&fake, "ok"), 0);
    let odd = |model: &str| {
        json!({"model": model, "messages": [
            {"role": "user", "content": [{"type": "text", "text": Q}, {"type": "a_new_part", "x": 1}]},
            {"role": "narrator", "content": "An aside."}
        ]})
    };
    let r = post(&srv, "/v1/chat/completions", &[], &odd("a::ok"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("x-llmprobe-dropped"),
        "content[a_new_part], role[narrator]"
    );
    let r = post(&srv, "/v1/chat/completions", &[], &odd("o::ok"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("x-llmprobe-dropped"), "");
    let sent = fake.seen().pop().unwrap().body.unwrap();
    assert_eq!(sent["messages"][1]["role"], "narrator", "{sent}");
}
