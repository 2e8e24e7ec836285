//! OpenAI chat completions (`POST {base}/chat/completions`), the dialect of
//! most providers and of Ollama, llama.cpp and vLLM. Every field goes as it
//! came, except that system messages after the first turn are folded into
//! the leading system message unless the provider says
//! `system_messages = "in-place"` ([`super::SystemMessages`]).

use eventsource_stream::Event;
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use super::models::{self, ListError, Listed, Page, Pricing};
use super::provider_error::{Lax, Obj, present, some};
use super::stream::{StreamState, unreadable};
use super::{
    BuildError, ChatReply, ChatRequest, Encoded, ProviderError, ReplyDelta, ReplyError,
    SystemMessages, ToolCall, ToolCallDelta, Usage, Wire, error_from_json, secret_header,
};

pub struct OpenAi;

/// An OpenAI-compatible model list.
#[derive(Debug, Deserialize)]
struct ModelList {
    data: Vec<Value>,
}

/// One model of an OpenAI-compatible list, with every provider's
/// additions read leniently (a field of another type is absent).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ListEntry {
    id: Lax<String>,
    /// Together: `chat`, `language`, `code`, `embedding`, `image`, …;
    /// Mistral: `base`, `fine-tuned`.
    #[serde(rename = "type")]
    kind: Lax<String>,
    /// Groq: `false` for a model it no longer serves.
    active: Lax<bool>,
    context_length: Lax<u64>,
    context_window: Lax<u64>,
    max_context_length: Lax<u64>,
    max_completion_tokens: Lax<u32>,
    top_provider: Lax<TopProvider>,
    pricing: Lax<Pricing>,
    supported_parameters: Lax<Vec<String>>,
    architecture: Lax<Architecture>,
    capabilities: Lax<MistralCaps>,
    deprecation: Lax<String>,
    expiration_date: Lax<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TopProvider {
    max_completion_tokens: Lax<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Architecture {
    input_modalities: Lax<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct MistralCaps {
    completion_chat: Lax<bool>,
    function_calling: Lax<bool>,
    vision: Lax<bool>,
}

impl ListEntry {
    /// The model, unless the entry is no chat model (another `type`,
    /// Groq's inactive, Mistral's without chat) or has no id.
    fn listed(self) -> Option<Listed> {
        let id = self.id.get().filter(|s| !s.is_empty())?.clone();
        // Together's `type` names what a model does; Mistral's (`base`,
        // `fine-tuned`) names how it was made: only the known kinds that
        // are no chat model are left out.
        if let Some(kind) = self.kind.get()
            && matches!(
                kind.as_str(),
                "embedding" | "image" | "moderation" | "rerank" | "audio" | "transcribe" | "tts"
            )
        {
            return None;
        }
        let mistral = self.capabilities.get();
        if self.active.get() == Some(&false)
            || mistral.and_then(|c| c.completion_chat.get()) == Some(&false)
        {
            return None;
        }
        let params = self.supported_parameters.get();
        let param = |name: &str| params.is_some_and(|p| p.iter().any(|x| x == name));
        let image = self
            .architecture
            .get()
            .and_then(|a| a.input_modalities.get())
            .is_some_and(|m| m.iter().any(|x| x == "image"));
        let mistral_flag =
            |f: fn(&MistralCaps) -> &Lax<bool>| mistral.and_then(|c| f(c).get()) == Some(&true);
        let free = match self.pricing.get().and_then(Pricing::free) {
            _ if models::free_by_id(&id) => Some(true),
            given => given,
        };
        Some(Listed {
            free,
            context_window: [
                &self.context_length,
                &self.context_window,
                &self.max_context_length,
            ]
            .into_iter()
            .find_map(|v| v.get().copied()),
            max_output_tokens: self
                .top_provider
                .get()
                .and_then(|t| t.max_completion_tokens.get())
                .or(self.max_completion_tokens.get())
                .copied(),
            capabilities: models::caps(
                param("tools") || mistral_flag(|c| &c.function_calling),
                param("response_format") || param("structured_outputs"),
                image || mistral_flag(|c| &c.vision),
            ),
            deprecated: [&self.deprecation, &self.expiration_date]
                .into_iter()
                .find_map(|v| v.get().and_then(|s| models::date(s))),
            id,
        })
    }
}

/// A whole reply, read leniently: a field of an unexpected type is absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Reply {
    choices: Lax<Vec<Value>>,
    #[serde(deserialize_with = "some")]
    usage: Option<Lax<Obj<Counts>>>,
}

/// The first choice of a reply (the only one read).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    finish_reason: Lax<String>,
    /// OpenRouter's, with finish_reason "error".
    error: Option<Value>,
    #[serde(deserialize_with = "some")]
    message: Option<Lax<Obj<Message>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Message {
    content: Lax<ReplyContent>,
    reasoning_content: Lax<String>,
    reasoning: Lax<String>,
    tool_calls: Lax<Vec<Lax<Obj<Call>>>>,
}

/// Content given either as a string or as a list of `{type:"text", text}`
/// parts (some OpenAI-compatible servers do the latter); parts of other
/// types are not text.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ReplyContent {
    Text(String),
    Parts(Vec<Lax<Obj<TextPart>>>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TextPart {
    #[serde(rename = "type")]
    kind: Lax<String>,
    text: Lax<String>,
}

impl ReplyContent {
    fn text(&self) -> String {
        match self {
            ReplyContent::Text(s) => s.clone(),
            ReplyContent::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get())
                .filter(|Obj(p)| p.kind.get().is_none_or(|t| t == "text"))
                .filter_map(|Obj(p)| p.text.get().map(String::as_str))
                .collect(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Call {
    id: Lax<String>,
    function: Lax<Obj<Function>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Function {
    name: Lax<String>,
    arguments: Lax<String>,
}

/// `usage`, whole or streamed.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Counts {
    prompt_tokens: Lax<u64>,
    completion_tokens: Lax<u64>,
}

impl From<Option<Counts>> for Usage {
    fn from(c: Option<Counts>) -> Usage {
        let c = c.unwrap_or_default();
        Usage {
            input_tokens: c.prompt_tokens.into_option(),
            output_tokens: c.completion_tokens.into_option(),
        }
    }
}

/// What every stream chunk is read for besides its first choice (read in
/// place, as chunks are the pass-through hot path).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Head<'a> {
    #[serde(borrow)]
    id: Lax<&'a str>,
    /// Whether the chunk has an `error` (OpenRouter, after HTTP 200).
    #[serde(deserialize_with = "present")]
    error: bool,
    usage: Lax<Obj<Counts>>,
}

/// A fragment of a streamed tool call.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CallDelta {
    index: Lax<u64>,
    id: Lax<String>,
    function: Lax<Obj<Function>>,
}

impl Wire for OpenAi {
    /// Each chunk becomes the deltas it holds; chunks are already
    /// OpenAI's, so in `native` mode each also comes as it came
    /// ([`ReplyDelta::Raw`]), ahead of its deltas, for a surface that
    /// forwards it.
    /// `[DONE]` ends the stream; a chunk with an `error` object or
    /// `finish_reason: "error"` (OpenRouter, after HTTP 200) is an error.
    fn stream_event(&self, ev: &Event, st: &mut StreamState, out: &mut Vec<ReplyDelta>) {
        let data = ev.data.trim();
        if data == "[DONE]" {
            st.end(out);
            return;
        }
        let Some(chunk) = super::parse_json(&ev.data) else {
            out.push(unreadable(data));
            return;
        };
        // Not an object: a chunk with nothing in it.
        let head = Obj::<Head>::deserialize(&chunk).map_or_else(|_| Head::default(), |h| h.0);
        if head.error
            && let Some(err) = error_from_json(&chunk)
        {
            out.push(ReplyDelta::Error(err));
            return;
        }
        let first = chunk.pointer("/choices/0");
        let finish = first.and_then(|c| c.get("finish_reason"));
        if finish.and_then(Value::as_str) == Some("error") {
            let err = first
                .and_then(|c| Obj::<Choice>::deserialize(c).ok())
                .and_then(|Obj(c)| c.error)
                .as_ref()
                .and_then(super::error_from_json_inner)
                .unwrap_or_else(|| ProviderError {
                    message: "the upstream failed mid-stream".into(),
                    ..ProviderError::default()
                });
            out.push(ReplyDelta::Error(err));
            return;
        }
        // An object: what a forwarding surface shows as the chunk's usage.
        let usage = head.usage.into_option().map(|c| c.0);
        let has_usage = usage.is_some();
        if let Some(counts) = usage {
            st.usage = Usage::from(Some(counts));
        }
        let finish = finish
            .filter(|f| !f.is_null())
            .map(|f| f.as_str().unwrap_or("stop").to_string());
        let at = out.len();
        chunk_deltas(head.id.into_option(), first, finish, st, out);
        // Forwarded: the chunk as it came, ahead of the deltas it holds,
        // which every reader but the forwarding one goes by; and its usage
        // with it, as the client sees it, rather than once at the end.
        if st.native {
            if has_usage {
                out.push(ReplyDelta::Usage(st.usage));
            }
            out.insert(at, ReplyDelta::Raw(chunk));
        }
    }

    fn url(&self, base_url: &str, _model: &str, _stream: bool) -> String {
        format!("{}/chat/completions", base_url.trim_end_matches('/'))
    }

    /// One page: OpenAI-compatible lists are not paged.
    fn models_url(&self, base_url: &str, _cursor: Option<&str>) -> String {
        format!("{}/models", base_url.trim_end_matches('/'))
    }

    /// `{"data": [...]}`, or Together's bare array, with whatever each
    /// provider adds per model (../docs/discovery.md): OpenRouter's prices,
    /// context and parameters, Mistral's capabilities and deprecation,
    /// Groq's `active` and windows, Together's `type` and prices.
    fn parse_models(&self, json: &Value) -> Result<Page, ListError> {
        let entries: Vec<Value> = match json {
            Value::Array(a) => a.clone(),
            _ => models::read::<ModelList>(json, "an OpenAI model list ({\"data\": [...]})")?.data,
        };
        let models = entries
            .iter()
            .filter_map(|e| ListEntry::deserialize(e).ok()?.listed())
            .collect();
        Ok(Page { models, next: None })
    }

    /// Folded by default: many OpenAI-compatible servers (and the chat
    /// templates of open models) refuse a system message after the first
    /// turn. OpenAI itself takes them in place.
    fn system_messages(&self) -> &'static [SystemMessages] {
        &[SystemMessages::Fold, SystemMessages::InPlace]
    }

    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
        Ok(vec![(
            AUTHORIZATION,
            secret_header(&format!("Bearer {key}"))?,
        )])
    }

    /// The client's request as it came, in this key order: model, messages,
    /// the modelled fields, then every unknown field verbatim. A probe's
    /// body is `{"model","messages","temperature","max_tokens"}`.
    fn encode(&self, req: &ChatRequest) -> Result<Encoded, BuildError> {
        Ok(Encoded::json(&body(req)))
    }

    fn parse_reply(&self, json: &Value) -> Result<ChatReply, ReplyError> {
        let no_choices = || ReplyError::Shape("no choices in the response".into());
        let Obj(reply) = Obj::<Reply>::deserialize(json).map_err(|_| no_choices())?;
        let choices = reply.choices.get().ok_or_else(no_choices)?;
        let first = choices
            .first()
            .ok_or_else(|| ReplyError::Shape("empty choices list".into()))?;
        let first = Obj::<Choice>::deserialize(first).map_or_else(|_| Choice::default(), |c| c.0);
        let finish_reason = first.finish_reason.into_option();
        // OpenRouter reports a failed upstream generation as a choice with
        // finish_reason "error" and, sometimes, an error object in it.
        if let Some(err) = first.error.as_ref().and_then(super::error_from_json_inner) {
            return Err(ReplyError::Embedded(err));
        }
        let message = first
            .message
            .ok_or_else(|| ReplyError::Shape("no message in the first choice".into()))?
            .into_option()
            .map_or_else(Message::default, |m| m.0);
        let reasoning = [message.reasoning_content, message.reasoning]
            .into_iter()
            .find_map(Lax::into_option)
            .filter(|s| !s.is_empty());
        let usage = reply
            .usage
            .map(|u| Usage::from(u.into_option().map(|c| c.0)));
        let tool_calls = message
            .tool_calls
            .into_option()
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let c = c.into_option().map_or_else(Call::default, |c| c.0);
                let f = c
                    .function
                    .into_option()
                    .map_or_else(Function::default, |f| f.0);
                ToolCall {
                    id: c.id.into_option().unwrap_or_default(),
                    name: f.name.into_option().unwrap_or_default(),
                    arguments: f.arguments.into_option().unwrap_or_default(),
                }
            })
            .collect();
        Ok(ChatReply {
            tool_calls,
            // null content is a legitimate (empty) answer, e.g. a reasoning
            // model that spent max_tokens thinking.
            text: message
                .content
                .get()
                .map(ReplyContent::text)
                .unwrap_or_default(),
            reasoning,
            finish_reason,
            usage,
        })
    }
}

/// The body as JSON, in the key order [`OpenAi::encode`] documents.
fn body(req: &ChatRequest) -> Value {
    let system = req
        .system
        .as_ref()
        .map(|s| json!({"role": "system", "content": s}));
    let messages: Vec<Value> = system
        .into_iter()
        .chain(req.messages.iter().map(|m| m.to_openai()))
        .collect();
    let mut body = json!({"model": req.model, "messages": messages});
    if let Some(t) = req.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(n) = req.max_tokens {
        let field = if req.max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[field] = json!(n);
    }
    if let Some(p) = req.top_p {
        body["top_p"] = json!(p);
    }
    match req.stop.as_slice() {
        [] => {}
        [one] => body["stop"] = json!(one),
        many => body["stop"] = json!(many),
    }
    if req.stream {
        body["stream"] = json!(true);
        // Usage arrives only when asked for; route needs it for token
        // budgets, and drops the extra chunk if the client did not ask.
        if !req.extra.contains_key("stream_options") {
            body["stream_options"] = json!({"include_usage": true});
        }
    }
    for (k, v) in req.fields_as_sent() {
        body[k] = v.clone();
    }
    body
}

/// The deltas one chunk holds: the start, reasoning, text, tool-call
/// fragments of its first choice, and the finish.
fn chunk_deltas(
    id: Option<&str>,
    first: Option<&Value>,
    finish: Option<String>,
    st: &mut StreamState,
    out: &mut Vec<ReplyDelta>,
) {
    let Some(first) = first else { return };
    st.start(id, out);
    let text = |field: &str| {
        first
            .pointer(field)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    if let Some(r) = text("/delta/reasoning_content") {
        out.push(ReplyDelta::Reasoning(r));
    }
    if let Some(t) = text("/delta/content") {
        out.push(ReplyDelta::Text(t));
    }
    let calls = first.pointer("/delta/tool_calls").and_then(Value::as_array);
    for c in calls.into_iter().flatten() {
        let c = Obj::<CallDelta>::deserialize(c).map_or_else(|_| CallDelta::default(), |c| c.0);
        let f = c
            .function
            .into_option()
            .map_or_else(Function::default, |f| f.0);
        out.push(ReplyDelta::ToolCall(ToolCallDelta {
            index: c
                .index
                .into_option()
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(0),
            id: c.id.into_option(),
            name: f.name.into_option(),
            arguments: f.arguments.into_option().unwrap_or_default(),
        }));
    }
    if let Some(reason) = finish {
        st.finish(reason, out);
    }
}

/// What the OpenAI dialect can carry, and what becomes of each request
/// field in it: everything, as it came.
mod facts {
    use super::OpenAi;
    use crate::upstream::dialect::fields::Fate;
    use crate::upstream::dialect::{Facts, Need};

    impl Facts for OpenAi {
        /// Requests go as they came and replies come back in Chat
        /// Completions' own shape.
        fn passes_through(&self) -> bool {
            true
        }

        /// Every field, known or not, goes as it came.
        fn fate(&self, _name: &str) -> Option<Fate> {
            Some(Fate::Pass)
        }

        /// Everything but a suffix: fill-in-the-middle needs a completions
        /// endpoint that takes one (Codestral's, DeepSeek's), and this is a
        /// chat endpoint, which ignores or refuses it. No candidate meets
        /// it until a FIM endpoint is a dialect of its own.
        fn carries(&self, need: Need) -> bool {
            need != Need::Suffix
        }
    }
}
