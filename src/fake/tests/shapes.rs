//! Conversations the real providers refuse for their shape (a tool result
//! that answers no call, a call left unanswered, an unknown role, empty
//! content), refused by the fake in each provider's words, over real HTTP;
//! and the well-formed conversations next to them, answered.

use super::*;

/// `body` (its conversation only: the fields every request needs are
/// added) posted to `model` at `base` in `d`'s shape; for Anthropic, each
/// of `betas` as an `anthropic-beta` header of its own.
fn post(
    base: &str,
    d: Dialect,
    model: &str,
    body: Value,
    betas: &[&str],
) -> reqwest::RequestBuilder {
    let c = client();
    let mut body = body;
    let rb = match d {
        Dialect::Openai => {
            body["model"] = json!(model);
            c.post(format!("{base}/v1/chat/completions"))
                .header("authorization", format!("Bearer {KEY}"))
        }
        Dialect::Anthropic => {
            body["model"] = json!(model);
            body["max_tokens"] = json!(64);
            let mut rb = c
                .post(format!("{base}/v1/messages"))
                .header("x-api-key", KEY)
                .header("anthropic-version", "2023-06-01");
            for b in betas {
                rb = rb.header("anthropic-beta", *b);
            }
            rb
        }
        Dialect::Gemini => c
            .post(format!("{base}/v1beta/models/{model}:generateContent"))
            .header("x-goog-api-key", KEY),
    };
    rb.body(body.to_string())
}

/// The 400's error object, in `d`'s shape.
fn refusal(d: Dialect, r: &Reply) -> Value {
    assert_eq!(r.status, 400, "{d:?}: {}", r.text);
    let v = r.json();
    let e = error_of(d, &v).clone();
    match d {
        Dialect::Openai | Dialect::Anthropic => assert_eq!(e["type"], "invalid_request_error"),
        Dialect::Gemini => {
            assert_eq!(e["code"], 400, "{v}");
            assert_eq!(e["status"], "INVALID_ARGUMENT", "{v}");
        }
    }
    e
}

fn message(d: Dialect, r: &Reply) -> String {
    refusal(d, r)["message"].as_str().unwrap().to_string()
}

fn tool_use(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "multiply", "input": {"a": 12, "b": 7}})
}

fn tool_result(id: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": "84"})
}

const Q: &str = "What is 12*7?";

const MID_CONVERSATION: &str = "mid-conversation-system-2026-04-07";

#[tokio::test]
async fn anthropic_refuses_tool_results_and_calls_that_do_not_pair() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    let a = Dialect::Anthropic;
    let ask = |messages: Value| send(post(&base, a, "m", json!({"messages": messages}), &[]));
    // Paired, in order or not, several at once: answered.
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me."},
            tool_use("toolu_a"), tool_use("toolu_b")]},
        {"role": "user", "content": [tool_result("toolu_b"), tool_result("toolu_a")]},
    ]))
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.content(a), "The result is 84, 84.");
    // Calls as the last message are the model's to answer (a prefill).
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [tool_use("toolu_a")]},
    ]))
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // A lone result, as the first message or after a user message.
    let lone = |n: usize, id: &str| {
        format!(
            "messages.{n}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: \
             {id}. Each `tool_result` block must have a corresponding `tool_use` block in the \
             previous message."
        )
    };
    let r = ask(json!([{"role": "user", "content": [tool_result("toolu_x")]}])).await;
    assert_eq!(message(a, &r), lone(0, "toolu_x"));
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "user", "content": [tool_result("toolu_x")]},
    ]))
    .await;
    assert_eq!(message(a, &r), lone(1, "toolu_x"));
    // A result for a call two messages back: not the previous message's.
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [tool_use("toolu_a")]},
        {"role": "user", "content": [tool_result("toolu_a")]},
        {"role": "assistant", "content": "The result is 84."},
        {"role": "user", "content": [tool_result("toolu_a")]},
    ]))
    .await;
    assert_eq!(message(a, &r), lone(4, "toolu_a"));
    // One result too many, named by its block.
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [tool_use("toolu_a")]},
        {"role": "user", "content": [tool_result("toolu_a"), tool_result("toolu_z")]},
    ]))
    .await;
    assert_eq!(
        message(a, &r),
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_z. \
         Each `tool_result` block must have a corresponding `tool_use` block in the previous \
         message."
    );
    // Calls whose results are not all in the next message.
    let unanswered = |ids: &str| {
        format!(
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately \
             after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block \
             in the next message."
        )
    };
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [tool_use("toolu_a"), tool_use("toolu_b")]},
        {"role": "user", "content": "never mind"},
    ]))
    .await;
    assert_eq!(message(a, &r), unanswered("toolu_a, toolu_b"));
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [tool_use("toolu_a"), tool_use("toolu_b")]},
        {"role": "user", "content": [tool_result("toolu_a")]},
    ]))
    .await;
    assert_eq!(message(a, &r), unanswered("toolu_b"));
    fake.shutdown().await;
}

#[tokio::test]
async fn anthropic_takes_system_messages_only_under_their_beta() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    let a = Dialect::Anthropic;
    let ask = |messages: Value, betas: &'static [&'static str]| {
        send(post(&base, a, "m", json!({"messages": messages}), betas))
    };
    // Claude Code's shape: the user's turn, then a system message.
    let with_system = |content: Value| {
        json!([
            {"role": "user", "content": "What is 2+2?"},
            {"role": "system", "content": content},
        ])
    };
    let wrong_role = "messages.1.role: Input should be 'user' or 'assistant'";
    let r = ask(with_system(json!("Be brief.")), &[]).await;
    assert_eq!(message(a, &r), wrong_role);
    let r = ask(with_system(json!("Be brief.")), &["claude-code-20250219"]).await;
    assert_eq!(message(a, &r), wrong_role);
    // The beta in a list, or in a header of its own; text as a string or
    // as blocks. The answer reads the user's turn before the system one.
    for (betas, content) in [
        (
            &["claude-code-20250219, mid-conversation-system-2026-04-07,effort-2025-11-24"][..],
            json!("Be brief."),
        ),
        (
            &["claude-code-20250219", MID_CONVERSATION][..],
            json!([{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Really."}]),
        ),
    ] {
        let r = send(post(
            &base,
            a,
            "m",
            json!({"messages": with_system(content)}),
            betas,
        ))
        .await;
        assert_eq!(r.status, 200, "{betas:?}: {}", r.text);
        assert_eq!(r.content(a), "4", "{betas:?}");
    }
    // Under the beta, still text only, and still not empty.
    let r = ask(
        with_system(json!([{"type": "image", "source": {"type": "base64",
            "media_type": "image/png", "data": "QUJD"}}])),
        &[MID_CONVERSATION],
    )
    .await;
    assert_eq!(
        message(a, &r),
        "messages.1.content.0.type: Input should be 'text'"
    );
    let r = ask(with_system(json!("")), &[MID_CONVERSATION]).await;
    assert_eq!(
        message(a, &r),
        "messages.1: all messages must have non-empty content except for the optional final \
         assistant message"
    );
    // Any other role, beta or not.
    for role in ["developer", "tool", "model"] {
        let r = ask(
            json!([{"role": "user", "content": Q}, {"role": role, "content": "x"}]),
            &[MID_CONVERSATION],
        )
        .await;
        assert_eq!(message(a, &r), wrong_role, "{role}");
    }
    let r = ask(
        json!([{"role": "user", "content": Q}, {"content": "x"}]),
        &[],
    )
    .await;
    assert_eq!(message(a, &r), "messages.1.role: Field required");
    fake.shutdown().await;
}

#[tokio::test]
async fn anthropic_refuses_empty_text_and_empty_messages() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    let a = Dialect::Anthropic;
    let ask = |messages: Value| send(post(&base, a, "m", json!({"messages": messages}), &[]));
    let empty_text = "messages: text content blocks must be non-empty";
    let r = ask(json!([{"role": "user", "content": [
        {"type": "text", "text": Q}, {"type": "text", "text": ""}]}]))
    .await;
    assert_eq!(message(a, &r), empty_text);
    // In an assistant message, and in a tool result's content.
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
    ]))
    .await;
    assert_eq!(message(a, &r), empty_text);
    let r = ask(json!([
        {"role": "user", "content": Q},
        {"role": "assistant", "content": [tool_use("toolu_a")]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a",
            "content": [{"type": "text", "text": ""}]}]},
    ]))
    .await;
    assert_eq!(message(a, &r), empty_text);
    let no_content = |n: usize| {
        format!(
            "messages.{n}: all messages must have non-empty content except for the optional \
             final assistant message"
        )
    };
    for empty in [json!(""), json!([])] {
        let r = ask(json!([{"role": "user", "content": empty}])).await;
        assert_eq!(message(a, &r), no_content(0), "{empty}");
        let r = ask(json!([
            {"role": "user", "content": Q},
            {"role": "assistant", "content": empty},
            {"role": "user", "content": Q},
        ]))
        .await;
        assert_eq!(message(a, &r), no_content(1), "{empty}");
        // The final assistant message may be empty.
        let r = ask(json!([
            {"role": "user", "content": Q},
            {"role": "assistant", "content": empty},
        ]))
        .await;
        assert_eq!(r.status, 200, "{empty}: {}", r.text);
        assert_eq!(r.content(a), "84");
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn openai_refuses_tool_messages_and_calls_that_do_not_pair() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    let o = Dialect::Openai;
    let ask = |messages: Value| send(post(&base, o, "m", json!({"messages": messages}), &[]));
    let calls = |ids: &[&str]| {
        let list: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({"id": id, "type": "function",
                       "function": {"name": "multiply", "arguments": "{\"a\":12,\"b\":7}"}})
            })
            .collect();
        json!({"role": "assistant", "content": null, "tool_calls": list})
    };
    let tool = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "84"});
    // Answered in any order, a system message among the answers.
    let r = ask(json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": Q},
        calls(&["call_a", "call_b"]),
        tool("call_b"),
        {"role": "system", "content": "Answer now."},
        tool("call_a"),
    ]))
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.content(o), "The result is 84, 84.");
    // Calls as the last message.
    let r = ask(json!([{"role": "user", "content": Q}, calls(&["call_a"])])).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // A tool message that answers nothing: alone, after the answers are
    // over, or for another id.
    let orphan = "Invalid parameter: messages with role 'tool' must be a response to a \
                  preceeding message with 'tool_calls'.";
    for (messages, n) in [
        (json!([{"role": "user", "content": Q}, tool("call_a")]), 1),
        (
            json!([
                {"role": "user", "content": Q},
                calls(&["call_a"]),
                tool("call_a"),
                {"role": "user", "content": "again"},
                tool("call_a"),
            ]),
            4,
        ),
        (
            json!([
                {"role": "user", "content": Q},
                calls(&["call_a"]),
                tool("call_a"),
                {"role": "assistant", "content": "The result is 84."},
                tool("call_a"),
            ]),
            4,
        ),
        (
            json!([{"role": "user", "content": Q}, calls(&["call_a"]), tool("call_z")]),
            2,
        ),
    ] {
        let r = ask(messages.clone()).await;
        let e = refusal(o, &r);
        assert_eq!(e["message"], orphan, "{messages}");
        assert_eq!(e["param"], format!("messages.[{n}].role"), "{messages}");
        assert_eq!(e["code"], Value::Null);
    }
    // Calls not all answered before the next turn, or before the end.
    let unanswered = |ids: &str| {
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages \
             responding to each 'tool_call_id'. The following tool_call_ids did not have \
             response messages: {ids}"
        )
    };
    for (messages, ids) in [
        (
            json!([
                {"role": "user", "content": Q},
                calls(&["call_a", "call_b"]),
                {"role": "user", "content": "never mind"},
            ]),
            "call_a, call_b",
        ),
        (
            json!([{"role": "user", "content": Q}, calls(&["call_a", "call_b"]), tool("call_a")]),
            "call_b",
        ),
        (
            json!([
                {"role": "user", "content": Q},
                calls(&["call_a", "call_b"]),
                tool("call_b"),
                {"role": "assistant", "content": "Done."},
            ]),
            "call_a",
        ),
    ] {
        let r = ask(messages.clone()).await;
        let e = refusal(o, &r);
        assert_eq!(e["message"], unanswered(ids), "{messages}");
        assert_eq!(e["param"], "messages.[1].role", "{messages}");
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn gemini_refuses_stray_function_responses_and_unknown_roles() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    let g = Dialect::Gemini;
    let ask = |contents: Value| send(post(&base, g, "m", json!({"contents": contents}), &[]));
    let user = json!({"role": "user", "parts": [{"text": Q}]});
    let call = json!({"role": "model", "parts": [{"text": "Let me."},
        {"functionCall": {"name": "multiply", "args": {"a": 12, "b": 7}}}]});
    let response = json!({"role": "user", "parts": [
        {"functionResponse": {"name": "multiply", "response": {"result": 84}}}]});
    let r = ask(json!([user, call, response])).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.content(g), "The result is 84.");
    // snake_case, as Google also reads it.
    let r = ask(json!([user,
        {"role": "model", "parts": [{"function_call": {"name": "multiply", "args": {}}}]},
        {"role": "user", "parts": [{"function_response": {"name": "multiply",
            "response": {"result": 84}}}]}]))
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let stray = "Please ensure that function response turn comes immediately after a function \
                 call turn.";
    for contents in [
        json!([response]),
        json!([user, response]),
        json!([user, {"role": "model", "parts": [{"text": "No call."}]}, response]),
        json!([user, call, response, {"role": "model", "parts": [{"text": "84"}]}, response]),
        json!([user, call, user, response]),
    ] {
        let r = ask(contents.clone()).await;
        assert_eq!(message(g, &r), stray, "{contents}");
    }
    let bad_role = "Please use a valid role: user, model.";
    for role in ["system", "assistant", "function", "tool"] {
        let r = ask(json!([user, {"role": role, "parts": [{"text": "x"}]}])).await;
        assert_eq!(message(g, &r), bad_role, "{role}");
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn a_malformed_conversation_is_refused_before_any_behaviour_and_recorded() {
    let fake = start(FakeConfig::default().script("scripted", &[Behaviour::E500]))
        .await
        .unwrap();
    let base = fake.url();
    let lone = json!({"messages": [{"role": "user", "content": [tool_result("toolu_x")]}]});
    // A failing behaviour, by id or by script, does not answer first.
    for model in ["e500", "scripted", "rate-limit"] {
        let r = send(post(&base, Dialect::Anthropic, model, lone.clone(), &[])).await;
        assert!(message(Dialect::Anthropic, &r).starts_with("messages.0.content.0:"));
    }
    let recorded = fake.requests();
    assert_eq!(recorded.len(), 3);
    for (rec, model) in recorded.iter().zip(["e500", "scripted", "rate-limit"]) {
        assert_eq!(rec.behaviour, None, "{rec:?}");
        let mut body = lone.clone();
        body["model"] = json!(model);
        body["max_tokens"] = json!(64);
        assert_eq!(rec.body.as_ref(), Some(&body));
    }
    // Refused before the fake's own need of a user turn, as OpenAI, which
    // has no such need, would refuse it.
    let r = send(post(
        &base,
        Dialect::Openai,
        "m",
        json!({"messages": [{"role": "tool", "tool_call_id": "call_x", "content": "84"}]}),
        &[],
    ))
    .await;
    assert_eq!(refusal(Dialect::Openai, &r)["param"], "messages.[0].role");
    // The refused request did not take its turn of the script.
    let r = ask(&base, Dialect::Anthropic, "scripted", Q).await;
    assert_eq!(r.status, 500, "{}", r.text);
    fake.shutdown().await;
}
