//! What a request asks of the fake beyond its prompt: tools to call, a
//! tool result to answer, JSON output, images, an output cap and the
//! prompt's length. Each dialect's responder reads these from its own
//! fields (`fake/openai.rs`, …) into one [`Asks`]; what the fake does with
//! them is decided here, dialect-blind:
//!
//! - a request that declares tools, whose last message is not a tool
//!   result and whose tool choice is not "none", gets a call of the first
//!   tool (or the one the choice names), with arguments made from the
//!   tool's JSON schema by [`instance`];
//! - the `agent` behaviour instead calls a tool only when the last user
//!   turn holds a directive `[[call NAME {json args}]]` naming a declared
//!   tool ([`Asks::directed_call`]), with exactly those arguments and an
//!   id counted through the conversation (`fake_1`, `fake_2`, …; the
//!   other behaviours always use `fake_1`);
//! - a request whose last message is a tool result gets a text answer that
//!   quotes it: "The result is 84.";
//! - the question is read without the context coding agents wrap it in
//!   (Claude Code's `<system-reminder>`, Codex's `<environment_context>`:
//!   [`question`]), so that a date in it is not taken for the question;
//! - a request for JSON output gets JSON text: `{"answer": 84}` for a bare
//!   JSON mode, or an instance of the schema it gives, the answer in its
//!   first numeric field;
//! - the refusing behaviours (`no-tools`, `no-json`, `no-images`,
//!   `max-tokens:N`, `context-window:N`) refuse only a request that asks
//!   for what they refuse ([`refusal`]); any other request they answer
//!   like `ok`.

use base64::Engine as _;
use serde_json::{Map, Number, Value, json};

use super::arith;
use super::behaviour::Behaviour;
use crate::capabilities::glyphs;
use crate::upstream::dialect::JSON_TOOL;

/// A tool the request declares.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    /// Its parameters' JSON schema (`Null` when it has none).
    pub schema: Value,
}

/// Which tool the request lets the model call.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Choice {
    /// Any tool, or one must be called ("auto", "required", "any"): the
    /// fake calls the first.
    #[default]
    Auto,
    /// No tool: answer in text.
    None,
    /// This tool.
    Named(String),
}

/// JSON output, as the request asks for it.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// Any JSON object (`json_object`, a JSON MIME type without a schema).
    Object,
    /// An object of this schema.
    Schema(Value),
}

/// What one request asks for beyond its prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asks {
    pub tools: Vec<Tool>,
    pub choice: Choice,
    /// The last message is a tool result: its content, as text.
    pub tool_result: Option<String>,
    /// How many tool results the whole conversation holds: the calls
    /// answered so far, which numbers the `agent` behaviour's next call.
    pub results_so_far: usize,
    pub json: Option<Json>,
    /// Which flavour of JSON mode, for the refusal's wording
    /// (`json_object`, `json_schema`).
    pub json_kind: Option<String>,
    /// A message holds an image.
    pub image: bool,
    /// The base64 data of every PNG image the request holds inline (a
    /// `data:image/png;base64,…` URL, an Anthropic base64 source, a Gemini
    /// `inlineData`), for the fake to read ([`Asks::reading`]).
    pub pngs: Vec<String>,
    /// The output cap asked for: the field that holds it and its value.
    pub max_tokens: Option<(&'static str, u64)>,
    /// The prompt's length in tokens, estimated as `route` counts a
    /// request (docs/routing.md): characters of text divided by 4, rounded
    /// up.
    pub input_tokens: u64,
}

/// A call of one tool, as the fake makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// `call_…` (OpenAI) or `toolu_…` (Anthropic) is prefixed by the
    /// dialect; Gemini sends none.
    pub id: String,
    pub name: String,
    /// The arguments, an object.
    pub args: Value,
}

impl ToolCall {
    /// The arguments as JSON text, as OpenAI sends them.
    pub fn args_text(&self) -> String {
        self.args.to_string()
    }
}

/// The id the fake gives every tool call (each dialect adds its prefix).
pub const CALL_ID: &str = "fake_1";

impl Asks {
    /// The number the request's image shows, read from its pixels with the
    /// font the vision probe draws with ([`glyphs::read`]): the first PNG
    /// that reads.
    pub fn reading(&self) -> Option<u64> {
        self.pngs.iter().find_map(|data| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .ok()?;
            glyphs::read(&bytes)
        })
    }

    /// The tool call the fake answers `prompt` with, if any. Numeric
    /// arguments take the question's numbers, except for the tool that
    /// carries JSON mode on Anthropic ([`JSON_TOOL`]), whose input is the
    /// answer, `answer`, as JSON output would hold it.
    pub fn tool_call(&self, prompt: &str, answer: &str) -> Option<ToolCall> {
        if self.tool_result.is_some() {
            return None;
        }
        let tool = match &self.choice {
            Choice::None => return None,
            Choice::Auto => self.tools.first()?,
            Choice::Named(n) => self
                .tools
                .iter()
                .find(|t| &t.name == n)
                .or(self.tools.first())?,
        };
        let mut numbers = if tool.name == JSON_TOOL {
            answer.trim().parse::<f64>().ok().into_iter().collect()
        } else {
            arith::operands(prompt).unwrap_or_default()
        }
        .into_iter();
        let args = match instance(&tool.schema, None, &mut numbers) {
            Value::Object(m) => Value::Object(m),
            _ => json!({}),
        };
        Some(ToolCall {
            id: CALL_ID.to_string(),
            name: tool.name.clone(),
            args,
        })
    }

    /// The call a `[[call NAME {args}]]` directive in `prompt` (the last
    /// user turn's text) asks for: the first directive whose NAME is a
    /// declared tool and whose args are a JSON object, called with exactly
    /// those args, its id `fake_N` for the Nth call of the conversation.
    /// `None` when the turn holds none, the request declares no such tool,
    /// forbids calls, or its last message is a tool result.
    pub fn directed_call(&self, prompt: &str) -> Option<ToolCall> {
        if self.tool_result.is_some() || self.choice == Choice::None {
            return None;
        }
        directives(prompt)
            .find(|(name, _)| self.tools.iter().any(|t| t.name == *name))
            .map(|(name, args)| ToolCall {
                id: format!("fake_{}", self.results_so_far + 1),
                name: name.to_string(),
                args,
            })
    }

    /// The text answer: `answer` (the question's answer), or a sentence
    /// quoting the tool result; as JSON when JSON was asked for.
    pub fn text(&self, answer: &str) -> String {
        let value = self.tool_result.as_deref().unwrap_or(answer);
        match &self.json {
            None => match &self.tool_result {
                Some(r) => format!("The result is {r}."),
                None => answer.to_string(),
            },
            Some(Json::Object) => json!({"answer": number_or_text(value)}).to_string(),
            Some(Json::Schema(schema)) => {
                let mut numbers = value.trim().parse::<f64>().ok().into_iter();
                match instance(schema, None, &mut numbers) {
                    v @ Value::Object(_) => v.to_string(),
                    _ => json!({"answer": number_or_text(value)}).to_string(),
                }
            }
        }
    }
}

/// Where a directive begins.
const DIRECTIVE: &str = "[[call ";

/// Every well-formed `[[call NAME {json}]]` in `text`, in order: NAME runs
/// to the next white space, the arguments are one JSON object, and `]]`
/// follows it (white space allowed between). A directive's arguments are
/// not searched for others.
fn directives(text: &str) -> impl Iterator<Item = (&str, Value)> + '_ {
    let mut from = 0;
    std::iter::from_fn(move || {
        while let Some(at) = text[from..].find(DIRECTIVE) {
            let start = from + at + DIRECTIVE.len();
            from = start;
            if let Some((name, args, len)) = directive(&text[start..]) {
                from = start + len;
                return Some((name, args));
            }
        }
        None
    })
}

/// The directive whose head `[[call ` `rest` follows: its name, its
/// arguments, and the length of `rest` it takes up to its `]]`.
fn directive(rest: &str) -> Option<(&str, Value, usize)> {
    let name_at = rest.len() - rest.trim_start().len();
    let name_len = rest[name_at..].find(char::is_whitespace)?;
    let name = &rest[name_at..name_at + name_len];
    let json_at = rest.len() - rest[name_at + name_len..].trim_start().len();
    let mut values = serde_json::Deserializer::from_str(&rest[json_at..]).into_iter::<Value>();
    let args = values.next()?.ok().filter(Value::is_object)?;
    let after = json_at + values.byte_offset();
    let close = after + (rest[after..].len() - rest[after..].trim_start().len());
    (name_len > 0 && rest[close..].starts_with("]]")).then_some((name, args, close + 2))
}

/// The context coding agents wrap around what the user typed, each span
/// from its opening tag to its closing one: Claude Code's date and
/// reminders, Codex's working directory and shell.
const WRAPPERS: [(&str, &str); 2] = [
    ("<system-reminder>", "</system-reminder>"),
    ("<environment_context>", "</environment_context>"),
];

/// The user's own words in a turn's text: `prompt` without the spans in
/// [`WRAPPERS`], so that the numbers of a date in them are not taken for
/// the question's. A span left open is kept.
pub fn question(prompt: &str) -> std::borrow::Cow<'_, str> {
    let mut out = std::borrow::Cow::Borrowed(prompt);
    for (open, close) in WRAPPERS {
        while let Some(start) = out.find(open) {
            let Some(len) = out[start..].find(close) else {
                break;
            };
            let end = start + len + close.len();
            let mut s = out.into_owned();
            // A line break where the span was, so that the words on
            // either side stay apart.
            s.replace_range(start..end, "\n");
            out = std::borrow::Cow::Owned(s);
        }
    }
    out
}

/// Add one to the first number among `args`' fields (for `wrong-args`).
pub fn bump_first_number(args: &mut Value) {
    let Some(m) = args.as_object_mut() else {
        return;
    };
    if let Some(v) = m.values_mut().find(|v| v.is_number()) {
        *v = match v.as_i64() {
            Some(n) => json!(n.saturating_add(1)),
            None => json!(v.as_f64().unwrap_or(0.0) + 1.0),
        };
    }
}

/// `"84"` as the number 84, anything else as a string.
fn number_or_text(s: &str) -> Value {
    let t = s.trim();
    if let Ok(n) = t.parse::<i64>() {
        return json!(n);
    }
    t.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map_or_else(|| json!(s), Value::Number)
}

/// A value of `schema`, the same every time: the first of an `enum`, a
/// `const` or `default`; objects with their required properties (all of
/// them when the schema lists none); arrays of one item; strings
/// `"fake <property>"` (or a date, date-time, email or URI for those
/// formats); booleans true; integers 1 and numbers 1.5, except that
/// numeric fields take `numbers` in order first (the question's operands
/// for a tool call, the answer for JSON output). Types are read
/// case-blind, so Gemini's `"OBJECT"` schemas work; `anyOf` / `oneOf` /
/// `allOf` use their first branch.
pub fn instance(
    schema: &Value,
    name: Option<&str>,
    numbers: &mut dyn Iterator<Item = f64>,
) -> Value {
    let Some(s) = schema.as_object() else {
        return Value::Null;
    };
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|b| {
            b.iter()
                .find(|b| type_of(b).as_deref() != Some("null"))
                .or(b.first())
        }) {
            return instance(first, name, numbers);
        }
    }
    let ty = type_of(schema).unwrap_or_else(|| {
        if s.contains_key("properties") {
            "object".into()
        } else if s.contains_key("items") {
            "array".into()
        } else {
            String::new()
        }
    });
    match ty.as_str() {
        "integer" => numbers
            .next()
            .filter(|n| n.fract() == 0.0)
            .map(|n| json!(n as i64))
            .or_else(|| s.get("default").cloned())
            .unwrap_or(json!(1)),
        "number" => numbers
            .next()
            .map(|n| {
                if n.fract() == 0.0 {
                    json!(n as i64)
                } else {
                    json!(n)
                }
            })
            .or_else(|| s.get("default").cloned())
            .unwrap_or(json!(1.5)),
        _ if s.contains_key("default") => s["default"].clone(),
        "boolean" => json!(true),
        "string" => json!(match s.get("format").and_then(Value::as_str) {
            Some("date") => "2026-01-01".to_string(),
            Some("date-time") => "2026-01-01T00:00:00Z".to_string(),
            Some("email") => "fake@example.com".to_string(),
            Some("uri") => "https://example.com/".to_string(),
            _ => format!("fake {}", name.unwrap_or("text")),
        }),
        "array" => {
            let item = s
                .get("items")
                .map_or(Value::Null, |i| instance(i, name, numbers));
            json!([item])
        }
        "object" => {
            let mut out = Map::new();
            let props = s.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = match s.get("required").and_then(Value::as_array) {
                Some(r) => r.iter().filter_map(Value::as_str).collect(),
                None => props.map_or_else(Vec::new, |p| p.keys().map(String::as_str).collect()),
            };
            for key in required {
                let sub = props.and_then(|p| p.get(key)).unwrap_or(&Value::Null);
                out.insert(key.to_string(), instance(sub, Some(key), numbers));
            }
            Value::Object(out)
        }
        "null" => Value::Null,
        _ => json!(format!("fake {}", name.unwrap_or("text"))),
    }
}

/// A schema's type, lower case; the first that is not "null" of a list.
fn type_of(schema: &Value) -> Option<String> {
    let t = schema.get("type")?;
    let t = match t {
        Value::String(s) => s.as_str(),
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_str)
            .find(|t| !t.eq_ignore_ascii_case("null"))
            .or_else(|| list.first().and_then(Value::as_str))?,
        _ => return None,
    };
    Some(t.to_ascii_lowercase())
}

/// Why a refusing behaviour refuses a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Tools, in the wording of an OpenAI-compatible host (Groq), or of
    /// Ollama when `ollama`.
    Tools {
        ollama: bool,
    },
    /// JSON mode; `kind` is `json_object` or `json_schema` where the
    /// dialect names it.
    Json {
        kind: String,
    },
    Images,
    /// `asked` output tokens in `field`, above `cap`.
    MaxTokens {
        field: &'static str,
        asked: u64,
        cap: u64,
    },
    /// A prompt of `used` tokens, above `limit`.
    Context {
        limit: u64,
        used: u64,
    },
}

/// The refusal `b` answers `asks` with, if `b` is a refusing behaviour and
/// the request asks for what it refuses.
pub fn refusal(b: Behaviour, asks: &Asks) -> Option<Refusal> {
    match b {
        Behaviour::NoTools | Behaviour::OllamaNoTools if !asks.tools.is_empty() => {
            Some(Refusal::Tools {
                ollama: b == Behaviour::OllamaNoTools,
            })
        }
        Behaviour::NoJson if asks.json.is_some() => Some(Refusal::Json {
            kind: asks
                .json_kind
                .clone()
                .unwrap_or_else(|| "json_object".into()),
        }),
        Behaviour::NoImages if asks.image => Some(Refusal::Images),
        Behaviour::MaxTokens(cap) => match asks.max_tokens {
            Some((field, asked)) if asked > cap => Some(Refusal::MaxTokens { field, asked, cap }),
            _ => None,
        },
        Behaviour::ContextWindow(limit) if asks.input_tokens > limit => Some(Refusal::Context {
            limit,
            used: asks.input_tokens,
        }),
        _ => None,
    }
}

/// The characters of text in `v`: every string under a `text`, `content`
/// or `system` key (whole message content, text parts, system prompts),
/// never image data or tool schemas.
pub fn text_chars(v: &Value) -> u64 {
    fn walk(v: &Value, counted: bool) -> u64 {
        match v {
            Value::String(s) if counted => s.chars().count() as u64,
            Value::Array(items) => items.iter().map(|i| walk(i, counted)).sum(),
            Value::Object(m) => m
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "tools" | "response_format"))
                .map(|(k, v)| walk(v, matches!(k.as_str(), "text" | "content" | "system")))
                .sum(),
            _ => 0,
        }
    }
    walk(v, false)
}

/// [`text_chars`] as tokens, the way `route` estimates them.
pub fn estimated_tokens(v: &Value) -> u64 {
    text_chars(v).div_ceil(4)
}

/// A tool result's content as text: a string as it is, text blocks joined,
/// an object with one field as that field's value (Gemini wraps a plain
/// result as `{"result": …}`), anything else as JSON.
pub fn result_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) if parts.iter().all(|p| p.get("text").is_some()) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Value::Object(m) if m.len() == 1 => result_text(m.values().next().unwrap_or(&Value::Null)),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The base64 data of a `data:image/png;base64,…` URL.
pub fn png_of_data_url(url: &str) -> Option<String> {
    url.strip_prefix("data:image/png;base64,")
        .map(str::to_string)
}

/// A JSON schema's name for a `response_format` type, for refusals.
pub fn json_kind(format: &Value) -> Option<(Json, String)> {
    let kind = format.get("type").and_then(Value::as_str)?;
    let json = match kind {
        "json_object" => Json::Object,
        "json_schema" => match format.pointer("/json_schema/schema") {
            Some(s) if s.is_object() => Json::Schema(s.clone()),
            _ => Json::Object,
        },
        _ => return None,
    };
    Some((json, kind.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(list: &[(&str, Value)]) -> Vec<Tool> {
        list.iter()
            .map(|(n, s)| Tool {
                name: n.to_string(),
                schema: s.clone(),
            })
            .collect()
    }

    #[test]
    fn instances_follow_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "exact": {"type": "boolean"},
                "when": {"type": "string", "format": "date"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "at": {"type": "object", "properties": {"lat": {"type": "number"}},
                       "required": ["lat"]},
                "note": {"type": ["string", "null"]},
                "optional": {"type": "string"},
            },
            "required": ["city", "unit", "days", "exact", "when", "tags", "at", "note"],
        });
        let v = instance(&schema, None, &mut std::iter::empty());
        assert_eq!(
            v,
            json!({"city": "fake city", "unit": "celsius", "days": 1, "exact": true,
                   "when": "2026-01-01", "tags": ["fake tags"], "at": {"lat": 1.5},
                   "note": "fake note"})
        );
        // Gemini's upper-case types, and every property when none is required.
        let gemini = json!({"type": "OBJECT", "properties": {
            "a": {"type": "NUMBER"}, "b": {"type": "INTEGER"}, "c": {"type": "STRING"}}});
        let v = instance(&gemini, None, &mut [12.0, 7.0].into_iter());
        assert_eq!(v, json!({"a": 12, "b": 7, "c": "fake c"}));
        // An integer field does not take a fraction.
        let v = instance(&json!({"type": "integer"}), None, &mut [0.5].into_iter());
        assert_eq!(v, json!(1));
        assert_eq!(
            instance(
                &json!({"anyOf": [{"type": "null"}, {"const": 3}]}),
                None,
                &mut std::iter::empty()
            ),
            json!(3)
        );
    }

    #[test]
    fn the_first_or_the_chosen_tool_is_called_with_the_operands() {
        let calc = json!({"type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["b", "a"]});
        let mut asks = Asks {
            tools: tools(&[
                ("multiply", calc.clone()),
                (
                    "weather",
                    json!({"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]}),
                ),
            ]),
            ..Asks::default()
        };
        let c = asks.tool_call("What is 12*7?", "84").unwrap();
        assert_eq!(c.name, "multiply");
        // The operands go to the numeric fields in the order `required` lists them.
        assert_eq!(c.args, json!({"b": 12, "a": 7}));
        assert_eq!(c.args_text(), r#"{"b":12,"a":7}"#);
        asks.choice = Choice::Named("weather".into());
        let c = asks.tool_call("What is 12*7?", "84").unwrap();
        assert_eq!(
            (c.name.as_str(), c.args),
            ("weather", json!({"city": "fake city"}))
        );
        // Not arithmetic: defaults.
        asks.choice = Choice::Auto;
        assert_eq!(
            asks.tool_call("Hello", "84").unwrap().args,
            json!({"b": 1.5, "a": 1.5})
        );
        asks.choice = Choice::None;
        assert_eq!(asks.tool_call("What is 12*7?", "84"), None);
        asks.choice = Choice::Auto;
        asks.tool_result = Some("84".into());
        assert_eq!(asks.tool_call("What is 12*7?", "84"), None);
        assert_eq!(asks.text("84"), "The result is 84.");
        assert_eq!(Asks::default().tool_call("What is 12*7?", "84"), None);
    }

    #[test]
    fn json_answers_hold_the_answer() {
        let mut asks = Asks {
            json: Some(Json::Object),
            ..Asks::default()
        };
        assert_eq!(asks.text("84"), r#"{"answer":84}"#);
        assert_eq!(asks.text("2.5"), r#"{"answer":2.5}"#);
        assert_eq!(asks.text("hi"), r#"{"answer":"hi"}"#);
        asks.json = Some(Json::Schema(json!({"type": "object",
            "properties": {"explanation": {"type": "string"}, "value": {"type": "integer"}},
            "required": ["explanation", "value"], "additionalProperties": false})));
        assert_eq!(
            asks.text("84"),
            r#"{"explanation":"fake explanation","value":84}"#
        );
        asks.tool_result = Some("85".into());
        assert_eq!(
            asks.text("84"),
            r#"{"explanation":"fake explanation","value":85}"#
        );
    }

    #[test]
    fn refusals_need_what_they_refuse() {
        let plain = Asks {
            max_tokens: Some(("max_tokens", 16)),
            input_tokens: 10,
            ..Asks::default()
        };
        for b in [
            Behaviour::NoTools,
            Behaviour::OllamaNoTools,
            Behaviour::NoJson,
            Behaviour::NoImages,
            Behaviour::MaxTokens(8192),
            Behaviour::ContextWindow(8192),
            Behaviour::Ok(std::time::Duration::ZERO),
        ] {
            assert_eq!(refusal(b, &plain), None, "{b}");
        }
        let all = Asks {
            tools: tools(&[("t", Value::Null)]),
            json: Some(Json::Object),
            json_kind: Some("json_schema".into()),
            image: true,
            max_tokens: Some(("max_completion_tokens", 9000)),
            input_tokens: 9000,
            ..Asks::default()
        };
        assert_eq!(
            refusal(Behaviour::OllamaNoTools, &all),
            Some(Refusal::Tools { ollama: true })
        );
        assert_eq!(
            refusal(Behaviour::NoJson, &all),
            Some(Refusal::Json {
                kind: "json_schema".into()
            })
        );
        assert_eq!(refusal(Behaviour::NoImages, &all), Some(Refusal::Images));
        assert_eq!(
            refusal(Behaviour::MaxTokens(8192), &all),
            Some(Refusal::MaxTokens {
                field: "max_completion_tokens",
                asked: 9000,
                cap: 8192
            })
        );
        assert_eq!(refusal(Behaviour::MaxTokens(9000), &all), None);
        assert_eq!(
            refusal(Behaviour::ContextWindow(8192), &all),
            Some(Refusal::Context {
                limit: 8192,
                used: 9000
            })
        );
    }

    #[test]
    fn text_is_counted_as_route_counts_it() {
        let body = json!({
            "system": "abcd",
            "messages": [
                {"role": "user", "content": "12345678"},
                {"role": "user", "content": [
                    {"type": "text", "text": "abcd"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJDRA=="}},
                ]},
            ],
            "tools": [{"type": "function", "function": {"name": "long_tool_name"}}],
            "contents": [{"parts": [{"text": "ab"}, {"inlineData": {"data": "QUJD"}}]}],
        });
        assert_eq!(text_chars(&body), 4 + 8 + 4 + 2);
        assert_eq!(estimated_tokens(&body), 5);
    }

    #[test]
    fn images_drawn_by_the_vision_probe_are_read() {
        use base64::Engine as _;
        let png = glyphs::draw(4071);
        let asks = Asks {
            pngs: vec![
                "not base64!".into(),
                base64::engine::general_purpose::STANDARD.encode(b"not a png"),
                base64::engine::general_purpose::STANDARD.encode(&png),
            ],
            ..Asks::default()
        };
        assert_eq!(asks.reading(), Some(4071));
        assert_eq!(Asks::default().reading(), None);
        assert_eq!(
            png_of_data_url("data:image/png;base64,QUJD").as_deref(),
            Some("QUJD")
        );
        assert_eq!(png_of_data_url("data:image/jpeg;base64,QUJD"), None);
    }

    #[test]
    fn json_modes_tool_takes_the_answer_and_wrong_args_bump_a_number() {
        let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}},
                            "required": ["answer"]});
        let asks = Asks {
            tools: tools(&[(JSON_TOOL, schema)]),
            choice: Choice::Named(JSON_TOOL.into()),
            ..Asks::default()
        };
        let c = asks.tool_call("What is 12 * 7?", "84").unwrap();
        assert_eq!(c.args, json!({"answer": 84}));
        let mut args = json!({"x": "s", "a": 4, "b": 9});
        bump_first_number(&mut args);
        assert_eq!(args, json!({"x": "s", "a": 5, "b": 9}));
    }

    #[test]
    fn directives_name_a_tool_and_give_its_arguments() {
        fn found(text: &str) -> Vec<(&str, Value)> {
            directives(text).collect()
        }
        assert_eq!(
            found(r#"Read it: [[call Read {"file_path":"/x/notes.txt"}]] please"#),
            [("Read", json!({"file_path": "/x/notes.txt"}))]
        );
        // White space, nesting, `]]` inside a string, several in a turn.
        assert_eq!(
            found("[[call  a {\"s\": \"]] [[call b {}]]\", \"n\": {\"m\": [1]}}\n]] [[call b {}]]"),
            [
                ("a", json!({"s": "]] [[call b {}]]", "n": {"m": [1]}})),
                ("b", json!({}))
            ]
        );
        for bad in [
            "[[call Read]]",
            "[[call Read [1]]]",
            "[[call Read {\"a\": 1}",
            "[[call Read {\"a\": 1} trailing]]",
            "[[call Read {\"a\": }]]",
            "[[call {}]]",
            "[[Read {}]]",
        ] {
            assert_eq!(found(bad), [], "{bad}");
        }
        // Only a declared tool is called, numbered after the results so far.
        let mut asks = Asks {
            tools: tools(&[("Agent", Value::Null), ("Read", Value::Null)]),
            results_so_far: 2,
            ..Asks::default()
        };
        let text = r#"[[call Write {"x":1}]] then [[call Read {"file_path":"/x"}]]"#;
        assert_eq!(
            asks.directed_call(text),
            Some(ToolCall {
                id: "fake_3".into(),
                name: "Read".into(),
                args: json!({"file_path": "/x"})
            })
        );
        assert_eq!(asks.directed_call("What is 2+2?"), None);
        asks.choice = Choice::None;
        assert_eq!(asks.directed_call(text), None);
        asks.choice = Choice::Auto;
        asks.tool_result = Some("84".into());
        assert_eq!(asks.directed_call(text), None);
    }

    #[test]
    fn questions_are_read_without_their_wrapping() {
        assert_eq!(question("What is 2+2?"), "What is 2+2?");
        assert_eq!(
            question("<system-reminder>Today is 2026-12-07.</system-reminder>What is 2+2?"),
            "\nWhat is 2+2?"
        );
        assert_eq!(
            question(
                "<environment_context><current_date>2026-12-07</current_date>\
                 </environment_context>A<system-reminder>1</system-reminder>B\
                 <system-reminder>2</system-reminder>"
            ),
            "\nA\nB\n"
        );
        // A span left open is kept.
        assert_eq!(
            question("<system-reminder>2026-12-07 What is 2+2?"),
            "<system-reminder>2026-12-07 What is 2+2?"
        );
    }

    #[test]
    fn results_read_as_text() {
        assert_eq!(result_text(&json!("84")), "84");
        assert_eq!(result_text(&json!({"result": 84})), "84");
        assert_eq!(
            result_text(&json!([{"type": "text", "text": "8"}, {"type": "text", "text": "4"}])),
            "84"
        );
        assert_eq!(result_text(&json!({"a": 1, "b": 2})), r#"{"a":1,"b":2}"#);
    }
}
