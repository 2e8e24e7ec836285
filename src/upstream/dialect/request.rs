//! The chat request every dialect starts from, whichever surface it came
//! in on (each reads its own request into this one) or a probe that built
//! it: the conversation, the modelled options, and the fields the router
//! reads (`tools`, `tool_choice`, `parallel_tool_calls`,
//! `response_format`, `n`), each read once when the request is parsed and
//! kept as the client sent it.
//!
//! Parsing checks only what the three dialects need to translate the
//! request, and answers in OpenAI's words (`Invalid type for 'top_p'…`) so
//! that a client sees the error it would get from OpenAI. A read field that
//! cannot be translated keeps its refusal for the dialects that translate:
//! OpenAI-dialect upstreams get it as it came. Anything else stays in
//! `extra` and reaches OpenAI-dialect upstreams verbatim.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::BuildError;
use super::provider_error::{Lax, Obj};

/// The roles OpenAI accepts. `developer` is the newer name for `system`.
pub const ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

/// A message's content: a plain string, or OpenAI content parts
/// (`{"type":"text","text"}`, `{"type":"image_url","image_url":{"url"}}`,
/// …), kept as JSON because each dialect maps them differently.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Content {
    /// The text of the content: the string, or its text parts joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts.iter().filter_map(part_text).collect(),
        }
    }

    /// The text of a system message: the string, or its text parts a
    /// blank line apart (instructions given as several parts stay
    /// separate paragraphs). Other parts are not text; the caller reports
    /// them ([`Content::non_text_parts`]).
    pub fn system_text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(part_text)
                .collect::<Vec<_>>()
                .join("\n\n"),
        }
    }

    /// The types of the parts that are not text.
    pub fn non_text_parts(&self) -> impl Iterator<Item = &str> {
        let parts = match self {
            Content::Text(_) => &[][..],
            Content::Parts(p) => &p[..],
        };
        parts
            .iter()
            .filter(|p| part_type(p) != "text")
            .map(part_type)
    }

    fn to_json(&self) -> Value {
        match self {
            Content::Text(s) => Value::String(s.clone()),
            Content::Parts(p) => Value::Array(p.clone()),
        }
    }
}

/// The text of a `{"type":"text","text"}` part.
fn part_text(p: &Value) -> Option<&str> {
    let part = Part::of(p);
    (part.kind.get() == Some(&"text"))
        .then(|| part.text.into_option())
        .flatten()
}

/// A content part, read leniently (a field of an unexpected type is
/// absent, and so is every field of a part that is not an object):
/// `{"type":"text","text"}`, `{"type":"image_url","image_url":{"url"}}`
/// or the older `{"type":"image_url","image_url":"…"}`. Borrowed from the
/// part, which stays as the client sent it.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: Lax<&'a str>,
    #[serde(borrow)]
    text: Lax<&'a str>,
    #[serde(borrow)]
    image_url: Lax<ImageUrl<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ImageUrl<'a> {
    Url(&'a str),
    #[serde(borrow)]
    Object(Obj<UrlField<'a>>),
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct UrlField<'a> {
    #[serde(borrow)]
    url: Lax<&'a str>,
}

impl<'a> Part<'a> {
    pub(super) fn of(part: &'a Value) -> Part<'a> {
        lenient(part)
    }

    /// The part's `type`, when a string.
    pub(super) fn kind(&self) -> Option<&'a str> {
        self.kind.get().copied()
    }

    /// The URL of an `image_url` part, in either form.
    pub(super) fn image_url(&self) -> Option<&'a str> {
        match self.image_url.get()? {
            ImageUrl::Url(url) => Some(url),
            ImageUrl::Object(Obj(o)) => o.url.get().copied(),
        }
    }
}

/// One message of a conversation, with OpenAI roles (`system`,
/// `developer`, `user`, `assistant`, `tool`, `function`); dialects
/// translate them.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    /// `None` when the client sent `null` or left it out, which OpenAI
    /// allows for an assistant message that only calls tools.
    pub content: Option<Content>,
    /// Every other field (`name`, `tool_calls`, `tool_call_id`, …), passed
    /// to OpenAI-dialect upstreams as it came.
    pub extra: Map<String, Value>,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: Some(Content::Text(content.into())),
            extra: Map::new(),
        }
    }

    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("user", content)
    }

    /// `system` and `developer` messages: Anthropic and Gemini take them
    /// out of the conversation into a separate field.
    pub fn is_system(&self) -> bool {
        matches!(self.role.as_str(), "system" | "developer")
    }

    /// The message as OpenAI JSON: role, content, then the extra fields.
    pub(super) fn to_openai(&self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), Value::String(self.role.clone()));
        m.insert(
            "content".into(),
            self.content.as_ref().map_or(Value::Null, Content::to_json),
        );
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    /// Refuse what only the OpenAI dialect can carry: the legacy
    /// `function` role and `function_call` (superseded by tools, which
    /// every dialect carries). Dropping them would change the
    /// conversation's meaning.
    pub(super) fn check_translatable(&self, dialect: &str) -> Result<(), BuildError> {
        if self.role == "function" {
            return Err(BuildError::Unsupported(format!(
                "function messages (the legacy form of tool results) can only be sent to \
                 openai-dialect providers, not {dialect}"
            )));
        }
        if self.fields().function_call.is_some() {
            return Err(BuildError::Unsupported(format!(
                "messages with function_call (the legacy form of tool_calls) can only be sent \
                 to openai-dialect providers, not {dialect}"
            )));
        }
        Ok(())
    }

    /// The tool calls of an assistant message (`tool_calls`), in order.
    /// `i` is the message's index, for errors.
    pub fn tool_calls(&self, i: usize) -> Result<Vec<ToolCall>, BuildError> {
        let calls = match self.fields().tool_calls {
            None => return Ok(Vec::new()),
            Some(Lax::Is(calls)) => calls,
            Some(Lax::Not(_)) => {
                return Err(malformed(&format!("messages[{i}].tool_calls"), "an array"));
            }
        };
        calls
            .into_iter()
            .map(object)
            .enumerate()
            .map(|(j, c)| {
                let at = format!("messages[{i}].tool_calls[{j}]");
                let kind = c.kind.into_option().unwrap_or("function");
                if kind != "function" {
                    return Err(BuildError::Unsupported(format!(
                        "{at}: tool calls of type {kind:?} can only be sent to openai-dialect providers"
                    )));
                }
                let f = object(c.function);
                let (Some(id), Some(name)) = (c.id.into_option(), f.name.into_option()) else {
                    return Err(malformed(&at, "an object with an id and a function name"));
                };
                let arguments = match f.arguments {
                    None => String::new(),
                    Some(Arguments::Text(s)) => s.to_string(),
                    // Some clients send the object itself.
                    Some(Arguments::Json(other)) => other.to_string(),
                };
                Ok(ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments,
                })
            })
            .collect()
    }

    /// What an assistant turn said in place of content: OpenAI's
    /// `refusal`, which comes with `content: null`. Other dialects get it
    /// as the turn's text, since it is what the model said.
    pub(super) fn refusal(&self) -> Option<&str> {
        if self.content.is_some() {
            return None;
        }
        self.fields().refusal.into_option()
    }

    /// The call a `tool` message answers (`tool_call_id`).
    pub fn tool_call_id(&self) -> Option<&str> {
        self.fields().tool_call_id.into_option()
    }

    /// Whether the message calls tools or a function (`tool_calls` or
    /// `function_call`, not `null`).
    pub(super) fn makes_calls(&self) -> bool {
        let f = self.fields();
        f.tool_calls.is_some() || f.function_call.is_some()
    }

    /// Whether some entry of `tool_calls` names a type other than
    /// `function` (OpenAI's built-in tools).
    pub(super) fn makes_non_function_calls(&self) -> bool {
        self.fields()
            .calls()
            .any(|c| c.kind.get().is_some_and(|k| *k != "function"))
    }

    /// Whether the message holds tool calls (`tool_calls`, a non-empty
    /// array).
    fn has_tool_calls(&self) -> bool {
        matches!(self.fields().tool_calls, Some(Lax::Is(c)) if !c.is_empty())
    }

    /// The fields of the message that route reads beyond role and content.
    fn fields(&self) -> MessageFields<'_> {
        MessageFields::deserialize(&self.extra).unwrap_or_default()
    }
}

/// A message's fields beyond `role` and `content` that route reads, read
/// leniently from its `extra` (a field of an unexpected type is absent)
/// and borrowed from it: `extra` stays as the client sent it.
#[derive(Default, Deserialize)]
#[serde(default)]
struct MessageFields<'a> {
    /// `None` when absent or `null`, `Some(Lax::Not)` when not an array.
    #[serde(borrow)]
    tool_calls: Option<Lax<Vec<Lax<Obj<CallFields<'a>>>>>>,
    #[serde(borrow)]
    tool_call_id: Lax<&'a str>,
    #[serde(borrow)]
    refusal: Lax<&'a str>,
    /// `None` when absent or `null`.
    function_call: Option<serde::de::IgnoredAny>,
}

impl<'a> MessageFields<'a> {
    /// The `tool_calls` entries, when it is an array.
    fn calls(self) -> impl Iterator<Item = CallFields<'a>> {
        let calls = match self.tool_calls {
            Some(Lax::Is(calls)) => calls,
            _ => Vec::new(),
        };
        calls.into_iter().map(object)
    }
}

/// A `tool_calls` entry: `{id,"type":"function","function":{name,arguments}}`.
#[derive(Default, Deserialize)]
#[serde(default)]
struct CallFields<'a> {
    #[serde(borrow)]
    id: Lax<&'a str>,
    #[serde(rename = "type", borrow)]
    kind: Lax<&'a str>,
    #[serde(borrow)]
    function: Lax<Obj<FunctionFields<'a>>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct FunctionFields<'a> {
    #[serde(borrow)]
    name: Lax<&'a str>,
    /// `None` when absent or `null`.
    #[serde(borrow)]
    arguments: Option<Arguments<'a>>,
}

/// A call's `arguments`: the JSON text OpenAI sends, or (from some
/// clients) the object itself.
#[derive(Deserialize)]
#[serde(untagged)]
enum Arguments<'a> {
    Text(&'a str),
    Json(Value),
}

/// The object read as `T`, or `T`'s default when it was not one.
fn object<T: Default>(v: Lax<Obj<T>>) -> T {
    v.into_option().map_or_else(T::default, |Obj(t)| t)
}

/// A tool the model may call, from an OpenAI
/// `{"type":"function","function":{name,description,parameters}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDecl {
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema for the arguments object, as the client wrote it;
    /// each dialect adapts it (Gemini takes only a subset).
    pub parameters: Option<Value>,
}

/// Whether and which tool the model must call (`tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (`"auto"`, the default with tools).
    Auto,
    /// No tool may be called (`"none"`).
    None,
    /// Some tool must be called (`"required"`).
    Required,
    /// This function must be called
    /// (`{"type":"function","function":{"name"}}`).
    Function(String),
}

/// A call the model made (or made earlier in the conversation): OpenAI's
/// `{id,"type":"function","function":{name,arguments}}`, with `arguments`
/// the JSON **text** of the arguments object, as OpenAI gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    /// The arguments as the object Anthropic and Gemini want: empty text
    /// is no arguments; anything but a JSON object is refused, since no
    /// guess at what the client meant would be honest.
    pub(super) fn arguments_object(&self, at: &str) -> Result<Value, BuildError> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(Map::new()));
        }
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(BuildError::Unsupported(format!(
                "{at}.function.arguments is not a JSON object, which only openai-dialect \
                 providers take"
            ))),
        }
    }
}

/// JSON output asked for with `response_format` (`{"type":"text"}` is
/// no request at all, so it has no variant).
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// `{"type":"json_object"}`: any JSON object.
    JsonObject,
    /// `{"type":"json_schema","json_schema":{name,schema,strict}}`.
    JsonSchema { name: String, schema: Value },
}

/// The fields [`ChatRequest`] reads apart from `extra`.
const READ_FIELDS: [&str; 5] = [
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "n",
];

/// A client's value that cannot be read as the field it is in.
fn malformed(field: &str, expected: &str) -> BuildError {
    BuildError::Unsupported(format!("'{field}' is not {expected}"))
}

/// A field the router reads, kept as the client sent it: OpenAI-dialect
/// upstreams get `raw` byte for byte, the other dialects go by `read`,
/// worked out once when the request was parsed. A reading that cannot be
/// translated holds the refusal, which only a translating dialect gives.
#[derive(Debug, Clone)]
pub struct Sent<T> {
    pub raw: Value,
    pub read: T,
    /// Where the field came among the request's unmodelled fields
    /// ([`ChatRequest::fields_as_sent`]), so that it goes back in the
    /// client's order.
    at: usize,
}

/// Equal when the client sent the same: the place is only for writing it.
impl<T: PartialEq> PartialEq for Sent<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw && self.read == other.read
    }
}

/// `tools`, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Tools {
    /// The function tools, or why they cannot be translated: the first
    /// entry that is not one.
    pub decls: Result<Vec<ToolDecl>, BuildError>,
    /// Some entry is a tool of another type (OpenAI's built-in tools).
    pub other_type: bool,
    /// Some function asks for `strict` arguments.
    pub strict: bool,
}

/// `response_format`, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Format {
    /// The `type` it names (`text`, `json_object`, `json_schema`), if any.
    pub kind: Option<String>,
    pub format: Result<Option<ResponseFormat>, BuildError>,
    /// `json_schema.strict` is `true`.
    pub strict: bool,
}

/// A function tool's `function`, or a `json_schema` format's
/// `json_schema`, read leniently: a field of an unexpected type is absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Named {
    name: Lax<String>,
    description: Lax<String>,
    /// A function's.
    parameters: Option<Value>,
    /// A format's.
    schema: Option<Value>,
    strict: Lax<bool>,
}

/// `v` read as an object `T`, or `T`'s default when it is not one.
fn lenient<'a, T: Default + Deserialize<'a>>(v: &'a Value) -> T {
    Obj::<T>::deserialize(v).map_or_else(|_| T::default(), |o| o.0)
}

/// An object's `type` (when a string) and the object under `inner`,
/// found in one walk over its entries.
fn kind_and<'a>(v: &'a Value, inner: &str) -> (Option<&'a str>, Option<&'a Value>) {
    let (mut kind, mut found) = (None, None);
    for (k, v) in v.as_object().into_iter().flatten() {
        match k.as_str() {
            "type" => kind = v.as_str(),
            k if k == inner => found = Some(v),
            _ => {}
        }
    }
    (kind, found)
}

fn read_tools(raw: &Value) -> Tools {
    let items: &[Value] = match raw {
        Value::Array(a) => a,
        _ => &[],
    };
    let walked: Vec<_> = items.iter().map(|t| kind_and(t, "function")).collect();
    let mut strict = false;
    let mut other_type = false;
    let mut decls = Vec::with_capacity(items.len());
    let mut first_error = None;
    for (i, (kind, function)) in walked.into_iter().enumerate() {
        let kind = kind.unwrap_or("function");
        other_type |= kind != "function";
        let f: Option<Named> = function.map(lenient);
        strict |= f.as_ref().is_some_and(|f| f.strict.get() == Some(&true));
        if first_error.is_some() {
            continue;
        }
        if kind != "function" {
            first_error = Some(BuildError::Unsupported(format!(
                "tools[{i}]: tools of type {kind:?} can only be sent to openai-dialect providers"
            )));
            continue;
        }
        let Some(f) = f else {
            first_error = Some(malformed(&format!("tools[{i}]"), "a function tool"));
            continue;
        };
        let Some(name) = f.name.into_option() else {
            first_error = Some(malformed(&format!("tools[{i}].function.name"), "a string"));
            continue;
        };
        decls.push(ToolDecl {
            name,
            description: f.description.into_option(),
            parameters: f.parameters,
        });
    }
    let decls = match (raw, first_error) {
        (Value::Null, _) => Ok(Vec::new()),
        (Value::Array(_), None) => Ok(decls),
        (Value::Array(_), Some(e)) => Err(e),
        _ => Err(malformed("tools", "an array")),
    };
    Tools {
        decls,
        other_type,
        strict,
    }
}

fn read_tool_choice(raw: &Value) -> Result<Option<ToolChoice>, BuildError> {
    let choice = match raw {
        Value::Null => return Ok(None),
        Value::String(s) if s == "auto" => ToolChoice::Auto,
        Value::String(s) if s == "none" => ToolChoice::None,
        Value::String(s) if s == "required" => ToolChoice::Required,
        _ => match raw.pointer("/function/name").and_then(Value::as_str) {
            Some(name) => ToolChoice::Function(name.to_string()),
            None => {
                return Err(malformed(
                    "tool_choice",
                    "\"auto\", \"none\", \"required\" or a named function",
                ));
            }
        },
    };
    Ok(Some(choice))
}

fn read_format(raw: &Value) -> Format {
    if raw.is_null() {
        return Format {
            kind: None,
            format: Ok(None),
            strict: false,
        };
    }
    let (kind, js) = kind_and(raw, "json_schema");
    let js: Named = js.map(lenient).unwrap_or_default();
    let format = match kind {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(ResponseFormat::JsonObject)),
        Some("json_schema") => Ok(Some(ResponseFormat::JsonSchema {
            name: js
                .name
                .into_option()
                .unwrap_or_else(|| "response".to_string()),
            schema: js
                .schema
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        })),
        _ => Err(malformed(
            "response_format",
            "of type text, json_object or json_schema",
        )),
    };
    Format {
        kind: kind.map(str::to_string),
        format,
        strict: js.strict.get() == Some(&true),
    }
}

/// The router's request, independent of surface and dialect: what every
/// surface reads a client's request into, and every dialect builds from.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// As the client named it; empty when it named none. The router
    /// replaces it with the upstream model before building a request.
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// A system prompt given apart from the messages (by `route`'s command
    /// line, say). OpenAI upstreams get it as a first system message;
    /// Anthropic and Gemini get it ahead of the system messages lifted out
    /// of `messages`. Parsing a client's request leaves it `None`: system
    /// messages stay where the client put them.
    pub system: Option<String>,
    /// `None` leaves the provider default, except for Anthropic, which
    /// requires a value and gets [`super::ANTHROPIC_DEFAULT_MAX_TOKENS`].
    pub max_tokens: Option<u32>,
    /// The client spelled it `max_completion_tokens` (which OpenAI's
    /// reasoning models require); OpenAI-dialect bodies keep that spelling.
    pub max_completion_tokens: bool,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Stop sequences; a single string from the client becomes one entry.
    pub stop: Vec<String>,
    pub stream: bool,
    /// `tools`, as sent and read ([`ChatRequest::tools`]).
    pub tools: Option<Sent<Tools>>,
    /// `tool_choice`, as sent and read ([`ChatRequest::tool_choice`]).
    pub tool_choice: Option<Sent<Result<Option<ToolChoice>, BuildError>>>,
    /// `parallel_tool_calls`, as sent and read when a boolean.
    pub parallel_tool_calls: Option<Sent<Option<bool>>>,
    /// `response_format`, as sent and read ([`ChatRequest::response_format`]).
    pub response_format: Option<Sent<Format>>,
    /// `n`, as sent and read when a non-negative integer.
    pub n: Option<Sent<Option<u64>>>,
    /// Every other field (`stream_options`, `seed`, `user`, …), which the
    /// router does not read itself: passed verbatim to OpenAI-dialect
    /// upstreams, translated or reported by the others. Set the fields
    /// above with [`ChatRequest::insert`], which keeps the client's order.
    pub extra: Map<String, Value>,
}

/// Tokens assumed for the answer when the client sets no `max_tokens`.
pub const DEFAULT_ESTIMATED_COMPLETION_TOKENS: u64 = 1024;

impl ChatRequest {
    /// A request with these messages and every option at its default.
    pub fn new(model: &str, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: model.to_string(),
            messages,
            system: None,
            max_tokens: None,
            max_completion_tokens: false,
            temperature: None,
            top_p: None,
            stop: Vec::new(),
            stream: false,
            tools: None,
            tool_choice: None,
            parallel_tool_calls: None,
            response_format: None,
            n: None,
            extra: Map::new(),
        }
    }

    /// Set a field the client sent that the modelled fields above
    /// `extra` do not hold: the read ones into their own fields, read now
    /// (and only now: every dialect goes by that reading), the rest into
    /// `extra`. Either way it comes after the fields set before it in
    /// [`ChatRequest::fields_as_sent`].
    pub fn insert(&mut self, key: String, raw: Value) {
        let at = self.extra.len()
            + self
                .read_fields()
                .iter()
                .filter(|(_, f)| f.is_some())
                .count();
        match key.as_str() {
            "tools" => {
                let read = read_tools(&raw);
                self.tools = Some(Sent { raw, read, at });
            }
            "tool_choice" => {
                let read = read_tool_choice(&raw);
                self.tool_choice = Some(Sent { raw, read, at });
            }
            "parallel_tool_calls" => {
                let read = raw.as_bool();
                self.parallel_tool_calls = Some(Sent { raw, read, at });
            }
            "response_format" => {
                let read = read_format(&raw);
                self.response_format = Some(Sent { raw, read, at });
            }
            "n" => {
                let read = raw.as_u64();
                self.n = Some(Sent { raw, read, at });
            }
            _ => {
                self.extra.insert(key, raw);
            }
        }
    }

    /// The fields read apart from `extra`, by name: each as sent and
    /// where it came, when the client sent it.
    fn read_fields(&self) -> [(&'static str, Option<(&Value, usize)>); 5] {
        fn of<T>(s: &Option<Sent<T>>) -> Option<(&Value, usize)> {
            s.as_ref().map(|s| (&s.raw, s.at))
        }
        [
            ("tools", of(&self.tools)),
            ("tool_choice", of(&self.tool_choice)),
            ("parallel_tool_calls", of(&self.parallel_tool_calls)),
            ("response_format", of(&self.response_format)),
            ("n", of(&self.n)),
        ]
    }

    /// Every field the client sent beyond the modelled ones above `tools`
    /// (the read ones and `extra`), as it sent them and in its order: what
    /// OpenAI-dialect upstreams get, and what the other dialects account
    /// for ([`super::fields::dropped`]).
    pub fn fields_as_sent(&self) -> impl Iterator<Item = (&str, &Value)> {
        let mut read = self.read_fields().map(|(k, f)| f.map(|(v, at)| (k, v, at)));
        read.sort_by_key(|f| f.map_or(usize::MAX, |(_, _, at)| at));
        let mut read = read.into_iter().flatten().peekable();
        let mut extra = self.extra.iter().peekable();
        let mut here = 0;
        std::iter::from_fn(move || {
            let from_read = match (read.peek(), extra.peek()) {
                (Some(&(_, _, at)), Some(_)) => at <= here,
                (Some(_), None) => true,
                (None, _) => false,
            };
            here += 1;
            if from_read {
                read.next().map(|(k, v, _)| (k, v))
            } else {
                extra.next().map(|(k, v)| (k.as_str(), v))
            }
        })
    }

    /// Take a field out of `extra`, keeping the read fields' places in the
    /// client's order (a field set after this one then comes where it was).
    pub fn remove_extra(&mut self, key: &str) -> Option<Value> {
        let place = self.fields_as_sent().position(|(k, _)| k == key)?;
        let value = self.extra.shift_remove(key)?;
        let ats = [
            self.tools.as_mut().map(|s| &mut s.at),
            self.tool_choice.as_mut().map(|s| &mut s.at),
            self.parallel_tool_calls.as_mut().map(|s| &mut s.at),
            self.response_format.as_mut().map(|s| &mut s.at),
            self.n.as_mut().map(|s| &mut s.at),
        ];
        for at in ats.into_iter().flatten() {
            if *at > place {
                *at -= 1;
            }
        }
        Some(value)
    }

    /// The request a probe sends: one user message, temperature 0.
    pub fn probe(model: &str, prompt: &str, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            max_tokens: Some(max_tokens),
            temperature: Some(0.0),
            ..ChatRequest::new(model, vec![ChatMessage::user(prompt)])
        }
    }

    /// A rough token count for budgets (`tpm`, `tpd`) before the request is
    /// sent: every character of text (system prompt, message text and text
    /// parts, tool calls' arguments, and the tool declarations as JSON,
    /// which models read as part of the prompt; not images) divided by 4,
    /// rounded up, plus the
    /// tokens the answer may use: `max_tokens`, or
    /// [`DEFAULT_ESTIMATED_COMPLETION_TOKENS`] when unset. Four characters a
    /// token is the usual rule of thumb for English; the provider's own
    /// count, when it reports one, replaces this afterwards.
    pub fn estimated_tokens(&self) -> u64 {
        let count = |s: &str| s.chars().count() as u64;
        let chars: u64 = self.system.as_deref().map_or(0, count)
            + self
                .messages
                .iter()
                .filter_map(|m| m.content.as_ref())
                .map(|c| count(&c.text()))
                .sum::<u64>()
            + self
                .messages
                .iter()
                .flat_map(|m| m.fields().calls())
                .filter_map(|c| match object(c.function).arguments {
                    Some(Arguments::Text(s)) => Some(count(s)),
                    _ => None,
                })
                .sum::<u64>()
            + self
                .tools
                .as_ref()
                .filter(|t| !t.raw.is_null())
                .map_or(0, |t| count(&t.raw.to_string()));
        chars.div_ceil(4)
            + self
                .max_tokens
                .map_or(DEFAULT_ESTIMATED_COMPLETION_TOKENS, u64::from)
    }

    /// Whether the client asked for a final usage chunk when streaming
    /// (`stream_options.include_usage`).
    pub fn wants_stream_usage(&self) -> bool {
        self.extra
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// How many messages open the conversation as system messages, before
    /// its first turn of another role.
    pub(super) fn leading_system_len(&self) -> usize {
        self.messages
            .iter()
            .position(|m| !m.is_system())
            .unwrap_or(self.messages.len())
    }

    /// Whether a system (or developer) message comes after the
    /// conversation started: instructions given mid-conversation.
    pub fn has_later_system(&self) -> bool {
        let lead = self.leading_system_len();
        self.messages[lead..].iter().any(ChatMessage::is_system)
    }

    /// The request with every later system message folded, in order, into
    /// the leading system prompt: the last leading system message, else the
    /// separate `system`, else a new system message at the front. Their
    /// text joins with a blank line ([`super::SystemMessages::Fold`]).
    pub(super) fn with_system_folded(&self) -> ChatRequest {
        let lead = self.leading_system_len();
        let later: Vec<String> = self.messages[lead..]
            .iter()
            .filter(|m| m.is_system())
            .filter_map(|m| m.content.as_ref().map(Content::system_text))
            .filter(|t| !t.is_empty())
            .collect();
        let mut out = self.clone();
        out.messages = self.messages[..lead]
            .iter()
            .chain(self.messages[lead..].iter().filter(|m| !m.is_system()))
            .cloned()
            .collect();
        if later.is_empty() {
            return out;
        }
        let join = |head: Option<String>| {
            head.into_iter()
                .filter(|h| !h.is_empty())
                .chain(later.iter().cloned())
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        if lead > 0 {
            let last = &mut out.messages[lead - 1];
            let head = last.content.as_ref().map(Content::system_text);
            last.content = Some(Content::Text(join(head)));
        } else if out.system.is_some() {
            out.system = Some(join(out.system.take()));
        } else {
            out.messages
                .insert(0, ChatMessage::new("system", join(None)));
        }
        out
    }

    /// The types of the parts of later system messages that are not text,
    /// each once, as `content[TYPE]`: what folding leaves out.
    pub(super) fn later_system_non_text_parts(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.messages[self.leading_system_len()..]
            .iter()
            .filter(|m| m.is_system())
            .filter_map(|m| m.content.as_ref())
            .flat_map(Content::non_text_parts)
            .filter(|t| seen.insert(*t))
            .map(|t| format!("content[{t}]"))
            .collect()
    }

    /// For a dialect that keeps later system messages in place: the
    /// request with each one that falls between an assistant turn's tool
    /// calls and their results moved to just after those results, since no
    /// dialect takes anything between a call and its result (Anthropic
    /// wants the results in the very next message). `None` when nothing
    /// moves.
    pub(super) fn with_system_after_tool_results(&self) -> Option<ChatRequest> {
        let mut out = Vec::with_capacity(self.messages.len());
        let mut held = Vec::new();
        let mut in_results = false;
        let mut moved = false;
        for m in &self.messages {
            if in_results && m.is_system() {
                held.push(m.clone());
                continue;
            }
            if in_results && m.role == "tool" {
                moved |= !held.is_empty();
                out.push(m.clone());
                continue;
            }
            out.append(&mut held);
            in_results = m.role == "assistant" && m.has_tool_calls();
            out.push(m.clone());
        }
        out.append(&mut held);
        moved.then(|| ChatRequest {
            messages: out,
            ..self.clone()
        })
    }

    /// The system prompt ahead of the conversation, for a dialect that
    /// keeps later system messages in place: `system`, then the leading
    /// system messages' text.
    pub(super) fn leading_system(&self) -> Vec<String> {
        self.system
            .iter()
            .cloned()
            .chain(
                self.messages[..self.leading_system_len()]
                    .iter()
                    .filter_map(|m| m.content.as_ref().map(Content::system_text)),
            )
            .collect()
    }

    /// The system prompt for dialects that keep it apart from the
    /// conversation: `system`, then every system message's text, joined by
    /// blank lines.
    pub(super) fn lifted_system(&self) -> Vec<String> {
        self.system
            .iter()
            .cloned()
            .chain(
                self.messages
                    .iter()
                    .filter(|m| m.is_system())
                    .filter_map(|m| m.content.as_ref().map(Content::system_text)),
            )
            .collect()
    }

    /// Refuse fields a non-OpenAI dialect cannot honour and whose loss
    /// would change the answer: the legacy `functions` (tools replaced
    /// them, and the reply would have to answer in their old shape too),
    /// several choices. A safety net: the router skips a candidate whose
    /// dialect cannot carry a request's needs before it gets here.
    pub(super) fn check_translatable(&self, dialect: &str) -> Result<(), BuildError> {
        for field in ["functions", "function_call"] {
            if self
                .extra
                .get(field)
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
            {
                return Err(BuildError::Unsupported(format!(
                    "`{field}` (the legacy form of tools) can only be sent to openai-dialect \
                     providers, not {dialect}"
                )));
            }
        }
        if self.several_choices() {
            return Err(BuildError::Unsupported(format!(
                "`n` above 1 can only be sent to openai-dialect providers, not {dialect}"
            )));
        }
        for m in &self.messages {
            m.check_translatable(dialect)?;
        }
        Ok(())
    }

    /// The tools the client declared (`tools`), in order; none when it
    /// sent none. Only function tools translate to other dialects.
    pub fn tools(&self) -> Result<Vec<ToolDecl>, BuildError> {
        self.tools
            .as_ref()
            .map_or(Ok(Vec::new()), |t| t.read.decls.clone())
    }

    /// Whether the client declared any tools (`tools`, non-empty).
    pub fn declares_tools(&self) -> bool {
        self.tools
            .as_ref()
            .is_some_and(|t| matches!(&t.raw, Value::Array(a) if !a.is_empty()))
    }

    /// `tool_choice`, if the client set one.
    pub fn tool_choice(&self) -> Result<Option<ToolChoice>, BuildError> {
        self.tool_choice
            .as_ref()
            .map_or(Ok(None), |c| c.read.clone())
    }

    /// `parallel_tool_calls`, if the client set it.
    pub fn parallel_tool_calls(&self) -> Option<bool> {
        self.parallel_tool_calls.as_ref().and_then(|p| p.read)
    }

    /// The JSON output the client asked for with `response_format`, if any.
    pub fn response_format(&self) -> Result<Option<ResponseFormat>, BuildError> {
        self.response_format
            .as_ref()
            .map_or(Ok(None), |f| f.read.format.clone())
    }

    /// Whether the client asked for several choices (`n` above 1).
    pub fn several_choices(&self) -> bool {
        self.n.as_ref().and_then(|n| n.read).is_some_and(|n| n > 1)
    }

    /// A number the model does not name but some dialects take
    /// (`seed`, `top_k`, the penalties).
    pub(super) fn extra_number(&self, field: &str) -> Option<&serde_json::Number> {
        match self.extra.get(field) {
            Some(Value::Number(n)) => Some(n),
            _ => None,
        }
    }

    /// A `tool` message whose `tool_call_id` answers no `tool_calls` entry
    /// of an earlier assistant message, as OpenAI refuses it (in its words,
    /// "preceeding" and all): upstreams refuse one, so a surface refuses it
    /// before any is asked.
    pub fn orphan_tool_result(&self) -> Option<RequestError> {
        let mut calls: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (i, m) in self.messages.iter().enumerate() {
            if m.role == "assistant" {
                calls.extend(m.fields().calls().filter_map(|c| c.id.into_option()));
            }
            if m.role != "tool" {
                continue;
            }
            // One without an id is left to the upstream: Ollama, llama.cpp
            // and vLLM take it (and the other dialects cannot build it).
            if let Some(id) = m.tool_call_id()
                && !calls.contains(id)
            {
                return Some(RequestError::new(
                    "Invalid parameter: messages with role 'tool' must be a response to a \
                     preceeding message with 'tool_calls'."
                        .into(),
                    Some(&format!("messages.[{i}].role")),
                ));
            }
        }
        None
    }

    /// Parse a client's request body. Errors read like OpenAI's own, naming
    /// the field at fault.
    pub fn from_openai_json(body: &[u8]) -> Result<ChatRequest, RequestError> {
        ChatRequest::from_openai_value(Value::Object(openai_object(body)?))
    }

    /// Read an OpenAI chat request already parsed as JSON (a surface that
    /// built it from its own request), with the errors of
    /// [`ChatRequest::from_openai_json`].
    pub fn from_openai_value(value: Value) -> Result<ChatRequest, RequestError> {
        let Value::Object(mut obj) = value else {
            return Err(not_an_object(&value));
        };
        let model = match obj.shift_remove("model") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(other) => return Err(invalid_type("model", "a string", &other)),
        };
        let messages = match obj.shift_remove("messages") {
            None | Some(Value::Null) => {
                return Err(RequestError::new(
                    "Missing required parameter: 'messages'.".into(),
                    Some("messages"),
                ));
            }
            Some(Value::Array(a)) if a.is_empty() => {
                return Err(RequestError::new(
                    "Invalid 'messages': empty array. Expected an array with minimum length 1, \
                     but got an empty array instead."
                        .into(),
                    Some("messages"),
                ));
            }
            Some(Value::Array(a)) => a
                .into_iter()
                .enumerate()
                .map(|(i, m)| parse_message(i, m))
                .collect::<Result<Vec<_>, _>>()?,
            Some(other) => return Err(invalid_type("messages", "an array", &other)),
        };
        let (max_tokens, max_completion_tokens) = match take_u32(&mut obj, "max_completion_tokens")?
        {
            Some(n) => {
                // Both given: the newer name wins, as at OpenAI.
                take_u32(&mut obj, "max_tokens")?;
                (Some(n), true)
            }
            None => (take_u32(&mut obj, "max_tokens")?, false),
        };
        let temperature = take_f64(&mut obj, "temperature")?;
        let top_p = take_f64(&mut obj, "top_p")?;
        let stop = match obj.shift_remove("stop") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s],
            Some(Value::Array(a)) => a
                .into_iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s),
                    other => Err(invalid_type(&format!("stop[{i}]"), "a string", &other)),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(invalid_type(
                    "stop",
                    "a string or an array of strings",
                    &other,
                ));
            }
        };
        let stream = match obj.shift_remove("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(other) => return Err(invalid_type("stream", "a boolean", &other)),
        };
        let mut req = ChatRequest {
            model,
            messages,
            system: None,
            max_tokens,
            max_completion_tokens,
            temperature,
            top_p,
            stop,
            stream,
            extra: Map::new(),
            ..ChatRequest::new("", Vec::new())
        };
        // The read fields out of the rest, each in its place among them;
        // a request with none keeps the rest as it is.
        if READ_FIELDS.iter().any(|k| obj.contains_key(*k)) {
            for (k, v) in obj {
                req.insert(k, v);
            }
        } else {
            req.extra = obj;
        }
        Ok(req)
    }
}

fn parse_message(i: usize, m: Value) -> Result<ChatMessage, RequestError> {
    let at = |field: &str| format!("messages[{i}].{field}");
    let Value::Object(mut obj) = m else {
        return Err(invalid_type(&format!("messages[{i}]"), "an object", &m));
    };
    // A role route does not know passes to OpenAI-dialect upstreams as it
    // came, and the other dialects leave its message out and report it
    // (`role[critic]`): it is never a 400 by itself.
    let role = match obj.shift_remove("role") {
        Some(Value::String(r)) if !r.is_empty() => r,
        Some(Value::String(_)) => {
            return Err(RequestError::new(
                format!("Invalid 'messages[{i}].role': empty string. Expected a role."),
                Some(&at("role")),
            ));
        }
        None | Some(Value::Null) => return Err(missing(&at("role"))),
        Some(other) => return Err(invalid_type(&at("role"), "a string", &other)),
    };
    let content = match obj.shift_remove("content") {
        Some(Value::String(s)) => Some(Content::Text(s)),
        Some(Value::Array(parts)) => {
            for (j, p) in parts.iter().enumerate() {
                let field = |f: &str| format!("messages[{i}].content[{j}]{f}");
                let Some(part) = p.as_object() else {
                    return Err(invalid_type(&field(""), "an object", p));
                };
                match part.get("type") {
                    Some(Value::String(t)) if t == "text" => match part.get("text") {
                        Some(Value::String(_)) => {}
                        text => {
                            let text = text.unwrap_or(&Value::Null);
                            return Err(invalid_type(&field(".text"), "a string", text));
                        }
                    },
                    Some(Value::String(_)) => {}
                    None => return Err(missing(&field(".type"))),
                    Some(other) => return Err(invalid_type(&field(".type"), "a string", other)),
                }
            }
            Some(Content::Parts(parts))
        }
        // Only a message that calls tools (or a function) may go without.
        None | Some(Value::Null) if role == "assistant" => None,
        None | Some(Value::Null) => return Err(missing(&at("content"))),
        Some(other) => {
            return Err(invalid_type(
                &at("content"),
                "one of a string or array of objects",
                &other,
            ));
        }
    };
    Ok(ChatMessage {
        role,
        content,
        extra: obj,
    })
}

fn take_u32(obj: &mut Map<String, Value>, field: &str) -> Result<Option<u32>, RequestError> {
    match obj.shift_remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => Ok(Some(v)),
            None => Err(RequestError::new(
                format!(
                    "Invalid '{field}': expected a non-negative integer below 2^32, \
                     but got {n} instead."
                ),
                Some(field),
            )),
        },
        Some(other) => Err(invalid_type(field, "an integer", &other)),
    }
}

fn take_f64(obj: &mut Map<String, Value>, field: &str) -> Result<Option<f64>, RequestError> {
    match obj.shift_remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(invalid_type(field, "a number", &other)),
    }
}

fn missing(field: &str) -> RequestError {
    RequestError::new(
        format!("Missing required parameter: '{field}'."),
        Some(field),
    )
}

fn invalid_type(field: &str, expected: &str, got: &Value) -> RequestError {
    RequestError::new(
        format!(
            "Invalid type for '{field}': expected {expected}, but got {} instead.",
            type_name(got)
        ),
        Some(field),
    )
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A client's request that cannot be read. Its message is what OpenAI
/// would say; [`RequestError::to_openai_json`] is the body to send back
/// with HTTP 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub message: String,
    /// The field at fault, as OpenAI's `param` names it (`messages[0].role`).
    pub param: Option<String>,
}

impl RequestError {
    fn new(message: String, param: Option<&str>) -> RequestError {
        RequestError {
            message,
            param: param.map(str::to_string),
        }
    }

    /// `{"error":{"message","type":"invalid_request_error","param","code":null}}`
    pub fn to_openai_json(&self) -> Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": self.param,
                "code": null,
            }
        })
    }
}

/// A request body as the JSON object an OpenAI-style request is, with
/// OpenAI's words for a body that is not JSON or not an object. Every
/// OpenAI-shaped surface reads its body with this.
pub fn openai_object(body: &[u8]) -> Result<Map<String, Value>, RequestError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        RequestError::new(
            format!(
                "We could not parse the JSON body of your request: {e}. \
                 The OpenAI API expects a JSON payload."
            ),
            None,
        )
    })?;
    match value {
        Value::Object(obj) => Ok(obj),
        other => Err(not_an_object(&other)),
    }
}

fn not_an_object(value: &Value) -> RequestError {
    RequestError::new(
        format!(
            "Invalid request body: expected a JSON object, but got {} instead.",
            type_name(value)
        ),
        None,
    )
}

/// An `image_url` part's image as (media type, base64 data), when its URL
/// is a base64 `data:` URL.
pub(super) fn data_url_image(part: &Value) -> Option<(String, String)> {
    let url = image_url_of(part)?;
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    (!media_type.is_empty()).then(|| (media_type.to_string(), data.to_string()))
}

/// The URL of an `image_url` part: `{"image_url":{"url"}}`, or the older
/// `{"image_url":"…"}`.
pub(super) fn image_url_of(part: &Value) -> Option<&str> {
    Part::of(part).image_url()
}

/// A part's type, for messages about parts a dialect cannot carry.
pub(super) fn part_type(part: &Value) -> &str {
    Part::of(part).kind().unwrap_or("?")
}

/// Content part types route knows: text and images, which every dialect
/// translates; audio, a need ([`super::Need::Audio`]); and files, which
/// only OpenAI-dialect upstreams take (leaving one out would answer a
/// different question). A part of any other type passes to OpenAI-dialect
/// upstreams as it came, and the other dialects leave it out and report it
/// (`content[TYPE]`).
pub const KNOWN_PARTS: &[&str] = &["text", "image_url", "input_audio", "file"];

/// Whether the other dialects leave `part` out (and report it).
pub(super) fn unknown_part(part: &Value) -> bool {
    !KNOWN_PARTS.contains(&part_type(part))
}

impl ChatMessage {
    /// Whether the message has a role route knows ([`ROLES`]); the other
    /// dialects leave out a message that does not.
    pub fn known_role(&self) -> bool {
        ROLES.contains(&self.role.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> RequestError {
        ChatRequest::from_openai_json(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn a_parsed_value_reads_as_its_bytes_do() {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":3}"#;
        let value: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            ChatRequest::from_openai_value(value).unwrap(),
            ChatRequest::from_openai_json(body.as_bytes()).unwrap()
        );
        for body in [
            r#"[1]"#,
            r#"{"messages":[]}"#,
            r#"{"messages":[],"top_p":"x"}"#,
        ] {
            let value: Value = serde_json::from_str(body).unwrap();
            assert_eq!(
                ChatRequest::from_openai_value(value).unwrap_err().message,
                err(body).message,
                "{body}"
            );
        }
        assert!(
            openai_object(b"{oops")
                .unwrap_err()
                .message
                .starts_with("We could not parse")
        );
    }

    #[test]
    fn a_full_request_is_read_and_unknown_fields_kept() {
        let r = ChatRequest::from_openai_json(
            br#"{"model":"auto","messages":[
                {"role":"system","content":"be brief"},
                {"role":"user","name":"ann","content":[{"type":"text","text":"hi "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1"}]}
            ],"max_completion_tokens":50,"max_tokens":9,"temperature":0.5,"top_p":1,
            "stop":"END","stream":true,"stream_options":{"include_usage":true},"seed":7}"#,
        )
        .unwrap();
        assert_eq!(r.model, "auto");
        assert_eq!(r.messages.len(), 3);
        assert_eq!(r.messages[1].extra["name"], "ann");
        assert_eq!(r.messages[1].content.as_ref().unwrap().text(), "hi ");
        assert_eq!(r.messages[2].content, None);
        assert!(r.messages[2].extra.contains_key("tool_calls"));
        assert_eq!((r.max_tokens, r.max_completion_tokens), (Some(50), true));
        assert_eq!((r.temperature, r.top_p), (Some(0.5), Some(1.0)));
        assert_eq!(r.stop, vec!["END"]);
        assert!(r.stream && r.wants_stream_usage());
        assert_eq!(
            r.extra.keys().collect::<Vec<_>>(),
            ["stream_options", "seed"]
        );
    }

    #[test]
    fn errors_name_the_field_like_openai() {
        let cases = [
            ("not json", "We could not parse the JSON body", None),
            ("[1]", "expected a JSON object, but got an array", None),
            (
                r#"{"model":"m"}"#,
                "Missing required parameter: 'messages'.",
                Some("messages"),
            ),
            (r#"{"messages":[]}"#, "empty array", Some("messages")),
            (
                r#"{"messages":"hi"}"#,
                "Invalid type for 'messages': expected an array, but got a string instead.",
                Some("messages"),
            ),
            (
                r#"{"messages":[{"role":"","content":"x"}]}"#,
                "Invalid 'messages[0].role': empty string.",
                Some("messages[0].role"),
            ),
            (
                r#"{"messages":[{"content":"x"}]}"#,
                "Missing required parameter: 'messages[0].role'.",
                Some("messages[0].role"),
            ),
            (
                r#"{"messages":[{"role":"user"}]}"#,
                "Missing required parameter: 'messages[0].content'.",
                Some("messages[0].content"),
            ),
            (
                r#"{"messages":[{"role":"user","content":5}]}"#,
                "Invalid type for 'messages[0].content'",
                Some("messages[0].content"),
            ),
            (
                r#"{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}"#,
                "Invalid type for 'messages[0].content[0].text'",
                Some("messages[0].content[0].text"),
            ),
            (
                r#"{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#,
                "Invalid type for 'temperature': expected a number, but got a string instead.",
                Some("temperature"),
            ),
            (
                r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}"#,
                "Invalid 'max_tokens'",
                Some("max_tokens"),
            ),
            (
                r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":1.5}"#,
                "Invalid 'max_tokens'",
                Some("max_tokens"),
            ),
            (
                r#"{"messages":[{"role":"user","content":"x"}],"stop":[1]}"#,
                "Invalid type for 'stop[0]'",
                Some("stop[0]"),
            ),
            (
                r#"{"messages":[{"role":"user","content":"x"}],"stream":"yes"}"#,
                "Invalid type for 'stream'",
                Some("stream"),
            ),
            (
                r#"{"model":3,"messages":[{"role":"user","content":"x"}]}"#,
                "Invalid type for 'model'",
                Some("model"),
            ),
        ];
        for (body, message, param) in cases {
            let e = err(body);
            assert!(e.message.contains(message), "{body}: {}", e.message);
            assert_eq!(e.param.as_deref(), param, "{body}");
            let json = e.to_openai_json();
            assert_eq!(json["error"]["type"], "invalid_request_error");
            assert_eq!(json["error"]["message"], e.message);
        }
    }

    #[test]
    fn estimated_tokens_counts_text_and_the_answer() {
        let mut r = ChatRequest::probe("m", "12345", 16);
        // 5 characters → 2 tokens, plus 16 for the answer.
        assert_eq!(r.estimated_tokens(), 18);
        r.system = Some("abc".into());
        assert_eq!(r.estimated_tokens(), 16 + 2);
        r.max_tokens = None;
        assert_eq!(
            r.estimated_tokens(),
            2 + DEFAULT_ESTIMATED_COMPLETION_TOKENS
        );
        r.messages[0].content = Some(Content::Parts(vec![
            serde_json::json!({"type":"text","text":"abcd"}),
            serde_json::json!({"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}}),
        ]));
        // 3 + 4 characters → 2 tokens; the image is not counted.
        assert_eq!(
            r.estimated_tokens(),
            2 + DEFAULT_ESTIMATED_COMPLETION_TOKENS
        );
        // Tool declarations and calls' arguments are read as prompt.
        let tools = serde_json::json!([{"type":"function","function":{"name":"f"}}]);
        let tools_chars = tools.to_string().chars().count() as u64;
        r.insert("tools".into(), tools);
        let mut call = ChatMessage::new("assistant", "");
        call.extra.insert(
            "tool_calls".into(),
            serde_json::json!([{"id":"c","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]),
        );
        r.messages.push(call);
        assert_eq!(
            r.estimated_tokens(),
            (7 + tools_chars + 7).div_ceil(4) + DEFAULT_ESTIMATED_COMPLETION_TOKENS
        );
    }

    #[test]
    fn a_tool_message_must_answer_an_earlier_call() {
        let req = |messages: &str| {
            ChatRequest::from_openai_json(format!(r#"{{"messages":{messages}}}"#).as_bytes())
                .unwrap()
        };
        let paired = req(r#"[{"role":"user","content":"q"},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"42"}]"#);
        assert!(paired.orphan_tool_result().is_none());
        let lone = req(
            r#"[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"c9","content":"42"}]"#,
        );
        let e = lone.orphan_tool_result().unwrap();
        assert_eq!(
            e.message,
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding \
             message with 'tool_calls'."
        );
        assert_eq!(e.param.as_deref(), Some("messages.[1].role"));
        // Without an id it is the upstream's to judge (local servers take
        // one).
        let unnamed = req(r#"[{"role":"user","content":"q"},{"role":"tool","content":"42"}]"#);
        assert!(unnamed.orphan_tool_result().is_none());
    }

    #[test]
    fn the_message_and_part_views_read_leniently() {
        let m = |extra: Value| ChatMessage {
            role: "assistant".into(),
            content: None,
            extra: extra.as_object().unwrap().clone(),
        };
        let calls = m(serde_json::json!({"tool_calls": [
            {"id": "a", "function": {"name": "f", "arguments": {"x": 1.5}}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": null}},
        ], "refusal": 7, "tool_call_id": "c"}));
        let read = calls.tool_calls(0).unwrap();
        assert_eq!(
            (read[0].arguments.as_str(), read[1].arguments.as_str()),
            (r#"{"x":1.5}"#, "")
        );
        assert_eq!((calls.refusal(), calls.tool_call_id()), (None, Some("c")));
        assert!(calls.makes_calls() && !calls.makes_non_function_calls());
        for bad in [
            serde_json::json!([3]),
            serde_json::json!([{"id": 1, "function": {"name": "f"}}]),
        ] {
            let e = m(serde_json::json!({"tool_calls": bad}))
                .tool_calls(2)
                .unwrap_err();
            assert!(e.to_string().contains("messages[2].tool_calls[0]"), "{e}");
        }
        assert!(
            m(serde_json::json!({"tool_calls": {}}))
                .tool_calls(0)
                .is_err()
        );
        assert!(!m(serde_json::json!({"tool_calls": null, "function_call": null})).makes_calls());
        let url = |p: Value| image_url_of(&p).map(str::to_string);
        assert_eq!(
            url(serde_json::json!({"image_url": "u"})).as_deref(),
            Some("u")
        );
        assert_eq!(
            url(serde_json::json!({"image_url": {"url": "v"}})).as_deref(),
            Some("v")
        );
        assert_eq!(url(serde_json::json!({"image_url": [{"url": "w"}]})), None);
        assert_eq!(part_type(&serde_json::json!({"type": 1})), "?");
        assert_eq!(part_type(&serde_json::json!(["text"])), "?");
    }
}
