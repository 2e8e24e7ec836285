//! The Chat Completions request fields ([`FIELDS`]: each with what
//! becomes of it in the dialects that translate), the [`Fate`]s a field
//! can have, and [`dropped`], so that nothing a client sends is dropped
//! silently. Each dialect states its own fate for every field
//! ([`Facts::fate`](super::Facts::fate), in the dialect's file).
//!
//! OpenAI-dialect upstreams get every field as it came, known or not
//! ([`Facts::passes_through`](super::Facts::passes_through)). Anthropic and Gemini get each field
//! translated to their own equivalent where one exists; a field left out
//! is either harmless (the answer is the same without it: `user` for
//! Gemini, `store`, …) or reported: [`dropped`] names it, and
//! `route --serve` answers with `X-Llmprobe-Dropped: seed, logit_bias`. A
//! field no table knows is reported too. What a dialect cannot carry at
//! all (several choices, audio) is a need (`super::needs`): the router
//! skips such a candidate, and building the request refuses it as a last
//! resort. `docs/routing.md` has the same table, a column per dialect
//! that translates; a test checks it against the dialects' own.

use serde_json::Value;

use super::{ChatRequest, Dialect, wire};

/// What becomes of one field in one dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Fate {
    /// Sent as it came.
    Pass,
    /// Sent as the dialect's own equivalent.
    Translate,
    /// Left out; the answer is the same without it.
    DropHarmless,
    /// Left out though it may change the answer; reported.
    DropReported,
    /// Cannot be carried: a need the router skips for (or the legacy
    /// function-calling fields); building the request refuses it.
    Need,
}

impl Fate {
    /// As `docs/routing.md` words it.
    pub fn doc(self) -> &'static str {
        match self {
            Fate::Pass => "pass",
            Fate::Translate => "translate",
            Fate::DropHarmless => "drop (harmless)",
            Fate::DropReported => "drop (reported)",
            Fate::Need => "need",
        }
    }
}

/// One field of a Chat Completions request, and what becomes of it in
/// the dialects that translate (their fates are theirs: [`Facts::fate`](super::Facts::fate)).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    /// What the translation is, or why the field goes.
    pub how: &'static str,
}

const fn f(name: &'static str, how: &'static str) -> Field {
    Field { name, how }
}

/// One dialect's fate for a field of [`FIELDS`], by name: the rows of a
/// dialect's own table.
pub type Row = (&'static str, Fate);

/// The fate of `name` in a dialect's table `rows`.
pub fn fate_in(rows: &[Row], name: &str) -> Option<Fate> {
    rows.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Every field of a Chat Completions request.
pub const FIELDS: &[Field] = &[
    f("model", "the candidate's model; Gemini's is in the URL"),
    f(
        "messages",
        "leading system messages lifted out (`system`, `systemInstruction`), later ones kept in \
         place for Anthropic and folded into `systemInstruction` for Gemini (the provider's \
         `system_messages`); tool calls and results as `tool_use`/`tool_result` blocks or \
         `functionCall`/`functionResponse` parts; adjacent turns of one role merged; a role or \
         content part route does not know left out, reported as `role[ROLE]`, `content[TYPE]`",
    ),
    f(
        "max_tokens",
        "`max_tokens` (Anthropic requires one: 4096 when unset), `maxOutputTokens`",
    ),
    f("max_completion_tokens", "as `max_tokens`"),
    f("temperature", "`temperature`"),
    f("top_p", "`top_p`, `topP`"),
    f("stop", "`stop_sequences`, `stopSequences`"),
    f(
        "stream",
        "`stream`; Gemini's streaming URL `:streamGenerateContent?alt=sse`",
    ),
    f(
        "stream_options",
        "usage is always read from the stream; the usage chunk reaches a client that asked",
    ),
    f(
        "n",
        "above 1 is the need `n`; 1 is the default and harmless",
    ),
    f(
        "tools",
        "`tools[].input_schema`; `tools[].functionDeclarations` with the schema cut to Gemini's \
         subset",
    ),
    f(
        "tool_choice",
        "`auto`/`any`/`tool`/`none`; `functionCallingConfig.mode` `AUTO`/`ANY`/`NONE` with \
         `allowedFunctionNames`",
    ),
    f(
        "parallel_tool_calls",
        "`false` is `tool_choice.disable_parallel_tool_use`; Gemini has no switch (`true`, its \
         default, is harmless)",
    ),
    f(
        "functions",
        "the legacy form of `tools`: only openai-dialect upstreams",
    ),
    f(
        "function_call",
        "the legacy form of `tool_choice`: only openai-dialect upstreams",
    ),
    f(
        "response_format",
        "Anthropic: a forced tool `json_output` whose input is the content; Gemini: \
         `responseMimeType` + `responseSchema`. Reported as dropped when the client also sent \
         tools, which win",
    ),
    f("seed", "`generationConfig.seed`; Anthropic has none"),
    f("logit_bias", "no equivalent"),
    f(
        "logprobs",
        "Anthropic has none; Gemini's `responseLogprobs` would need a reply shape route does not \
         render",
    ),
    f("top_logprobs", "as `logprobs`"),
    f(
        "frequency_penalty",
        "`generationConfig.frequencyPenalty`; Anthropic has none",
    ),
    f(
        "presence_penalty",
        "`generationConfig.presencePenalty`; Anthropic has none",
    ),
    f(
        "top_k",
        "not OpenAI's own, but OpenRouter, vLLM, llama.cpp and Ollama take it: `top_k`, `topK`",
    ),
    f(
        "user",
        "`metadata.user_id`; Gemini has no end-user field (it only helps abuse monitoring)",
    ),
    f("metadata", "tags for OpenAI's stored completions"),
    f("store", "OpenAI's stored completions"),
    f(
        "service_tier",
        "OpenAI's processing tier; the answer is the same",
    ),
    f(
        "prompt_cache_key",
        "an OpenAI cache hint; the answer is the same",
    ),
    f("safety_identifier", "OpenAI's abuse-monitoring id"),
    f(
        "prediction",
        "predicted output only makes OpenAI faster; the answer is the same",
    ),
    f(
        "reasoning_effort",
        "thinking budgets interact with `max_tokens`, `temperature` and forced tools, and not \
         every model thinks: no honest mapping",
    ),
    f("verbosity", "no equivalent"),
    f(
        "web_search_options",
        "a provider-side tool route does not translate",
    ),
    f(
        "modalities",
        "`[\"text\"]` is harmless; audio output is the need `audio`",
    ),
    f("audio", "audio output is the need `audio`"),
    f("suffix", "fill-in-the-middle is the need `suffix`"),
    // Fields inside others; `dropped` reports these under the short names
    // `tools.strict`, `response_format.strict` and `messages.name`.
    f(
        "tools[].function.strict",
        "`true` is reported as `tools.strict`: neither dialect promises arguments that match \
         the schema exactly",
    ),
    f(
        "response_format.json_schema.strict",
        "`true` is reported as `response_format.strict`, as `tools[].function.strict`",
    ),
    f(
        "messages[].name",
        "a participant's name, reported as `messages.name`: neither dialect names participants",
    ),
    f(
        "messages[].refusal",
        "an assistant turn's refusal (with `content: null`) becomes its text",
    ),
    f(
        "image_url.detail",
        "OpenAI's image resolution; the others read the image at their own",
    ),
];

/// Whether the row is a field inside another (`tools[].function.strict`),
/// not a top-level one.
fn nested(f: &Field) -> bool {
    f.name.contains('.')
}

/// The table's entry for `name`.
pub fn field(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.name == name && !nested(f))
}

/// A value that asks for nothing beyond the default, so leaving it out
/// changes nothing whatever the field's fate: `null`, `n: 1`,
/// `modalities: ["text"]`, `parallel_tool_calls: true`, `tools: []`,
/// `response_format: {"type":"text"}`, and OpenAI's documented defaults
/// `frequency_penalty: 0`, `presence_penalty: 0`, `logprobs: false`,
/// `top_logprobs: 0`, `logit_bias: {}`, `verbosity: "medium"`. SDKs and
/// proxies often send these explicitly.
fn inert(req: &ChatRequest, name: &str, v: &Value) -> bool {
    match (name, v) {
        (_, Value::Null) => true,
        ("n", v) => v.as_u64() == Some(1),
        ("frequency_penalty" | "presence_penalty" | "top_logprobs", v) => v.as_f64() == Some(0.0),
        ("logprobs", Value::Bool(b)) => !*b,
        ("logit_bias", Value::Object(m)) => m.is_empty(),
        ("verbosity", v) => v == "medium",
        ("modalities", Value::Array(m)) => m.iter().all(|x| x == "text"),
        ("parallel_tool_calls", Value::Bool(b)) => *b,
        ("tools", Value::Array(a)) => a.is_empty(),
        ("response_format", _) => req.json_format() == Some("text"),
        _ => false,
    }
}

/// JSON mode and tools together: the client's tools go and JSON mode is
/// dropped. Anthropic's JSON mode is itself a forced tool, which would
/// take the choice away from the client's tools; Gemini refuses
/// `responseMimeType: application/json` alongside function calling.
pub(super) fn json_mode_yields_to_tools(req: &ChatRequest) -> bool {
    req.declares_tools() && matches!(req.response_format(), Ok(Some(_)))
}

/// The client's fields that `req`, sent in `d`, leaves out although they
/// may change the answer: those the table reports, and any it does not
/// know. Fields the request models itself (`messages`, `temperature`, …)
/// are always translated; only its unmodelled ones (`extra`) can go.
pub fn dropped(d: Dialect, req: &ChatRequest) -> Vec<String> {
    let w = wire(d);
    if w.passes_through() {
        return Vec::new();
    }
    let mut out: Vec<String> = req
        .fields_as_sent()
        .filter(|(k, v)| !inert(req, k, v))
        .filter(|(k, _)| field(k).is_none_or(|f| w.fate(f.name) == Some(Fate::DropReported)))
        .map(|(k, _)| k.to_string())
        .collect();
    let yields = json_mode_yields_to_tools(req);
    if yields {
        out.push("response_format".into());
    }
    if req.tools.as_ref().is_some_and(|t| t.read.strict) {
        out.push("tools.strict".into());
    }
    if !yields && req.response_format.as_ref().is_some_and(|f| f.read.strict) {
        out.push("response_format.strict".into());
    }
    // A tool result's name is the function's, carried by the dialects.
    let named = req.messages.iter().any(|m| {
        !matches!(m.role.as_str(), "tool" | "function")
            && m.extra
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
    });
    if named {
        out.push("messages.name".into());
    }
    // Roles and content parts route does not know: the dialect leaves
    // their messages and parts out. Each named once (a set: a client may
    // send thousands).
    let mut seen = std::collections::HashSet::new();
    for m in &req.messages {
        // A system message is text here (`system`, `systemInstruction`,
        // a text-only `system` message): its other parts go.
        if m.is_system()
            && let Some(c) = &m.content
        {
            for t in c.non_text_parts() {
                if seen.insert(("content", t)) {
                    out.push(format!("content[{t}]"));
                }
            }
        }
        if !m.known_role() && seen.insert(("role", m.role.as_str())) {
            out.push(format!("role[{}]", m.role));
        }
        if let Some(super::Content::Parts(parts)) = &m.content {
            for p in parts.iter().filter(|p| super::request::unknown_part(p)) {
                let t = super::request::part_type(p);
                if seen.insert(("content", t)) {
                    out.push(format!("content[{t}]"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use strum::IntoEnumIterator;

    /// The dialects that translate rather than pass fields through: the
    /// columns of the docs table.
    fn translating() -> impl Iterator<Item = Dialect> {
        Dialect::iter().filter(|d| !wire(*d).passes_through())
    }

    fn request(extra: Value) -> ChatRequest {
        let mut r = ChatRequest::from_openai_json(
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
        )
        .unwrap();
        for (k, v) in extra.as_object().unwrap() {
            r.insert(k.clone(), v.clone());
        }
        r
    }

    /// A value for each field that asks for something.
    fn sample(name: &str) -> Value {
        match name {
            "tools" => {
                json!([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}])
            }
            "tool_choice" => json!("required"),
            "parallel_tool_calls" => json!(false),
            "response_format" => json!({"type":"json_object"}),
            "stream_options" => json!({"include_usage": true}),
            "user" | "safety_identifier" | "prompt_cache_key" | "service_tier" => json!("u-1"),
            "metadata" => json!({"k": "v"}),
            "store" | "logprobs" => json!(true),
            "logit_bias" => json!({"50256": -100}),
            "reasoning_effort" | "verbosity" => json!("low"),
            "prediction" => json!({"type":"content","content":"x"}),
            "web_search_options" => json!({}),
            _ => json!(3),
        }
    }

    #[test]
    fn the_table_says_what_the_bodies_do() {
        let modelled = [
            "model",
            "messages",
            "max_tokens",
            "max_completion_tokens",
            "temperature",
            "top_p",
            "stop",
            "stream",
        ];
        for d in translating() {
            let w = wire(d);
            let base = w.body(&request(json!({}))).unwrap();
            for f in FIELDS
                .iter()
                .filter(|f| !modelled.contains(&f.name) && !nested(f))
            {
                let mut extra = json!({});
                extra[f.name] = sample(f.name);
                // tool_choice and parallel_tool_calls mean something only
                // with tools; the baseline has the same tools.
                let with_tools = matches!(f.name, "tool_choice" | "parallel_tool_calls");
                let base = if with_tools {
                    let mut b = json!({});
                    b["tools"] = sample("tools");
                    extra["tools"] = sample("tools");
                    w.body(&request(b)).unwrap()
                } else {
                    base.clone()
                };
                let req = request(extra);
                let body = w.body(&req);
                let reported = dropped(d, &req).contains(&f.name.to_string());
                match w
                    .fate(f.name)
                    .unwrap_or_else(|| panic!("{d:?} lacks {}", f.name))
                {
                    Fate::Translate => {
                        assert_ne!(body.unwrap(), base, "{d:?} {}", f.name);
                        assert!(!reported, "{d:?} {}", f.name);
                    }
                    Fate::DropHarmless => {
                        assert_eq!(body.unwrap(), base, "{d:?} {}", f.name);
                        assert!(!reported, "{d:?} {}", f.name);
                    }
                    Fate::DropReported => {
                        assert_eq!(body.unwrap(), base, "{d:?} {}", f.name);
                        assert!(reported, "{d:?} {}", f.name);
                    }
                    // Refused when building, or skipped before it by the
                    // router; never sent and never reported.
                    Fate::Need => assert!(!reported, "{d:?} {}", f.name),
                    Fate::Pass => panic!("{d:?} passes {} as it came", f.name),
                }
            }
        }
    }

    #[test]
    fn openai_passes_every_field_and_reports_nothing() {
        let o = wire(Dialect::Openai);
        assert!(FIELDS.iter().all(|f| o.fate(f.name) == Some(Fate::Pass)));
        let req = request(json!({"seed": 1, "logit_bias": {"1": 1}, "x_custom": 2}));
        assert!(dropped(Dialect::Openai, &req).is_empty());
    }

    #[test]
    fn unknown_roles_and_parts_are_left_out_and_reported_by_the_other_dialects() {
        let req = ChatRequest::from_openai_json(
            br#"{"model":"m","messages":[
                {"role":"user","content":[{"type":"text","text":"hi"},{"type":"a_new_part","x":1}]},
                {"role":"critic","content":"too long"},
                {"role":"user","content":[{"type":"a_new_part"}]},
                {"role":"assistant","content":"ok"},
                {"role":"user","content":"and?"}]}"#,
        )
        .unwrap();
        assert!(dropped(Dialect::Openai, &req).is_empty());
        for d in translating() {
            assert_eq!(
                dropped(d, &req),
                ["content[a_new_part]", "role[critic]"],
                "{d:?}"
            );
            let body = wire(d).body(&req).unwrap();
            let text = body.to_string();
            assert!(
                !text.contains("a_new_part") && !text.contains("too long"),
                "{text}"
            );
            let turns = body.get("messages").or(body.get("contents")).unwrap();
            assert_eq!(turns.as_array().unwrap().len(), 3, "{d:?}: {body}");
        }
        // OpenAI-dialect upstreams get both as they came.
        let o = wire(Dialect::Openai).body(&req).unwrap();
        assert_eq!(o["messages"][1]["role"], "critic");
        assert_eq!(o["messages"][0]["content"][1]["type"], "a_new_part");
    }

    #[test]
    fn unknown_fields_and_default_values() {
        let req = request(json!({
            "seed": 1, "x_custom": true, "n": 1, "modalities": ["text"],
            "parallel_tool_calls": true, "logprobs": null, "user": "u",
            "response_format": {"type": "text"}
        }));
        assert_eq!(dropped(Dialect::Anthropic, &req), ["seed", "x_custom"]);
        assert_eq!(dropped(Dialect::Gemini, &req), ["x_custom"]);
        // OpenAI's documented defaults, as SDKs send them.
        let defaults = request(json!({
            "frequency_penalty": 0, "presence_penalty": 0.0, "logprobs": false,
            "top_logprobs": 0, "logit_bias": {}, "verbosity": "medium",
            "stream_options": {"include_usage": true}
        }));
        for d in translating() {
            assert!(dropped(d, &defaults).is_empty(), "{d:?}");
        }
        let asks = request(json!({"presence_penalty": 0.5, "logprobs": true, "verbosity": "low"}));
        assert_eq!(
            dropped(Dialect::Anthropic, &asks),
            ["presence_penalty", "logprobs", "verbosity"]
        );
        let both =
            request(json!({"tools": sample("tools"), "response_format": {"type":"json_object"}}));
        for d in translating() {
            assert_eq!(dropped(d, &both), ["response_format"], "{d:?}");
        }
    }

    #[test]
    fn nested_fields_are_reported_or_carried_as_the_table_says() {
        let mut r = ChatRequest::from_openai_json(
            br#"{"model":"m","messages":[
              {"role":"user","name":"ann","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]},
              {"role":"assistant","content":null,"refusal":"I cannot."},
              {"role":"user","content":"why?"}],
             "tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]}"#,
        )
        .unwrap();
        for d in translating() {
            assert_eq!(dropped(d, &r), ["tools.strict", "messages.name"], "{d:?}");
            let body = wire(d).body(&r).unwrap().to_string();
            assert!(body.contains("I cannot."), "{d:?}: {body}");
            assert!(
                !body.contains("\"detail\"") && !body.contains("\"ann\""),
                "{d:?}"
            );
        }
        for (n, fate) in [
            ("tools[].function.strict", Fate::DropReported),
            ("response_format.json_schema.strict", Fate::DropReported),
            ("messages[].name", Fate::DropReported),
            ("messages[].refusal", Fate::Translate),
            ("image_url.detail", Fate::DropHarmless),
        ] {
            assert!(FIELDS.iter().any(|f| f.name == n), "{n}");
            for d in translating() {
                assert_eq!(wire(d).fate(n), Some(fate), "{d:?} {n}");
            }
            // A client's top-level field of that name is unknown.
            assert!(field(n).is_none());
        }
        r.tools = None;
        r.messages.truncate(1);
        r.messages[0].extra.remove("name");
        r.insert(
            "response_format".into(),
            json!({"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object"}}}),
        );
        for d in translating() {
            assert_eq!(dropped(d, &r), ["response_format.strict"], "{d:?}");
        }
    }

    #[test]
    fn every_field_is_in_the_docs_table() {
        let doc = include_str!("../../../docs/routing.md");
        let columns: Vec<Dialect> = translating().collect();
        let names: Vec<&str> = columns.iter().map(|d| d.as_str()).collect();
        let header = format!("| field | {} | how |", names.join(" | "));
        assert!(doc.contains(&header), "docs/routing.md lacks {header}");
        for f in FIELDS {
            let fates: Vec<&str> = columns
                .iter()
                .map(|d| wire(*d).fate(f.name).map_or("?", Fate::doc))
                .collect();
            let row = format!("| `{}` | {} | {} |", f.name, fates.join(" | "), f.how);
            assert!(doc.contains(&row), "docs/routing.md lacks the row {row}");
        }
    }

    #[test]
    fn each_translating_dialect_has_a_fate_for_every_field() {
        for d in translating() {
            let w = wire(d);
            for f in FIELDS {
                assert!(w.fate(f.name).is_some(), "{d:?} lacks {}", f.name);
            }
            assert_eq!(w.fate("no_such_field"), None, "{d:?}");
            assert!(
                FIELDS.iter().all(|f| w.fate(f.name) != Some(Fate::Pass)),
                "{d:?}"
            );
        }
    }
}
