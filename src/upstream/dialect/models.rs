//! A provider's own list of the models it serves (`GET {base}/models` and
//! its dialects' variants), read into one shape: what `llmprobe models`,
//! discovery and retirement compare the catalog with
//! (docs/discovery.md). Each dialect reads its own pages
//! ([`Wire::parse_models`](super::Wire::parse_models)); the facts every
//! list may carry are read here, once.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::outcome::{CapSet, Capability};

/// One model as a provider's list describes it. Only `id` is always
/// there; the rest is what that provider's list says, as hints that
/// probes confirm or refute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    pub id: String,
    /// `Some(true)` where the list says the model costs nothing (prices of
    /// `"0"`, an id ending in `:free`), `Some(false)` where it gives a
    /// price, `None` where it says nothing about price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// What the list says the model can do (tools, JSON, images).
    #[serde(default, skip_serializing_if = "no_caps")]
    pub capabilities: CapSet,
    /// The date the provider says it retires the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<NaiveDate>,
}

impl Listed {
    pub fn new(id: impl Into<String>) -> Listed {
        Listed {
            id: id.into(),
            free: None,
            context_window: None,
            max_output_tokens: None,
            capabilities: CapSet::default(),
            deprecated: None,
        }
    }
}

fn no_caps(c: &CapSet) -> bool {
    c.is_empty()
}

/// `{base}/models` with `pairs` in its query, each written safely (cursors
/// are opaque tokens).
pub(super) fn url_with(base_url: &str, pairs: &[(&str, &str)]) -> String {
    let plain = format!("{}/models", base_url.trim_end_matches('/'));
    match reqwest::Url::parse(&plain) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(pairs);
            url.into()
        }
        // Not a URL: the request fails and says so.
        Err(_) => plain,
    }
}

/// One page of a list, and the cursor of the next one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    /// The chat models of the page (embedding, image and retired entries
    /// left out where the list says so).
    pub models: Vec<Listed>,
    /// The cursor of the next page, for the dialect's
    /// [`Wire::models_url`](super::Wire::models_url).
    pub next: Option<String>,
}

/// A list that is not the shape the dialect documents: the reason, to be
/// reported on the provider's line (never the body, which may echo a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListError(pub String);

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The price OpenRouter and Together give, as strings (OpenRouter) or
/// numbers (Together): free when every price given is zero.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(super) struct Pricing {
    prompt: Option<Price>,
    completion: Option<Price>,
    input: Option<Price>,
    output: Option<Price>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Price {
    Text(String),
    Number(f64),
}

impl Price {
    fn is_zero(&self) -> Option<bool> {
        match self {
            Price::Text(s) => s.trim().parse::<f64>().ok().map(|v| v == 0.0),
            Price::Number(v) => Some(*v == 0.0),
        }
    }
}

impl Pricing {
    /// Free when at least one price is given and every given one is 0;
    /// `None` when no price can be read.
    pub(super) fn free(&self) -> Option<bool> {
        let given: Vec<bool> = [&self.prompt, &self.completion, &self.input, &self.output]
            .into_iter()
            .flatten()
            .map(Price::is_zero)
            .collect::<Option<Vec<bool>>>()?;
        (!given.is_empty()).then(|| given.iter().all(|z| *z))
    }
}

/// `:free` in an id is the list's own word for a free variant (OpenRouter).
pub(super) fn free_by_id(id: &str) -> bool {
    id.ends_with(":free")
}

/// A deprecation date as lists write it: `2026-12-01`, or an RFC 3339
/// time whose date is taken.
pub(super) fn date(s: &str) -> Option<NaiveDate> {
    let day = s.get(..10)?;
    NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()
}

/// The capabilities named by `tools`, `json` and `vision` flags.
pub(super) fn caps(tools: bool, json: bool, vision: bool) -> CapSet {
    let mut c = CapSet::default();
    if tools {
        c.insert(Capability::Tools);
    }
    if json {
        c.insert(Capability::Json);
    }
    if vision {
        c.insert(Capability::Vision);
    }
    c
}

/// Read `json` as `T`, naming the list's shape when it is another.
pub(super) fn read<T: serde::de::DeserializeOwned>(
    json: &serde_json::Value,
    shape: &str,
) -> Result<T, ListError> {
    T::deserialize(json).map_err(|e| ListError(format!("not {shape}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_decide_free_only_when_given() {
        let p: Pricing = serde_json::from_str(r#"{"prompt":"0","completion":"0"}"#).unwrap();
        assert_eq!(p.free(), Some(true));
        let p: Pricing =
            serde_json::from_str(r#"{"prompt":"0","completion":"0.0000004"}"#).unwrap();
        assert_eq!(p.free(), Some(false));
        let p: Pricing = serde_json::from_str(r#"{"input":0,"output":0}"#).unwrap();
        assert_eq!(p.free(), Some(true));
        let p: Pricing = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(p.free(), None);
        let p: Pricing = serde_json::from_str(r#"{"prompt":"n/a"}"#).unwrap();
        assert_eq!(p.free(), None);
    }

    use crate::upstream::dialect::{Dialect, wire};
    use serde_json::json;

    fn ids(p: &Page) -> Vec<&str> {
        p.models.iter().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn openai_lists_read_every_providers_additions() {
        let openrouter = json!({"data": [
            {"id": "meta/llama:free", "context_length": 131072,
             "pricing": {"prompt": "0", "completion": "0"},
             "supported_parameters": ["tools", "tool_choice", "response_format"],
             "architecture": {"input_modalities": ["text", "image"]},
             "top_provider": {"max_completion_tokens": 8192}},
            {"id": "openai/gpt-5", "pricing": {"prompt": "0.000001", "completion": "0.00001"}},
            {"id": "x/zero", "pricing": {"prompt": "0", "completion": "0"}},
            {"id": 7},
        ]});
        let p = wire(Dialect::Openai).parse_models(&openrouter).unwrap();
        assert_eq!(ids(&p), ["meta/llama:free", "openai/gpt-5", "x/zero"]);
        let free = &p.models[0];
        assert_eq!(free.free, Some(true));
        assert_eq!(free.context_window, Some(131072));
        assert_eq!(free.max_output_tokens, Some(8192));
        assert_eq!(free.capabilities, caps(true, true, true));
        assert_eq!(p.models[1].free, Some(false));
        assert_eq!(
            p.models[2].free,
            Some(true),
            "free by its prices, whatever the id"
        );
        assert_eq!(p.next, None);

        let mistral = json!({"object": "list", "data": [
            {"id": "mistral-small-latest", "max_context_length": 131072,
             "capabilities": {"completion_chat": true, "function_calling": true, "vision": true},
             "deprecation": "2027-03-01T00:00:00Z"},
            {"id": "mistral-embed", "capabilities": {"completion_chat": false}},
        ]});
        let p = wire(Dialect::Openai).parse_models(&mistral).unwrap();
        assert_eq!(ids(&p), ["mistral-small-latest"]);
        assert_eq!(p.models[0].capabilities, caps(true, false, true));
        assert_eq!(p.models[0].deprecated, NaiveDate::from_ymd_opt(2027, 3, 1));
        assert_eq!(p.models[0].free, None, "no price, no word on free");

        let together = json!([
            {"id": "meta-llama/Llama-3.3-70B-Instruct-Turbo-Free", "type": "chat",
             "context_length": 131072, "pricing": {"input": 0, "output": 0}},
            {"id": "BAAI/bge-large", "type": "embedding"},
        ]);
        let p = wire(Dialect::Openai).parse_models(&together).unwrap();
        assert_eq!(ids(&p), ["meta-llama/Llama-3.3-70B-Instruct-Turbo-Free"]);
        assert_eq!(p.models[0].free, Some(true));

        let groq = json!({"data": [
            {"id": "openai/gpt-oss-20b", "active": true, "context_window": 131072,
             "max_completion_tokens": 65536},
            {"id": "old", "active": false},
        ]});
        let p = wire(Dialect::Openai).parse_models(&groq).unwrap();
        assert_eq!(ids(&p), ["openai/gpt-oss-20b"]);
        assert_eq!(p.models[0].max_output_tokens, Some(65536));

        let err = wire(Dialect::Openai)
            .parse_models(&json!({"error": "nope"}))
            .unwrap_err();
        assert!(err.0.starts_with("not an OpenAI model list"), "{err}");
    }

    #[test]
    fn anthropic_lists_page_after_the_last_id() {
        let page = json!({"data": [{"type": "model", "id": "claude-a"}, {"type": "model", "id": "claude-b"}],
            "has_more": true, "first_id": "claude-a", "last_id": "claude-b"});
        let p = wire(Dialect::Anthropic).parse_models(&page).unwrap();
        assert_eq!(ids(&p), ["claude-a", "claude-b"]);
        assert_eq!(p.next.as_deref(), Some("claude-b"));
        let url = wire(Dialect::Anthropic).models_url("https://x/v1/", Some("claude b&c"));
        assert_eq!(url, "https://x/v1/models?limit=1000&after_id=claude+b%26c");
        let last = json!({"data": [], "has_more": false});
        assert_eq!(
            wire(Dialect::Anthropic).parse_models(&last).unwrap().next,
            None
        );
    }

    #[test]
    fn gemini_lists_keep_only_generate_content() {
        let page = json!({"models": [
            {"name": "models/gemini-2.5-flash", "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
             "supportedGenerationMethods": ["generateContent", "countTokens"]},
            {"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]},
        ], "nextPageToken": "abc"});
        let p = wire(Dialect::Gemini).parse_models(&page).unwrap();
        assert_eq!(ids(&p), ["gemini-2.5-flash"]);
        assert_eq!(p.models[0].context_window, Some(1048576));
        assert_eq!(p.next.as_deref(), Some("abc"));
        assert_eq!(
            wire(Dialect::Gemini).models_url("https://g/v1beta", Some("abc")),
            "https://g/v1beta/models?pageSize=1000&pageToken=abc"
        );
    }

    #[test]
    fn dates_read_days_and_times() {
        assert_eq!(date("2026-12-01"), NaiveDate::from_ymd_opt(2026, 12, 1));
        assert_eq!(
            date("2026-12-01T00:00:00Z"),
            NaiveDate::from_ymd_opt(2026, 12, 1)
        );
        assert_eq!(date("soon"), None);
    }
}
