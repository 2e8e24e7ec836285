//! What a request needs from the model that serves it, and which needs
//! each dialect can carry at all.
//!
//! `route` works a request's [`Needs`] out once, before it picks a
//! candidate, and passes over (`skip:<need>` in the trail) every candidate
//! that cannot meet one, instead of sending what would fail or lose part of
//! the request. "Cannot" comes from three places, checked in this order:
//! the dialect ([`Dialect::carries`], which each dialect answers), the model's catalog data (its
//! context window), and what an upstream said in a 400 that named the
//! capability (remembered for a day by the route state).
//!
//! The names are the trail's vocabulary (`docs/routing.md`): `tools`,
//! `json`, `vision`, `image_url`, `n`, `audio`, `suffix`, `context`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::request::{ChatRequest, Content, Part};
use super::{Dialect, wire};

/// One thing a request needs from the model.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Need {
    /// `tools` (or the older `functions`), or a conversation that already
    /// holds tool calls or tool results.
    Tools,
    /// `response_format` of type `json_object` or `json_schema`.
    Json,
    /// An image in a message, of any kind.
    Vision,
    /// An image given by an `http(s)` URL rather than inline data: some
    /// dialects take only inline images.
    ImageUrl,
    /// `n` above 1: several choices in one reply.
    N,
    /// An audio part (`input_audio`) in a message, or audio output.
    Audio,
    /// A text completion's `suffix` (fill-in-the-middle).
    Suffix,
    /// A prompt longer than the model's context window.
    Context,
}

impl Need {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The need in a sentence: "it has tools".
    pub fn phrase(self) -> &'static str {
        match self {
            Need::Tools => "it has tools",
            Need::Json => "it asks for JSON output",
            Need::Vision => "it has an image",
            Need::ImageUrl => "it has an image given by URL",
            Need::N => "it asks for several choices (n > 1)",
            Need::Audio => "it has audio",
            Need::Suffix => "it has a suffix",
            Need::Context => "it is longer than the context window",
        }
    }

    /// What a model that cannot meet it lacks: "carry tools".
    pub fn ability(self) -> &'static str {
        match self {
            Need::Tools => "carry tools",
            Need::Json => "return JSON",
            Need::Vision => "read images",
            Need::ImageUrl => "fetch images by URL",
            Need::N => "return several choices",
            Need::Audio => "take audio",
            Need::Suffix => "complete with a suffix",
            Need::Context => "hold a prompt this long",
        }
    }
}

/// Every need of one request, in a fixed order.
pub type Needs = BTreeSet<Need>;

impl ChatRequest {
    /// The `type` of the request's `response_format` (`json_object`,
    /// `json_schema`, `text`), if it names one.
    pub fn json_format(&self) -> Option<&str> {
        self.response_format.as_ref()?.read.kind.as_deref()
    }

    /// What this request needs from the model that serves it. The prompt's
    /// length against a context window ([`Need::Context`]) depends on the
    /// model, so the router adds it per candidate; it is never in here.
    pub fn needs(&self) -> Needs {
        let mut out = Needs::new();
        let non_empty = |field: &str| {
            self.extra
                .get(field)
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
        };
        let tools = self
            .tools
            .as_ref()
            .is_some_and(|t| !t.raw.is_null() && t.raw.as_array().is_none_or(|a| !a.is_empty()));
        if tools || non_empty("functions") {
            out.insert(Need::Tools);
        }
        if matches!(self.json_format(), Some("json_object" | "json_schema")) {
            out.insert(Need::Json);
        }
        if self.several_choices() {
            out.insert(Need::N);
        }
        if non_empty("suffix") {
            out.insert(Need::Suffix);
        }
        if self
            .extra
            .get("modalities")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|x| x == "audio"))
            || non_empty("audio")
        {
            out.insert(Need::Audio);
        }
        for m in &self.messages {
            if matches!(m.role.as_str(), "tool" | "function") || m.makes_calls() {
                out.insert(Need::Tools);
            }
            let Some(Content::Parts(parts)) = &m.content else {
                continue;
            };
            for p in parts.iter().map(Part::of) {
                match p.kind() {
                    Some("image_url") => {
                        out.insert(Need::Vision);
                        if p.image_url().is_some_and(|u| !u.starts_with("data:")) {
                            out.insert(Need::ImageUrl);
                        }
                    }
                    Some("input_audio") => {
                        out.insert(Need::Audio);
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

impl ChatRequest {
    /// The need this request has in a form only the OpenAI dialect
    /// carries, if any: the legacy `functions` / `function_call` (and
    /// `function` messages), or tools and tool calls of a type other than
    /// `function` (OpenAI's built-in tools). Both are [`Need::Tools`] in the
    /// trail; other dialects take only function tools, in the current form.
    pub fn openai_only(&self) -> Option<Need> {
        let set = |m: &serde_json::Map<String, Value>, f: &str| {
            m.get(f)
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
        };
        let legacy = set(&self.extra, "functions")
            || set(&self.extra, "function_call")
            || self.tools.as_ref().is_some_and(|t| t.read.other_type)
            || self.messages.iter().any(|m| {
                m.role == "function"
                    || set(&m.extra, "function_call")
                    || m.makes_non_function_calls()
            });
        legacy.then_some(Need::Tools)
    }
}

impl Dialect {
    /// Whether this dialect can carry `need` at all, whatever the model
    /// ([`Facts::carries`](super::Facts::carries): each dialect says). A context window belongs
    /// to the model, so every dialect carries [`Need::Context`]; none
    /// carries [`Need::Suffix`], as they all speak chat endpoints.
    pub fn carries(self, need: Need) -> bool {
        wire(self).carries(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    fn needs(body: &str) -> Vec<&'static str> {
        ChatRequest::from_openai_json(body.as_bytes())
            .unwrap()
            .needs()
            .into_iter()
            .map(Need::as_str)
            .collect()
    }

    #[test]
    fn a_plain_request_needs_nothing() {
        assert!(needs(r#"{"messages":[{"role":"user","content":"hi"}]}"#).is_empty());
        assert!(
            needs(r#"{"messages":[{"role":"user","content":"hi"}],"tools":[],"n":1}"#).is_empty()
        );
    }

    #[test]
    fn each_need_is_found_where_clients_put_it() {
        assert_eq!(
            needs(
                r#"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}"#
            ),
            ["tools"]
        );
        assert_eq!(
            needs(
                r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]},{"role":"tool","tool_call_id":"c","content":"4"}]}"#
            ),
            ["tools"]
        );
        assert_eq!(
            needs(
                r#"{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}"#
            ),
            ["json"]
        );
        assert!(
            needs(
                r#"{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"text"}}"#
            )
            .is_empty()
        );
        assert_eq!(
            needs(
                r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}"#
            ),
            ["vision"]
        );
        assert_eq!(
            needs(
                r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"input_audio","input_audio":{}}]}],"n":3}"#
            ),
            ["vision", "image_url", "n", "audio"]
        );
    }

    #[test]
    fn legacy_functions_and_built_in_tools_are_openai_only() {
        let req = |body: &str| ChatRequest::from_openai_json(body.as_bytes()).unwrap();
        let plain = req(
            r#"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}"#,
        );
        assert_eq!(plain.openai_only(), None);
        for body in [
            r#"{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}"#,
            r#"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search"}]}"#,
            r#"{"messages":[{"role":"user","content":"hi"},{"role":"function","name":"f","content":"4"}]}"#,
        ] {
            assert_eq!(req(body).openai_only(), Some(Need::Tools), "{body}");
        }
    }

    #[test]
    fn openai_carries_everything_but_a_suffix_and_the_names_are_the_trails() {
        for n in Need::iter() {
            assert_eq!(Dialect::Openai.carries(n), n != Need::Suffix, "{n:?}");
            let name: &str = n.into();
            assert_eq!(name.parse::<Need>().unwrap(), n);
            assert_eq!(serde_json::to_value(n).unwrap(), name);
        }
        assert!(!Dialect::Gemini.carries(Need::ImageUrl));
        assert!(!Dialect::Anthropic.carries(Need::N));
        // A chat endpoint does not fill in the middle, whatever its dialect.
        for d in Dialect::iter() {
            assert!(!d.carries(Need::Suffix), "{d:?}");
            assert!(d.carries(Need::Context), "{d:?}");
        }
    }
}
