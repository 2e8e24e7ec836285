//! What the fake provider does differently per dialect, behind one trait:
//! [`DialectResponder`], with one implementation per dialect in its own file
//! (`fake/openai.rs`, `fake/anthropic.rs`, `fake/gemini.rs`), looked up by
//! `fake::responder` the way `upstream::dialect::wire` looks up the client
//! side.
//!
//! The dispatcher in `fake.rs` and the stream player in `fake/stream.rs`
//! stay dialect-blind: they ask the responder for the key, the prompt, a
//! body, an error or a stream's events. A new dialect is one new file and
//! one arm in `fake::responder`.

use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::watch;

use super::asks::{Asks, Refusal, ToolCall};
use super::stream::{self, Answer, Ending, Mode, Step};

/// Token counts the fake reports as usage.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub input: usize,
    pub output: usize,
}

impl Usage {
    /// The prompt's words plus a few for the template, and at least one
    /// output token.
    pub fn of(prompt: &str, text: &str) -> Usage {
        Usage {
            input: prompt.split_whitespace().count() + 8,
            output: text.split_whitespace().count().max(1),
        }
    }

    /// As [`Usage::of`], but an empty streamed answer has no output tokens.
    fn of_stream(a: &Answer<'_>) -> Usage {
        let u = Usage::of(a.prompt, a.text);
        Usage {
            output: if a.empty { 0 } else { u.output },
            ..u
        }
    }
}

/// Why the real provider refuses a request's conversation: its message,
/// and the field at fault (OpenAI's `param`, `messages.[3].role`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub message: String,
    pub param: Option<String>,
}

impl Malformed {
    pub fn new(message: impl Into<String>) -> Malformed {
        Malformed {
            message: message.into(),
            param: None,
        }
    }

    pub fn at(message: impl Into<String>, param: impl Into<String>) -> Malformed {
        Malformed {
            message: message.into(),
            param: Some(param.into()),
        }
    }
}

/// A stream's events, and the index of its first content chunk (none for an
/// empty answer).
pub type Steps = (Vec<Step>, Option<usize>);

/// A failure every dialect answers in its own words, as
/// [`DialectResponder::failure`] writes it.
#[derive(Debug, Clone, Copy)]
pub enum Failure<'a> {
    E500,
    /// 529.
    Overloaded,
    E503,
    /// A bad key.
    Unauthorized,
    Forbidden,
    ContextLength,
    NotFound {
        model: &'a str,
    },
    /// The model is gone: OpenAI's dialect answers Groq's 400
    /// `model_decommissioned`; the others, their "not found" 404.
    Decommissioned {
        model: &'a str,
    },
    /// A 500 of the fake's own (a models file it cannot read), in the
    /// dialect's envelope.
    Internal {
        message: &'a str,
    },
    /// A 401 that quotes the key back, as some providers do. Redaction must
    /// catch this before it reaches a log.
    EchoKey {
        key: &'a str,
    },
}

/// One dialect's side of the fake: reading its requests and writing its
/// answers, errors and streams, shaped as captured responses (docs/providers.md).
pub trait DialectResponder: Sync {
    /// The API key sent, from wherever this dialect puts it.
    fn api_key(&self, headers: &HeaderMap, uri: &Uri) -> Option<String>;

    /// A header the real provider requires and the request lacks, as the
    /// message it would answer with.
    fn missing_header(&self, _headers: &HeaderMap) -> Option<&'static str> {
        None
    }

    /// The text of the last user turn.
    fn prompt(&self, body: &Value) -> Option<String>;

    /// What the request asks for beyond its prompt: tools, a tool result,
    /// JSON output, images, an output cap (`fake/asks.rs`).
    fn asks(&self, body: &Value) -> Asks;

    /// Why a request without a user turn is rejected.
    fn no_prompt(&self) -> &'static str {
        "messages: a user message is required"
    }

    /// How the client asked to stream: by the path (`from_path`, Gemini's
    /// `:streamGenerateContent`) or by the body (`"stream": true`).
    fn stream_mode(&self, _from_path: Option<Mode>, body: &Value) -> Option<Mode> {
        (body.get("stream") == Some(&Value::Bool(true))).then_some(Mode::Sse)
    }

    /// A completed answer with `text` as the model's output.
    fn success(&self, model: &str, text: &str, truncated: bool, usage: Usage) -> Value;

    /// A completed answer that calls a tool.
    fn tool_success(&self, model: &str, call: &ToolCall, usage: Usage) -> Value;

    /// The field of [`success`](Self::success) that holds the answer, which
    /// an empty answer leaves as `[]`.
    fn answers_field(&self) -> &'static str;

    /// A conversation the real provider refuses for its shape (a tool
    /// result that answers no call, a call left unanswered, a role it does
    /// not know, empty content), as the 400 it answers with; `None` for a
    /// well-formed one. The dispatcher asks before any behaviour runs, so
    /// that every behaviour, failing ones too, refuses what the provider
    /// would refuse.
    fn malformed(&self, _headers: &HeaderMap, _body: &Value) -> Option<Malformed> {
        None
    }

    /// A malformed request, rejected the way the real provider would:
    /// `message`, and the field at fault where the dialect's errors name
    /// one (OpenAI's `param`).
    fn bad_request(&self, message: &str, param: Option<&str>) -> Response;
    /// 429 with a [`RETRY_SECS`](super::respond::RETRY_SECS) wait.
    fn rate_limit(&self) -> Response;
    /// `f`, in this dialect's envelope and the real provider's words.
    fn failure(&self, f: Failure<'_>) -> Response;
    /// The 400 a model that cannot take what the request asks for answers
    /// with, in a real provider's wording.
    fn refuse(&self, why: &Refusal, model: &str) -> Response;

    /// The whole stream of `a`, already cut into `pieces`, and the index of
    /// its first content chunk (none for an empty answer).
    fn stream_steps(&self, a: &Answer<'_>, pieces: &[&str], usage: Usage) -> Steps;

    /// The whole stream of a tool call, its arguments' JSON text already cut
    /// into `pieces`, and the index of its first content chunk.
    fn tool_steps(&self, a: &Answer<'_>, call: &ToolCall, pieces: &[&str], usage: Usage) -> Steps;

    /// The error an upstream sends inside a stream that has already begun.
    fn stream_error(&self, a: &Answer<'_>) -> Step;

    /// The streamed response for `a`, ending as `ending` says.
    fn stream(
        &self,
        a: &Answer<'_>,
        mode: Mode,
        ending: Ending,
        shutdown: watch::Receiver<bool>,
    ) -> Response {
        let pieces = stream::pieces(a.text);
        let usage = Usage::of_stream(a);
        let (steps, first_content) = match a.tool {
            Some(call) => self.tool_steps(a, call, &pieces, usage),
            None => self.stream_steps(a, &pieces, usage),
        };
        let error = self.stream_error(a);
        stream::respond(steps, first_content, error, mode, ending, shutdown)
    }
}

/// A header's trimmed, non-empty value.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// A turn's text: content is a string or a list of parts/blocks with
/// "text".
pub fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    }
}

/// A message's or turn's `role`.
pub fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// The last message with role `user` in `messages`, as OpenAI and Anthropic
/// both send them.
pub fn last_user_message(body: &Value) -> Option<String> {
    body.get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| text_of(m.get("content")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    use strum::IntoEnumIterator as _;

    use crate::fake::{Dialect, responder};

    #[test]
    fn answers_field_holds_the_answer_in_every_dialect() {
        let usage = Usage {
            input: 9,
            output: 1,
        };
        for d in Dialect::iter() {
            let r = responder(d);
            let v = r.success("m", "42", false, usage);
            let answers = v[r.answers_field()].as_array();
            assert_eq!(answers.map(Vec::len), Some(1), "{d:?}: {v}");
            assert!(v.to_string().contains("\"42\""), "{d:?}: {v}");
        }
    }

    #[test]
    fn text_is_read_from_strings_and_parts() {
        assert_eq!(text_of(&serde_json::json!("hi")).as_deref(), Some("hi"));
        let parts = serde_json::json!([{"text": "a"}, {"image": 1}, {"text": "b"}]);
        assert_eq!(text_of(&parts).as_deref(), Some("ab"));
        assert_eq!(text_of(&serde_json::json!(3)), None);
        let body = serde_json::json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "last"},
        ]});
        assert_eq!(last_user_message(&body).as_deref(), Some("last"));
    }
}
