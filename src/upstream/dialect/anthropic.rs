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
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value, json};

use std::borrow::Cow;

use super::models::{self, ListError, Listed, Page};
use super::provider_error::{Lax, Obj, some};
use super::request::{ChatMessage, data_url_image, image_url_of, part_type, unknown_part};
use super::stream::{StreamState, unreadable};
use super::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, BuildError, ChatReply, ChatRequest, Content, Encoded, JSON_TOOL,
    PartText, ProviderError, ReplyDelta, ReplyError, ResponseFormat, SystemMessages, ToolCall,
    ToolCallDelta, ToolChoice, Usage, Wire, error_from_json, secret_header,
};

pub struct Anthropic;

/// A page of Anthropic's model list.
#[derive(Debug, Deserialize)]
struct ModelList {
    data: Vec<Value>,
    #[serde(default)]
    has_more: bool,
    #[serde(default)]
    last_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ListEntry {
    id: Lax<String>,
}

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

/// One streamed event, read leniently; which fields it has depends on
/// its type.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StreamEvent {
    #[serde(rename = "type")]
    kind: Lax<String>,
    /// `message_start`'s.
    message: Lax<Obj<StartMessage>>,
    /// The content block a `content_block_*` event is about.
    index: Lax<u64>,
    content_block: Lax<Obj<StartBlock>>,
    delta: Lax<Obj<Delta>>,
    /// `message_delta`'s.
    usage: Lax<Obj<Counts>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StartMessage {
    id: Lax<String>,
    usage: Lax<Obj<Counts>>,
}

/// A block as `content_block_start` opens it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StartBlock {
    #[serde(rename = "type")]
    kind: Lax<String>,
    id: Lax<String>,
    name: Lax<String>,
    text: Lax<String>,
}

/// A `content_block_delta`'s or `message_delta`'s `delta`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    #[serde(rename = "type")]
    kind: Lax<String>,
    text: Lax<String>,
    thinking: Lax<String>,
    partial_json: Lax<String>,
    stop_reason: Lax<String>,
}

/// `message_delta`'s counts are cumulative; keep the latest of each.
fn stream_usage(st: &mut StreamState, counts: Lax<Obj<Counts>>) {
    let Some(Obj(c)) = counts.into_option() else {
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
        // Not an object: an event with nothing in it but its name.
        let e =
            Obj::<StreamEvent>::deserialize(&data).map_or_else(|_| StreamEvent::default(), |e| e.0);
        let kind = e.kind.get().map_or(ev.event.as_str(), String::as_str);
        let index = e.index.get().copied();
        match kind {
            "message_start" => {
                let message = e.message.into_option().map(|m| m.0).unwrap_or_default();
                stream_usage(st, message.usage);
                st.start(message.id.get().map(String::as_str), out);
                // The role's chunk has always had empty content.
                out.push(ReplyDelta::Text(String::new()));
            }
            "content_block_start" => {
                let Some(Obj(block)) = e.content_block.into_option() else {
                    return;
                };
                if block.kind.get().map(String::as_str) == Some("tool_use") {
                    let name = block.name.into_option().unwrap_or_default();
                    if st.plan.json_tool && name == JSON_TOOL {
                        st.json_block = index;
                    } else {
                        let i = st.open_tool_call(index);
                        out.push(ReplyDelta::ToolCall(ToolCallDelta {
                            index: i,
                            id: block.id.into_option(),
                            name: Some(name),
                            arguments: String::new(),
                        }));
                    }
                } else if let Some(t) = block.text.into_option()
                    // A text block may open with text already in it.
                    && !t.is_empty()
                    && !st.plan.json_tool
                {
                    out.push(ReplyDelta::Text(t));
                }
            }
            "content_block_delta" => {
                let Some(Obj(delta)) = e.delta.into_option() else {
                    return;
                };
                match delta.kind.get().map(String::as_str) {
                    // In JSON mode the content is the tool's input alone.
                    Some("text_delta") if st.plan.json_tool => {}
                    Some("text_delta") => {
                        out.extend(delta.text.into_option().map(ReplyDelta::Text))
                    }
                    Some("thinking_delta") => {
                        out.extend(delta.thinking.into_option().map(ReplyDelta::Reasoning))
                    }
                    Some("input_json_delta") => {
                        let Some(part) = delta.partial_json.into_option() else {
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
                stream_usage(st, e.usage);
                let reason = e
                    .delta
                    .into_option()
                    .and_then(|d| d.0.stop_reason.into_option());
                if let Some(reason) = reason {
                    // The forced JSON tool's call is the answer, not a call.
                    let reason = match reason.as_str() {
                        "tool_use" if st.plan.json_tool => "end_turn".to_string(),
                        _ => reason,
                    };
                    st.finish(reason, out);
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

    /// Paged: up to 1,000 a page, the next after the last id.
    fn models_url(&self, base_url: &str, cursor: Option<&str>) -> String {
        match cursor {
            Some(after) => models::url_with(base_url, &[("limit", "1000"), ("after_id", after)]),
            None => models::url_with(base_url, &[("limit", "1000")]),
        }
    }

    /// `{"data": [{"type": "model", "id", …}], "has_more", "last_id"}`.
    fn parse_models(&self, json: &Value) -> Result<Page, ListError> {
        let list: ModelList = models::read(json, "an Anthropic model list ({\"data\": [...]})")?;
        let models: Vec<Listed> = list
            .data
            .iter()
            .filter_map(|e| {
                let e = ListEntry::deserialize(e).ok()?;
                let id = e.id.into_option().filter(|s| !s.is_empty())?;
                Some(Listed::new(id))
            })
            .collect();
        let next = match list.has_more {
            true => list.last_id.or_else(|| models.last().map(|m| m.id.clone())),
            false => None,
        };
        Ok(Page { models, next })
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
    /// [`encode`](Wire::encode) sends when a body holds one.
    fn system_messages(&self) -> &'static [SystemMessages] {
        &[SystemMessages::InPlace, SystemMessages::Fold]
    }

    fn encode(&self, req: &ChatRequest) -> Result<Encoded, BuildError> {
        let body = Body::of(req)?;
        let mut encoded = Encoded::json(&body);
        if body.system_in_place() {
            encoded.headers.push((
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(MID_CONVERSATION_SYSTEM),
            ));
        }
        Ok(encoded)
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

/// A Messages request body, borrowing from the [`ChatRequest`] it is made
/// of; fields in the order they are sent.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<&'a Number>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    user_id: &'a str,
}

/// One turn of the conversation.
#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: TurnContent<'a>,
}

/// A turn's (or a tool result's) content: a string, or blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum TurnContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<OutBlock<'a>>),
}

impl<'a> TurnContent<'a> {
    /// Nothing to send: no block, or empty text.
    fn is_empty(&self) -> bool {
        match self {
            TurnContent::Text(t) => t.is_empty(),
            TurnContent::Blocks(b) => b.is_empty(),
        }
    }

    /// As a list of blocks; empty text is none.
    fn into_blocks(self) -> Vec<OutBlock<'a>> {
        match self {
            TurnContent::Text(t) if t.is_empty() => Vec::new(),
            TurnContent::Text(t) => vec![OutBlock::Text {
                text: PartText::Str(t),
            }],
            TurnContent::Blocks(b) => b,
        }
    }
}

/// A content block of a request.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    Text {
        text: PartText<'a>,
    },
    Image {
        source: Source<'a>,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: TurnContent<'a>,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Source<'a> {
    Base64 { media_type: String, data: String },
    Url { url: &'a str },
}

#[derive(Serialize)]
struct Tool {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    input_schema: Value,
}

#[derive(Serialize)]
struct Choice {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    disable_parallel_tool_use: bool,
}

impl Choice {
    fn of(kind: &'static str) -> Choice {
        Choice {
            kind,
            name: None,
            disable_parallel_tool_use: false,
        }
    }

    fn tool(name: impl Into<String>) -> Choice {
        Choice {
            name: Some(name.into()),
            ..Choice::of("tool")
        }
    }
}

impl<'a> Body<'a> {
    fn of(req: &'a ChatRequest) -> Result<Body<'a>, BuildError> {
        req.check_translatable("anthropic")?;
        // The system prompt ahead of the conversation is a top-level
        // field here; a later system message stays where it is (the
        // endpoint folded it first unless in place was chosen).
        let system = req.leading_system();
        let lead = req.leading_system_len();
        let mut turns: Vec<Turn> = Vec::new();
        for (i, m) in req.messages.iter().enumerate() {
            let (role, content) = match m.role.as_str() {
                _ if m.is_system() && i < lead => continue,
                _ if m.is_system() => match m.content.as_ref().map(Content::system_text) {
                    Some(t) if !t.is_empty() => ("system", TurnContent::Text(t.into())),
                    _ => continue,
                },
                _ if !m.known_role() => continue,
                "tool" => ("user", TurnContent::Blocks(vec![tool_result(m, i)?])),
                "assistant" => ("assistant", assistant_content(m, i)?),
                _ => ("user", content(m, i)?),
            };
            // Nothing to send (only parts left out, or empty text, which
            // Anthropic refuses in any message but a final assistant one and
            // OpenAI takes): the turn is left out.
            if content.is_empty() {
                continue;
            }
            push_turn(&mut turns, Turn { role, content });
        }
        let mut body = Body {
            model: &req.model,
            max_tokens: req.max_tokens.unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS),
            messages: turns,
            system: (!system.is_empty()).then(|| system.join("\n\n")),
            temperature: req.temperature,
            top_p: req.top_p,
            top_k: req.extra_number("top_k"),
            stop_sequences: &req.stop,
            stream: req.stream,
            metadata: req
                .extra
                .get("user")
                .and_then(Value::as_str)
                .map(|user_id| Metadata { user_id }),
            tools: Vec::new(),
            tool_choice: None,
        };
        (body.tools, body.tool_choice) = tools(req)?;
        Ok(body)
    }

    /// Whether a `system` message stays inside `messages`, which takes the
    /// [`MID_CONVERSATION_SYSTEM`] beta.
    fn system_in_place(&self) -> bool {
        self.messages.iter().any(|t| t.role == "system")
    }
}

/// Whether JSON mode goes as the forced tool [`JSON_TOOL`]: it was asked
/// for, and the client's own tools do not take its place.
pub(super) fn json_via_tool(req: &ChatRequest) -> bool {
    !req.declares_tools() && matches!(req.response_format(), Ok(Some(_)))
}

/// The client's tools and tool choice, or JSON mode as a forced tool.
fn tools(req: &ChatRequest) -> Result<(Vec<Tool>, Option<Choice>), BuildError> {
    let declared = req.tools()?;
    if declared.is_empty() {
        let mut tools = history_stubs(req)?;
        let mut choice = None;
        if json_via_tool(req) {
            let (schema, what) = match req.response_format()? {
                Some(ResponseFormat::JsonSchema { name, schema }) => (schema, format!(" ({name})")),
                _ => (json!({"type": "object"}), String::new()),
            };
            tools.retain(|t| t.name != JSON_TOOL);
            tools.insert(
                0,
                Tool {
                    name: JSON_TOOL.into(),
                    description: Some(format!("Give your answer{what} as this tool's input.")),
                    input_schema: schema,
                },
            );
            choice = Some(Choice::tool(JSON_TOOL));
        } else if !tools.is_empty() {
            // The client declared no tools, so it expects no new call:
            // OpenAI makes none without tools, and `none` is how
            // Anthropic says so while the stubs are declared.
            choice = Some(Choice::of("none"));
        }
        return Ok((tools, choice));
    }
    let tools = declared
        .into_iter()
        .map(|t| Tool {
            name: t.name,
            description: t.description,
            // Anthropic requires a schema; OpenAI lets a function without
            // parameters take none.
            input_schema: t
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        })
        .collect();
    let choice = req.tool_choice()?;
    let serial = req.parallel_tool_calls() == Some(false);
    if choice.is_none() && !serial {
        return Ok((tools, None));
    }
    let mut c = match choice.unwrap_or(ToolChoice::Auto) {
        ToolChoice::Auto => Choice::of("auto"),
        ToolChoice::None => Choice::of("none"),
        ToolChoice::Required => Choice::of("any"),
        ToolChoice::Function(name) => Choice::tool(name),
    };
    c.disable_parallel_tool_use = serial && c.kind != "none";
    Ok((tools, Some(c)))
}

/// A stub declaration per tool the history's assistant turns called, in
/// order of first call. Anthropic refuses `tool_use`/`tool_result` blocks
/// in a request that defines no tools (400 "must define tools"), while
/// OpenAI takes a follow-up turn that no longer declares them.
fn history_stubs(req: &ChatRequest) -> Result<Vec<Tool>, BuildError> {
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
        .map(|name| Tool {
            name,
            description: Some("(declared earlier in this conversation)".into()),
            input_schema: json!({"type": "object"}),
        })
        .collect())
}

/// A user message's content: its text, or its parts as blocks.
fn content(m: &ChatMessage, i: usize) -> Result<TurnContent<'_>, BuildError> {
    match &m.content {
        Some(Content::Text(t)) => Ok(TurnContent::Text(t.into())),
        Some(Content::Parts(parts)) => blocks(parts, i).map(TurnContent::Blocks),
        None => Err(no_content(i)),
    }
}

/// The parts as blocks; a part of a type route does not know is left out
/// (and reported, [`super::fields::dropped`]), and so is empty text.
fn blocks(parts: &[Value], i: usize) -> Result<Vec<OutBlock<'_>>, BuildError> {
    parts
        .iter()
        .enumerate()
        .filter(|(_, p)| !unknown_part(p))
        // Anthropic refuses an empty text block; it says nothing.
        .filter(|(_, p)| !(part_type(p) == "text" && p["text"].as_str() == Some("")))
        .map(|(j, p)| block(p, i, j))
        .collect()
}

/// An assistant message: its text, then a `tool_use` block per call.
fn assistant_content(m: &ChatMessage, i: usize) -> Result<TurnContent<'_>, BuildError> {
    let calls = m.tool_calls(i)?;
    if calls.is_empty() {
        if let Some(r) = m.refusal() {
            return Ok(TurnContent::Text(r.into()));
        }
        return content(m, i);
    }
    let mut out = match &m.content {
        // Anthropic refuses an empty text block.
        Some(Content::Text(t)) if !t.is_empty() => vec![OutBlock::Text {
            text: PartText::Str(t.into()),
        }],
        Some(Content::Parts(parts)) => blocks(parts, i)?,
        _ => Vec::new(),
    };
    for (j, c) in calls.into_iter().enumerate() {
        let input = c.arguments_object(&format!("messages[{i}].tool_calls[{j}]"))?;
        out.push(OutBlock::ToolUse {
            id: c.id,
            name: c.name,
            input,
        });
    }
    Ok(TurnContent::Blocks(out))
}

/// A `tool` message as a `tool_result` block.
fn tool_result(m: &ChatMessage, i: usize) -> Result<OutBlock<'_>, BuildError> {
    let id = m.tool_call_id().ok_or_else(|| {
        BuildError::Unsupported(format!(
            "messages[{i}] is a tool result without a tool_call_id"
        ))
    })?;
    let content = match &m.content {
        Some(Content::Text(t)) => TurnContent::Text(t.into()),
        Some(Content::Parts(parts)) => TurnContent::Blocks(blocks(parts, i)?),
        None => TurnContent::Text("".into()),
    };
    Ok(OutBlock::ToolResult {
        tool_use_id: id,
        content,
    })
}

/// Add a turn, merged into the last one when both have the same role:
/// Anthropic wants user and assistant turns to alternate.
fn push_turn<'a>(turns: &mut Vec<Turn<'a>>, turn: Turn<'a>) {
    match turns.last_mut() {
        Some(last) if last.role == turn.role => {
            let prev = std::mem::replace(&mut last.content, TurnContent::Blocks(Vec::new()));
            let mut merged = prev.into_blocks();
            merged.extend(turn.content.into_blocks());
            last.content = TurnContent::Blocks(merged);
        }
        _ => turns.push(turn),
    }
}

/// An OpenAI content part as an Anthropic content block.
fn block(part: &Value, i: usize, j: usize) -> Result<OutBlock<'_>, BuildError> {
    match part_type(part) {
        "text" => Ok(OutBlock::Text {
            text: PartText::Json(&part["text"]),
        }),
        "image_url" => {
            if let Some((media_type, data)) = data_url_image(part) {
                return Ok(OutBlock::Image {
                    source: Source::Base64 { media_type, data },
                });
            }
            match image_url_of(part) {
                Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
                    Ok(OutBlock::Image {
                        source: Source::Url { url },
                    })
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
