//! The three wire dialects: how a chat request becomes an HTTP request for a
//! provider, and how a response body becomes a [`ChatReply`] or a
//! [`ProviderError`].
//!
//! Probes use this for one-question requests; `route` reuses it for general
//! chat requests, so nothing here is probe-specific: [`ChatRequest`] is the
//! whole OpenAI request (`request.rs`), a reply is a [`ChatReply`] and a
//! streamed reply a sequence of [`ReplyDelta`]s (`stream.rs`), both in no
//! dialect's shape; each inbound surface renders them in its own. Error
//! bodies are parsed by one dialect-independent function, [`parse_error`],
//! because their shape depends on the provider (OpenRouter, Mistral,
//! Cloudflare and NVIDIA all speak the OpenAI dialect but fail
//! differently), not on the dialect.
//!
//! A dialect is one file: a unit type implementing [`Wire`], which says
//! where to send ([`Wire::url`]), how to authenticate and which headers to
//! send, how to shape the body from a [`ChatRequest`] (or refuse what the
//! dialect cannot carry), how to read a success body into a [`ChatReply`]
//! and where its id is, and what each server-sent event of a stream means
//! ([`Wire::stream_event`], and [`Wire::stream_ends_at_eof`] if its
//! streams simply stop). The same file answers [`Facts`]: what the dialect
//! can carry ([`Need`]s), what becomes of every request field in it (its
//! own table of [`fields::Fate`]s), its default `max_tokens`, how it takes
//! JSON mode, and whether it is Chat Completions itself, so that nothing
//! outside this module compares [`Dialect`] values. Adding one touches its
//! own file, a variant of the closed [`Dialect`] enum (defined here, once,
//! for the catalog, the fake provider and `route`), the one match in
//! [`wire`], and a responder in the fake provider.

mod anthropic;
pub mod fields;
mod gemini;
pub mod models;
mod needs;
mod openai;
mod provider_error;
mod request;
mod schema;
mod stream;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use std::collections::BTreeMap;

use crate::upstream::secret::Secret;

pub use anthropic::Anthropic;
pub use gemini::Gemini;
pub use needs::{Need, Needs};
pub use openai::OpenAi;
use provider_error::{error_from_json, error_from_json_inner, success_json};
pub use provider_error::{html_title, looks_like_html, parse_error, parse_json};
pub use request::{
    ChatMessage, ChatRequest, Content, DEFAULT_ESTIMATED_COMPLETION_TOKENS, ROLES, RequestError,
    ResponseFormat, ToolCall, ToolChoice, ToolDecl, openai_object,
};
pub use stream::{StreamMapper, StreamState, chunk_stream, map_byte_stream};

/// Where a conversation's later system messages go in a dialect's body:
/// instructions given after the conversation started (Claude Code's
/// `system` role inside `messages`, a Responses `developer` item after the
/// first turn). A provider's `system_messages` chooses among what its
/// dialect can do ([`Wire::system_messages`]); the first is the default.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr, strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum SystemMessages {
    /// Folded, in order, into the leading system prompt (a blank line
    /// between each): many OpenAI-compatible servers refuse a system
    /// message after the first turn.
    Fold,
    /// Kept where the client put them.
    InPlace,
}

impl SystemMessages {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The wire protocol a provider speaks. Its names (`openai`, …) are
/// strum's, and serde reads and writes them through strum, so they are
/// written once.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::Display,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
    strum::VariantNames,
)]
#[strum(serialize_all = "lowercase")]
pub enum Dialect {
    /// OpenAI chat completions; also most other providers, Ollama, llama.cpp
    /// and vLLM.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini `generateContent`.
    Gemini,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Every name, for a message: `openai, anthropic or gemini`.
    pub fn names() -> String {
        use strum::VariantNames;
        match Dialect::VARIANTS.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

// An unknown name is refused in serde's own words (`unknown variant
// `x`, expected one of `openai`, …`), which the catalog's errors quote.
crate::names::serde_via_strum!(Dialect);

/// Anthropic rejects a request without `max_tokens`.
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 4096;

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

/// A successful completion, in dialect-independent form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatReply {
    /// The answer text; empty when the model produced none (content null,
    /// cut off, or only reasoning).
    pub text: String,
    /// Reasoning the provider returned separately (`reasoning_content`,
    /// Anthropic `thinking`, Gemini thought parts). Never part of `text`.
    pub reasoning: Option<String>,
    /// As the provider spells it: `stop`, `length`, `end_turn`,
    /// `max_tokens`, `STOP`, `MAX_TOKENS`, `error`, …
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    /// The tools the model called, in order (Anthropic `tool_use` blocks,
    /// Gemini `functionCall` parts, OpenAI `tool_calls`).
    pub tool_calls: Vec<ToolCall>,
}

impl ChatReply {
    /// The model stopped because it ran out of tokens.
    pub fn truncated(&self) -> bool {
        matches!(
            self.finish_reason.as_deref(),
            Some("length" | "max_tokens" | "MAX_TOKENS")
        )
    }
}

/// The tool a request in JSON mode forces on Anthropic, which has no JSON
/// mode of its own: its input schema is the requested schema, and its
/// input is the answer ([`ReplyPlan::json_tool`]).
pub const JSON_TOOL: &str = "json_output";

/// How to read the replies to one translated request: what the
/// translation put into the upstream's reply that the client did not ask
/// for, to take back out. Made by [`build_request`]; applied by
/// [`ReplyPlan::apply`] to a whole reply and by the dialect's
/// [`Wire::stream_event`] to a stream ([`StreamMapper::plan`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplyPlan {
    /// JSON mode went as the forced tool [`JSON_TOOL`]: its call's input
    /// is the reply's content, the call itself is not shown, and the reply
    /// ends as a plain stop.
    pub json_tool: bool,
}

impl ReplyPlan {
    /// The plan for `req` sent in `dialect`.
    pub fn new(dialect: Dialect, req: &ChatRequest) -> ReplyPlan {
        wire(dialect).reply_plan(req)
    }

    /// Undo the translation in a whole reply. In JSON mode the forced
    /// call's input becomes the content; any text the model wrote besides
    /// (it writes none when a tool is forced) is dropped, since the
    /// content must be the JSON alone, as in the stream.
    pub fn apply(&self, reply: &mut ChatReply) {
        if !self.json_tool {
            return;
        }
        if let Some(i) = reply.tool_calls.iter().position(|c| c.name == JSON_TOOL) {
            reply.text = reply.tool_calls.remove(i).arguments;
        }
        if reply.finish_reason.as_deref() == Some("tool_use") {
            reply.finish_reason = Some("end_turn".into());
        }
    }
}

/// One step of a streamed reply, in no dialect's shape: what each
/// dialect's stream events mean ([`Wire::stream_event`]), for each surface
/// to render in its own.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyDelta {
    /// The reply has begun; the upstream's id for it, if it gave one.
    /// Always first.
    Start { id: Option<String> },
    /// More answer text (possibly empty: some dialects open with it).
    Text(String),
    /// More reasoning, given apart from the answer.
    Reasoning(String),
    /// Part of a tool call (see [`ToolCallDelta`]).
    ToolCall(ToolCallDelta),
    /// Why the model stopped, as the provider spells it (see
    /// [`ChatReply::finish_reason`]).
    Finish(String),
    /// The reply's token counts, once, just before [`ReplyDelta::Done`].
    Usage(Usage),
    /// The upstream's own chunk as it came (parsed, never rebuilt), ahead
    /// of the deltas above that it holds: for a surface that speaks the
    /// upstream's dialect and forwards its chunks in place of rendering
    /// those deltas (asked for with [`StreamMapper::native`]). Every
    /// other reader skips it.
    Raw(Value),
    /// The upstream reported a failure mid-stream. Nothing follows.
    Error(ProviderError),
    /// The reply is complete.
    Done,
}

/// Part of one streamed tool call. The first delta of a call (by
/// `index`) has its `id` and `name` and perhaps the first fragment of
/// its arguments; later ones only more fragments. Calls are numbered from
/// 0 in the order the reply makes them, whatever else the reply holds,
/// as OpenAI numbers `delta.tool_calls`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    /// A fragment of the JSON text of the arguments (possibly empty).
    pub arguments: String,
}

/// An error as the provider described it, from whichever of the known
/// shapes the body has.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderError {
    pub message: String,
    /// A machine-readable code or type: `rate_limit_exceeded`,
    /// `overloaded_error`, `RESOURCE_EXHAUSTED`, `API_KEY_INVALID`, `3036`, …
    pub code: Option<String>,
    /// An HTTP status embedded in the body (OpenRouter's and Gemini's
    /// numeric `code`, NVIDIA's `status`), which can differ from the real
    /// one: OpenRouter reports upstream failures inside an HTTP 200.
    pub embedded_status: Option<u16>,
}

/// Why a 2xx body is not a usable reply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    /// The body is an error object, not a completion (OpenRouter does this
    /// with HTTP 200).
    #[error("error in a success response: {}", .0.message)]
    Embedded(ProviderError),
    /// An HTML page, described by its title or first heading.
    #[error("HTML page instead of JSON{}", html_note(.0))]
    Html(Option<String>),
    #[error("response is not JSON")]
    NotJson,
    /// Bytes that are not UTF-8, which JSON must be (RFC 8259): a client
    /// that decodes strictly, as the official SDKs do, fails on the body,
    /// so the answer around them does not count.
    #[error("response is not valid UTF-8 (byte {0} of the body)")]
    NotUtf8(usize),
    #[error("empty response body")]
    Empty,
    /// JSON, but not the dialect's shape: no choices, no candidates, no
    /// content.
    #[error("{0}")]
    Shape(String),
}

fn html_note(title: &Option<String>) -> String {
    title.as_ref().map(|t| format!(": {t}")).unwrap_or_default()
}

/// Why a request could not be built. Messages never contain a header value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("the api key contains characters not allowed in an http header")]
    BadKey,
    #[error("header {0:?} from the config is not a valid http header")]
    BadHeader(String),
    /// The request uses something the provider's dialect cannot carry (a
    /// tool message for Anthropic, an image URL for Gemini, …). The
    /// client's request is fine; another provider may take it.
    #[error("{0}")]
    Unsupported(String),
}

/// How a dialect takes JSON mode (`response_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonMode {
    /// A JSON mode of its own.
    Own,
    /// A forced tool call ([`JSON_TOOL`]): a model that refuses tools
    /// refuses JSON mode too.
    ForcedTool,
}

/// What a dialect can carry and what becomes of a client's request in
/// it: what the router, the probes and the request builder ask of a
/// dialect, answered by the dialect itself (each dialect file's `facts`
/// module) instead of by comparisons with [`Dialect`] values elsewhere.
pub trait Facts {
    /// Whether the dialect is the Chat Completions API itself: a request
    /// goes with every field as it came ([`Facts::fate`] is
    /// [`Fate::Pass`](fields::Fate::Pass) throughout, and the legacy
    /// `functions` and built-in tools reach it), and its replies and
    /// stream chunks are what a Chat Completions client reads, so that
    /// surface may forward them as they came.
    fn passes_through(&self) -> bool {
        false
    }
    /// What becomes of the Chat Completions request field `name` (a row
    /// of [`fields::FIELDS`]); `None` for a name the table does not know.
    fn fate(&self, name: &str) -> Option<fields::Fate>;
    /// Whether the dialect can carry `need` at all, whatever the model.
    /// A model of a dialect that can may still not (the catalog, or an
    /// upstream's 400, says so); one of a dialect that cannot never does.
    fn carries(&self, need: Need) -> bool;
    /// The `max_tokens` to send when the client gave none, for a dialect
    /// that requires one.
    fn default_max_tokens(&self) -> Option<u32> {
        None
    }
    /// How JSON mode goes in this dialect.
    fn json_mode(&self) -> JsonMode {
        JsonMode::Own
    }
    /// How to read the replies to `req` sent in this dialect: what its
    /// translation puts into them that the client did not ask for.
    fn reply_plan(&self, _req: &ChatRequest) -> ReplyPlan {
        ReplyPlan::default()
    }
}

/// What each dialect knows: where to send, how to authenticate, how to
/// shape the body, and how to read a success body; and, through
/// [`Facts`], what it can carry.
pub trait Wire: Facts + Sync {
    /// The full endpoint URL for `model`; `stream` for a streamed reply.
    fn url(&self, base_url: &str, model: &str, stream: bool) -> String;
    /// Whether [`url`](Wire::url) depends on the model or on streaming.
    fn url_names_model(&self) -> bool {
        false
    }
    /// The authentication headers for `key` (marked sensitive).
    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError>;
    /// Headers the dialect needs on every request, with or without a key.
    fn fixed_headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        Vec::new()
    }
    /// The body to send for `req`, serialized from the dialect's typed
    /// body, with the headers it needs; or why `req` cannot be expressed
    /// in this dialect.
    fn encode(&self, req: &ChatRequest) -> Result<Encoded, BuildError>;
    /// The body [`encode`](Wire::encode) writes, read back as JSON: for
    /// tests and fuzzing, which look into it.
    fn body(&self, req: &ChatRequest) -> Result<Value, BuildError> {
        let bytes = self.encode(req)?.bytes;
        Ok(serde_json::from_slice(&bytes).expect("an encoded body is JSON"))
    }
    /// Read a success body that has already been parsed as JSON and is not
    /// an error object.
    fn parse_reply(&self, json: &Value) -> Result<ChatReply, ReplyError>;
    /// The upstream's own id for a reply read by
    /// [`parse_reply`](Wire::parse_reply), for a surface that names the
    /// reply after it.
    fn reply_id<'a>(&self, json: &'a Value) -> Option<&'a str> {
        json.get("id").and_then(Value::as_str)
    }
    /// Map one server-sent event of a streamed reply to what it means,
    /// pushed onto `out`, keeping what the stream has shown so far in
    /// `st`. [`StreamMapper`] drives it and stops after an error or
    /// [`ReplyDelta::Done`].
    fn stream_event(
        &self,
        ev: &eventsource_stream::Event,
        st: &mut StreamState,
        out: &mut Vec<ReplyDelta>,
    );
    /// Whether a stream that has started is complete when the body simply
    /// ends (Gemini's never say so otherwise).
    fn stream_ends_at_eof(&self) -> bool {
        false
    }
    /// Where later system messages can go in this dialect, the default
    /// first ([`SystemMessages`]).
    fn system_messages(&self) -> &'static [SystemMessages] {
        &[SystemMessages::Fold]
    }
    /// The URL of the provider's own model list: its first page, or the
    /// page after `cursor` (a [`models::Page::next`]).
    fn models_url(&self, base_url: &str, cursor: Option<&str>) -> String;
    /// One page of that list, already parsed as JSON.
    fn parse_models(&self, json: &Value) -> Result<models::Page, models::ListError>;
}

/// A request body ready to send: its JSON text, and the headers that
/// particular body needs beside the fixed ones (a beta it uses).
#[derive(Debug)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// The text of a text part of a request body: a string, or the `text`
/// of a client's content part as it came, whatever its type (the upstream
/// judges it, as it always has).
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
enum PartText<'a> {
    Str(std::borrow::Cow<'a, str>),
    Json(&'a Value),
}

impl Encoded {
    /// `body` as JSON text, needing no header of its own.
    fn json<T: serde::Serialize>(body: &T) -> Encoded {
        Encoded {
            // Bodies hold strings, numbers and JSON values: they always
            // serialize.
            bytes: serde_json::to_vec(body).expect("a request body serializes"),
            headers: Vec::new(),
        }
    }
}

/// The implementation of a dialect.
pub fn wire(d: Dialect) -> &'static dyn Wire {
    match d {
        Dialect::Openai => &OpenAi,
        Dialect::Anthropic => &Anthropic,
        Dialect::Gemini => &Gemini,
    }
}

/// Where and how to reach one provider, without its keys: `route` picks a
/// key per attempt and passes it to [`build_request`] separately. Built by
/// [`crate::catalog::Resolved::endpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The provider's name in the catalog, for messages.
    pub provider: String,
    pub dialect: Dialect,
    /// With placeholders filled and no trailing slash.
    pub base_url: String,
    /// Extra headers from the config, sent on every request.
    pub headers: BTreeMap<String, String>,
    /// The chat URL, parsed, for dialects whose URL does not name the model
    /// (`route` sends thousands of requests a second to one endpoint).
    url: Option<reqwest::Url>,
    /// The dialect's fixed headers and the config's extra ones, or the name
    /// of an extra header that is not a valid header.
    fixed: Result<HeaderMap, String>,
    /// Where later system messages go: the provider's `system_messages`,
    /// or the dialect's default.
    pub system_messages: SystemMessages,
}

impl Endpoint {
    /// An endpoint, with what every request to it shares worked out once.
    pub fn new(
        provider: String,
        dialect: Dialect,
        base_url: String,
        headers: BTreeMap<String, String>,
    ) -> Endpoint {
        let w = wire(dialect);
        let url = (!w.url_names_model())
            .then(|| reqwest::Url::parse(&w.url(&base_url, "", false)).ok())
            .flatten();
        let mut map = HeaderMap::new();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in w.fixed_headers() {
            map.append(name, value);
        }
        let fixed = headers
            .iter()
            .try_for_each(|(name, value)| {
                let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| name.clone())?;
                let v = HeaderValue::from_str(value).map_err(|_| name.clone())?;
                map.append(n, v);
                Ok(())
            })
            .map(|()| map);
        Endpoint {
            provider,
            dialect,
            base_url,
            headers,
            url,
            fixed,
            system_messages: w.system_messages()[0],
        }
    }

    /// The same endpoint with later system messages placed as `s` says
    /// (a provider's `system_messages`, checked against the dialect when
    /// the catalog was read).
    pub fn with_system_messages(mut self, s: Option<SystemMessages>) -> Endpoint {
        if let Some(s) = s {
            self.system_messages = s;
        }
        self
    }
}

/// A request ready to send, with what its translation left out and how
/// to read its reply.
#[derive(Debug)]
pub struct Built {
    pub builder: reqwest::RequestBuilder,
    /// The client's fields the dialect could not carry and that change the
    /// answer ([`fields::dropped`]): `seed`, `logit_bias`, … Empty for
    /// OpenAI-dialect upstreams, which get every field.
    pub dropped: Vec<String>,
    pub plan: ReplyPlan,
}

/// A POST for `req` to `ep`, authenticated with `key` (none for keyless
/// providers), with the provider's extra headers. The key only ever goes
/// into a sensitive header, never the URL.
/// A request for one page of `ep`'s model list (`cursor`: the page after
/// it), with the provider's fixed and configured headers and `key`'s
/// authentication, as every request to it has.
pub fn build_list_request(
    client: &reqwest::Client,
    ep: &Endpoint,
    key: Option<&Secret>,
    cursor: Option<&str>,
) -> Result<reqwest::RequestBuilder, BuildError> {
    let w = wire(ep.dialect);
    let mut headers = ep.fixed.clone().map_err(BuildError::BadHeader)?;
    headers.remove(CONTENT_TYPE);
    let mut builder = client
        .get(w.models_url(&ep.base_url, cursor))
        .headers(headers);
    if let Some(key) = key {
        for (name, value) in w.auth_headers(key.expose())? {
            builder = builder.header(name, value);
        }
    }
    Ok(builder)
}

pub fn build_request(
    client: &reqwest::Client,
    ep: &Endpoint,
    key: Option<&Secret>,
    req: &ChatRequest,
) -> Result<Built, BuildError> {
    let w = wire(ep.dialect);
    let headers = ep.fixed.clone().map_err(BuildError::BadHeader)?;
    // Later system messages: folded into the leading system prompt (only
    // their text: the other parts are reported), or kept in place but never
    // between a call and its results.
    let placed;
    let mut folded_away = Vec::new();
    let req = match ep.system_messages {
        _ if !req.has_later_system() => req,
        SystemMessages::Fold => {
            folded_away = req.later_system_non_text_parts();
            placed = req.with_system_folded();
            &placed
        }
        SystemMessages::InPlace => match req.with_system_after_tool_results() {
            Some(moved) => {
                placed = moved;
                &placed
            }
            None => req,
        },
    };
    let builder = match &ep.url {
        Some(url) => client.post(url.clone()),
        None => client.post(w.url(&ep.base_url, &req.model, req.stream)),
    };
    let body = w.encode(req)?;
    let mut headers = headers;
    for (name, value) in body.headers {
        // One header, the betas a comma apart: a provider's configured
        // `anthropic-beta` and the one this body needs both reach servers
        // that read only the first of several.
        let merged = match headers.get(&name).map(HeaderValue::as_bytes) {
            Some(had) if !had.is_empty() => {
                let mut v = had.to_vec();
                v.extend_from_slice(b",");
                v.extend_from_slice(value.as_bytes());
                HeaderValue::from_bytes(&v).unwrap_or(value)
            }
            _ => value,
        };
        headers.insert(name, merged);
    }
    let builder = builder.headers(headers);
    // reqwest's `json` feature is not enabled: the dialect serializes.
    let mut builder = builder.body(body.bytes);
    if let Some(key) = key {
        for (name, value) in w.auth_headers(key.expose())? {
            builder = builder.header(name, value);
        }
    }
    let mut dropped = fields::dropped(ep.dialect, req);
    if !folded_away.is_empty() {
        let had: std::collections::HashSet<String> = dropped.iter().cloned().collect();
        dropped.extend(folded_away.into_iter().filter(|w| !had.contains(w)));
    }
    Ok(Built {
        builder,
        dropped,
        plan: ReplyPlan::new(ep.dialect, req),
    })
}

/// A header value holding a secret: invalid characters are an error that
/// does not echo the value, and the value is hidden from Debug output.
fn secret_header(value: &str) -> Result<HeaderValue, BuildError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| BuildError::BadKey)?;
    v.set_sensitive(true);
    Ok(v)
}

/// Parse a 2xx body into a reply for `dialect`.
pub fn parse_reply(dialect: Dialect, body: &[u8]) -> Result<ChatReply, ReplyError> {
    parse_success(dialect, body).map(|(reply, _)| reply)
}

/// Parse a 2xx body into a reply for `dialect`, keeping the parsed JSON so
/// that `route` can pass it through or read its id ([`Wire::reply_id`])
/// without parsing the body a second time.
pub fn parse_success(dialect: Dialect, body: &[u8]) -> Result<(ChatReply, Value), ReplyError> {
    let json = success_json(body)?;
    let reply = wire(dialect).parse_reply(&json)?;
    Ok((reply, json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::upstream::secret::Secret;
    use serde_json::json;

    /// A client to build requests with; the TLS provider first, as every
    /// client needs it (whichever test runs first).
    fn test_client() -> reqwest::Client {
        crate::upstream::http::install_tls_provider();
        reqwest::Client::new()
    }

    fn endpoint(dialect: &str) -> Endpoint {
        let c = Catalog::from_toml_str(
            &format!(
                r#"
                include_default_catalog = false
                [[providers]]
                name = "p"
                dialect = "{dialect}"
                base_url = "http://127.0.0.1:9/v1"
                models = ["m"]
                headers = {{ "x-title" = "llmprobe" }}
                "#
            ),
            "t.toml",
        )
        .unwrap();
        c.providers[0]
            .resolve_with(|_| None)
            .unwrap()
            .endpoint()
            .clone()
    }

    fn built(dialect: &str, key: Option<&str>, model: &str) -> reqwest::Request {
        let key = key.map(|k| Secret::new(k.into()));
        build_request(
            &crate::upstream::http::client().unwrap(),
            &endpoint(dialect),
            key.as_ref(),
            &ChatRequest::probe(model, "What is 7 + 7?", 16),
        )
        .unwrap()
        .builder
        .build()
        .unwrap()
    }

    fn body_of(req: &reqwest::Request) -> Value {
        serde_json::from_slice(req.body().unwrap().as_bytes().unwrap()).unwrap()
    }

    #[test]
    fn openai_request_shape() {
        let req = built("openai", Some("sk-test-key"), "llama-3.1-8b-instant");
        assert_eq!(req.url().as_str(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(req.headers()["authorization"], "Bearer sk-test-key");
        assert!(req.headers()["authorization"].is_sensitive());
        assert_eq!(req.headers()["x-title"], "llmprobe");
        let body = body_of(&req);
        assert_eq!(body["model"], "llama-3.1-8b-instant");
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][0]["content"], "What is 7 + 7?");
        assert_eq!(body["temperature"], 0.0);
        assert_eq!(body["max_tokens"], 16);
    }

    #[test]
    fn keyless_openai_sends_no_authorization() {
        let req = built("openai", None, "llama3");
        assert!(req.headers().get("authorization").is_none());
    }

    #[test]
    fn anthropic_request_shape() {
        let req = built("anthropic", Some("sk-ant-key"), "claude-haiku");
        assert_eq!(req.url().as_str(), "http://127.0.0.1:9/v1/messages");
        assert_eq!(req.headers()["x-api-key"], "sk-ant-key");
        assert!(req.headers()["x-api-key"].is_sensitive());
        assert_eq!(req.headers()["anthropic-version"], "2023-06-01");
        let body = body_of(&req);
        assert_eq!(body["max_tokens"], 16);
        assert_eq!(body["temperature"], 0.0);
        assert_eq!(body["messages"][0]["content"], "What is 7 + 7?");
    }

    #[test]
    fn gemini_key_is_a_header_never_in_the_url() {
        let req = built("gemini", Some("AIzaSyKEYKEYKEY"), "gemini-2.5-flash");
        assert_eq!(
            req.url().as_str(),
            "http://127.0.0.1:9/v1/models/gemini-2.5-flash:generateContent"
        );
        assert!(!req.url().as_str().contains("AIza"));
        assert_eq!(req.headers()["x-goog-api-key"], "AIzaSyKEYKEYKEY");
        let body = body_of(&req);
        assert_eq!(body["contents"][0]["role"], "user");
        assert_eq!(body["contents"][0]["parts"][0]["text"], "What is 7 + 7?");
        assert_eq!(body["generationConfig"]["temperature"], 0.0);
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 16);
    }

    #[test]
    fn a_key_with_a_newline_is_refused_without_echoing_it() {
        let err = build_request(
            &crate::upstream::http::client().unwrap(),
            &endpoint("openai"),
            Some(&Secret::new("sk-abc\ndef".into())),
            &ChatRequest::probe("m", "q", 1),
        )
        .unwrap_err();
        assert!(!err.to_string().contains("abc"));
    }

    #[test]
    fn system_and_assistant_roles_are_translated() {
        let mut req = ChatRequest::probe("m", "hi", 1);
        req.max_tokens = None;
        req.temperature = None;
        req.messages = vec![
            ChatMessage::new("system", "be brief"),
            ChatMessage::user("hi"),
            ChatMessage::new("assistant", "hello"),
            ChatMessage::new("developer", "in English"),
            ChatMessage::user("2+2?"),
        ];
        // The bodies as each dialect writes them; where a later system
        // message goes is the endpoint's choice (the next test).
        let a = Anthropic.body(&req).unwrap();
        assert_eq!(a["system"], "be brief");
        let roles: Vec<&str> = a["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "system", "user"]);
        assert_eq!(a["messages"][2]["content"], "in English");
        assert_eq!(a["max_tokens"], ANTHROPIC_DEFAULT_MAX_TOKENS);
        assert!(a.get("temperature").is_none());
        assert_eq!(
            Anthropic.encode(&req).unwrap().headers,
            [(
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(anthropic::MID_CONVERSATION_SYSTEM)
            )]
        );
        let g = Gemini.body(&req).unwrap();
        assert_eq!(g["systemInstruction"]["parts"][0]["text"], "be brief");
        assert_eq!(g["systemInstruction"]["parts"][1]["text"], "in English");
        assert_eq!(g["contents"][1]["role"], "model");
        let o = OpenAi.body(&req).unwrap();
        assert_eq!(o["messages"].as_array().unwrap().len(), 5);
        assert!(o.get("max_tokens").is_none());
        // A separate system prompt comes first everywhere.
        req.system = Some("top".into());
        assert_eq!(Anthropic.body(&req).unwrap()["system"], "top\n\nbe brief");
        assert_eq!(
            Gemini.body(&req).unwrap()["systemInstruction"]["parts"][0]["text"],
            "top"
        );
        let o = OpenAi.body(&req).unwrap();
        assert_eq!(
            o["messages"][0],
            serde_json::json!({"role":"system","content":"top"})
        );
        assert_eq!(o["messages"].as_array().unwrap().len(), 6);
        // Without a later system message nothing needs the beta.
        req.messages.remove(3);
        assert!(Anthropic.encode(&req).unwrap().headers.is_empty());
    }

    /// Claude Code 2.1.197's shape: the question, then its instructions as
    /// a `system` message; and a developer message after a reply.
    fn later_system() -> ChatRequest {
        let mut req = ChatRequest::probe("m", "What is 2+2?", 16);
        req.messages.push(ChatMessage::new("system", "Be brief."));
        req.messages.push(ChatMessage::new("assistant", "4"));
        req.messages
            .push(ChatMessage::new("developer", "Now in words."));
        req.messages.push(ChatMessage::user("And 3+3?"));
        req
    }

    fn built_with(ep: &Endpoint, req: &ChatRequest) -> reqwest::Request {
        build_request(&crate::upstream::http::client().unwrap(), ep, None, req)
            .unwrap()
            .builder
            .build()
            .unwrap()
    }

    #[test]
    fn later_system_messages_are_folded_or_kept_as_each_endpoint_says() {
        let roles = |v: &Value, field: &str| -> Vec<String> {
            v[field]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["role"].as_str().unwrap().to_string())
                .collect()
        };
        // OpenAI: folded into a leading system message by default.
        let o = built_with(&endpoint("openai"), &later_system());
        let b = body_of(&o);
        assert_eq!(
            roles(&b, "messages"),
            ["system", "user", "assistant", "user"]
        );
        assert_eq!(b["messages"][0]["content"], "Be brief.\n\nNow in words.");
        // ... into the one the client led with, or the separate prompt.
        let mut led = later_system();
        led.messages
            .insert(0, ChatMessage::new("system", "You are terse."));
        let b = body_of(&built_with(&endpoint("openai"), &led));
        assert_eq!(
            b["messages"][0]["content"],
            "You are terse.\n\nBe brief.\n\nNow in words."
        );
        assert_eq!(b["messages"].as_array().unwrap().len(), 4);
        let mut top = later_system();
        top.system = Some("Top.".into());
        let b = body_of(&built_with(&endpoint("openai"), &top));
        assert_eq!(
            b["messages"][0]["content"],
            "Top.\n\nBe brief.\n\nNow in words."
        );
        assert_eq!(b["messages"].as_array().unwrap().len(), 4);
        // In place when the provider says so.
        let ep = endpoint("openai").with_system_messages(Some(SystemMessages::InPlace));
        let b = body_of(&built_with(&ep, &later_system()));
        assert_eq!(
            roles(&b, "messages"),
            ["user", "system", "assistant", "developer", "user"]
        );
        // Anthropic: in place under the beta by default; folded into
        // `system` when the provider says so.
        let a = built_with(&endpoint("anthropic"), &later_system());
        assert_eq!(
            a.headers()["anthropic-beta"],
            anthropic::MID_CONVERSATION_SYSTEM
        );
        let b = body_of(&a);
        assert_eq!(
            roles(&b, "messages"),
            ["user", "system", "assistant", "system", "user"]
        );
        assert!(b.get("system").is_none());
        let ep = endpoint("anthropic").with_system_messages(Some(SystemMessages::Fold));
        let a = built_with(&ep, &later_system());
        assert!(a.headers().get("anthropic-beta").is_none());
        let b = body_of(&a);
        assert_eq!(b["system"], "Be brief.\n\nNow in words.");
        assert_eq!(roles(&b, "messages"), ["user", "assistant", "user"]);
        // Gemini: in systemInstruction, in order.
        let b = body_of(&built_with(&endpoint("gemini"), &later_system()));
        assert_eq!(
            b["systemInstruction"]["parts"][0]["text"],
            "Be brief.\n\nNow in words."
        );
        assert_eq!(roles(&b, "contents"), ["user", "model", "user"]);
    }

    #[test]
    fn a_system_message_between_calls_and_their_results_moves_after_the_results() {
        let req = ChatRequest::from_openai_json(
            br#"{"model":"m","messages":[
                {"role":"user","content":"q"},
                {"role":"assistant","content":null,"tool_calls":[
                    {"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},
                    {"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"1"},
                {"role":"system","content":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use words."}]},
                {"role":"tool","tool_call_id":"c2","content":"2"},
                {"role":"user","content":"and?"}]}"#,
        )
        .unwrap();
        let roles = |v: &Value| -> Vec<String> {
            v["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["role"].as_str().unwrap().to_string())
                .collect()
        };
        // Anthropic: both results in the turn right after the calls, then
        // the instructions, then the user's words.
        let b = body_of(&built_with(&endpoint("anthropic"), &req));
        assert_eq!(roles(&b), ["user", "assistant", "user", "system", "user"]);
        assert_eq!(b["messages"][2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(b["messages"][3]["content"], "Be brief.\n\nUse words.");
        // OpenAI in place: the same order.
        let ep = endpoint("openai").with_system_messages(Some(SystemMessages::InPlace));
        let b = body_of(&built_with(&ep, &req));
        assert_eq!(
            roles(&b),
            ["user", "assistant", "tool", "tool", "system", "user"]
        );
        // Folded, the parts stay paragraphs.
        let b = body_of(&built_with(&endpoint("openai"), &req));
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "Be brief.\n\nUse words."})
        );
    }

    #[test]
    fn what_folding_a_system_message_leaves_out_is_reported() {
        let mut req = later_system();
        req.messages[1].content = Some(Content::Parts(vec![
            json!({"type": "text", "text": "Be brief."}),
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}),
        ]));
        let client = crate::upstream::http::client().unwrap();
        for dialect in ["openai", "anthropic", "gemini"] {
            let built = build_request(&client, &endpoint(dialect), None, &req).unwrap();
            assert_eq!(built.dropped, ["content[image_url]"], "{dialect}");
        }
        // In place on OpenAI, the part goes as it came.
        let ep = endpoint("openai").with_system_messages(Some(SystemMessages::InPlace));
        assert!(
            build_request(&client, &ep, None, &req)
                .unwrap()
                .dropped
                .is_empty()
        );
    }

    #[test]
    fn the_mid_conversation_beta_joins_a_configured_anthropic_beta_header() {
        let c = Catalog::from_toml_str(
            "include_default_catalog = false\n[[providers]]\nname = \"p\"\n\
             dialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n\
             headers = { \"anthropic-beta\" = \"context-1m-2025-08-07\" }\n",
            "t.toml",
        )
        .unwrap();
        let ep = c.providers[0]
            .resolve_with(|_| None)
            .unwrap()
            .endpoint()
            .clone();
        let r = built_with(&ep, &later_system());
        let betas: Vec<&str> = r
            .headers()
            .get_all("anthropic-beta")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(
            betas,
            [format!(
                "context-1m-2025-08-07,{}",
                anthropic::MID_CONVERSATION_SYSTEM
            )]
        );
        // Without a later system message, the configured one alone.
        let r = built_with(&ep, &ChatRequest::probe("m", "q", 16));
        assert_eq!(r.headers()["anthropic-beta"], "context-1m-2025-08-07");
    }

    #[test]
    fn a_placement_the_dialect_lacks_is_a_config_error_naming_the_provider() {
        let load = |dialect: &str, placement: &str| {
            Catalog::from_toml_str(
                &format!(
                    "include_default_catalog = false\n[[providers]]\nname = \"p\"\n\
                     dialect = \"{dialect}\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
                     models = [\"m\"]\nsystem_messages = \"{placement}\"\n"
                ),
                "t.toml",
            )
        };
        assert!(load("openai", "in-place").is_ok());
        assert!(load("anthropic", "fold").is_ok());
        let e = load("gemini", "in-place").unwrap_err().to_string();
        assert!(
            e.contains("provider \"p\"")
                && e.contains("system_messages \"in-place\"")
                && e.contains("use \"fold\""),
            "{e}"
        );
        let e = load("openai", "inline").unwrap_err().to_string();
        assert!(e.contains("use \"fold\" or \"in-place\""), "{e}");
    }

    /// Probes must send exactly what they sent before route existed.
    #[test]
    fn probe_bodies_are_byte_identical() {
        let body = |d: &str| {
            let req = built(d, Some("k"), "m");
            let bytes = req.body().unwrap().as_bytes().unwrap().to_vec();
            (req.url().to_string(), String::from_utf8(bytes).unwrap())
        };
        assert_eq!(
            body("openai"),
            (
                "http://127.0.0.1:9/v1/chat/completions".into(),
                r#"{"model":"m","messages":[{"role":"user","content":"What is 7 + 7?"}],"temperature":0.0,"max_tokens":16}"#.into()
            )
        );
        assert_eq!(
            body("anthropic"),
            (
                "http://127.0.0.1:9/v1/messages".into(),
                r#"{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"What is 7 + 7?"}],"temperature":0.0}"#.into()
            )
        );
        assert_eq!(
            body("gemini"),
            (
                "http://127.0.0.1:9/v1/models/m:generateContent".into(),
                r#"{"contents":[{"role":"user","parts":[{"text":"What is 7 + 7?"}]}],"generationConfig":{"temperature":0.0,"maxOutputTokens":16}}"#.into()
            )
        );
    }

    fn client_request(json: &str) -> ChatRequest {
        ChatRequest::from_openai_json(json.as_bytes()).unwrap()
    }

    fn build(dialect: &str, req: &ChatRequest) -> Result<reqwest::Request, BuildError> {
        build_request(&test_client(), &endpoint(dialect), None, req)
            .map(|b| b.builder.build().unwrap())
    }

    #[test]
    fn openai_passes_the_client_request_through() {
        let req = client_request(
            r#"{"model":"gpt","messages":[{"role":"user","name":"ann","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]},{"role":"tool","tool_call_id":"c","content":"42"}],
               "max_completion_tokens":5,"top_p":0.9,"stop":["a","b"],"tools":[{"type":"function"}],"seed":1}"#,
        );
        let body = body_of(&build("openai", &req).unwrap());
        assert_eq!(body["messages"][0]["name"], "ann");
        assert_eq!(body["messages"][0]["content"][0]["text"], "hi");
        assert_eq!(body["messages"][1]["content"], Value::Null);
        assert_eq!(body["messages"][1]["tool_calls"][0]["id"], "c");
        assert_eq!(body["messages"][2]["tool_call_id"], "c");
        assert_eq!(body["max_completion_tokens"], 5);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["top_p"], 0.9);
        assert_eq!(body["stop"], serde_json::json!(["a", "b"]));
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["seed"], 1);
        assert!(body.get("stream").is_none());
        // The others carry tools now (tests below); the legacy functions
        // they refuse rather than drop.
        let legacy = client_request(
            r#"{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}"#,
        );
        for d in ["anthropic", "gemini"] {
            let e = build(d, &legacy).unwrap_err();
            assert!(matches!(e, BuildError::Unsupported(_)), "{e:?}");
            assert!(e.to_string().contains(d), "{e}");
        }
    }

    /// A client's tool-calling request reaches an OpenAI upstream byte for
    /// byte as it was sent, when it was sent in the order route writes
    /// (model, messages with role and content first, the modelled fields,
    /// then the rest in the client's order): nothing in it is rebuilt.
    #[test]
    fn openai_tool_requests_pass_byte_for_byte() {
        let sent = r#"{"model":"gpt","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]},{"role":"tool","content":"42","tool_call_id":"call_1"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","$defs":{},"additionalProperties":false}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"response_format":{"type":"json_object"},"seed":1}"#;
        let req = client_request(sent);
        let built = build_request(&test_client(), &endpoint("openai"), None, &req).unwrap();
        assert!(built.dropped.is_empty());
        assert_eq!(built.plan, ReplyPlan::default());
        let bytes = built.builder.build().unwrap();
        let body = std::str::from_utf8(bytes.body().unwrap().as_bytes().unwrap()).unwrap();
        assert_eq!(body, sent);
    }

    #[test]
    fn streaming_urls_and_flags() {
        let mut req = client_request(
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stop":"END","top_p":0.5}"#,
        );
        let o = build("openai", &req).unwrap();
        let body = body_of(&o);
        assert_eq!(body["stream"], true);
        assert_eq!(
            body["stream_options"],
            serde_json::json!({"include_usage": true})
        );
        assert_eq!(body["stop"], "END");
        let a = build("anthropic", &req).unwrap();
        let body = body_of(&a);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stop_sequences"], serde_json::json!(["END"]));
        assert_eq!(body["top_p"], 0.5);
        let g = build("gemini", &req).unwrap();
        assert_eq!(
            g.url().as_str(),
            "http://127.0.0.1:9/v1/models/m:streamGenerateContent?alt=sse"
        );
        let body = body_of(&g);
        assert!(body.get("stream").is_none());
        assert_eq!(
            body["generationConfig"]["stopSequences"],
            serde_json::json!(["END"])
        );
        assert_eq!(body["generationConfig"]["topP"], 0.5);
        // The client's own stream_options win.
        req.extra.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": false}),
        );
        let body = body_of(&build("openai", &req).unwrap());
        assert_eq!(
            body["stream_options"],
            serde_json::json!({"include_usage": false})
        );
    }

    #[test]
    fn content_parts_are_mapped_or_refused() {
        let req = client_request(
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}"#,
        );
        let a = Anthropic.body(&req).unwrap();
        assert_eq!(
            a["messages"][0]["content"],
            serde_json::json!([
                {"type":"text","text":"what is this?"},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}
            ])
        );
        let g = Gemini.body(&req).unwrap();
        assert_eq!(
            g["contents"][0]["parts"],
            serde_json::json!([
                {"text":"what is this?"},
                {"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}
            ])
        );
        let remote = client_request(
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}"#,
        );
        assert_eq!(
            Anthropic.body(&remote).unwrap()["messages"][0]["content"][0]["source"],
            serde_json::json!({"type":"url","url":"https://example.com/cat.png"})
        );
        let e = Gemini.body(&remote).unwrap_err();
        assert_eq!(
            e.to_string(),
            "messages[0].content[0]: gemini takes images only as base64 data: URLs"
        );
        let audio = client_request(
            r#"{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}"#,
        );
        for e in [
            Anthropic.body(&audio).unwrap_err(),
            Gemini.body(&audio).unwrap_err(),
        ] {
            assert!(e.to_string().contains("\"input_audio\""), "{e}");
        }
    }

    #[test]
    fn openai_reply_ignores_reasoning() {
        let body = br#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"7+7 is 14"},"finish_reason":"length"}],"usage":{"prompt_tokens":20,"completion_tokens":16}}"#;
        let r = parse_reply(Dialect::Openai, body).unwrap();
        assert_eq!(r.text, "");
        assert_eq!(r.reasoning.as_deref(), Some("7+7 is 14"));
        assert!(r.truncated());
        assert_eq!(r.usage.unwrap().output_tokens, Some(16));
    }

    #[test]
    fn deepseek_keep_alive_prefix_is_skipped() {
        let body = b"\n\n: keep-alive\n\n{\"choices\":[{\"message\":{\"content\":\"14\"},\"finish_reason\":\"stop\"}]}";
        assert_eq!(parse_reply(Dialect::Openai, body).unwrap().text, "14");
    }

    #[test]
    fn anthropic_reply_joins_text_blocks_only() {
        let body = br#"{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"1"},{"type":"text","text":"4"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}"#;
        let r = parse_reply(Dialect::Anthropic, body).unwrap();
        assert_eq!(r.text, "14");
        assert_eq!(r.reasoning.as_deref(), Some("hmm"));
        assert_eq!(r.finish_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn gemini_reply_skips_thought_parts() {
        let body = br#"{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking...","thought":true},{"text":"14"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1}}"#;
        let r = parse_reply(Dialect::Gemini, body).unwrap();
        assert_eq!(r.text, "14");
        assert_eq!(r.usage.unwrap().input_tokens, Some(9));
    }

    #[test]
    fn gemini_cut_off_without_parts_is_an_empty_reply() {
        let body = br#"{"candidates":[{"content":{"role":"model"},"finishReason":"MAX_TOKENS"}]}"#;
        let r = parse_reply(Dialect::Gemini, body).unwrap();
        assert_eq!(r.text, "");
        assert!(r.truncated());
    }

    #[test]
    fn shapes_that_are_not_replies() {
        assert!(matches!(
            parse_reply(Dialect::Openai, br#"{"choices":[]}"#),
            Err(ReplyError::Shape(_))
        ));
        assert!(matches!(
            parse_reply(Dialect::Gemini, br#"{"promptFeedback":{"blockReason":"SAFETY"}}"#),
            Err(ReplyError::Shape(m)) if m.contains("SAFETY")
        ));
        assert!(matches!(
            parse_reply(Dialect::Anthropic, br#"{"type":"message","content":[]}"#),
            Err(ReplyError::Shape(_))
        ));
        assert_eq!(
            parse_reply(Dialect::Openai, b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>x</body></html>"),
            Err(ReplyError::Html(Some("502 Bad Gateway".into())))
        );
        assert_eq!(
            parse_reply(Dialect::Openai, b"\x00\x01garbage"),
            Err(ReplyError::NotJson)
        );
        // A reply in every other way, with bytes that are not UTF-8 inside
        // its text: refused, at the first bad byte.
        let bad = b"{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"\xff14\"}}]}";
        let at = bad.iter().position(|&b| b == 0xff).unwrap();
        assert_eq!(
            parse_reply(Dialect::Openai, bad),
            Err(ReplyError::NotUtf8(at))
        );
        assert_eq!(parse_reply(Dialect::Openai, b"  "), Err(ReplyError::Empty));
    }
}
