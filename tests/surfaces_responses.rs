//! `POST /v1/responses` end to end: the real binary, against fake
//! providers of each upstream dialect. Replies, streams (event order and
//! sequence numbers), a function call and its output sent back, images,
//! what is dropped and reported, the 400s, a request shaped like Codex
//! CLI's, and conversations held by route's item store (`item_reference`,
//! `previous_response_id`, expiry on the test clock).

use serde_json::{Value, json};

use crate::support::Test;
use crate::support::{Env, Fake, Http, RouteServer, advance, clock_env, http};

const Q: &str = "What is 7 + 7? Reply with only the number.";
const MODELS: [&str; 3] = ["o::ok", "a::ok", "g::ok"];

/// A fake with each dialect behind one server: `o` (openai), `a`
/// (anthropic), `g` (gemini), each serving `models`; the environment
/// holds the fake's record, so it lives as long as the test.
fn setup(models: &[&str]) -> (Env, Fake, RouteServer) {
    setup_with(models, "")
}

/// [`setup`] with `extra` in the config (a `[route]` table).
fn setup_with(models: &[&str], extra: &str) -> (Env, Fake, RouteServer) {
    let (env, fake, srv) = Test::new()
        .provider("o", "openai", models, "priority = 1")
        .provider("a", "anthropic", models, "priority = 2")
        .provider("g", "gemini", models, "priority = 3")
        .extra(extra)
        .serve(&[]);
    (env, fake, srv)
}

/// The bodies of the requests the fake received (route's reachability
/// probes at start have none).
fn sent(fake: &Fake) -> Vec<Value> {
    fake.seen().into_iter().filter_map(|s| s.body).collect()
}

fn post(srv: &RouteServer, body: &Value) -> Http {
    http(
        "POST",
        &format!("{}/v1/responses?api-version=1", srv.url),
        &[
            ("content-type", "application/json"),
            ("openai-beta", "responses=experimental"),
        ],
        Some(&body.to_string()),
    )
}

/// A stream's events as `(event name, data)`, checking each one's name is
/// its data's `type` and the sequence numbers count from 0.
fn events(r: &Http) -> Vec<(String, Value)> {
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.header("content-type").starts_with("text/event-stream"),
        "{:?}",
        r.headers
    );
    let mut out = Vec::new();
    for block in r.body.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut name = None;
        let mut data = None;
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data =
                    Some(serde_json::from_str::<Value>(d).unwrap_or_else(|e| panic!("{e}: {d}")));
            }
        }
        let (name, data) = (name.expect("event name"), data.expect("event data"));
        assert_eq!(data["type"], name.as_str(), "{block}");
        assert_eq!(data["sequence_number"], out.len(), "{}", r.body);
        out.push((name, data));
    }
    out
}

fn kinds(evs: &[(String, Value)]) -> Vec<&str> {
    evs.iter().map(|(k, _)| k.as_str()).collect()
}

/// The event kinds with each run of deltas collapsed to one.
fn shape(evs: &[(String, Value)]) -> Vec<&str> {
    let mut k = kinds(evs);
    k.dedup();
    k
}

#[test]
fn responses_answer_plain_and_streamed_through_each_dialect() {
    let (_env, _fake, srv) = setup(&["ok"]);
    for m in MODELS {
        let r = post(
            &srv,
            &json!({"model": m, "input": Q, "instructions": "You are terse.", "max_output_tokens": 64}),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        assert_eq!(r.header("x-routed-via"), m);
        assert_eq!(r.header("x-fallback-trail"), "none");
        let v = r.json();
        assert_eq!(v["object"], "response", "{v}");
        assert_eq!(v["status"], "completed", "{v}");
        assert_eq!(v["model"], m.split("::").nth(1).unwrap(), "{v}");
        assert!(v["id"].as_str().unwrap().starts_with("resp_"), "{v}");
        assert_eq!(v["output_text"], "14", "{v}");
        assert_eq!(v["output"][0]["type"], "message", "{v}");
        assert_eq!(v["output"][0]["role"], "assistant", "{v}");
        assert_eq!(v["output"][0]["content"][0]["type"], "output_text", "{v}");
        assert_eq!(v["output"][0]["content"][0]["text"], "14", "{v}");
        assert_eq!(v["instructions"], "You are terse.", "{v}");
        assert_eq!(v["max_output_tokens"], 64, "{v}");
        let u = &v["usage"];
        let (i, o) = (
            u["input_tokens"].as_u64().unwrap(),
            u["output_tokens"].as_u64().unwrap(),
        );
        assert!(i > 0 && o > 0, "{v}");
        assert_eq!(u["total_tokens"], i + o, "{v}");

        let r = post(&srv, &json!({"model": m, "input": Q, "stream": true}));
        assert_eq!(r.header("x-routed-via"), m);
        let evs = events(&r);
        assert_eq!(
            shape(&evs),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ],
            "{m}: {}",
            r.body
        );
        let deltas: String = evs
            .iter()
            .filter(|(k, _)| k == "response.output_text.delta")
            .map(|(_, d)| d["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, "14", "{m}");
        let done = &evs.last().unwrap().1["response"];
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["output_text"], "14", "{done}");
        assert_eq!(done["id"], evs[0].1["response"]["id"]);
        let item_id = &evs[2].1["item"]["id"];
        assert!(
            evs[3..8]
                .iter()
                .all(|(_, d)| d["item_id"] == *item_id || d["item"]["id"] == *item_id)
        );
        assert!(
            done["usage"]["output_tokens"].as_u64().unwrap() > 0,
            "{m}: {done}"
        );
    }
}

const ADD: &str = r#"{"type": "function", "name": "add", "description": "Add two numbers.",
    "strict": true, "parameters": {"type": "object", "additionalProperties": false,
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}"#;
const ASK: &str = "What is 12 + 30? Use the add tool.";

#[test]
fn a_function_call_and_its_output_round_trip_through_each_dialect() {
    let (_env, _fake, srv) = setup(&["ok"]);
    let add: Value = serde_json::from_str(ADD).unwrap();
    for m in MODELS {
        let r = post(&srv, &json!({"model": m, "input": ASK, "tools": [add]}));
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        let v = r.json();
        let call = v["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["type"] == "function_call")
            .unwrap_or_else(|| panic!("{m}: no call in {v}"))
            .clone();
        assert_eq!(call["name"], "add", "{m}: {v}");
        assert!(call["id"].as_str().unwrap().starts_with("fc_"), "{call}");
        let call_id = call["call_id"].as_str().unwrap();
        assert!(!call_id.is_empty(), "{call}");
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"a": 12, "b": 30}), "{m}");
        assert_eq!(v["tools"][0]["name"], "add", "{v}");

        // Streamed: the call's item, its argument deltas, then done.
        let r = post(
            &srv,
            &json!({"model": m, "input": ASK, "tools": [add], "stream": true}),
        );
        let evs = events(&r);
        assert_eq!(
            shape(&evs),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ],
            "{m}: {}",
            r.body
        );
        assert_eq!(evs[2].1["item"]["type"], "function_call");
        assert_eq!(evs[2].1["item"]["name"], "add");
        let streamed: String = evs
            .iter()
            .filter(|(k, _)| k == "response.function_call_arguments.delta")
            .map(|(_, d)| d["delta"].as_str().unwrap())
            .collect();
        let done = evs
            .iter()
            .find(|(k, _)| k == "response.function_call_arguments.done")
            .unwrap();
        assert_eq!(done.1["arguments"], streamed.as_str());
        assert_eq!(
            serde_json::from_str::<Value>(&streamed).unwrap(),
            json!({"a": 12, "b": 30})
        );
        let last = &evs.last().unwrap().1["response"];
        assert_eq!(
            last["output"][0]["call_id"], evs[2].1["item"]["call_id"],
            "{last}"
        );

        // The round trip: the call and its output sent back in full.
        let r = post(
            &srv,
            &json!({"model": m, "tools": [add], "store": false, "input": [
                {"role": "user", "content": [{"type": "input_text", "text": ASK}]},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                call,
                {"type": "function_call_output", "call_id": call_id, "output": "42"},
            ]}),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        let v = r.json();
        assert!(
            v["output_text"].as_str().unwrap().contains("42"),
            "{m}: {v}"
        );
        assert_eq!(v["status"], "completed", "{v}");
    }
}

#[test]
fn reasoning_and_built_in_tools_are_dropped_and_reported() {
    let (_env, fake, srv) = setup(&["ok"]);
    for m in MODELS {
        let r = post(
            &srv,
            &json!({
                "model": m, "input": Q, "reasoning": {"effort": "high", "summary": "auto"},
                "tools": [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}],
                "tool_choice": "auto",
            }),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        assert_eq!(r.json()["output_text"], "14");
        let dropped = r.header("x-llmprobe-dropped");
        assert!(
            dropped.starts_with("tools[web_search], tools[file_search], reasoning"),
            "{m}: {dropped}"
        );
    }
    // No upstream heard of either.
    let bodies = sent(&fake);
    assert_eq!(bodies.len(), 3);
    for b in bodies {
        let body = b.to_string();
        assert!(
            !body.contains("web_search") && !body.contains("reasoning_effort"),
            "{body}"
        );
        assert!(!body.contains("\"tools\""), "{body}");
    }
}

/// A Codex CLI history with a shell call route does not run, its output
/// (sent as a `function_call_output`) and a compaction: all three are
/// dropped and reported, so no upstream sees a tool result that answers
/// no call; `text.verbosity` is reported by its Responses name where the
/// dialect drops it.
#[test]
fn a_codex_history_with_built_in_calls_is_served_without_them() {
    let (_env, fake, srv) = setup(&["ok"]);
    for m in MODELS {
        let r = post(
            &srv,
            &json!({"model": m, "text": {"verbosity": "low"}, "input": [
                {"type": "compaction", "id": "cmp_1", "encrypted_content": "zzz"},
                {"role": "user", "content": "list the files"},
                {"type": "local_shell_call", "id": "lsh_1", "call_id": "ls1", "status": "completed",
                 "action": {"type": "exec", "command": ["ls"], "env": {}}},
                {"type": "function_call_output", "call_id": "ls1", "output": "README.md"},
                {"role": "assistant", "content": "There is a README."},
                {"role": "user", "content": Q},
            ]}),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        assert_eq!(r.json()["output_text"], "14", "{m}");
        let dropped = r.header("x-llmprobe-dropped");
        let want = "input[compaction], input[local_shell_call], input[function_call_output]";
        // The fake's OpenAI dialect takes verbosity; the others drop it.
        let want = if m.starts_with("o::") {
            want.to_string()
        } else {
            format!("{want}, text.verbosity")
        };
        assert_eq!(dropped, want, "{m}");
    }
    let bodies = sent(&fake);
    assert_eq!(bodies.len(), 3);
    for b in bodies {
        let body = b.to_string();
        assert!(
            !body.contains("ls1") && !body.contains("README.md") && !body.contains("zzz"),
            "{body}"
        );
        assert!(body.contains("There is a README."), "{body}");
    }
}

#[test]
fn what_route_cannot_honour_is_a_400_and_reaches_no_upstream() {
    let (_env, fake, srv) = setup(&["ok"]);
    let add: Value = serde_json::from_str(ADD).unwrap();
    let cases = [
        (
            json!({"model": "o::ok", "input": Q, "previous_response_id": "resp_1"}),
            "previous_response_id",
        ),
        (
            json!({"model": "o::ok", "input": Q, "conversation": {"id": "conv_1"}}),
            "conversation",
        ),
        (
            json!({"model": "o::ok", "input": Q, "background": true}),
            "background",
        ),
        (
            json!({"model": "o::ok", "input": Q, "tools": [add, {"type": "web_search"}],
                "tool_choice": {"type": "web_search"}}),
            "tool_choice",
        ),
        (
            json!({"model": "o::ok", "input": Q, "tools": [{"type": "web_search"}],
                "tool_choice": "required"}),
            "tool_choice",
        ),
        (
            json!({"model": "o::ok", "input": [{"type": "item_reference", "id": "msg_1"}]}),
            "input[0].id",
        ),
        (
            json!({"model": "o::ok", "input": [{"role": "user", "content": [
                {"type": "input_file", "file_id": "file_1"}]}]}),
            "input[0].content[0].type",
        ),
        (
            json!({"model": "o::ok", "input": [{"role": "user", "content": Q},
                {"type": "function_call", "name": "add", "arguments": "{}"}]}),
            "input[1].call_id",
        ),
        (json!({"model": "o::ok"}), "input"),
        (
            json!({"model": "o::ok", "input": "", "instructions": "Be brief."}),
            "input",
        ),
        (
            json!({"model": "o::ok", "input": Q, "max_output_tokens": 0}),
            "max_output_tokens",
        ),
        (
            json!({"model": "o::ok", "input": [{"role": "user", "content": Q},
                {"type": "function_call_output", "call_id": "ls1", "output": "a.txt"}]}),
            "input[1].call_id",
        ),
        (
            json!({"model": "o::ok", "input": [{"role": "user", "content": Q},
                {"type": "compaction_trigger"}]}),
            "input[1].type",
        ),
    ];
    for (body, field) in cases {
        let r = post(&srv, &body);
        assert_eq!(r.status, 400, "{field}: {}", r.body);
        let e = &r.json()["error"];
        assert_eq!(e["type"], "invalid_request_error", "{e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("'{field}'")),
            "{field}: {e}"
        );
    }
    let r = post(
        &srv,
        &json!({"model": "o::ok", "input": Q, "previous_response_id": "resp_1"}),
    );
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send the whole conversation as input"),
        "{}",
        r.body
    );
    let r = http(
        "POST",
        &format!("{}/v1/responses", srv.url),
        &[("content-type", "application/json")],
        Some("{not json"),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    // The chat surface's code and words for a body that is not JSON.
    assert_eq!(r.json()["error"]["code"], "invalid_request", "{}", r.body);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("We could not parse the JSON body of your request"),
        "{}",
        r.body
    );
    let r = post(&srv, &json!({"model": "nope::nothing", "input": Q}));
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    assert!(sent(&fake).is_empty(), "{:?}", sent(&fake));
    // The record is read: the first request that is served is in it.
    assert_eq!(
        post(&srv, &json!({"model": "o::ok", "input": Q})).status,
        200
    );
    assert_eq!(sent(&fake).len(), 1);
}

#[test]
fn a_reply_cut_by_the_cap_is_incomplete_and_a_broken_stream_ends_with_response_failed() {
    let (_env, _fake, srv) = setup(&["truncated", "stream-error"]);
    for p in ["o", "a", "g"] {
        let m = format!("{p}::truncated");
        let r = post(
            &srv,
            &json!({"model": m, "input": Q, "max_output_tokens": 16}),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        let v = r.json();
        assert_eq!(v["status"], "incomplete", "{m}: {v}");
        assert_eq!(
            v["incomplete_details"]["reason"], "max_output_tokens",
            "{m}: {v}"
        );

        let m = format!("{p}::stream-error");
        let r = post(&srv, &json!({"model": m, "input": Q, "stream": true}));
        let evs = events(&r);
        let (kind, last) = evs.last().unwrap();
        assert_eq!(kind, "response.failed", "{m}: {}", r.body);
        assert_eq!(last["response"]["status"], "failed", "{m}: {last}");
        assert!(
            last["response"]["error"]["message"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{last}"
        );
        assert_eq!(
            kinds(&evs)[..3],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added"
            ]
        );
    }
}

/// What Codex CLI sends on every turn: long instructions, many function
/// tools with large schemas, `reasoning`, `store: false`, `include`,
/// `prompt_cache_key`, and fields route has never heard of.
fn codex_request(model: &str) -> Value {
    let instructions = "You are a coding agent running in the Codex CLI. ".repeat(400);
    let tools: Vec<Value> = (0..40)
        .map(|i| {
            let props: serde_json::Map<String, Value> = (0..25)
                .map(|j| {
                    (
                        format!("field_{j}"),
                        json!({"type": "string", "description": format!("Field {j} of tool {i}. ").repeat(5)}),
                    )
                })
                .chain([
                    ("a".to_string(), json!({"type": "number"})),
                    ("b".to_string(), json!({"type": "number"})),
                ])
                .collect();
            json!({
                "type": "function", "name": format!("tool_{i}"), "strict": false,
                "description": format!("Tool number {i}. ").repeat(20),
                "parameters": {"type": "object", "properties": props, "required": ["a", "b"],
                               "additionalProperties": false},
            })
        })
        .collect();
    json!({
        "model": model,
        "instructions": instructions,
        "input": [
            {"type": "message", "role": "developer", "content": [
                {"type": "input_text", "text": "<permissions instructions>sandbox: workspace-write</permissions instructions>"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context><cwd>/repo</cwd></environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ASK}]},
        ],
        "tools": tools,
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199a0c4-5b7e-7d21-9e8f-3c2a1b0d4e5f",
        "text": {"verbosity": "medium"},
        "client_metadata": {"x-codex-turn": 1},
        "service_tier": "auto",
    })
}

#[test]
fn a_request_shaped_like_codex_clis_is_served_through_each_dialect() {
    let (_env, fake, srv) = setup(&["ok"]);
    for m in MODELS {
        let r = http(
            "POST",
            &format!("{}/v1/responses", srv.url),
            &[
                ("content-type", "application/json"),
                ("authorization", "Bearer unused"),
                ("originator", "codex_cli_rs"),
                ("session_id", "0199a0c4-5b7e-7d21-9e8f-3c2a1b0d4e5f"),
                ("openai-beta", "responses=experimental"),
            ],
            Some(&codex_request(m).to_string()),
        );
        assert!(
            r.header("x-llmprobe-dropped").starts_with("reasoning"),
            "{m}: {:?}",
            r.headers
        );
        let evs = events(&r);
        let done = &evs.last().unwrap().1["response"];
        assert_eq!(
            evs.last().unwrap().0,
            "response.completed",
            "{m}: {}",
            r.body
        );
        let call = &done["output"][0];
        assert_eq!(call["type"], "function_call", "{m}: {done}");
        assert_eq!(call["name"], "tool_0", "{m}: {done}");
        assert_eq!(done["tools"].as_array().unwrap().len(), 40);
        assert_eq!(done["parallel_tool_calls"], false);
    }
    // What the OpenAI upstream received: a chat request, every tool, the
    // instructions first, no Responses-only field.
    let bodies = sent(&fake);
    let o = bodies
        .iter()
        .find(|b| b["messages"].is_array())
        .unwrap_or_else(|| panic!("no chat request: {bodies:?}"));
    assert_eq!(o["tools"].as_array().unwrap().len(), 40, "{o}");
    assert_eq!(o["messages"][0]["role"], "system");
    assert!(
        o["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are a coding agent")
    );
    assert_eq!(o["messages"][1]["role"], "developer");
    assert_eq!(o["parallel_tool_calls"], false);
    for k in [
        "include",
        "store",
        "prompt_cache_key",
        "client_metadata",
        "reasoning",
        "instructions",
        "input",
    ] {
        assert!(o.get(k).is_none(), "{k} reached the upstream: {o}");
    }
    let a = bodies
        .iter()
        .find(|b| b["tools"][0]["input_schema"].is_object())
        .expect("anthropic");
    assert_eq!(a["tools"].as_array().unwrap().len(), 40);
    assert!(a["system"].to_string().contains("You are a coding agent"));
}

/// A one-pixel PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[test]
fn an_input_image_reaches_each_dialect_as_its_own_image() {
    let (_env, fake, srv) = setup(&["ok"]);
    for m in MODELS {
        let r = post(
            &srv,
            &json!({"model": m, "input": [{"role": "user", "content": [
                {"type": "input_text", "text": Q},
                {"type": "input_image", "image_url": format!("data:image/png;base64,{PNG}"), "detail": "low"},
            ]}]}),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        assert_eq!(r.json()["output_text"], "14", "{m}");
    }
    let bodies = sent(&fake);
    let text = |b: &Value| b.to_string();
    assert!(
        bodies
            .iter()
            .any(|b| b["messages"][0]["content"][1]["image_url"]["url"]
                .as_str()
                .is_some_and(|u| u.ends_with(PNG))),
        "openai: {bodies:?}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| b["messages"][0]["content"][1]["type"] == "image" && text(b).contains(PNG)),
        "anthropic: {bodies:?}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| b["contents"][0]["parts"][1]["inlineData"]["data"] == PNG),
        "gemini: {bodies:?}"
    );
}

#[test]
fn interleaved_parallel_calls_from_an_openai_upstream_keep_all_their_arguments() {
    let env = clock_env();
    let srv = crate::support::route_over_canned_stream(&env, crate::support::INTERLEAVED_CALLS);
    let add: Value = serde_json::from_str(ADD).unwrap();
    let r = post(
        &srv,
        &json!({"model": "o::m", "input": ASK, "tools": [add], "stream": true}),
    );
    // `events` checks the sequence numbers count from 0.
    let evs = events(&r);
    // Items open and close one at a time; each call's deltas add up to
    // the arguments its `.done` and `output_item.done` give.
    let mut open: Option<String> = None;
    let mut deltas = String::new();
    let mut done = Vec::new();
    for (k, d) in &evs {
        match k.as_str() {
            "response.output_item.added" => {
                assert!(open.is_none(), "{}", r.body);
                assert_eq!(d["output_index"], done.len());
                open = Some(d["item"]["id"].as_str().unwrap().to_string());
                deltas.clear();
            }
            "response.function_call_arguments.delta" => {
                assert_eq!(d["item_id"].as_str(), open.as_deref(), "{}", r.body);
                deltas.push_str(d["delta"].as_str().unwrap());
            }
            "response.function_call_arguments.done" => {
                assert_eq!(d["item_id"].as_str(), open.as_deref(), "{}", r.body);
                assert_eq!(d["arguments"], deltas.as_str(), "{}", r.body);
            }
            "response.output_item.done" => {
                assert_eq!(d["item"]["id"].as_str(), open.take().as_deref());
                done.push(d["item"].clone());
            }
            _ => {}
        }
    }
    let calls: Vec<(&str, Value)> = done
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| {
            let args = serde_json::from_str(i["arguments"].as_str().unwrap()).unwrap();
            (i["call_id"].as_str().unwrap(), args)
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", json!({"a": 1, "b": 2})),
            ("call_b", json!({"a": 3, "b": 4})),
        ],
        "{}",
        r.body
    );
    let (kind, last) = evs.last().unwrap();
    assert_eq!(kind, "response.completed");
    assert_eq!(last["response"]["output"], json!(done));
    assert_eq!(last["response"]["output"][0]["content"][0]["text"], "Both.");
    assert_eq!(last["response"]["usage"]["output_tokens"], 30);
}

/// A served reply's `response` object: the body, or a stream's last
/// event's.
fn reply(r: &Http) -> Value {
    assert_eq!(r.status, 200, "{}", r.body);
    if r.header("content-type").starts_with("text/event-stream") {
        let evs = events(r);
        let (kind, last) = evs.last().unwrap();
        assert_eq!(kind, "response.completed", "{}", r.body);
        last["response"].clone()
    } else {
        r.json()
    }
}

/// The id of a reply's `message` item.
fn message_id(v: &Value) -> String {
    v["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["type"] == "message")
        .unwrap_or_else(|| panic!("no message in {v}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

const TURNS: [(&str, &str); 3] = [
    ("What is 1 + 1?", "2"),
    ("What is 2 + 2?", "4"),
    ("What is 3 + 3?", "6"),
];

/// The Vercel AI SDK's OpenAI provider (the Responses API, `store` left
/// on) sends the assistant's earlier answers as `item_reference`s to the
/// `message` items route returned: each turn resolves them, streamed or
/// not, and the upstream gets the whole conversation.
#[test]
fn a_three_turn_conversation_refers_to_routes_answers_by_item_reference() {
    let (_env, fake, srv) = setup(&["ok"]);
    for m in MODELS {
        for stream in [false, true] {
            let mut input = Vec::new();
            for (q, a) in TURNS {
                input.push(json!({"role": "user", "content": [{"type": "input_text", "text": q}]}));
                let r = post(&srv, &json!({"model": m, "input": input, "stream": stream}));
                assert_eq!(r.header("x-llmprobe-dropped"), "", "{m}");
                let v = reply(&r);
                assert_eq!(v["output_text"], a, "{m} {stream}: {v}");
                assert_eq!(v["store"], true, "{v}");
                input.push(json!({"type": "item_reference", "id": message_id(&v)}));
            }
            // The third turn's upstream request held both earlier answers.
            let last = sent(&fake).pop().unwrap().to_string();
            for (i, (q, a)) in TURNS.into_iter().enumerate() {
                assert!(last.contains(q), "{m}: {last}");
                let answered = last.contains(&format!("\"{a}\""));
                assert_eq!(answered, i < 2, "{m}: {last}");
            }
        }
    }
    // 3 dialects, plain and streamed, 3 turns: a response and a message
    // item each.
    let text = http("GET", &format!("{}/metrics", srv.url), &[], None).body;
    for line in [
        "llmprobe_route_item_store_items{kind=\"item\"} 18",
        "llmprobe_route_item_store_items{kind=\"response\"} 18",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    let bytes: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("llmprobe_route_item_store_bytes "))
        .unwrap_or_else(|| panic!("{text}"))
        .parse()
        .unwrap();
    assert!(bytes > 1000, "{bytes}");
}

/// `previous_response_id` puts the chain's turns before the new input, as
/// OpenAI does; the earlier instructions are not carried over; a response
/// sent with `store: false` is not kept.
#[test]
fn previous_response_id_chains_the_turns_and_store_false_keeps_nothing() {
    let (_env, fake, srv) = setup(&["ok"]);
    for m in MODELS {
        for stream in [false, true] {
            let mut previous: Option<String> = None;
            for (i, (q, a)) in TURNS.into_iter().enumerate() {
                let mut body = json!({"model": m, "input": q, "stream": stream});
                if i == 0 {
                    body["instructions"] = json!("Say only the number, like a terse robot.");
                }
                if let Some(p) = &previous {
                    body["previous_response_id"] = json!(p);
                }
                let v = reply(&post(&srv, &body));
                assert_eq!(v["output_text"], a, "{m} {stream}: {v}");
                assert_eq!(v["previous_response_id"], json!(previous), "{v}");
                assert_eq!(v["store"], true, "{v}");
                previous = Some(v["id"].as_str().unwrap().to_string());
            }
            let last = sent(&fake).pop().unwrap().to_string();
            for (i, (q, a)) in TURNS.into_iter().enumerate() {
                assert!(last.contains(q), "{m}: {last}");
                let answered = last.contains(&format!("\"{a}\""));
                assert_eq!(answered, i < 2, "{m}: {last}");
            }
            assert!(!last.contains("terse robot"), "{m}: {last}");
        }
    }
    // store: false: answered, and nothing kept.
    let v = reply(&post(
        &srv,
        &json!({"model": "o::ok", "input": Q, "store": false}),
    ));
    assert_eq!(v["store"], false, "{v}");
    let before = sent(&fake).len();
    let r = post(
        &srv,
        &json!({"model": "o::ok", "input": "More?", "previous_response_id": v["id"]}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "previous_response_not_found", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("it is unknown or expired"),
        "{e}"
    );
    let r = post(
        &srv,
        &json!({"model": "o::ok", "input": [{"type": "item_reference", "id": message_id(&v)}]}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "item_not_found", "{}", r.body);
    assert_eq!(sent(&fake).len(), before);
}

/// Route keeps items `item_store_secs` after they were stored or last
/// used: past that, on route's clock, a reference is a 400 that says the
/// item is unknown or expired, and nothing reaches an upstream.
#[test]
fn an_expired_reference_is_a_400_that_says_so() {
    let (env, fake, srv) = setup_with(&["ok"], "[route]\nitem_store_secs = 60\n");
    let first = reply(&post(&srv, &json!({"model": "o::ok", "input": TURNS[0].0})));
    let refer = |v: &Value, q: &str| {
        json!({"model": "o::ok", "input": [
            {"role": "user", "content": TURNS[0].0},
            {"type": "item_reference", "id": message_id(v)},
            {"role": "user", "content": q},
        ]})
    };
    // Within the minute: resolved, and renewed by the turn that used it.
    advance(&env, 50);
    let second = reply(&post(&srv, &refer(&first, TURNS[1].0)));
    assert_eq!(second["output_text"], "4");
    advance(&env, 100);
    assert_eq!(
        reply(&post(&srv, &refer(&first, TURNS[2].0)))["output_text"],
        "6"
    );
    // A minute after its last use, it is gone; so is the response.
    advance(&env, 161);
    let before = sent(&fake).len();
    let r = post(&srv, &refer(&first, TURNS[2].0));
    assert_eq!(r.status, 400, "{}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["type"], "invalid_request_error", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Invalid 'input[1].id': route holds no item")
            && msg.contains("unknown or expired")
            && msg.contains("60 s ([route] item_store_secs)"),
        "{msg}"
    );
    let r = post(
        &srv,
        &json!({"model": "o::ok", "input": "Again?", "previous_response_id": second["id"]}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("unknown or expired"), "{}", r.body);
    assert_eq!(sent(&fake).len(), before);
    let text = http("GET", &format!("{}/metrics", srv.url), &[], None).body;
    assert!(
        text.contains("llmprobe_route_item_store_evictions_total{reason=\"expired\"}"),
        "{text}"
    );
}

/// An unknown field, item type, content part type or role is never a 400
/// by itself: dropped, reported once each in `X-Llmprobe-Dropped`, and the
/// request served.
#[test]
fn unknown_fields_items_parts_and_roles_are_reported_and_the_request_served() {
    let (_env, fake, srv) = setup(&["ok"]);
    for m in MODELS {
        let r = post(
            &srv,
            &json!({
                "model": m, "seed": 7, "moderation": {"model": "omni-moderation-latest"},
                "input": [
                    {"type": "teleport", "id": "tp_1", "destination": "mars"},
                    {"role": "critic", "content": "This is a bad question."},
                    {"role": "user", "content": [
                        {"type": "input_text", "text": Q},
                        {"type": "input_hologram", "data": "aGk="},
                    ]},
                    {"type": "teleport", "id": "tp_2"},
                ],
                "text": {"shape": "round"},
                "client_metadata": {"x-codex-turn": 3},
                "prompt_cache_retention": "24h",
            }),
        );
        assert_eq!(r.status, 200, "{m}: {}", r.body);
        assert_eq!(r.json()["output_text"], "14", "{m}");
        assert_eq!(
            r.header("x-llmprobe-dropped"),
            "input[teleport], role[critic], content[input_hologram], text.shape, seed, moderation",
            "{m}"
        );
    }
    for b in sent(&fake) {
        let body = b.to_string();
        for word in [
            "mars",
            "critic",
            "bad question",
            "aGk=",
            "seed",
            "omni",
            "round",
        ] {
            assert!(!body.contains(word), "{word}: {body}");
        }
    }
}
