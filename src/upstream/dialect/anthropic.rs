//! Anthropic Messages (`POST {base}/messages`).
//!
//! Tool calls are `tool_use` blocks in assistant turns and their results
//! `tool_result` blocks in the next user turn; turns must alternate, so
//! adjacent turns of one role (several tool results, then the user's
//! next words) are merged into one. JSON mode has no equivalent here: it
//! is sent as one forced tool, [`JSON_TOOL`], whose input schema is the
//! requested schema, and its input is read back as the content
//! ([`super::ReplyPlan`]). System messages that open the conversation are
//! the top-level `system`; a later one stays in place as a `system`
//! message, under the [`MID_CONVERSATION_SYSTEM`] beta, unless the
//! provider's `system_messages = "fold"` folds it into `system`.

use eventsource_stream::Event;
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use super::provider_error::{Lax, Obj, some};
use super::request::{ChatMessage, data_url_image, image_url_of, part_type, unknown_part};
use super::stream::{StreamState, unreadable};
use super::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, BuildError, ChatReply, ChatRequest, Content, JSON_TOOL,
    ProviderError, ReplyDelta, ReplyError, ResponseFormat, SystemMessages, ToolCall, ToolCallDelta,
    ToolChoice, Usage, Wire, error_from_json, secret_header,
};

pub struct Anthropic;

/// A whole reply, read leniently: a field of an unexpected type is absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Reply {
    content: Lax<Vec<Lax<Block>>>,
    stop_reason: Lax<String>,
    #[serde(deserialize_with = "some")]
    usage: Option<Lax<Obj<Counts>>>,
}

/// A content block of a reply; block types not read yet are [`Block::Other`].
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: Lax<String>,
    },
    Thinking {
        #[serde(default)]
        thinking: Lax<String>,
    },
    ToolUse {
        #[serde(default)]
        id: Lax<String>,
        #[serde(default)]
        name: Lax<String>,
        #[serde(default)]
        input: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Counts {
    input_tokens: Lax<u64>,
    output_tokens: Lax<u64>,
}

impl From<Counts> for Usage {
    fn from(c: Counts) -> Usage {
        Usage {
            input_tokens: c.input_tokens.into_option(),
            output_tokens: c.output_tokens.into_option(),
        }
    }
}

/// `message_delta`'s counts are cumulative; keep the latest of each.
fn stream_usage(st: &mut StreamState, u: &Value) {
    let Ok(Obj(c)) = Obj::<Counts>::deserialize(u) else {
        return;
    };
    let u = Usage::from(c);
    if let Some(n) = u.input_tokens {
        st.usage.input_tokens = Some(n);
    }
    if let Some(n) = u.output_tokens {
        st.usage.output_tokens = Some(n);
    }
}

const VERSION: &str = "2023-06-01";

/// The beta under which Anthropic takes `system` messages inside
/// `messages` (Claude Code 2.1.197 sends it with them).
pub const MID_CONVERSATION_SYSTEM: &str = "mid-conversation-system-2026-04-07";

impl Wire for Anthropic {
    /// `message_start` starts the reply (its id, and the input tokens),
    /// text deltas give text, thinking deltas give reasoning, a `tool_use`
    /// block's start opens a tool call and its `input_json_delta`s give
    /// the arguments, `message_delta` gives the finish reason and output
    /// tokens, `message_stop` ends it, and `event: error` is an error.
    /// `ping` and block stops carry nothing. In JSON mode the forced
    /// tool's input is the text, and nothing else is.
    fn stream_event(&self, ev: &Event, st: &mut StreamState, out: &mut Vec<ReplyDelta>) {
        let Some(data) = super::parse_json(&ev.data) else {
            out.push(unreadable(&ev.data));
            return;
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        match kind {
            "message_start" => {
                let message = data.get("message");
                if let Some(u) = message.and_then(|m| m.get("usage")) {
                    stream_usage(st, u);
                }
                let id = message.and_then(|m| m.get("id")).and_then(Value::as_str);
                st.start(id, out);
                // The role's chunk has always had empty content.
                out.push(ReplyDelta::Text(String::new()));
            }
            "content_block_start" => {
                let block = data.get("content_block");
                let field = |f: &str| block.and_then(|b| b.get(f)).and_then(Value::as_str);
                let index = data.get("index").and_then(Value::as_u64);
                if field("type") == Some("tool_use") {
                    let name = field("name").unwrap_or_default();
                    if st.plan.json_tool && name == JSON_TOOL {
                        st.json_block = index;
                    } else {
                        let i = st.open_tool_call(index);
                        out.push(ReplyDelta::ToolCall(ToolCallDelta {
                            index: i,
                            id: field("id").map(str::to_string),
                            name: Some(name.to_string()),
                            arguments: String::new(),
                        }));
                    }
                } else if let Some(t) = field("text")
                    // A text block may open with text already in it.
                    && !t.is_empty()
                    && !st.plan.json_tool
                {
                    out.push(ReplyDelta::Text(t.to_string()));
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta");
                let text = |field: &str| {
                    delta
                        .and_then(|d| d.get(field))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                let index = data.get("index").and_then(Value::as_u64);
                match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                    // In JSON mode the content is the tool's input alone.
                    Some("text_delta") if st.plan.json_tool => {}
                    Some("text_delta") => out.extend(text("text").map(ReplyDelta::Text)),
                    Some("thinking_delta") => {
                        out.extend(text("thinking").map(ReplyDelta::Reasoning))
                    }
                    Some("input_json_delta") => {
                        let Some(part) = text("partial_json") else {
                            return;
                        };
                        if index.is_some() && index == st.json_block {
                            out.push(ReplyDelta::Text(part));
                        } else if let Some(i) = index.and_then(|b| st.tool_blocks.get(&b)) {
                            out.push(ReplyDelta::ToolCall(ToolCallDelta {
                                index: *i,
                                id: None,
                                name: None,
                                arguments: part,
                            }));
                        }
                    }
                    // signature_delta, citations: nothing a reply carries
                    // yet.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(u) = data.get("usage") {
                    stream_usage(st, u);
                }
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    // The forced JSON tool's call is the answer, not a call.
                    let reason = match reason {
                        "tool_use" if st.plan.json_tool => "end_turn",
                        r => r,
                    };
                    st.finish(reason.to_string(), out);
                }
            }
            "message_stop" => st.end(out),
            "error" => out.push(ReplyDelta::Error(error_from_json(&data).unwrap_or_else(
                || ProviderError {
                    message: "error event without details".into(),
                    ..ProviderError::default()
                },
            ))),
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
    }

    fn url(&self, base_url: &str, _model: &str, _stream: bool) -> String {
        format!("{}/messages", base_url.trim_end_matches('/'))
    }

    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
        Ok(vec![(
            HeaderName::from_static("x-api-key"),
            secret_header(key)?,
        )])
    }

    /// Sent even without a key: a keyless Anthropic-compatible server (or a
    /// proxy in front of one) still checks the version.
    fn fixed_headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        vec![(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(VERSION),
        )]
    }

    /// In place by default: Anthropic takes `system` messages inside
    /// `messages` with the [`MID_CONVERSATION_SYSTEM`] beta, which
    /// [`body_headers`](Wire::body_headers) sends when a body holds one.
    fn system_messages(&self) -> &'static [SystemMessages] {
        &[SystemMessages::InPlace, SystemMessages::Fold]
    }

    fn body_headers(&self, body: &Value) -> Vec<(HeaderName, HeaderValue)> {
        let in_place = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "system"));
        if in_place {
            vec![(
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(MID_CONVERSATION_SYSTEM),
            )]
        } else {
            Vec::new()
        }
    }

    fn body(&self, req: &ChatRequest) -> Result<Value, BuildError> {
        req.check_translatable("anthropic")?;
        // The system prompt ahead of the conversation is a top-level
        // field here; a later system message stays where it is (the
        // endpoint folded it first unless in place was chosen).
        let system = req.leading_system();
        let lead = req.leading_system_len();
        let mut turns: Vec<(&str, Value)> = Vec::new();
        for (i, m) in req.messages.iter().enumerate() {
            let turn = match m.role.as_str() {
                _ if m.is_system() && i < lead => continue,
                _ if m.is_system() => match m.content.as_ref().map(Content::system_text) {
                    Some(t) if !t.is_empty() => ("system", json!(t)),
                    _ => continue,
                },
                _ if !m.known_role() => continue,
                "tool" => ("user", json!([tool_result(m, i)?])),
                "assistant" => ("assistant", assistant_content(m, i)?),
                _ => ("user", content(m, i)?),
            };
            // Nothing to send (only parts left out, or empty text, which
            // Anthropic refuses in any message but a final assistant one and
            // OpenAI takes): the turn is left out.
            if turn.1.as_array().is_some_and(Vec::is_empty) || turn.1.as_str() == Some("") {
                continue;
            }
            push_turn(&mut turns, turn);
        }
        let messages: Vec<Value> = turns
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = json!({
            "model": req.model,
            "max_tokens": req.max_tokens.unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS),
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = req.top_p {
            body["top_p"] = json!(p);
        }
        if let Some(k) = req.extra_number("top_k") {
            body["top_k"] = json!(k);
        }
        if !req.stop.is_empty() {
            body["stop_sequences"] = json!(req.stop);
        }
        if req.stream {
            body["stream"] = json!(true);
        }
        if let Some(user) = req.extra.get("user").and_then(Value::as_str) {
            body["metadata"] = json!({"user_id": user});
        }
        tools(req, &mut body)?;
        Ok(body)
    }

    fn parse_reply(&self, json: &Value) -> Result<ChatReply, ReplyError> {
        let no_content = || ReplyError::Shape("no content in the response".into());
        let Obj(reply) = Obj::<Reply>::deserialize(json).map_err(|_| no_content())?;
        let content = reply.content.into_option().ok_or_else(no_content)?;
        if content.is_empty() {
            return Err(ReplyError::Shape("empty content array".into()));
        }
        let (mut text, mut reasoning, mut tool_calls) = (String::new(), String::new(), Vec::new());
        for block in content.iter().filter_map(Lax::get) {
            match block {
                Block::Text { text: t } => text.extend(t.get().map(String::as_str)),
                Block::Thinking { thinking } => {
                    reasoning.extend(thinking.get().map(String::as_str));
                }
                Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                    id: id.get().cloned().unwrap_or_default(),
                    name: name.get().cloned().unwrap_or_default(),
                    arguments: input.as_ref().map_or_else(|| "{}".into(), Value::to_string),
                }),
                Block::Other => {}
            }
        }
        Ok(ChatReply {
            text,
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            finish_reason: reply.stop_reason.into_option(),
            usage: reply
                .usage
                .map(|u| u.into_option().map_or_else(Usage::default, |c| c.0.into())),
            tool_calls,
        })
    }
}

/// Whether JSON mode goes as the forced tool [`JSON_TOOL`]: it was asked
/// for, and the client's own tools do not take its place.
pub(super) fn json_via_tool(req: &ChatRequest) -> bool {
    !req.declares_tools() && matches!(req.response_format(), Ok(Some(_)))
}

/// The client's tools and tool choice, or JSON mode as a forced tool.
fn tools(req: &ChatRequest, body: &mut Value) -> Result<(), BuildError> {
    let declared = req.tools()?;
    if declared.is_empty() {
        let mut tools = history_stubs(req)?;
        if json_via_tool(req) {
            let (schema, what) = match req.response_format()? {
                Some(ResponseFormat::JsonSchema { name, schema }) => (schema, format!(" ({name})")),
                _ => (json!({"type": "object"}), String::new()),
            };
            tools.retain(|t| t["name"] != JSON_TOOL);
            tools.insert(
                0,
                json!({
                    "name": JSON_TOOL,
                    "description": format!("Give your answer{what} as this tool's input."),
                    "input_schema": schema,
                }),
            );
            body["tool_choice"] = json!({"type": "tool", "name": JSON_TOOL});
        } else if !tools.is_empty() {
            // The client declared no tools, so it expects no new call:
            // OpenAI makes none without tools, and `none` is how
            // Anthropic says so while the stubs are declared.
            body["tool_choice"] = json!({"type": "none"});
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        return Ok(());
    }
    let tools: Vec<Value> = declared
        .into_iter()
        .map(|t| {
            let mut tool = json!({"name": t.name});
            if let Some(d) = t.description {
                tool["description"] = json!(d);
            }
            // Anthropic requires a schema; OpenAI lets a function without
            // parameters take none.
            tool["input_schema"] = t
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            tool
        })
        .collect();
    body["tools"] = Value::Array(tools);
    let choice = req.tool_choice()?;
    let serial = req.parallel_tool_calls() == Some(false);
    if choice.is_none() && !serial {
        return Ok(());
    }
    let mut c = match choice.unwrap_or(ToolChoice::Auto) {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
    };
    if serial && c["type"] != "none" {
        c["disable_parallel_tool_use"] = json!(true);
    }
    body["tool_choice"] = c;
    Ok(())
}

/// A stub declaration per tool the history's assistant turns called, in
/// order of first call. Anthropic refuses `tool_use`/`tool_result` blocks
/// in a request that defines no tools (400 "must define tools"), while
/// OpenAI takes a follow-up turn that no longer declares them.
fn history_stubs(req: &ChatRequest) -> Result<Vec<Value>, BuildError> {
    let mut names: Vec<String> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        if m.role != "assistant" {
            continue;
        }
        for c in m.tool_calls(i)? {
            if !names.contains(&c.name) {
                names.push(c.name);
            }
        }
    }
    Ok(names
        .into_iter()
        .map(|name| {
            json!({
                "name": name,
                "description": "(declared earlier in this conversation)",
                "input_schema": {"type": "object"},
            })
        })
        .collect())
}

/// A user message's content: its text, or its parts as blocks.
fn content(m: &ChatMessage, i: usize) -> Result<Value, BuildError> {
    match &m.content {
        Some(Content::Text(t)) => Ok(json!(t)),
        Some(Content::Parts(parts)) => blocks(parts, i),
        None => Err(no_content(i)),
    }
}

/// The parts as blocks; a part of a type route does not know is left out
/// (and reported, [`super::fields::dropped`]), and so is empty text.
fn blocks(parts: &[Value], i: usize) -> Result<Value, BuildError> {
    parts
        .iter()
        .enumerate()
        .filter(|(_, p)| !unknown_part(p))
        // Anthropic refuses an empty text block; it says nothing.
        .filter(|(_, p)| !(part_type(p) == "text" && p["text"].as_str() == Some("")))
        .map(|(j, p)| block(p, i, j))
        .collect::<Result<_, _>>()
        .map(Value::Array)
}

/// An assistant message: its text, then a `tool_use` block per call.
fn assistant_content(m: &ChatMessage, i: usize) -> Result<Value, BuildError> {
    let calls = m.tool_calls(i)?;
    if calls.is_empty() {
        if let Some(r) = m.refusal() {
            return Ok(json!(r));
        }
        return content(m, i);
    }
    let mut out = match &m.content {
        // Anthropic refuses an empty text block.
        Some(Content::Text(t)) if !t.is_empty() => vec![json!({"type": "text", "text": t})],
        Some(Content::Parts(parts)) => match blocks(parts, i)? {
            Value::Array(a) => a,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    for (j, c) in calls.iter().enumerate() {
        out.push(json!({
            "type": "tool_use",
            "id": c.id,
            "name": c.name,
            "input": c.arguments_object(&format!("messages[{i}].tool_calls[{j}]"))?,
        }));
    }
    Ok(Value::Array(out))
}

/// A `tool` message as a `tool_result` block.
fn tool_result(m: &ChatMessage, i: usize) -> Result<Value, BuildError> {
    let id = m.tool_call_id().ok_or_else(|| {
        BuildError::Unsupported(format!(
            "messages[{i}] is a tool result without a tool_call_id"
        ))
    })?;
    let content = match &m.content {
        Some(Content::Text(t)) => json!(t),
        Some(Content::Parts(parts)) => blocks(parts, i)?,
        None => json!(""),
    };
    Ok(json!({"type": "tool_result", "tool_use_id": id, "content": content}))
}

/// Add a turn, merged into the last one when both have the same role:
/// Anthropic wants user and assistant turns to alternate.
fn push_turn<'a>(turns: &mut Vec<(&'a str, Value)>, (role, content): (&'a str, Value)) {
    match turns.last_mut() {
        Some((last, prev)) if *last == role => {
            let mut merged = as_blocks(std::mem::take(prev));
            merged.extend(as_blocks(content));
            *prev = Value::Array(merged);
        }
        _ => turns.push((role, content)),
    }
}

/// Content as a list of blocks; an empty string is none.
fn as_blocks(content: Value) -> Vec<Value> {
    match content {
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a,
        _ => Vec::new(),
    }
}

/// An OpenAI content part as an Anthropic content block.
fn block(part: &Value, i: usize, j: usize) -> Result<Value, BuildError> {
    match part_type(part) {
        "text" => {
            Ok(json!({"type": "text", "text": part.get("text").cloned().unwrap_or_default()}))
        }
        "image_url" => {
            if let Some((media_type, data)) = data_url_image(part) {
                return Ok(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": media_type, "data": data},
                }));
            }
            match image_url_of(part) {
                Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
                    Ok(json!({"type": "image", "source": {"type": "url", "url": url}}))
                }
                _ => Err(BuildError::Unsupported(format!(
                    "messages[{i}].content[{j}]: anthropic takes images as base64 data: URLs or http(s) URLs"
                ))),
            }
        }
        other => Err(BuildError::Unsupported(format!(
            "messages[{i}].content[{j}]: content parts of type {other:?} cannot be sent to anthropic"
        ))),
    }
}

fn no_content(i: usize) -> BuildError {
    BuildError::Unsupported(format!(
        "messages[{i}] has no content, which anthropic does not accept"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::dialect::{Dialect, ReplyPlan, fields};

    fn request(json: &str) -> ChatRequest {
        ChatRequest::from_openai_json(json.as_bytes()).unwrap()
    }

    /// A conversation with two parallel calls, their results and the
    /// user's next words: OpenAI's shape in, Anthropic's out.
    const CONVERSATION: &str = r#"{"model":"claude","messages":[
        {"role":"system","content":"be brief"},
        {"role":"user","content":"weather in SF and NYC?"},
        {"role":"assistant","content":"Checking.","tool_calls":[
            {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"SF\"}"}},
            {"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"NYC\"}"}}]},
        {"role":"tool","tool_call_id":"toolu_1","content":"15 C"},
        {"role":"tool","tool_call_id":"toolu_2","content":[{"type":"text","text":"20 C"}]},
        {"role":"user","content":"which is warmer?"}],
      "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}],
      "tool_choice":"required","parallel_tool_calls":false,"user":"u-42","top_k":5,"seed":7}"#;

    #[test]
    fn tool_calls_and_results_become_blocks_in_alternating_turns() {
        let req = request(CONVERSATION);
        let body = Anthropic.body(&req).unwrap();
        assert_eq!(body["system"], "be brief");
        assert_eq!(
            body["messages"],
            json!([
                {"role":"user","content":"weather in SF and NYC?"},
                {"role":"assistant","content":[
                    {"type":"text","text":"Checking."},
                    {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"SF"}},
                    {"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"location":"NYC"}}]},
                {"role":"user","content":[
                    {"type":"tool_result","tool_use_id":"toolu_1","content":"15 C"},
                    {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"20 C"}]},
                    {"type":"text","text":"which is warmer?"}]}
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"name":"get_weather","description":"Weather now","input_schema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}])
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type":"any","disable_parallel_tool_use":true})
        );
        assert_eq!(body["metadata"], json!({"user_id":"u-42"}));
        assert_eq!(body["top_k"], 5);
        assert!(body.get("seed").is_none());
        assert_eq!(fields::dropped(Dialect::Anthropic, &req), ["seed"]);
        assert_eq!(
            ReplyPlan::new(Dialect::Anthropic, &req),
            ReplyPlan::default()
        );
    }

    #[test]
    fn each_tool_choice_has_its_anthropic_form() {
        let tools = r#""tools":[{"type":"function","function":{"name":"f"}}]"#;
        let cases = [
            (r#""auto""#, json!({"type":"auto"})),
            (r#""none""#, json!({"type":"none"})),
            (r#""required""#, json!({"type":"any"})),
            (
                r#"{"type":"function","function":{"name":"f"}}"#,
                json!({"type":"tool","name":"f"}),
            ),
        ];
        for (choice, want) in cases {
            let body = Anthropic
                .body(&request(&format!(
                    r#"{{"messages":[{{"role":"user","content":"x"}}],{tools},"tool_choice":{choice}}}"#
                )))
                .unwrap();
            assert_eq!(body["tool_choice"], want, "{choice}");
            // A function without parameters still gets a schema.
            assert_eq!(
                body["tools"][0]["input_schema"],
                json!({"type":"object","properties":{}})
            );
        }
        // No choice given: Anthropic's default, nothing sent.
        let body = Anthropic
            .body(&request(&format!(
                r#"{{"messages":[{{"role":"user","content":"x"}}],{tools}}}"#
            )))
            .unwrap();
        assert!(body.get("tool_choice").is_none());
    }

    #[test]
    fn json_mode_is_one_forced_tool_unless_the_client_has_tools() {
        let req = request(
            r#"{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"city","schema":{"type":"object","properties":{"name":{"type":"string"}}}}}}"#,
        );
        let body = Anthropic.body(&req).unwrap();
        assert_eq!(body["tools"][0]["name"], JSON_TOOL);
        assert_eq!(
            body["tools"][0]["input_schema"],
            json!({"type":"object","properties":{"name":{"type":"string"}}})
        );
        assert_eq!(body["tool_choice"], json!({"type":"tool","name":JSON_TOOL}));
        assert!(ReplyPlan::new(Dialect::Anthropic, &req).json_tool);
        assert!(fields::dropped(Dialect::Anthropic, &req).is_empty());
        let object = request(
            r#"{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
        );
        assert_eq!(
            Anthropic.body(&object).unwrap()["tools"][0]["input_schema"],
            json!({"type":"object"})
        );
        // With the client's own tools, they go and JSON mode is reported.
        let both = request(
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"response_format":{"type":"json_object"}}"#,
        );
        let body = Anthropic.body(&both).unwrap();
        assert_eq!(body["tools"].as_array().unwrap().len(), 1);
        assert_eq!(body["tools"][0]["name"], "f");
        assert!(!ReplyPlan::new(Dialect::Anthropic, &both).json_tool);
        assert_eq!(
            fields::dropped(Dialect::Anthropic, &both),
            ["response_format"]
        );
    }

    #[test]
    fn a_history_of_tool_calls_without_tools_declares_stubs() {
        // The follow-up turn drops `tools`; Anthropic would answer 400.
        let mut v: Value = serde_json::from_str(CONVERSATION).unwrap();
        let o = v.as_object_mut().unwrap();
        for k in ["tools", "tool_choice", "parallel_tool_calls"] {
            o.remove(k);
        }
        let req = ChatRequest::from_openai_json(v.to_string().as_bytes()).unwrap();
        let body = Anthropic.body(&req).unwrap();
        assert_eq!(
            body["tools"],
            json!([{"name":"get_weather","description":"(declared earlier in this conversation)","input_schema":{"type":"object"}}])
        );
        assert_eq!(body["tool_choice"], json!({"type":"none"}));
        // JSON mode keeps its forced tool, and the stubs come after it.
        v["response_format"] = json!({"type":"json_object"});
        let req = ChatRequest::from_openai_json(v.to_string().as_bytes()).unwrap();
        let body = Anthropic.body(&req).unwrap();
        let names: Vec<_> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].clone())
            .collect();
        assert_eq!(names, [json!(JSON_TOOL), json!("get_weather")]);
        assert_eq!(body["tool_choice"], json!({"type":"tool","name":JSON_TOOL}));
        // No tool in the history, no stub.
        let plain = request(r#"{"messages":[{"role":"user","content":"x"}]}"#);
        let body = Anthropic.body(&plain).unwrap();
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }

    #[test]
    fn what_cannot_be_translated_is_refused() {
        let bad_args = request(
            r#"{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}"#,
        );
        let e = Anthropic.body(&bad_args).unwrap_err();
        assert!(e.to_string().contains("messages[0].tool_calls[0]"), "{e}");
        let orphan = request(r#"{"messages":[{"role":"tool","content":"4"}]}"#);
        assert!(Anthropic.body(&orphan).is_err());
        // Empty arguments are no arguments.
        let empty = request(
            r#"{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":""}}]}]}"#,
        );
        assert_eq!(
            Anthropic.body(&empty).unwrap()["messages"][0]["content"],
            json!([{"type":"tool_use","id":"c","name":"f","input":{}}])
        );
    }

    #[test]
    fn an_empty_turn_is_left_out_as_anthropic_refuses_one() {
        let req = request(
            r#"{"model":"claude","messages":[
                {"role":"user","content":"hi"},
                {"role":"assistant","content":""},
                {"role":"user","content":"and?"}]}"#,
        );
        let body = Anthropic.body(&req).unwrap();
        // The two user turns around it merge.
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "and?"}]}])
        );
    }
}

/// What Anthropic can carry, and what becomes of each request field in it.
/// A module of its own only so that it can follow the tests above.
mod facts {
    use super::{Anthropic, json_via_tool};
    use crate::upstream::dialect::fields::{Fate, Row, fate_in};
    use crate::upstream::dialect::{
        ANTHROPIC_DEFAULT_MAX_TOKENS, ChatRequest, Facts, JsonMode, Need, ReplyPlan,
    };
    use Fate::{DropHarmless, DropReported, Need as Needed, Translate};

    /// Every field of [`fields::FIELDS`](crate::upstream::dialect::fields::FIELDS), in its order.
    const FIELDS: &[Row] = &[
        ("model", Translate),
        ("messages", Translate),
        ("max_tokens", Translate),
        ("max_completion_tokens", Translate),
        ("temperature", Translate),
        ("top_p", Translate),
        ("stop", Translate),
        ("stream", Translate),
        ("stream_options", DropHarmless),
        ("n", Needed),
        ("tools", Translate),
        ("tool_choice", Translate),
        ("parallel_tool_calls", Translate),
        ("functions", Needed),
        ("function_call", Needed),
        ("response_format", Translate),
        ("seed", DropReported),
        ("logit_bias", DropReported),
        ("logprobs", DropReported),
        ("top_logprobs", DropReported),
        ("frequency_penalty", DropReported),
        ("presence_penalty", DropReported),
        ("top_k", Translate),
        ("user", Translate),
        ("metadata", DropHarmless),
        ("store", DropHarmless),
        ("service_tier", DropHarmless),
        ("prompt_cache_key", DropHarmless),
        ("safety_identifier", DropHarmless),
        ("prediction", DropHarmless),
        ("reasoning_effort", DropReported),
        ("verbosity", DropReported),
        ("web_search_options", DropReported),
        ("modalities", Needed),
        ("audio", Needed),
        ("suffix", Needed),
        ("tools[].function.strict", DropReported),
        ("response_format.json_schema.strict", DropReported),
        ("messages[].name", DropReported),
        ("messages[].refusal", Translate),
        ("image_url.detail", DropHarmless),
    ];

    impl Facts for Anthropic {
        fn fate(&self, name: &str) -> Option<Fate> {
            fate_in(FIELDS, name)
        }

        /// Tools, JSON through a forced tool, images inline or by URL; one
        /// choice, no audio, no suffix (a chat endpoint does not fill in
        /// the middle).
        fn carries(&self, need: Need) -> bool {
            matches!(
                need,
                Need::Tools | Need::Json | Need::Vision | Need::ImageUrl | Need::Context
            )
        }

        /// Anthropic refuses a request without `max_tokens`.
        fn default_max_tokens(&self) -> Option<u32> {
            Some(ANTHROPIC_DEFAULT_MAX_TOKENS)
        }

        /// Anthropic has no JSON mode: it goes as the forced tool
        /// [`JSON_TOOL`](crate::upstream::dialect::JSON_TOOL).
        fn json_mode(&self) -> JsonMode {
            JsonMode::ForcedTool
        }

        fn reply_plan(&self, req: &ChatRequest) -> ReplyPlan {
            ReplyPlan {
                json_tool: json_via_tool(req),
            }
        }
    }
}
