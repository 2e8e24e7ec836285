//! What a provider said when it failed, from whichever of the known error
//! shapes its body has, and whether a 2xx body is a reply at all (or an
//! error object, an HTML page, nothing).
//!
//! The shape depends on the provider, not the dialect (OpenRouter, Mistral,
//! Cloudflare and NVIDIA all speak the OpenAI dialect but fail
//! differently), so one reader serves every dialect. Each shape is a type
//! whose fields are all [`Lax`]: a field of an unexpected type is absent,
//! never a reason to miss the rest of the error.

use serde::Deserialize;
use serde_json::Value;

use super::{ProviderError, ReplyError};

/// A value read as `T` when it is one, and as nothing otherwise: upstream
/// bodies are read leniently, field by field.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum Lax<T> {
    Is(T),
    Not(serde::de::IgnoredAny),
}

impl<T> Default for Lax<T> {
    fn default() -> Self {
        Lax::Not(serde::de::IgnoredAny)
    }
}

impl<T> Lax<T> {
    pub(super) fn get(&self) -> Option<&T> {
        match self {
            Lax::Is(v) => Some(v),
            Lax::Not(_) => None,
        }
    }

    pub(super) fn into_option(self) -> Option<T> {
        match self {
            Lax::Is(v) => Some(v),
            Lax::Not(_) => None,
        }
    }
}

/// A value read as `T` only when it is a JSON object: serde lets a struct
/// be read from an array too, which no upstream means.
#[derive(Debug, Clone)]
pub(super) struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// A field that is `Some` whenever it is there (`null` included), for the
/// fields whose mere presence counts.
pub(super) fn some<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Whether a field is there at all, `null` included, read without
/// keeping it.
pub(super) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

impl Lax<String> {
    /// The string, when it is one and not empty.
    fn non_empty(&self) -> Option<String> {
        self.get().filter(|s| !s.is_empty()).cloned()
    }
}

/// Every known error shape's top-level fields:
///
/// - OpenAI, Groq, llama.cpp, OpenRouter, Gemini:
///   `{"error":{"message","type"|"status","code"}}`
/// - Gemini through its OpenAI-compatible endpoint: the same in an array
/// - Anthropic: `{"type":"error","error":{"type","message"}}`
/// - Mistral: `{"object":"error","message","type","code"}`
/// - Ollama native: `{"error":"…"}`
/// - Cloudflare v4: `{"success":false,"errors":[{"code","message"}]}`
/// - NVIDIA problem JSON: `{"status":429,"title","detail"}`
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Envelope {
    error: Option<Value>,
    object: Lax<String>,
    message: Option<Value>,
    #[serde(rename = "type")]
    kind: Lax<String>,
    code: Option<Value>,
    success: Lax<bool>,
    errors: Lax<Vec<Lax<Obj<CloudflareError>>>>,
    status: Lax<u64>,
    title: Lax<String>,
    detail: Lax<String>,
}

/// The object under `error`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorObject {
    code: Option<Value>,
    /// Gemini's: the first `reason` names the failure best.
    details: Lax<Vec<Lax<Obj<Detail>>>>,
    #[serde(rename = "type")]
    kind: Lax<String>,
    status: Lax<String>,
    message: Option<Value>,
    /// OpenRouter's: `raw` holds the upstream's own words.
    metadata: Lax<Obj<Metadata>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Detail {
    reason: Lax<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Metadata {
    raw: Lax<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CloudflareError {
    code: Option<Value>,
    message: Option<Value>,
}

/// Parse an error body (any status) into what the provider said, if it has
/// one of the known shapes.
pub fn parse_error(body: &[u8]) -> Option<ProviderError> {
    error_from_json(&parse_json(&String::from_utf8_lossy(body))?)
}

/// JSON, tolerating what some servers put in front of it: a BOM, blank
/// lines, and SSE comment lines such as DeepSeek's `: keep-alive`.
pub fn parse_json(text: &str) -> Option<Value> {
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    while rest.starts_with(':') {
        rest = rest.split_once('\n').map_or("", |(_, r)| r).trim_start();
    }
    serde_json::from_str(rest).ok()
}

/// The error object in a body, if it is one of the shapes [`Envelope`]
/// lists.
pub(super) fn error_from_json(json: &Value) -> Option<ProviderError> {
    let mut json = json;
    while let Value::Array(a) = json {
        json = a.first()?;
    }
    if !json.is_object() {
        return None;
    }
    let Ok(e) = Envelope::deserialize(json) else {
        return None;
    };
    if let Some(err) = e.error.as_ref().and_then(error_from_json_inner) {
        return Some(err);
    }
    if e.object.get().map(String::as_str) == Some("error") {
        let (code, embedded_status) = code_and_status(e.code.as_ref());
        return Some(ProviderError {
            message: message_of(e.message.as_ref()).unwrap_or_default(),
            code: code.or_else(|| e.kind.non_empty()),
            embedded_status,
        });
    }
    if e.success.get() == Some(&false) {
        let first = e.errors.get().and_then(|a| a.first()).map(|f| {
            f.get()
                .map_or((None, None), |Obj(f)| (f.code.as_ref(), f.message.as_ref()))
        });
        let (code, message) = first.unwrap_or((None, None));
        return Some(ProviderError {
            message: message_of(message).unwrap_or_default(),
            code: code_and_status(code).0,
            embedded_status: None,
        });
    }
    if let (Some(status), Some(title)) = (e.status.get(), e.title.get()) {
        return Some(ProviderError {
            message: match e.detail.get() {
                Some(d) if !d.is_empty() => format!("{title}: {d}"),
                _ => title.clone(),
            },
            code: None,
            embedded_status: u16::try_from(*status).ok(),
        });
    }
    None
}

/// The object inside an `error` field, when it is given without the
/// wrapper (OpenRouter's per-choice error).
pub(super) fn error_from_json_inner(e: &Value) -> Option<ProviderError> {
    match e {
        Value::Object(_) => ErrorObject::deserialize(e).ok().map(from_error_object),
        Value::String(s) => Some(ProviderError {
            message: s.clone(),
            ..ProviderError::default()
        }),
        _ => None,
    }
}

fn from_error_object(e: ErrorObject) -> ProviderError {
    let (code, embedded_status) = code_and_status(e.code.as_ref());
    let reason = e
        .details
        .get()
        .and_then(|d| d.iter().find_map(|x| x.get()?.0.reason.get().cloned()));
    let code = reason
        .or(code)
        .or_else(|| e.kind.non_empty())
        .or_else(|| e.status.non_empty());
    let mut message = message_of(e.message.as_ref()).unwrap_or_default();
    // OpenRouter's message for upstream failures is only "Provider
    // returned error"; the upstream's own words are in metadata.raw.
    if let Some(raw) = e.metadata.get().and_then(|m| m.0.raw.get()) {
        message = format!("{message}: {raw}");
    }
    ProviderError {
        message,
        code,
        embedded_status,
    }
}

/// A `code` may be a string (`"rate_limit_exceeded"`) or a number, which
/// is an HTTP status when it is in range (OpenRouter, Gemini) and a
/// provider code otherwise (Cloudflare's 3036).
fn code_and_status(code: Option<&Value>) -> (Option<String>, Option<u16>) {
    match code {
        Some(Value::String(s)) if !s.is_empty() => (Some(s.clone()), None),
        Some(Value::Number(n)) => {
            match n
                .as_u64()
                .filter(|c| (100..600).contains(c))
                .and_then(|c| u16::try_from(c).ok())
            {
                Some(status) => (None, Some(status)),
                None => (Some(n.to_string()), None),
            }
        }
        _ => (None, None),
    }
}

/// Messages are usually strings; Mistral sometimes sends an object.
fn message_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// What a 2xx body is when it is a reply: it holds one of these. A body
/// with choices or candidates is a reply even if it also has an `error`
/// field; one without them that has an error object is an error.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReplyKeys {
    #[serde(deserialize_with = "present")]
    choices: bool,
    #[serde(deserialize_with = "present")]
    candidates: bool,
    #[serde(deserialize_with = "present")]
    content: bool,
}

/// A 2xx body as JSON, if it is a reply rather than an error object, an
/// HTML page or nothing.
pub(super) fn success_json(body: &[u8]) -> Result<Value, ReplyError> {
    let text = String::from_utf8_lossy(body);
    let json = match parse_json(&text) {
        Some(v) => v,
        None if text.trim().is_empty() => return Err(ReplyError::Empty),
        None if looks_like_html(&text) => return Err(ReplyError::Html(html_title(&text))),
        None => return Err(ReplyError::NotJson),
    };
    let has_reply = json.is_object()
        && ReplyKeys::deserialize(&json).is_ok_and(|k| k.choices || k.candidates || k.content);
    if !has_reply && let Some(err) = error_from_json(&json) {
        return Err(ReplyError::Embedded(err));
    }
    // Checked last, on a body parsed from the lossy text, so that an HTML
    // page, garbage or an error object with a bad byte in it is still
    // described as what it is.
    if let Err(e) = std::str::from_utf8(body) {
        return Err(ReplyError::NotUtf8(e.valid_up_to()));
    }
    Ok(json)
}

pub fn looks_like_html(text: &str) -> bool {
    let head: String = text.trim_start().chars().take(512).collect();
    let head = head.to_ascii_lowercase();
    head.starts_with("<!doctype html") || head.starts_with("<html") || head.contains("<body")
}

/// The text of an HTML page's `<title>`, else its first `<h1>`, with tags
/// removed and whitespace collapsed.
pub fn html_title(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    for tag in ["title", "h1"] {
        let Some(open) = lower.find(&format!("<{tag}")) else {
            continue;
        };
        let Some(gt) = lower[open..].find('>') else {
            continue;
        };
        let start = open + gt + 1;
        let Some(len) = lower[start..].find(&format!("</{tag}")) else {
            continue;
        };
        let inner = strip_tags(&text[start..start + len]);
        if !inner.is_empty() {
            return Some(inner.chars().take(100).collect());
        }
    }
    None
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_shapes() {
        type Case<'a> = (&'a [u8], &'a str, Option<&'a str>, Option<u16>);
        let cases: &[Case] = &[
            (
                br#"{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}"#,
                "Rate limit reached",
                Some("rate_limit_exceeded"),
                None,
            ),
            (
                br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                "Overloaded",
                Some("overloaded_error"),
                None,
            ),
            (
                br#"[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}]"#,
                "Quota exceeded",
                Some("RESOURCE_EXHAUSTED"),
                Some(429),
            ),
            (
                br#"{"object":"error","message":"Service tier capacity exceeded for this model.","type":"service_tier_capacity_exceeded","param":null,"code":"3505"}"#,
                "Service tier capacity exceeded for this model.",
                Some("3505"),
                None,
            ),
            (
                br#"{"success":false,"errors":[{"code":3036,"message":"Capacity temporarily exceeded"}],"messages":[],"result":null}"#,
                "Capacity temporarily exceeded",
                Some("3036"),
                None,
            ),
            (
                br#"{"status":429,"title":"Too Many Requests"}"#,
                "Too Many Requests",
                None,
                Some(429),
            ),
            (
                br#"{"error":"model 'llama9' not found"}"#,
                "model 'llama9' not found",
                None,
                None,
            ),
        ];
        for (body, message, code, status) in cases {
            let e =
                parse_error(body).unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(body)));
            assert_eq!(e.message, *message);
            assert_eq!(e.code.as_deref(), *code);
            assert_eq!(e.embedded_status, *status);
        }
        assert_eq!(parse_error(b"not json"), None);
        assert_eq!(parse_error(br#"{"choices":[]}"#), None);
    }

    #[test]
    fn gemini_reason_wins_over_status() {
        let body = br#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}"#;
        let e = parse_error(body).unwrap();
        assert_eq!(e.code.as_deref(), Some("API_KEY_INVALID"));
        assert_eq!(e.embedded_status, Some(400));
    }
}
