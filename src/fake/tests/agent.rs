//! The `agent` behaviour, over real HTTP, with conversations shaped as
//! real coding agents send them: trimmed by hand from captured requests of
//! Claude Code 2.1.197 (Messages) and Codex CLI 0.171.0 (Responses, as
//! route hands it on), and their equivalents in the other dialects.

use super::*;

const BETAS: &str = "claude-code-20250219,interleaved-thinking-2025-05-14,\
context-management-2025-06-27,mid-conversation-system-2026-04-07,effort-2025-11-24";

/// Claude Code's first text block of a turn: the date, in a reminder.
const REMINDER: &str = "<system-reminder>\nAs you answer the user's questions, you can use \
the following context:\n# currentDate\nToday's date is 2026-12-07.\n\n      IMPORTANT: this \
context may or may not be relevant to your tasks. You should not respond to this context \
unless it is highly relevant to your task.\n</system-reminder>\n\n";

/// Codex's first user message: where it runs, and the date.
const ENVIRONMENT: &str = "<environment_context>\n  <cwd>/tmp/cxwork</cwd>\n  \
<shell>bash</shell>\n  <current_date>2026-12-07</current_date>\n  \
<timezone>Etc/UTC</timezone>\n  <filesystem><workspace_roots><root>/tmp/cxwork</root>\
</workspace_roots></filesystem>\n</environment_context>";

/// Claude Code's system message after the user's turn.
const AGENT_TYPES: &str = "Available agent types for the Agent tool:\n- claude: Catch-all \
for any task that doesn't fit a more specific agent. (Tools: *)\n- Explore: Read-only search \
agent for broad fan-out searches. (Tools: All tools except Agent, Edit, Write)";

const SYSTEM: &str = "You are a Claude agent, built on Anthropic's Claude Agent SDK.";

/// Three of Claude Code's tools, `Agent` first as it sends them, their
/// schemas trimmed.
fn schemas() -> [(&'static str, Value); 3] {
    [
        (
            "Agent",
            json!({"type": "object", "properties": {
                "description": {"type": "string"}, "prompt": {"type": "string"},
                "subagent_type": {"type": "string"},
                "run_in_background": {"type": "boolean"}},
                "required": ["description", "prompt"], "additionalProperties": false}),
        ),
        (
            "Bash",
            json!({"type": "object", "properties": {
                "command": {"type": "string"}, "timeout": {"type": "number"}},
                "required": ["command"], "additionalProperties": false}),
        ),
        (
            "Read",
            json!({"type": "object", "properties": {
                "file_path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "exclusiveMinimum": 0}},
                "required": ["file_path"], "additionalProperties": false}),
        ),
    ]
}

fn tools(d: Dialect) -> Value {
    let list: Vec<Value> = schemas()
        .into_iter()
        .map(|(name, schema)| match d {
            Dialect::Openai => {
                json!({"type": "function", "function": {"name": name, "parameters": schema}})
            }
            Dialect::Anthropic => {
                json!({"name": name, "description": name, "input_schema": schema})
            }
            Dialect::Gemini => json!({"name": name, "parametersJsonSchema": schema}),
        })
        .collect();
    match d {
        Dialect::Gemini => json!([{"functionDeclarations": list}]),
        _ => json!(list),
    }
}

/// One turn of the conversation, dialect-blind.
#[derive(Clone)]
enum Turn {
    /// A user turn of these text blocks.
    User(Vec<&'static str>),
    /// A system message among the turns (Claude Code's; OpenAI's).
    System(&'static str),
    /// The model's call of `Read` on /x/notes.txt, with this id.
    Call(&'static str),
    /// The result of the call with this id.
    Result(&'static str, &'static str),
    /// The model's text.
    Said(&'static str),
}

const READ_ARGS: &str = r#"{"file_path":"/x/notes.txt"}"#;

/// `turns` in `d`'s shape, as the request's body with its tools declared,
/// and a system prompt where the dialect has one.
fn body(d: Dialect, turns: &[Turn], stream: bool) -> Value {
    let read_args: Value = serde_json::from_str(READ_ARGS).unwrap();
    let mut out: Vec<Value> = Vec::new();
    for t in turns {
        let v = match (d, t) {
            (Dialect::Openai, Turn::User(texts)) => json!({"role": "user", "content":
                texts.iter().map(|t| json!({"type": "text", "text": t})).collect::<Vec<_>>()}),
            (Dialect::Anthropic, Turn::User(texts)) => json!({"role": "user", "content":
                texts.iter().map(|t| json!({"type": "text", "text": t})).collect::<Vec<_>>()}),
            (Dialect::Gemini, Turn::User(texts)) => json!({"role": "user", "parts":
                texts.iter().map(|t| json!({"text": t})).collect::<Vec<_>>()}),
            (Dialect::Gemini, Turn::System(_)) => continue,
            (_, Turn::System(text)) => json!({"role": "system", "content": text}),
            (Dialect::Openai, Turn::Call(id)) => json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": "Read", "arguments": READ_ARGS}}]}),
            (Dialect::Anthropic, Turn::Call(id)) => json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": "Read", "input": read_args}]}),
            (Dialect::Gemini, Turn::Call(_)) => json!({"role": "model", "parts": [
                {"functionCall": {"name": "Read", "args": read_args}}]}),
            (Dialect::Openai, Turn::Result(id, text)) => {
                json!({"role": "tool", "tool_call_id": id, "content": text})
            }
            (Dialect::Anthropic, Turn::Result(id, text)) => json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id,
                 "content": [{"type": "text", "text": text}]}]}),
            (Dialect::Gemini, Turn::Result(_, text)) => json!({"role": "user", "parts": [
                {"functionResponse": {"name": "Read", "response": {"output": text}}}]}),
            (Dialect::Gemini, Turn::Said(text)) => {
                json!({"role": "model", "parts": [{"text": text}]})
            }
            (_, Turn::Said(text)) => json!({"role": "assistant", "content": text}),
        };
        out.push(v);
    }
    match d {
        Dialect::Openai => {
            out.insert(0, json!({"role": "system", "content": SYSTEM}));
            json!({"model": "agent", "messages": out, "tools": tools(d), "stream": stream})
        }
        Dialect::Anthropic => json!({
            "model": "agent",
            "max_tokens": 32000,
            "system": [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.84c;"},
                {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}},
            ],
            "messages": out,
            "tools": tools(d),
            "metadata": {"user_id": "{\"device_id\":\"44af\",\"session_id\":\"a68e\"}"},
            "thinking": {"type": "adaptive"},
            "output_config": {"effort": "high"},
            "stream": stream,
        }),
        Dialect::Gemini => json!({
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": out,
            "tools": tools(d),
        }),
    }
}

/// `turns` posted to the `agent` model in `d`, with Claude Code's headers
/// on Anthropic.
fn post(base: &str, d: Dialect, turns: &[Turn], stream: bool) -> reqwest::RequestBuilder {
    let c = client();
    let rb = match d {
        Dialect::Openai => c
            .post(format!("{base}/v1/chat/completions"))
            .header("authorization", format!("Bearer {KEY}")),
        Dialect::Anthropic => c
            .post(format!("{base}/v1/messages?beta=true"))
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", BETAS),
        Dialect::Gemini if stream => c
            .post(format!(
                "{base}/v1beta/models/agent:streamGenerateContent?alt=sse"
            ))
            .header("x-goog-api-key", KEY),
        Dialect::Gemini => c
            .post(format!("{base}/v1beta/models/agent:generateContent"))
            .header("x-goog-api-key", KEY),
    };
    rb.body(body(d, turns, stream).to_string())
}

async fn ask_agent(base: &str, d: Dialect, turns: &[Turn]) -> Reply {
    let r = send(post(base, d, turns, false)).await;
    assert_eq!(r.status, 200, "{d:?}: {}", r.text);
    r
}

/// The id and name of the call an unstreamed reply makes, and its
/// arguments; `None` for a reply in text.
fn call_in(d: Dialect, v: &Value) -> Option<(Option<String>, String, Value)> {
    let id = |v: &Value| v.as_str().map(String::from);
    match d {
        Dialect::Openai => {
            let c = v["choices"][0]["message"]["tool_calls"].get(0)?;
            let args = serde_json::from_str(c["function"]["arguments"].as_str()?).ok()?;
            Some((id(&c["id"]), c["function"]["name"].as_str()?.into(), args))
        }
        Dialect::Anthropic => {
            let c = v["content"]
                .as_array()?
                .iter()
                .find(|b| b["type"] == "tool_use")?;
            Some((id(&c["id"]), c["name"].as_str()?.into(), c["input"].clone()))
        }
        Dialect::Gemini => {
            let c = v["candidates"][0]["content"]["parts"]
                .as_array()?
                .iter()
                .find_map(|p| p.get("functionCall"))?;
            Some((None, c["name"].as_str()?.into(), c["args"].clone()))
        }
    }
}

#[tokio::test]
async fn agent_answers_claude_codes_question_and_calls_no_tool() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    // Claude Code's first request: the reminder and the question as two
    // text blocks, then a system message.
    let turns = [
        Turn::User(vec![REMINDER, "What is 2+2?"]),
        Turn::System(AGENT_TYPES),
    ];
    for d in DIALECTS {
        let r = ask_agent(&base, d, &turns).await;
        assert_eq!(call_in(d, &r.json()), None, "{d:?}: {}", r.text);
        assert_eq!(r.content(d), "4", "{d:?}");
        // Streamed, as Claude Code asks.
        let mut resp = post(&base, d, &turns, true).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{d:?}");
        let mut text = String::new();
        read_rest(&mut resp, &mut text).await.unwrap();
        assert_eq!(stream_pieces(d, &parse_sse(&text)).concat(), "4", "{d:?}");
        assert!(
            !text.contains("tool_use") && !text.contains("tool_calls"),
            "{text}"
        );
    }
    // `ok`, by contrast, calls the first tool.
    let mut ok = body(Dialect::Anthropic, &turns, false);
    ok["model"] = json!("ok");
    let r = send(
        client()
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", BETAS)
            .body(ok.to_string()),
    )
    .await;
    assert_eq!(call_in(Dialect::Anthropic, &r.json()).unwrap().1, "Agent");
    fake.shutdown().await;
}

#[tokio::test]
async fn the_question_is_read_without_the_context_agents_wrap_it_in() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    // Codex's environment and question as one turn, as route merges two
    // user messages in a row for Anthropic and Gemini; or as two messages.
    let merged = [Turn::User(vec![ENVIRONMENT, "What is 2+2?"])];
    let apart = [
        Turn::User(vec![ENVIRONMENT]),
        Turn::User(vec!["What is 2+2?"]),
    ];
    for d in DIALECTS {
        for turns in [&merged[..], &apart[..]] {
            let r = ask_agent(&base, d, turns).await;
            assert_eq!(r.content(d), "4", "{d:?}");
        }
        // The question's own numbers, not the date's, and every behaviour
        // reads it so.
        let r = ask(&base, d, "ok", &format!("{REMINDER}What is 12*7?")).await;
        assert_eq!(r.content(d), "84", "{d:?}");
        let r = ask(
            &base,
            d,
            "ok",
            &format!("{ENVIRONMENT}what is seven times six"),
        )
        .await;
        assert_eq!(r.content(d), "42", "{d:?}");
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn agent_calls_the_tool_its_directive_names() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    let directive = r#"Read my notes. [[call Read {"file_path":"/x/notes.txt"}]]"#;
    let turns = [
        Turn::User(vec![REMINDER, directive]),
        Turn::System(AGENT_TYPES),
    ];
    let prefix = |d| match d {
        Dialect::Openai => Some("call_".to_string()),
        Dialect::Anthropic => Some("toolu_".to_string()),
        Dialect::Gemini => None,
    };
    let want_args = json!({"file_path": "/x/notes.txt"});
    for d in DIALECTS {
        let r = ask_agent(&base, d, &turns).await;
        let (id, name, args) = call_in(d, &r.json()).unwrap_or_else(|| panic!("{}", r.text));
        assert_eq!((name.as_str(), &args), ("Read", &want_args), "{d:?}");
        assert_eq!(id, prefix(d).map(|p| format!("{p}fake_1")), "{d:?}");
        // Streamed, the same call.
        let mut resp = post(&base, d, &turns, true).send().await.unwrap();
        let mut text = String::new();
        read_rest(&mut resp, &mut text).await.unwrap();
        assert!(text.contains("\"Read\""), "{d:?}: {text}");
        assert!(!text.contains("\"Agent\""), "{d:?}: {text}");
    }
    // Its arguments as written, even those a schema would not make.
    let odd =
        r#"[[call Bash {"command": "ls -la ]] /tmp", "timeout": 5, "extra": [1, {"x": null}]}]]"#;
    let r = ask_agent(&base, Dialect::Anthropic, &[Turn::User(vec![odd])]).await;
    assert_eq!(
        call_in(Dialect::Anthropic, &r.json()).unwrap().2,
        json!({"command": "ls -la ]] /tmp", "timeout": 5, "extra": [1, {"x": null}]})
    );
    // A tool the request does not declare, or arguments that are not an
    // object: no call, the question answered.
    for text in [
        r#"What is 2+2? [[call Write {"file_path":"/x"}]]"#,
        r#"What is 2+2? [[call Read ["/x/notes.txt"]]]"#,
        r#"What is 2+2? [[call Read {"file_path": "/x"]]"#,
    ] {
        for d in DIALECTS {
            let r = ask_agent(&base, d, &[Turn::User(vec![text])]).await;
            assert_eq!(call_in(d, &r.json()), None, "{d:?} {text}");
        }
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn agent_quotes_tool_results_and_numbers_its_calls_through_the_conversation() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let base = fake.url();
    let first = r#"[[call Read {"file_path":"/x/notes.txt"}]]"#;
    let again = r#"Once more. [[call Read {"file_path":"/x/notes.txt"}]]"#;
    for d in DIALECTS {
        let (c1, c2) = match d {
            Dialect::Openai => ("call_fake_1", "call_fake_2"),
            _ => ("toolu_fake_1", "toolu_fake_2"),
        };
        // The result, then Claude Code's system message after it.
        let mut turns = vec![
            Turn::User(vec![REMINDER, first]),
            Turn::Call(c1),
            Turn::Result(c1, "buy milk"),
            Turn::System(AGENT_TYPES),
        ];
        let r = ask_agent(&base, d, &turns).await;
        assert_eq!(call_in(d, &r.json()), None, "{d:?}: {}", r.text);
        assert_eq!(r.content(d), "The result is buy milk.", "{d:?}");
        // The next turn's call is the conversation's second.
        turns.push(Turn::Said("The result is buy milk."));
        turns.push(Turn::User(vec![again]));
        let r = ask_agent(&base, d, &turns).await;
        let (id, name, _) = call_in(d, &r.json()).unwrap_or_else(|| panic!("{}", r.text));
        assert_eq!(name, "Read", "{d:?}");
        if d != Dialect::Gemini {
            assert_eq!(id.as_deref(), Some(c2), "{d:?}");
        }
        turns.push(Turn::Call(c2));
        turns.push(Turn::Result(c2, "and eggs"));
        let r = ask_agent(&base, d, &turns).await;
        assert_eq!(r.content(d), "The result is and eggs.", "{d:?}");
    }
    // Other behaviours keep their one id.
    let r = send(
        client().post(format!("{base}/v1/chat/completions")).body(
            json!({"model": "ok", "tools": tools(Dialect::Openai), "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_fake_1",
                    "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_fake_1", "content": "x"},
                {"role": "assistant", "content": "The result is x."},
                {"role": "user", "content": "second"},
            ]})
            .to_string(),
        ),
    )
    .await;
    let (id, name, _) = call_in(Dialect::Openai, &r.json()).unwrap();
    assert_eq!(
        (id.as_deref(), name.as_str()),
        (Some("call_fake_1"), "Agent")
    );
    fake.shutdown().await;
}
