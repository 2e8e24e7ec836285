//! Tool calls, tool results, JSON mode and the refusing behaviours, in
//! every dialect, over real HTTP.

use super::*;

/// A calculator tool with two numbers, in `d`'s `tools` shape.
fn calculator(d: Dialect) -> Value {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    });
    let weather = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    });
    match d {
        Dialect::Openai => json!([
            {"type": "function", "function": {"name": "multiply", "parameters": schema}},
            {"type": "function", "function": {"name": "weather", "parameters": weather}},
        ]),
        Dialect::Anthropic => json!([
            {"name": "multiply", "input_schema": schema},
            {"name": "weather", "input_schema": weather},
        ]),
        Dialect::Gemini => json!([{"functionDeclarations": [
            {"name": "multiply", "parameters": schema},
            {"name": "weather", "parameters": weather},
        ]}]),
    }
}

/// A request with `extra` merged into the body `d`'s client sends: `turns`
/// as its conversation (or one user turn of `prompt`).
fn post(
    base: &str,
    d: Dialect,
    model: &str,
    turns: Option<Value>,
    prompt: &str,
    extra: Value,
    stream: bool,
) -> reqwest::RequestBuilder {
    let c = client();
    let (rb, mut body) = match d {
        Dialect::Openai => (
            c.post(format!("{base}/v1/chat/completions"))
                .header("authorization", format!("Bearer {KEY}")),
            json!({"model": model, "messages": turns.unwrap_or(json!([
                {"role": "user", "content": prompt}]))}),
        ),
        Dialect::Anthropic => (
            c.post(format!("{base}/v1/messages"))
                .header("x-api-key", KEY)
                .header("anthropic-version", "2023-06-01"),
            json!({"model": model, "max_tokens": 64, "messages": turns.unwrap_or(json!([
                {"role": "user", "content": prompt}]))}),
        ),
        Dialect::Gemini => {
            let method = if stream {
                "streamGenerateContent?alt=sse"
            } else {
                "generateContent"
            };
            (
                c.post(format!("{base}/v1beta/models/{model}:{method}"))
                    .header("x-goog-api-key", KEY),
                json!({"contents": turns.unwrap_or(json!([
                    {"role": "user", "parts": [{"text": prompt}]}]))}),
            )
        }
    };
    if stream && d != Dialect::Gemini {
        body["stream"] = json!(true);
    }
    for (k, v) in extra.as_object().into_iter().flatten() {
        body[k] = v.clone();
    }
    rb.body(body.to_string())
}

/// A non-streamed "What is 12*7?" to `model`, with `extra` in the body.
async fn ask(base: &str, d: Dialect, model: &str, extra: Value) -> Reply {
    send(post(base, d, model, None, "What is 12*7?", extra, false)).await
}

/// The tool call of an unstreamed reply: its name and arguments.
fn call_of(d: Dialect, v: &Value) -> (String, Value) {
    match d {
        Dialect::Openai => {
            let choice = &v["choices"][0];
            assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
            assert_eq!(choice["message"]["content"], Value::Null, "{v}");
            let call = &choice["message"]["tool_calls"][0];
            assert_eq!(call["type"], "function", "{v}");
            assert!(call["id"].as_str().unwrap().starts_with("call_"), "{v}");
            let args = call["function"]["arguments"].as_str().expect("a string");
            (
                call["function"]["name"].as_str().unwrap().into(),
                serde_json::from_str(args).unwrap(),
            )
        }
        Dialect::Anthropic => {
            assert_eq!(v["stop_reason"], "tool_use", "{v}");
            let block = &v["content"][0];
            assert_eq!(block["type"], "tool_use", "{v}");
            assert!(block["id"].as_str().unwrap().starts_with("toolu_"), "{v}");
            assert!(block["input"].is_object(), "{v}");
            (
                block["name"].as_str().unwrap().into(),
                block["input"].clone(),
            )
        }
        Dialect::Gemini => {
            let c = &v["candidates"][0];
            assert_eq!(c["finishReason"], "STOP", "{v}");
            let f = &c["content"]["parts"][0]["functionCall"];
            assert!(f["args"].is_object(), "{v}");
            (f["name"].as_str().unwrap().into(), f["args"].clone())
        }
    }
}

#[tokio::test]
async fn tools_are_called_in_every_dialect() {
    let fake = start(FakeConfig::default()).await.unwrap();
    // `think` (a reasoning model) calls tools too.
    for (d, model) in DIALECTS.iter().flat_map(|d| [(*d, "m"), (*d, "think")]) {
        let extra = json!({"tools": calculator(d)});
        let r = ask(&fake.url(), d, model, extra).await;
        assert_eq!(r.status, 200, "{d:?} {model}: {}", r.text);
        let (name, args) = call_of(d, &r.json());
        assert_eq!(name, "multiply", "{d:?} {model}");
        // The question's operands, in the schema's order.
        assert_eq!(args, json!({"a": 12, "b": 7}), "{d:?} {model}");
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn tool_choice_names_or_forbids_the_tool() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let named = |d| match d {
        Dialect::Openai => json!({"type": "function", "function": {"name": "weather"}}),
        Dialect::Anthropic => json!({"type": "tool", "name": "weather"}),
        Dialect::Gemini => unreachable!(),
    };
    for d in [Dialect::Openai, Dialect::Anthropic] {
        let extra = json!({"tools": calculator(d), "tool_choice": named(d)});
        let r = ask(&fake.url(), d, "m", extra).await;
        assert_eq!(
            call_of(d, &r.json()),
            ("weather".into(), json!({"city": "fake city"})),
            "{d:?}"
        );
    }
    let forced = json!({"tools": calculator(Dialect::Gemini), "toolConfig": {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}}});
    let r = ask(&fake.url(), Dialect::Gemini, "m", forced).await;
    assert_eq!(call_of(Dialect::Gemini, &r.json()).0, "weather");
    // No tool: a text answer.
    for d in DIALECTS {
        let none = match d {
            Dialect::Openai => json!({"tool_choice": "none"}),
            Dialect::Anthropic => json!({"tool_choice": {"type": "none"}}),
            Dialect::Gemini => json!({"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}),
        };
        let mut extra = json!({"tools": calculator(d)});
        extra
            .as_object_mut()
            .unwrap()
            .extend(none.as_object().unwrap().clone());
        let r = ask(&fake.url(), d, "m", extra).await;
        assert_eq!(r.content(d), "84", "{d:?}: {}", r.text);
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn tool_calls_stream_in_every_dialect() {
    let fake = start(FakeConfig::default()).await.unwrap();
    for d in DIALECTS {
        let extra = json!({"tools": calculator(d), "stream_options": {"include_usage": true}});
        let mut resp = post(&fake.url(), d, "m", None, "What is 12*7?", extra, true)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert!(is_sse(&resp), "{d:?}");
        let mut text = String::new();
        read_rest(&mut resp, &mut text).await.unwrap();
        let events = parse_sse(&text);
        let data: Vec<(Option<&str>, Value)> = events
            .iter()
            .filter(|e| matches!(e, Sse::Event(_, data) if data != "[DONE]"))
            .map(|e| (e.name(), e.json()))
            .collect();
        match d {
            Dialect::Openai => {
                // No text at all.
                assert!(stream_pieces(d, &events).is_empty(), "{text}");
                let calls: Vec<&Value> = data
                    .iter()
                    .filter_map(|(_, v)| v["choices"][0]["delta"]["tool_calls"].get(0))
                    .collect();
                assert_eq!(calls[0]["index"], 0);
                assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
                assert_eq!(calls[0]["function"]["name"], "multiply");
                let fragments: Vec<&str> = calls[1..]
                    .iter()
                    .map(|c| {
                        assert_eq!(c["index"], 0);
                        assert!(c.get("id").is_none() && c["function"].get("name").is_none());
                        c["function"]["arguments"].as_str().unwrap()
                    })
                    .collect();
                assert!(fragments.len() >= 2, "{text}");
                let args: Value = serde_json::from_str(&fragments.concat()).unwrap();
                assert_eq!(args, json!({"a": 12, "b": 7}));
                let finish: Vec<&Value> = data
                    .iter()
                    .map(|(_, v)| &v["choices"][0]["finish_reason"])
                    .filter(|f| !f.is_null())
                    .collect();
                assert_eq!(finish, [&json!("tool_calls")], "{text}");
                assert!(
                    data.last().unwrap().1["usage"]["total_tokens"]
                        .as_u64()
                        .unwrap()
                        > 0
                );
                assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
            }
            Dialect::Anthropic => {
                let names: Vec<&str> = data.iter().filter_map(|(n, _)| *n).collect();
                assert_eq!(names.first(), Some(&"message_start"));
                assert_eq!(names.last(), Some(&"message_stop"));
                let start = &data
                    .iter()
                    .find(|(n, _)| *n == Some("content_block_start"))
                    .unwrap()
                    .1;
                assert_eq!(start["content_block"]["type"], "tool_use");
                assert_eq!(start["content_block"]["name"], "multiply");
                assert_eq!(start["content_block"]["input"], json!({}));
                let fragments: Vec<&str> = data
                    .iter()
                    .filter(|(n, _)| *n == Some("content_block_delta"))
                    .map(|(_, v)| {
                        assert_eq!(v["delta"]["type"], "input_json_delta");
                        v["delta"]["partial_json"].as_str().unwrap()
                    })
                    .collect();
                assert!(fragments.len() >= 2, "{text}");
                let args: Value = serde_json::from_str(&fragments.concat()).unwrap();
                assert_eq!(args, json!({"a": 12, "b": 7}));
                assert!(names.contains(&"content_block_stop"));
                let delta = &data
                    .iter()
                    .find(|(n, _)| *n == Some("message_delta"))
                    .unwrap()
                    .1;
                assert_eq!(delta["delta"]["stop_reason"], "tool_use");
            }
            Dialect::Gemini => {
                assert_eq!(data.len(), 1, "{text}");
                let c = &data[0].1["candidates"][0];
                assert_eq!(
                    c["content"]["parts"][0]["functionCall"],
                    json!({"name": "multiply", "args": {"a": 12, "b": 7}})
                );
                assert_eq!(c["finishReason"], "STOP");
            }
        }
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn a_broken_stream_breaks_inside_the_call() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let extra = json!({"tools": calculator(Dialect::Openai)});
    let mut resp = post(
        &fake.url(),
        Dialect::Openai,
        "stream-cut",
        None,
        "What is 12*7?",
        extra,
        true,
    )
    .send()
    .await
    .unwrap();
    let mut text = String::new();
    assert!(read_rest(&mut resp, &mut text).await.is_err(), "{text}");
    // The call's head and one fragment of its arguments, then nothing.
    let events = parse_sse(&text);
    assert!(text.contains("\"name\":\"multiply\""), "{text}");
    assert!(
        !text.contains("\"finish_reason\":\"tool_calls\"") && !text.contains("[DONE]"),
        "{text}"
    );
    assert_eq!(events.len(), 2, "{text}");
    fake.shutdown().await;
}

#[tokio::test]
async fn tool_results_are_answered_in_text() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = "What is 12*7?";
    for d in DIALECTS {
        let turns = match d {
            Dialect::Openai => json!([
                {"role": "user", "content": q},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": "{\"a\":12,\"b\":7}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "84"},
            ]),
            Dialect::Anthropic => json!([
                {"role": "user", "content": q},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                    "name": "multiply", "input": {"a": 12, "b": 7}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                    "content": "84"}]},
            ]),
            Dialect::Gemini => json!([
                {"role": "user", "parts": [{"text": q}]},
                {"role": "model", "parts": [{"functionCall": {"name": "multiply",
                    "args": {"a": 12, "b": 7}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "multiply",
                    "response": {"result": 84}}}]},
            ]),
        };
        // The tools are still declared, as clients send them.
        let extra = json!({"tools": calculator(d)});
        let r = send(post(
            &fake.url(),
            d,
            "m",
            Some(turns.clone()),
            q,
            extra.clone(),
            false,
        ))
        .await;
        assert_eq!(r.status, 200, "{d:?}: {}", r.text);
        assert_eq!(r.content(d), "The result is 84.", "{d:?}");
        // Streamed, too.
        let mut resp = post(&fake.url(), d, "m", Some(turns), q, extra, true)
            .send()
            .await
            .unwrap();
        let mut text = String::new();
        read_rest(&mut resp, &mut text).await.unwrap();
        assert_eq!(
            stream_pieces(d, &parse_sse(&text)).concat(),
            "The result is 84.",
            "{d:?}"
        );
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn json_mode_answers_json() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let schema = json!({"type": "object",
        "properties": {"reasoning": {"type": "string"}, "value": {"type": "integer"}},
        "required": ["reasoning", "value"], "additionalProperties": false});
    let cases = [
        (
            Dialect::Openai,
            json!({"response_format": {"type": "json_object"}}),
            json!({"answer": 84}),
        ),
        (
            Dialect::Openai,
            json!({"response_format": {"type": "json_schema",
                   "json_schema": {"name": "answer", "schema": schema, "strict": true}}}),
            json!({"reasoning": "fake reasoning", "value": 84}),
        ),
        (
            Dialect::Gemini,
            json!({"generationConfig": {"responseMimeType": "application/json"}}),
            json!({"answer": 84}),
        ),
        (
            Dialect::Gemini,
            json!({"generationConfig": {"responseMimeType": "application/json",
                   "responseSchema": {"type": "OBJECT", "properties": {
                       "value": {"type": "NUMBER"}}, "required": ["value"]}}}),
            json!({"value": 84}),
        ),
    ];
    // `think` (a reasoning model) answers JSON too, its reasoning kept out.
    for ((d, extra, want), model) in cases
        .iter()
        .flat_map(|c| [(c.clone(), "m"), (c.clone(), "think")])
    {
        let r = ask(&fake.url(), d, model, extra.clone()).await;
        assert_eq!(r.status, 200, "{d:?} {model}: {}", r.text);
        let got: Value = serde_json::from_str(&r.content(d)).unwrap();
        assert_eq!(got, want, "{d:?} {model} {extra}");
    }
    fake.shutdown().await;
}

/// The error message of a 400 in `d`'s shape.
fn refused(d: Dialect, r: &Reply) -> String {
    assert_eq!(r.status, 400, "{d:?}: {}", r.text);
    let v = r.json();
    let e = error_of(d, &v);
    match d {
        Dialect::Openai | Dialect::Anthropic => {
            assert!(e["type"].is_string(), "{v}")
        }
        Dialect::Gemini => {
            assert_eq!(e["code"], 400, "{v}");
            assert_eq!(e["status"], "INVALID_ARGUMENT", "{v}");
        }
    }
    e["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn refusing_behaviours_refuse_what_they_cannot_take() {
    let fake = start(FakeConfig::default().script("llama3:8b", &[Behaviour::OllamaNoTools]))
        .await
        .unwrap();
    let base = fake.url();
    let image = |d| match d {
        Dialect::Openai => json!([{"role": "user", "content": [
            {"type": "text", "text": "What is 12*7?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]}]),
        Dialect::Anthropic => json!([{"role": "user", "content": [
            {"type": "text", "text": "What is 12*7?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "QUJD"}}]}]),
        Dialect::Gemini => json!([{"role": "user", "parts": [
            {"text": "What is 12*7?"},
            {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}]}]),
    };
    let q = "What is 12*7?";
    for d in DIALECTS {
        let ask = |model: &str, turns: Option<Value>, extra: Value| {
            send(post(&base, d, model, turns, q, extra, false))
        };
        let tools = json!({"tools": calculator(d)});
        let m = refused(d, &ask("no-tools", None, tools.clone()).await);
        let want = match d {
            Dialect::Openai => "tool calling is not supported with this model",
            Dialect::Anthropic => "tools: this model does not support tool use",
            Dialect::Gemini => "Function calling is not enabled for models/no-tools",
        };
        assert_eq!(m, want, "{d:?}");
        let m = refused(d, &ask("llama3:8b", None, tools.clone()).await);
        if d == Dialect::Openai {
            assert_eq!(
                m,
                "registry.ollama.ai/library/llama3:8b does not support tools"
            );
        }
        let m = refused(d, &ask("no-images", Some(image(d)), json!({})).await);
        let want = match d {
            Dialect::Openai => {
                "Invalid content type. image_url is only supported by certain models."
            }
            Dialect::Anthropic => {
                "This model doesn't support the image content block that you provided. Update the content block and try again."
            }
            Dialect::Gemini => "Image input modality is not enabled for models/no-images",
        };
        assert_eq!(m, want, "{d:?}");
        // What they do not refuse, they answer.
        for model in ["no-images", "no-json", "max-tokens", "context-window"] {
            let r = ask(model, None, tools.clone()).await;
            assert_eq!(call_of(d, &r.json()).0, "multiply", "{d:?} {model}");
        }
        let r = ask("no-tools", Some(image(d)), json!({})).await;
        assert_eq!(r.content(d), "84", "{d:?}");
    }
    // JSON mode, where the dialect has one; OpenAI names the field at fault.
    for (d, extra, want, param) in [
        (
            Dialect::Openai,
            json!({"response_format": {"type": "json_object"}}),
            "Invalid parameter: 'response_format' of type 'json_object' is not supported with this model.",
            Some("response_format"),
        ),
        (
            Dialect::Gemini,
            json!({"generationConfig": {"responseMimeType": "application/json"}}),
            "JSON mode is not enabled for models/no-json",
            None,
        ),
    ] {
        let r = send(post(&base, d, "no-json", None, q, extra, false)).await;
        assert_eq!(refused(d, &r), want);
        if let Some(param) = param {
            assert_eq!(r.json()["error"]["param"], param);
        }
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn output_caps_and_context_windows_are_enforced() {
    let fake = start(
        FakeConfig::default().script("claude-3-opus-20240229", &[Behaviour::MaxTokens(4096)]),
    )
    .await
    .unwrap();
    let base = fake.url();
    let q = "What is 12*7?";
    let cap = |d: Dialect, n: u64| match d {
        Dialect::Openai => json!({"max_tokens": n}),
        Dialect::Anthropic => json!({"max_tokens": n}),
        Dialect::Gemini => json!({"generationConfig": {"maxOutputTokens": n}}),
    };
    for d in DIALECTS {
        let m = refused(
            d,
            &send(post(&base, d, "max-tokens", None, q, cap(d, 65536), false)).await,
        );
        let want = match d {
            Dialect::Openai => "`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model".to_string(),
            Dialect::Anthropic => "max_tokens: 65536 > 8192, which is the maximum allowed number of output tokens for max-tokens".to_string(),
            Dialect::Gemini => "Unable to submit request because it has a maxOutputTokens value of 65536 but the supported range is from 1 (inclusive) to 8193 (exclusive). Update the value and try again.".to_string(),
        };
        assert_eq!(m, want, "{d:?}");
        // At the cap, and with a cap of its own.
        let r = send(post(&base, d, "max-tokens", None, q, cap(d, 8192), false)).await;
        assert_eq!(r.content(d), "84", "{d:?}");
        let r = send(post(
            &base,
            d,
            "max-tokens:100",
            None,
            q,
            cap(d, 101),
            false,
        ))
        .await;
        assert_eq!(r.status, 400, "{d:?}");
        // 64 characters: 16 tokens.
        let long = format!("What is 12*7? {}", "x".repeat(50));
        let m = refused(
            d,
            &send(post(
                &base,
                d,
                "context-window:10",
                None,
                &long,
                json!({}),
                false,
            ))
            .await,
        );
        let want = match d {
            Dialect::Openai => {
                "This model's maximum context length is 10 tokens. However, your messages resulted in 16 tokens. Please reduce the length of the messages."
            }
            Dialect::Anthropic => "prompt is too long: 16 tokens > 10 maximum",
            Dialect::Gemini => {
                "The input token count (16) exceeds the maximum number of tokens allowed (10)."
            }
        };
        assert_eq!(m, want, "{d:?}");
        let r = send(post(
            &base,
            d,
            "context-window:16",
            None,
            &long,
            json!({}),
            false,
        ))
        .await;
        assert_eq!(r.status, 200, "{d:?}: {}", r.text);
    }
    // The newer OpenAI field is named as sent; Anthropic names the model.
    let r = send(post(
        &base,
        Dialect::Openai,
        "max-tokens",
        None,
        q,
        json!({"max_completion_tokens": 9000}),
        false,
    ))
    .await;
    assert!(refused(Dialect::Openai, &r).starts_with("`max_completion_tokens` must be"));
    assert_eq!(r.json()["error"]["param"], "max_completion_tokens");
    let r = send(post(
        &base,
        Dialect::Anthropic,
        "claude-3-opus-20240229",
        None,
        q,
        json!({"max_tokens": 32000}),
        false,
    ))
    .await;
    assert_eq!(
        refused(Dialect::Anthropic, &r),
        "max_tokens: 32000 > 4096, which is the maximum allowed number of output tokens for claude-3-opus-20240229"
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn recorded_requests_keep_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, file) = recording(dir.path());
    let fake = start(cfg).await.unwrap();
    let extra = json!({"tools": calculator(Dialect::Anthropic), "temperature": 0});
    ask(&fake.url(), Dialect::Anthropic, "m", extra).await;
    send(post(
        &fake.url(),
        Dialect::Gemini,
        "no-tools",
        None,
        "hi",
        json!({}),
        false,
    ))
    .await;
    let c = client();
    send(
        c.post(format!("{}/v1/chat/completions", fake.url()))
            .body("{not json"),
    )
    .await;
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(KEY), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    let body = &lines[0]["body"];
    assert_eq!(body["model"], "m");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["tools"][0]["name"], "multiply");
    assert_eq!(body["messages"][0]["content"], "What is 12*7?");
    assert_eq!(lines[0]["behaviour"], "ok");
    assert_eq!(lines[1]["body"]["contents"][0]["parts"][0]["text"], "hi");
    // A body that is not JSON is not kept; the rest of the line is.
    assert!(lines[2].get("body").is_none(), "{text}");
    assert_eq!(lines[2]["dialect"], "openai");
    let listed = fake.requests();
    assert_eq!(listed[0].body.as_ref(), Some(body));
    fake.shutdown().await;
}
