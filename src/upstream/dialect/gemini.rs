//! Gemini `generateContent` (`POST {base}/models/{model}:generateContent`).
//!
//! The key goes in the `x-goog-api-key` header, never in `?key=`: reqwest
//! error messages and proxies' logs include the URL.
//!
//! Tool calls are `functionCall` parts of a `model` turn and their results
//! `functionResponse` parts of the next `user` turn, named after the call
//! they answer (Gemini pairs them by name, not id). Gemini gives calls no
//! ids, so each gets one made from the reply's id and the call itself
//! ([`call_id`]), the same whether the reply is streamed or not. Schemas
//! are cut to Gemini's subset (`super::schema`).

use eventsource_stream::Event;
use reqwest::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value, json};

use std::collections::HashMap;

use super::models::{self, ListError, Listed, Page};
use super::provider_error::{Lax, Obj, some};
use super::request::{ChatMessage, data_url_image, part_type, unknown_part};
use super::schema::{gemini_parameters, gemini_schema};
use super::stream::{StreamState, unreadable};
use super::{
    BuildError, ChatReply, ChatRequest, Content, Encoded, PartText, ReplyDelta, ReplyError,
    ResponseFormat, ToolCall, ToolCallDelta, ToolChoice, Usage, Wire, error_from_json, fields,
    secret_header,
};

pub struct Gemini;

/// A page of Gemini's model list.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelList {
    #[serde(default)]
    models: Vec<Value>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ListEntry {
    name: Lax<String>,
    input_token_limit: Lax<u64>,
    output_token_limit: Lax<u32>,
    supported_generation_methods: Lax<Vec<String>>,
}

/// A whole reply or one streamed event (each is a whole response holding
/// only what is new), read leniently: a field of an unexpected type is
/// absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Response {
    candidates: Lax<Vec<Value>>,
    #[serde(deserialize_with = "some")]
    usage_metadata: Option<Lax<Obj<Counts>>>,
    response_id: Lax<String>,
    prompt_feedback: Lax<Obj<Feedback>>,
}

impl Response {
    /// The first candidate (the only one read), if there is one.
    fn first(&self) -> Option<Candidate> {
        let first = self.candidates.get()?.first()?;
        Some(Obj::<Candidate>::deserialize(first).map_or_else(|_| Candidate::default(), |c| c.0))
    }

    /// Why the prompt was blocked, when it was; `Some(None)` when the
    /// reason is not a string.
    fn block_reason(&self) -> Option<Option<&str>> {
        let reason = self.prompt_feedback.get()?.0.block_reason.as_ref()?;
        Some(reason.as_str())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Feedback {
    #[serde(deserialize_with = "some")]
    block_reason: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Candidate {
    content: Lax<Obj<CandidateContent>>,
    finish_reason: Lax<String>,
}

impl Candidate {
    /// The candidate's parts; none when it has no content or parts (cut
    /// off by maxOutputTokens).
    fn parts(&self) -> &[Lax<Obj<Part>>] {
        self.content
            .get()
            .and_then(|c| c.0.parts.get())
            .map_or(&[], Vec::as_slice)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CandidateContent {
    parts: Lax<Vec<Lax<Obj<Part>>>>,
}

/// A part of a reply; only text (or thought) and calls are read.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Part {
    text: Lax<String>,
    thought: Lax<bool>,
    #[serde(deserialize_with = "some")]
    function_call: Option<Lax<Obj<FunctionCall>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FunctionCall {
    name: Lax<String>,
    args: Option<Value>,
    id: Lax<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Counts {
    prompt_token_count: Lax<u64>,
    candidates_token_count: Lax<u64>,
}

impl Counts {
    fn of(u: &Lax<Obj<Counts>>) -> (Option<u64>, Option<u64>) {
        u.get().map_or((None, None), |Obj(c)| {
            (
                c.prompt_token_count.get().copied(),
                c.candidates_token_count.get().copied(),
            )
        })
    }
}

/// The text of the parts that are thoughts (`thought`) or are not.
fn joined(parts: &[Lax<Obj<Part>>], thought: bool) -> String {
    parts
        .iter()
        .filter_map(Lax::get)
        .filter(|Obj(p)| (p.thought.get() == Some(&true)) == thought)
        .filter_map(|Obj(p)| p.text.get().map(String::as_str))
        .collect()
}

/// The calls among the parts (a `functionCall` of any value counts).
fn calls(parts: &[Lax<Obj<Part>>]) -> impl Iterator<Item = Option<&FunctionCall>> {
    parts
        .iter()
        .filter_map(Lax::get)
        .filter_map(|Obj(p)| p.function_call.as_ref())
        .map(|c| c.get().map(|c| &c.0))
}

impl Wire for Gemini {
    /// Each event is a whole response holding only the new text; the last
    /// has `finishReason`. The stream simply ends
    /// ([`stream_ends_at_eof`](Wire::stream_ends_at_eof)).
    fn stream_event(&self, ev: &Event, st: &mut StreamState, out: &mut Vec<ReplyDelta>) {
        let Some(data) = super::parse_json(&ev.data) else {
            out.push(unreadable(&ev.data));
            return;
        };
        if data.get("error").is_some()
            && let Some(err) = error_from_json(&data)
        {
            out.push(ReplyDelta::Error(err));
            return;
        }
        // Not an object: an event with nothing in it.
        let r = Obj::<Response>::deserialize(&data).map_or_else(|_| Response::default(), |r| r.0);
        if let Some(u) = &r.usage_metadata {
            let (input, output) = Counts::of(u);
            st.usage = Usage {
                input_tokens: input.or(st.usage.input_tokens),
                output_tokens: output.or(st.usage.output_tokens),
            };
        }
        let first_event = !st.started;
        let response_id = r.response_id.get().map(String::as_str);
        st.start(response_id, out);
        let first = r.first();
        let parts = first.as_ref().map_or(&[][..], Candidate::parts);
        let (text, reasoning) = (joined(parts, false), joined(parts, true));
        if !reasoning.is_empty() {
            out.push(ReplyDelta::Reasoning(reasoning));
        }
        // The first event always gives text, even empty, as it always has.
        if !text.is_empty() || first_event {
            out.push(ReplyDelta::Text(text));
        }
        // Calls come whole, never in fragments.
        for call in calls(parts) {
            let index = st.open_tool_call(None);
            let c = tool_call(call, response_id, index);
            out.push(ReplyDelta::ToolCall(ToolCallDelta {
                index,
                id: Some(c.id),
                name: Some(c.name),
                arguments: c.arguments,
            }));
        }
        let finish = first.as_ref().and_then(|c| c.finish_reason.get());
        // A prompt blocked for safety has no candidates at all.
        let blocked = first.is_none() && r.block_reason().is_some();
        if let Some(reason) = finish.map(String::as_str).or(blocked.then_some("SAFETY")) {
            st.finish(reason.to_string(), out);
        }
    }

    fn stream_ends_at_eof(&self) -> bool {
        true
    }

    fn url_names_model(&self) -> bool {
        true
    }

    /// Paged: up to 1,000 a page, then `pageToken`.
    fn models_url(&self, base_url: &str, cursor: Option<&str>) -> String {
        match cursor {
            Some(token) => {
                models::url_with(base_url, &[("pageSize", "1000"), ("pageToken", token)])
            }
            None => models::url_with(base_url, &[("pageSize", "1000")]),
        }
    }

    /// `{"models": [{"name": "models/…", "inputTokenLimit",
    /// "outputTokenLimit", "supportedGenerationMethods"}],
    /// "nextPageToken"}`: only the models that `generateContent`.
    fn parse_models(&self, json: &Value) -> Result<Page, ListError> {
        let list: ModelList = models::read(json, "a Gemini model list ({\"models\": [...]})")?;
        let models = list
            .models
            .iter()
            .filter_map(|e| {
                let e = ListEntry::deserialize(e).ok()?;
                let name = e.name.into_option()?;
                let id = name.strip_prefix("models/").unwrap_or(&name);
                let chats = e
                    .supported_generation_methods
                    .get()
                    .is_some_and(|m| m.iter().any(|x| x == "generateContent"));
                (chats && !id.is_empty()).then(|| Listed {
                    context_window: e.input_token_limit.get().copied(),
                    max_output_tokens: e.output_token_limit.get().copied(),
                    ..Listed::new(id)
                })
            })
            .collect();
        Ok(Page {
            models,
            next: list.next_page_token.filter(|t| !t.is_empty()),
        })
    }

    fn url(&self, base_url: &str, model: &str, stream: bool) -> String {
        // Model ids are sometimes written as the API names them,
        // "models/gemini-2.5-flash".
        let model = model.strip_prefix("models/").unwrap_or(model);
        let base = base_url.trim_end_matches('/');
        if stream {
            // Without alt=sse the streamed reply is one JSON array.
            format!("{base}/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{base}/models/{model}:generateContent")
        }
    }

    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
        Ok(vec![(
            HeaderName::from_static("x-goog-api-key"),
            secret_header(key)?,
        )])
    }

    fn encode(&self, req: &ChatRequest) -> Result<Encoded, BuildError> {
        Ok(Encoded::json(&Body::of(req)?))
    }

    fn reply_id<'a>(&self, json: &'a Value) -> Option<&'a str> {
        json.get("responseId").and_then(Value::as_str)
    }

    fn parse_reply(&self, json: &Value) -> Result<ChatReply, ReplyError> {
        let r = Obj::<Response>::deserialize(json).map_or_else(|_| Response::default(), |r| r.0);
        let Some(first) = r.candidates.get().filter(|c| !c.is_empty()).and(r.first()) else {
            return Err(ReplyError::Shape(match r.block_reason().flatten() {
                Some(reason) => format!("no candidates (prompt blocked: {reason})"),
                None => "no candidates in the response".into(),
            }));
        };
        // A candidate cut off by maxOutputTokens (typical for thinking
        // models) has a content without parts: an empty answer, not a
        // malformed response.
        let parts = first.parts();
        let reasoning = joined(parts, true);
        let response_id = r.response_id.get().map(String::as_str);
        let tool_calls = calls(parts)
            .enumerate()
            .map(|(i, call)| tool_call(call, response_id, i))
            .collect();
        Ok(ChatReply {
            text: joined(parts, false),
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            finish_reason: first.finish_reason.get().cloned(),
            usage: r.usage_metadata.as_ref().map(|u| {
                let (input_tokens, output_tokens) = Counts::of(u);
                Usage {
                    input_tokens,
                    output_tokens,
                }
            }),
            tool_calls,
        })
    }
}

/// A `generateContent` request body, borrowing from the [`ChatRequest`]
/// it is made of; fields in the order they are sent.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<Turn<'a>>,
    generation_config: Config<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<System>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Declarations; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig>,
}

#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    parts: Vec<OutPart<'a>>,
}

/// A part of a request turn.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum OutPart<'a> {
    Text(PartText<'a>),
    #[serde(rename_all = "camelCase")]
    InlineData {
        mime_type: String,
        data: String,
    },
    FunctionCall {
        name: String,
        args: Value,
    },
    FunctionResponse {
        name: String,
        response: Value,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Config<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<Value>,
}

#[derive(Serialize)]
struct System {
    parts: Vec<SystemText>,
}

#[derive(Serialize)]
struct SystemText {
    text: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Declarations {
    function_declarations: Vec<Declaration>,
}

#[derive(Serialize)]
struct Declaration {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig {
    function_calling_config: CallingConfig,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallingConfig {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_function_names: Option<[String; 1]>,
}

impl<'a> Body<'a> {
    fn of(req: &'a ChatRequest) -> Result<Body<'a>, BuildError> {
        req.check_translatable("gemini")?;
        let system: Vec<SystemText> = req
            .lifted_system()
            .into_iter()
            .map(|text| SystemText { text })
            .collect();
        // Each call's name by its id, for the results that answer it.
        let mut names: HashMap<String, String> = HashMap::new();
        let mut contents: Vec<Turn> = Vec::new();
        for (i, m) in req.messages.iter().enumerate() {
            let (role, parts) = match m.role.as_str() {
                _ if m.is_system() || !m.known_role() => continue,
                "tool" => ("user", vec![function_response(m, i, &names)?]),
                "assistant" => ("model", model_parts(m, i, &mut names)?),
                _ => ("user", parts(m, i)?),
            };
            // Only parts left out: nothing to send.
            if parts.is_empty() {
                continue;
            }
            // Turns of one role in a row (parallel calls' results) merge.
            match contents.last_mut() {
                Some(last) if last.role == role => last.parts.extend(parts),
                _ => contents.push(Turn { role, parts }),
            }
        }
        let json_mode = match req.response_format()? {
            Some(format) if !fields::json_mode_yields_to_tools(req) => Some(format),
            _ => None,
        };
        let generation_config = Config {
            temperature: req.temperature,
            max_output_tokens: req.max_tokens,
            top_p: req.top_p,
            stop_sequences: &req.stop,
            top_k: req.extra_number("top_k"),
            seed: req.extra_number("seed"),
            presence_penalty: req.extra_number("presence_penalty"),
            frequency_penalty: req.extra_number("frequency_penalty"),
            response_mime_type: json_mode.as_ref().map(|_| "application/json"),
            response_schema: match json_mode {
                Some(ResponseFormat::JsonSchema { schema, .. }) => Some(gemini_schema(&schema)),
                _ => None,
            },
        };
        let (tools, tool_config) = tools(req)?;
        Ok(Body {
            contents,
            generation_config,
            system_instruction: (!system.is_empty()).then_some(System { parts: system }),
            tools,
            tool_config,
        })
    }
}

/// A `functionCall` part's call, with its own id when it has one (newer
/// models give one) and otherwise [`call_id`].
fn tool_call(call: Option<&FunctionCall>, response_id: Option<&str>, index: usize) -> ToolCall {
    let name = call.and_then(|c| c.name.get()).cloned().unwrap_or_default();
    let arguments = call
        .and_then(|c| c.args.as_ref())
        .map_or_else(|| "{}".into(), Value::to_string);
    let id = match call.and_then(|c| c.id.get()).map(String::as_str) {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => call_id(response_id, index, &name, &arguments),
    };
    ToolCall {
        id,
        name,
        arguments,
    }
}

/// An id for the `index`th call of a reply, which Gemini does not name:
/// `call_` and a hash (64-bit FNV-1a) of the reply's id, the index, the
/// name and the arguments, so that a streamed reply and a whole one give
/// their calls the same ids, and two replies' calls (almost surely)
/// different ones.
pub(super) fn call_id(response_id: Option<&str>, index: usize, name: &str, args: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let index = index.to_string();
    for piece in [response_id.unwrap_or(""), &index, name, args] {
        for b in piece.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("call_{h:016x}")
}

/// The client's tools as function declarations, and its tool choice.
fn tools(req: &ChatRequest) -> Result<(Option<[Declarations; 1]>, Option<ToolConfig>), BuildError> {
    let declared = req.tools()?;
    if declared.is_empty() {
        return Ok((None, None));
    }
    let function_declarations = declared
        .into_iter()
        .map(|t| Declaration {
            parameters: t.parameters.as_ref().and_then(gemini_parameters),
            name: t.name,
            description: t.description,
        })
        .collect();
    let tools = Some([Declarations {
        function_declarations,
    }]);
    let (mode, allowed) = match req.tool_choice()? {
        None => return Ok((tools, None)),
        Some(ToolChoice::Auto) => ("AUTO", None),
        Some(ToolChoice::None) => ("NONE", None),
        Some(ToolChoice::Required) => ("ANY", None),
        Some(ToolChoice::Function(name)) => ("ANY", Some([name])),
    };
    let config = ToolConfig {
        function_calling_config: CallingConfig {
            mode,
            allowed_function_names: allowed,
        },
    };
    Ok((tools, Some(config)))
}

/// A user message's parts.
fn parts(m: &ChatMessage, i: usize) -> Result<Vec<OutPart<'_>>, BuildError> {
    match &m.content {
        Some(Content::Text(t)) => Ok(vec![OutPart::Text(PartText::Str(t.into()))]),
        // A part of a type route does not know is left out (and
        // reported, `fields::dropped`).
        Some(Content::Parts(parts)) => parts
            .iter()
            .enumerate()
            .filter(|(_, p)| !unknown_part(p))
            .map(|(j, p)| part(p, i, j))
            .collect(),
        None => Err(BuildError::Unsupported(format!(
            "messages[{i}] has no content, which gemini does not accept"
        ))),
    }
}

/// An assistant message's parts: its text, then a `functionCall` per
/// call (whose names are noted for the results that follow).
fn model_parts<'a>(
    m: &'a ChatMessage,
    i: usize,
    names: &mut HashMap<String, String>,
) -> Result<Vec<OutPart<'a>>, BuildError> {
    let calls = m.tool_calls(i)?;
    if calls.is_empty() {
        if let Some(r) = m.refusal() {
            return Ok(vec![OutPart::Text(PartText::Str(r.into()))]);
        }
        return parts(m, i);
    }
    let mut out = match &m.content {
        Some(Content::Text(t)) if t.is_empty() => Vec::new(),
        Some(_) => parts(m, i)?,
        None => Vec::new(),
    };
    for (j, c) in calls.into_iter().enumerate() {
        let args = c.arguments_object(&format!("messages[{i}].tool_calls[{j}]"))?;
        names.insert(c.id, c.name.clone());
        out.push(OutPart::FunctionCall { name: c.name, args });
    }
    Ok(out)
}

/// A `tool` message as a `functionResponse` part, named after the call it
/// answers. Gemini wants the response as an object: a JSON object's text
/// is that object; anything else is wrapped as `{"content": …}`.
fn function_response(
    m: &ChatMessage,
    i: usize,
    names: &HashMap<String, String>,
) -> Result<OutPart<'static>, BuildError> {
    let name = m.tool_call_id().and_then(|id| names.get(id)).ok_or_else(|| {
        BuildError::Unsupported(format!(
            "messages[{i}] answers no earlier tool call (its tool_call_id is unknown), and gemini \
             names a result after its call"
        ))
    })?;
    let text = m.content.as_ref().map(Content::text).unwrap_or_default();
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"content": text}),
    };
    Ok(OutPart::FunctionResponse {
        name: name.clone(),
        response,
    })
}

/// An OpenAI content part as a Gemini part.
fn part(p: &Value, i: usize, j: usize) -> Result<OutPart<'_>, BuildError> {
    match part_type(p) {
        "text" => Ok(OutPart::Text(PartText::Json(&p["text"]))),
        "image_url" => match data_url_image(p) {
            Some((mime_type, data)) => Ok(OutPart::InlineData { mime_type, data }),
            None => Err(BuildError::Unsupported(format!(
                "messages[{i}].content[{j}]: gemini takes images only as base64 data: URLs"
            ))),
        },
        other => Err(BuildError::Unsupported(format!(
            "messages[{i}].content[{j}]: content parts of type {other:?} cannot be sent to gemini"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::dialect::{Dialect, fields};

    fn request(json: &str) -> ChatRequest {
        ChatRequest::from_openai_json(json.as_bytes()).unwrap()
    }

    #[test]
    fn tool_calls_and_results_become_parts_paired_by_name() {
        let req = request(
            r#"{"model":"g","messages":[
                {"role":"user","content":"weather in SF and NYC?"},
                {"role":"assistant","content":"Checking.","tool_calls":[
                    {"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"SF\"}"}},
                    {"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"call_b","content":"{\"time\":\"09:00\"}"},
                {"role":"tool","tool_call_id":"call_a","content":"15 C"},
                {"role":"user","content":"thanks"}],
              "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{
                  "$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,
                  "properties":{"location":{"type":"string","default":"SF"}},"required":["location"]}}},
                {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}],
              "tool_choice":{"type":"function","function":{"name":"get_weather"}},
              "parallel_tool_calls":false,"seed":7,"top_k":3,"presence_penalty":0.5,"frequency_penalty":0.25,"user":"u"}"#,
        );
        let body = Gemini.body(&req).unwrap();
        assert_eq!(
            body["contents"],
            json!([
                {"role":"user","parts":[{"text":"weather in SF and NYC?"}]},
                {"role":"model","parts":[
                    {"text":"Checking."},
                    {"functionCall":{"name":"get_weather","args":{"location":"SF"}}},
                    {"functionCall":{"name":"get_time","args":{}}}]},
                {"role":"user","parts":[
                    {"functionResponse":{"name":"get_time","response":{"time":"09:00"}}},
                    {"functionResponse":{"name":"get_weather","response":{"content":"15 C"}}},
                    {"text":"thanks"}]}
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"functionDeclarations":[
                {"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}},
                {"name":"get_time"}]}])
        );
        assert_eq!(
            body["toolConfig"],
            json!({"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}})
        );
        let config = &body["generationConfig"];
        assert_eq!(
            (
                &config["seed"],
                &config["topK"],
                &config["presencePenalty"],
                &config["frequencyPenalty"]
            ),
            (&json!(7), &json!(3), &json!(0.5), &json!(0.25))
        );
        assert_eq!(
            fields::dropped(Dialect::Gemini, &req),
            ["parallel_tool_calls"]
        );
    }

    #[test]
    fn each_tool_choice_has_its_gemini_mode() {
        for (choice, mode) in [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")] {
            let body = Gemini
                .body(&request(&format!(
                    r#"{{"messages":[{{"role":"user","content":"x"}}],"tools":[{{"type":"function","function":{{"name":"f"}}}}],"tool_choice":"{choice}"}}"#
                )))
                .unwrap();
            assert_eq!(
                body["toolConfig"],
                json!({"functionCallingConfig":{"mode":mode}})
            );
        }
    }

    #[test]
    fn json_mode_is_a_mime_type_and_a_sanitised_schema() {
        let req = request(
            r#"{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"city","strict":true,"schema":{"type":"object","additionalProperties":false,"properties":{"name":{"type":["string","null"]}},"required":["name"]}}}}"#,
        );
        let config = &Gemini.body(&req).unwrap()["generationConfig"];
        assert_eq!(config["responseMimeType"], "application/json");
        assert_eq!(
            config["responseSchema"],
            json!({"type":"object","properties":{"name":{"type":"string","nullable":true}},"required":["name"]})
        );
        let object = request(
            r#"{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
        );
        let config = &Gemini.body(&object).unwrap()["generationConfig"];
        assert_eq!(config["responseMimeType"], "application/json");
        assert!(config.get("responseSchema").is_none());
        // Gemini refuses JSON mode with function calling: the tools win.
        let both = request(
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"response_format":{"type":"json_object"}}"#,
        );
        let body = Gemini.body(&both).unwrap();
        assert!(body["generationConfig"].get("responseMimeType").is_none());
        assert_eq!(fields::dropped(Dialect::Gemini, &both), ["response_format"]);
    }

    #[test]
    fn a_result_for_no_known_call_is_refused() {
        let req = request(
            r#"{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"4"}]}"#,
        );
        let e = Gemini.body(&req).unwrap_err();
        assert!(e.to_string().contains("messages[1]"), "{e}");
    }

    #[test]
    fn call_ids_are_stable_and_distinct() {
        let a = call_id(Some("r1"), 0, "f", "{}");
        assert_eq!(a, call_id(Some("r1"), 0, "f", "{}"));
        assert!(a.starts_with("call_") && a.len() == 21, "{a}");
        for other in [
            call_id(Some("r2"), 0, "f", "{}"),
            call_id(Some("r1"), 1, "f", "{}"),
            call_id(Some("r1"), 0, "g", "{}"),
            call_id(None, 0, "f", "{}"),
        ] {
            assert_ne!(a, other);
        }
        // A call's own id, when a newer model gives one, is kept.
        let call =
            FunctionCall::deserialize(&json!({"id":"fc_1","name":"f","args":{"x":1}})).unwrap();
        let c = tool_call(Some(&call), Some("r"), 0);
        assert_eq!(
            (c.id.as_str(), c.arguments.as_str()),
            ("fc_1", r#"{"x":1}"#)
        );
    }
}

/// What Gemini can carry, and what becomes of each request field in it.
/// A module of its own only so that it can follow the tests above.
mod facts {
    use super::Gemini;
    use crate::upstream::dialect::Facts;
    use crate::upstream::dialect::Need;
    use crate::upstream::dialect::fields::{Fate, Row, fate_in};
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
        ("parallel_tool_calls", DropReported),
        ("functions", Needed),
        ("function_call", Needed),
        ("response_format", Translate),
        ("seed", Translate),
        ("logit_bias", DropReported),
        ("logprobs", DropReported),
        ("top_logprobs", DropReported),
        ("frequency_penalty", Translate),
        ("presence_penalty", Translate),
        ("top_k", Translate),
        ("user", DropHarmless),
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

    impl Facts for Gemini {
        fn fate(&self, name: &str) -> Option<Fate> {
            fate_in(FIELDS, name)
        }

        /// Tools, JSON (`responseSchema`), inline images; an image URL
        /// would need an upload first. One choice, no audio, no suffix (a
        /// chat endpoint does not fill in the middle).
        fn carries(&self, need: Need) -> bool {
            matches!(
                need,
                Need::Tools | Need::Json | Need::Vision | Need::Context
            )
        }
    }
}
