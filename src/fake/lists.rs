//! Providers' model lists, as the fake serves them: `GET {prefix}/models`
//! in each dialect, in the shapes docs/discovery.md describes (each
//! dialect's list endpoint and paging), paged where the provider pages.
//!
//! **Which dialect.** The path is the same for all three, so the headers
//! decide: `x-goog-api-key` or `?key=` is Gemini's, `x-api-key` or
//! `anthropic-version` Anthropic's, `Authorization` OpenAI's; a request
//! with none of these (a keyless provider) is Gemini's under a `v1beta`
//! path segment (not `…/v1beta/openai/…`), else OpenAI's.
//!
//! **Which flavour of OpenAI's.** A path segment of the base URL names it:
//! `/openrouter/` answers OpenRouter's shape (prices as strings, `"0"` when
//! free; `supported_parameters`; `architecture.input_modalities`;
//! `top_provider.max_completion_tokens`), `/mistral/` Mistral's
//! (`capabilities`, `max_context_length`, `deprecation`, `aliases`),
//! `/together/` Together's bare array (`type`, `context_length`,
//! `pricing`), `/groq/` Groq's (`active`, `context_window`,
//! `max_completion_tokens`); any other path the plain
//! `{"object":"list","data":[…]}`. The first such segment counts.
//!
//! **Paging.** Anthropic's (`limit`, `after_id`, `before_id`; `has_more`,
//! `first_id`, `last_id`) and Gemini's (`pageSize`, `pageToken`;
//! `nextPageToken`) pages hold at most [`PAGE`] models, or fewer when the
//! client asks for fewer, so that a client that does not follow pages
//! misses models. OpenAI's lists are one page, as the providers send them.
//!
//! **Which models.** The `--models-file` ([`MODELS_FILE_HELP`]), read again
//! for every list request, so that a test drops a model by rewriting it;
//! without one, every model named in `--script`. A file that cannot be read
//! or parsed answers 500 naming the file. Gemini's list always holds an
//! embedding model (no `generateContent`), so that a client must filter.
//!
//! **Failing.** `--list-behaviour [SCOPE=]B1,B2,…` ([`LIST_HELP`]).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use axum::extract::Query;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header::RETRY_AFTER};
use axum::response::Response;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use super::behaviour::Behaviour;
use super::respond::{self, json_response};
use super::responder::{Failure, header};
use super::{Dialect, Inner, RecordedRequest, responder};
use crate::error::{Error, Result};

/// The most models on one page of a paged list.
pub const PAGE: usize = 2;

/// When every listed model was created: 2025-01-01T00:00:00Z.
const CREATED: i64 = 1_735_689_600;
const CREATED_AT: &str = "2025-01-01T00:00:00Z";

/// The embedding model Gemini's list holds when the file names none.
const GEMINI_EMBEDDING: &str = "text-embedding-004";

/// The help of `fake-provider --models-file`.
pub const MODELS_FILE_HELP: &str = "Serve the model lists (GET …/models, in every dialect) from this JSON file, read again on every list request, so that a test drops a model by rewriting it (without this flag: every model named in --script). The dialect is read from the headers: x-goog-api-key or ?key= is Gemini (keyless: a v1beta path segment), x-api-key or anthropic-version Anthropic, else OpenAI; OpenAI's flavour is a path segment of the base URL: /openrouter/, /mistral/, /together/ and /groq/ answer those providers' shapes, any other path the plain one. Anthropic's (limit, after_id) and Gemini's (pageSize, pageToken) lists hold at most 2 models a page. The file is a JSON array of entries, all fields but id optional: {\"id\": \"m\", \"free\": true, \"context\": 131072, \"max_output\": 8192, \"tools\": true, \"json\": true, \"vision\": false, \"deprecation\": \"2027-01-01\", \"kind\": \"chat\" or \"embedding\", \"aliases\": [\"m-latest\"], \"listed\": true, \"behaviour\": \"decommissioned\"}. free defaults to whether the id ends in :free (written as given); booleans default to false, kind to chat, listed to true; a number not given is null. Each shape renders the fields it has: OpenRouter pricing \"0\" when free (else \"0.0000002\" and \"0.0000008\"), supported_parameters tools and tool_choice for tools, response_format and structured_outputs for json, input_modalities image for vision, context_length, top_provider.max_completion_tokens, expiration_date from deprecation; Mistral capabilities.{completion_chat, function_calling, vision}, max_context_length, deprecation (as written), aliases; Together type, context_length, pricing (0 when free); Groq active, context_window, max_completion_tokens; Gemini inputTokenLimit, outputTokenLimit, supportedGenerationMethods (generateContent for chat, embedContent for embedding); Anthropic and OpenRouter leave embedding models out. listed: false keeps an entry out of every list; behaviour (B1,B2,… as in --script) is what chat requests for that model get, before --script: so one rewrite drops a model and makes it answer decommissioned. A file that cannot be read or parsed (an unknown field too) answers every list request, and every chat request, with a 500 naming the file.";

/// The list behaviours' names.
pub const LIST_NAMES: &str = "ok, ok:MS, slow:MS, needs-key, unauthorized, forbidden, not-found, \
rate-limit, retry-after:N, e500, e503, overloaded, html, html200, garbage, error-in-200, reset, hang-headers";

/// The long help of `fake-provider --list-behaviour`.
pub fn list_help() -> String {
    format!(
        "Make the model lists (GET …/models) fail: [SCOPE=]B1,B2,… cycled per list request it \
         applies to (repeatable; the first whose SCOPE matches applies). SCOPE is a dialect \
         (openai, anthropic, gemini) or a segment of the request's path (groq for \
         /groq/openai/v1/models); without one, every list. Without this flag every list \
         answers.\n\nBehaviours: {LIST_NAMES}. They answer as --script's do, in the dialect's \
         shape: unauthorized 401 (Gemini: 400 API_KEY_INVALID), html200 a 200 HTML page, \
         e500 500; not-found is a 404 for the URL, as a provider with no list endpoint \
         answers. needs-key answers 401 to a request without a key and the list to one with \
         a key (keyless requests are served otherwise, as the chat endpoints serve them). \
         ok:MS and slow:MS answer the list after MS milliseconds."
    )
}

/// What a model's entry in the models file says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Chat,
    Embedding,
}

/// One model of the models file ([`MODELS_FILE_HELP`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub id: String,
    /// Free to use; unset: whether the id ends in `:free`.
    #[serde(default)]
    pub free: Option<bool>,
    /// The context window, in tokens.
    #[serde(default)]
    pub context: Option<u64>,
    /// The output cap, in tokens.
    #[serde(default)]
    pub max_output: Option<u64>,
    #[serde(default)]
    pub tools: bool,
    #[serde(default)]
    pub json: bool,
    #[serde(default)]
    pub vision: bool,
    /// A date, written as given.
    #[serde(default)]
    pub deprecation: Option<String>,
    #[serde(default)]
    pub kind: Kind,
    /// Mistral's other names for the model.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// In the lists; `false` keeps it out while `behaviour` still applies.
    #[serde(default = "listed")]
    pub listed: bool,
    /// What chat requests for this model get, cycled, before `--script`.
    #[serde(default, deserialize_with = "behaviours")]
    pub behaviour: Option<Vec<Behaviour>>,
}

fn listed() -> bool {
    true
}

fn behaviours<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Vec<Behaviour>>, D::Error> {
    let Some(s) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    s.split(',')
        .map(|b| b.trim().parse::<Behaviour>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map(Some)
        .map_err(serde::de::Error::custom)
}

impl Entry {
    /// A chat model known by its id only.
    pub fn new(id: &str) -> Entry {
        Entry {
            id: id.to_string(),
            free: None,
            context: None,
            max_output: None,
            tools: false,
            json: false,
            vision: false,
            deprecation: None,
            kind: Kind::Chat,
            aliases: Vec::new(),
            listed: true,
            behaviour: None,
        }
    }

    pub fn is_free(&self) -> bool {
        self.free.unwrap_or_else(|| self.id.ends_with(":free"))
    }

    fn is_chat(&self) -> bool {
        self.kind == Kind::Chat
    }
}

/// The models file at `path`, read now (on a blocking thread); the error
/// names the file.
pub async fn load(path: &Path) -> std::result::Result<Vec<Entry>, String> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || read(&owned))
        .await
        .unwrap_or_else(|e| Err(format!("fake provider: reading the models file: {e}")))
}

fn read(path: &Path) -> std::result::Result<Vec<Entry>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("fake provider: cannot read the models file {shown}: {e}"))?;
    let entries: Vec<Entry> = serde_json::from_str(&text).map_err(|e| {
        format!("fake provider: the models file {shown} is not a JSON array of models: {e}")
    })?;
    let mut seen = std::collections::HashSet::new();
    for e in &entries {
        if e.id.trim().is_empty() {
            return Err(format!(
                "fake provider: the models file {shown} has an entry with an empty id"
            ));
        }
        if !seen.insert(e.id.as_str()) {
            return Err(format!(
                "fake provider: the models file {shown} lists {:?} twice",
                e.id
            ));
        }
    }
    Ok(entries)
}

/// What a list request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListBehaviour {
    /// 401 to a request without a key, the list to one with a key.
    NeedsKey,
    /// As the behaviour answers a chat request; `ok:MS` and `slow:MS`
    /// answer the list after MS.
    Is(Behaviour),
}

impl FromStr for ListBehaviour {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<ListBehaviour, String> {
        if s == "needs-key" {
            return Ok(ListBehaviour::NeedsKey);
        }
        let b: Behaviour = s
            .parse()
            .map_err(|_| format!("unknown list behaviour {s:?} (known: {LIST_NAMES})"))?;
        match b {
            Behaviour::Ok(_)
            | Behaviour::Slow(_)
            | Behaviour::Unauthorized
            | Behaviour::Forbidden
            | Behaviour::NotFound
            | Behaviour::RateLimit
            | Behaviour::RetryAfter(_)
            | Behaviour::E500
            | Behaviour::E503
            | Behaviour::Overloaded
            | Behaviour::Html
            | Behaviour::Html200
            | Behaviour::Garbage
            | Behaviour::ErrorIn200
            | Behaviour::Reset
            | Behaviour::HangHeaders => Ok(ListBehaviour::Is(b)),
            _ => Err(format!(
                "{s:?} is a chat behaviour, not a list one (list behaviours: {LIST_NAMES})"
            )),
        }
    }
}

impl fmt::Display for ListBehaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListBehaviour::NeedsKey => f.write_str("needs-key"),
            ListBehaviour::Is(b) => b.fmt(f),
        }
    }
}

/// One `--list-behaviour [SCOPE=]B1,B2,…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListScript {
    /// A dialect's name or a path segment; `None`: every list.
    pub scope: Option<String>,
    pub behaviours: Vec<ListBehaviour>,
}

impl ListScript {
    pub(super) fn applies(&self, d: Dialect, path: &str) -> bool {
        self.scope
            .as_deref()
            .is_none_or(|s| s == d.as_str() || path.split('/').any(|seg| seg == s))
    }
}

/// One `--list-behaviour` value.
pub fn parse_list_script(value: &str) -> Result<ListScript> {
    let bad = |m: String| Error::config(format!("--list-behaviour {value:?}: {m}"));
    let (scope, list) = match value.split_once('=') {
        Some((scope, list)) => {
            let scope = scope.trim();
            if scope.is_empty() || scope.contains('/') {
                return Err(bad(
                    "the scope is a dialect or one path segment, before '='".into(),
                ));
            }
            (Some(scope.to_string()), list)
        }
        None => (None, value),
    };
    let behaviours = list
        .split(',')
        .map(|b| b.trim().parse::<ListBehaviour>().map_err(&bad))
        .collect::<Result<Vec<_>>>()?;
    Ok(ListScript { scope, behaviours })
}

/// Which shape of OpenAI's list a path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    Plain,
    OpenRouter,
    Mistral,
    Together,
    Groq,
}

impl Flavour {
    fn of(path: &str) -> Flavour {
        path.split('/')
            .find_map(|seg| match seg {
                "openrouter" => Some(Flavour::OpenRouter),
                "mistral" => Some(Flavour::Mistral),
                "together" => Some(Flavour::Together),
                "groq" => Some(Flavour::Groq),
                _ => None,
            })
            .unwrap_or(Flavour::Plain)
    }
}

/// The dialect and flavour of a `GET …/models`; `None` for any other path.
pub fn endpoint(uri: &Uri, headers: &HeaderMap) -> Option<(Dialect, Flavour)> {
    let path = uri.path();
    if !path.ends_with("/models") {
        return None;
    }
    let has = |name| header(headers, name).is_some();
    let segment = |s| path.split('/').any(|seg| seg == s);
    let query_key = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv.starts_with("key=")));
    let d = if has("x-goog-api-key") || query_key {
        Dialect::Gemini
    } else if has("x-api-key") || has("anthropic-version") {
        Dialect::Anthropic
    } else if has("authorization") {
        Dialect::Openai
    } else if segment("v1beta") && !segment("openai") {
        Dialect::Gemini
    } else {
        Dialect::Openai
    };
    let flavour = match d {
        Dialect::Openai => Flavour::of(path),
        _ => Flavour::Plain,
    };
    Some((d, flavour))
}

/// Answer a list request, recorded as `rec` (its dialect, key and
/// behaviour filled in here).
pub(super) async fn serve(
    inner: &Inner,
    (d, flavour): (Dialect, Flavour),
    uri: &Uri,
    headers: &HeaderMap,
    mut rec: RecordedRequest,
) -> Response {
    let r = responder(d);
    let keyed = r.api_key(headers, uri).is_some();
    let behaviour = inner.list_behaviour(d, uri.path());
    rec.dialect = Some(d);
    rec.auth = keyed;
    rec.behaviour = Some(behaviour.to_string());
    inner.record(rec).await;
    inner.hold().await;
    let wait = match behaviour {
        ListBehaviour::NeedsKey if !keyed => return r.failure(Failure::Unauthorized),
        ListBehaviour::NeedsKey => Duration::ZERO,
        ListBehaviour::Is(Behaviour::Ok(wait) | Behaviour::Slow(wait)) => wait,
        ListBehaviour::Is(b) => return failure(inner, d, b, uri),
    };
    inner.sleep(inner.cfg.latency + wait).await;
    let entries = match inner.entries().await {
        Ok(e) => e,
        Err(message) => return r.failure(Failure::Internal { message: &message }),
    };
    let listed: Vec<&Entry> = entries.iter().filter(|e| e.listed).collect();
    let query = Query::<HashMap<String, String>>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default();
    match d {
        Dialect::Openai => json_response(StatusCode::OK, &openai(flavour, &listed)),
        Dialect::Anthropic => anthropic(&listed, &query),
        Dialect::Gemini => gemini(&listed, &query),
    }
}

/// A list request failing as `b` does.
fn failure(inner: &Inner, d: Dialect, b: Behaviour, uri: &Uri) -> Response {
    let r = responder(d);
    match b {
        Behaviour::RateLimit => r.rate_limit(),
        Behaviour::RetryAfter(secs) => {
            let mut resp = r.rate_limit();
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
            resp
        }
        Behaviour::E500 => r.failure(Failure::E500),
        Behaviour::E503 => r.failure(Failure::E503),
        Behaviour::Overloaded => r.failure(Failure::Overloaded),
        Behaviour::Unauthorized => r.failure(Failure::Unauthorized),
        Behaviour::Forbidden => r.failure(Failure::Forbidden),
        // No list endpoint: the URL is unknown, whatever the model.
        Behaviour::NotFound => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": {
                "message": format!("Unknown request URL: GET {}. Please check the URL for typos.", uri.path()),
                "type": "invalid_request_error",
                "param": null,
                "code": "unknown_url",
            }}),
        ),
        Behaviour::Html => respond::html(StatusCode::BAD_GATEWAY),
        Behaviour::Html200 => respond::html(StatusCode::OK),
        Behaviour::Garbage => respond::garbage(),
        Behaviour::ErrorIn200 => respond::error_in_200(),
        Behaviour::Reset => respond::reset(),
        Behaviour::HangHeaders => respond::hang_headers(inner.shutdown.clone()),
        // `ListBehaviour::from_str` admits no other.
        _ => r.failure(Failure::E500),
    }
}

/// OpenRouter's prices per token, as strings.
const PAID_PROMPT: &str = "0.0000002";
const PAID_COMPLETION: &str = "0.0000008";

/// OpenAI's list in `flavour`'s shape.
fn openai(flavour: Flavour, models: &[&Entry]) -> Value {
    let plain = |e: &Entry| {
        json!({
            "id": e.id,
            "object": "model",
            "created": CREATED,
            "owned_by": e.id.split_once('/').map_or("fake", |(o, _)| o),
        })
    };
    match flavour {
        Flavour::Plain => json!({
            "object": "list",
            "data": models.iter().map(|e| plain(e)).collect::<Vec<_>>(),
        }),
        Flavour::Groq => json!({
            "object": "list",
            "data": models.iter().map(|e| {
                let mut v = plain(e);
                v["active"] = json!(true);
                v["context_window"] = json!(e.context);
                v["public_apps"] = Value::Null;
                v["max_completion_tokens"] = json!(e.max_output);
                v
            }).collect::<Vec<_>>(),
        }),
        Flavour::OpenRouter => json!({
            "data": models.iter().filter(|e| e.is_chat()).map(|e| openrouter(e)).collect::<Vec<_>>(),
        }),
        Flavour::Mistral => json!({
            "object": "list",
            "data": models.iter().map(|e| mistral(e)).collect::<Vec<_>>(),
        }),
        Flavour::Together => Value::Array(models.iter().map(|e| together(e)).collect()),
    }
}

fn openrouter(e: &Entry) -> Value {
    let (prompt, completion) = if e.is_free() {
        ("0", "0")
    } else {
        (PAID_PROMPT, PAID_COMPLETION)
    };
    let mut params = vec!["max_tokens", "temperature", "top_p", "stop", "seed"];
    if e.tools {
        params.extend(["tools", "tool_choice"]);
    }
    if e.json {
        params.extend(["response_format", "structured_outputs"]);
    }
    let (modality, inputs) = if e.vision {
        ("text+image->text", json!(["text", "image"]))
    } else {
        ("text->text", json!(["text"]))
    };
    json!({
        "id": e.id,
        "canonical_slug": e.id.strip_suffix(":free").unwrap_or(&e.id),
        "name": display_name(&e.id),
        "created": CREATED,
        "description": "A model served by llmprobe's fake provider.",
        "context_length": e.context,
        "architecture": {
            "modality": modality,
            "input_modalities": inputs,
            "output_modalities": ["text"],
            "tokenizer": "Other",
            "instruct_type": null,
        },
        "pricing": {
            "prompt": prompt,
            "completion": completion,
            "request": "0",
            "image": "0",
            "web_search": "0",
            "internal_reasoning": "0",
        },
        "top_provider": {
            "context_length": e.context,
            "max_completion_tokens": e.max_output,
            "is_moderated": false,
        },
        "per_request_limits": null,
        "supported_parameters": params,
        "default_parameters": {},
        "expiration_date": e.deprecation,
    })
}

fn mistral(e: &Entry) -> Value {
    json!({
        "id": e.id,
        "object": "model",
        "created": CREATED,
        "owned_by": "mistralai",
        "capabilities": {
            "completion_chat": e.is_chat(),
            "completion_fim": false,
            "function_calling": e.tools,
            "fine_tuning": false,
            "vision": e.vision,
            "classification": false,
        },
        "name": e.id,
        "description": "A model served by llmprobe's fake provider.",
        "max_context_length": e.context,
        "aliases": e.aliases,
        "deprecation": e.deprecation,
        "deprecation_replacement_model": null,
        "default_model_temperature": 0.3,
        "type": "base",
    })
}

fn together(e: &Entry) -> Value {
    // Dollars per million tokens, as numbers.
    let (input, output) = if e.is_free() { (0.0, 0.0) } else { (0.2, 0.8) };
    json!({
        "id": e.id,
        "object": "model",
        "created": CREATED,
        "type": match e.kind { Kind::Chat => "chat", Kind::Embedding => "embedding" },
        "display_name": display_name(&e.id),
        "organization": e.id.split_once('/').map_or("fake", |(o, _)| o),
        "context_length": e.context,
        "pricing": {"hourly": 0, "input": input, "output": output, "base": 0, "finetune": 0},
    })
}

/// `meta-llama/llama-3.3-70b:free` → `Llama 3.3 70b (free)`.
fn display_name(id: &str) -> String {
    let (base, free) = match id.strip_suffix(":free") {
        Some(b) => (b, " (free)"),
        None => (id, ""),
    };
    let name = base.rsplit('/').next().unwrap_or(base);
    let words: Vec<String> = name
        .split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default()
        })
        .collect();
    format!("{}{free}", words.join(" "))
}

/// How many models a page holds when the client asks for `asked`: at
/// most [`PAGE`].
fn page_size(asked: usize) -> usize {
    asked.clamp(1, PAGE)
}

/// Anthropic's page: `limit` (1 to 1000, default 20), then `after_id` or
/// `before_id`.
fn anthropic(models: &[&Entry], query: &HashMap<String, String>) -> Response {
    let r = responder(Dialect::Anthropic);
    let chat: Vec<&Entry> = models.iter().copied().filter(|e| e.is_chat()).collect();
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if (1..=1000).contains(&n) => n,
        Some(_) => {
            return r.bad_request("limit: Input should be between 1 and 1000", None);
        }
    };
    let n = page_size(limit);
    let at = |id: &String| chat.iter().position(|e| &e.id == id);
    let (start, end) = match (query.get("after_id"), query.get("before_id")) {
        (Some(id), _) => match at(id) {
            Some(i) => (i + 1, (i + 1 + n).min(chat.len())),
            None => return r.bad_request(&format!("after_id: no model {id:?}"), None),
        },
        (None, Some(id)) => match at(id) {
            Some(i) => (i.saturating_sub(n), i),
            None => return r.bad_request(&format!("before_id: no model {id:?}"), None),
        },
        (None, None) => (0, n.min(chat.len())),
    };
    let page = &chat[start..end];
    let has_more = if query.contains_key("after_id") || !query.contains_key("before_id") {
        end < chat.len()
    } else {
        start > 0
    };
    let data: Vec<Value> = page
        .iter()
        .map(|e| {
            json!({
                "type": "model",
                "id": e.id,
                "display_name": display_name(&e.id),
                "created_at": CREATED_AT,
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({
            "data": data,
            "has_more": has_more,
            "first_id": page.first().map(|e| &e.id),
            "last_id": page.last().map(|e| &e.id),
        }),
    )
}

/// Gemini's page: `pageSize` (default 50, at most 1000), `pageToken`.
fn gemini(models: &[&Entry], query: &HashMap<String, String>) -> Response {
    let r = responder(Dialect::Gemini);
    let embedding = Entry {
        kind: Kind::Embedding,
        context: Some(2048),
        max_output: Some(1),
        ..Entry::new(GEMINI_EMBEDDING)
    };
    let mut all: Vec<&Entry> = models.to_vec();
    if !all.iter().any(|e| e.kind == Kind::Embedding) {
        all.insert(0, &embedding);
    }
    let size = match query.get("pageSize").map(|s| s.parse::<usize>()) {
        None | Some(Ok(0)) => 50,
        Some(Ok(n)) => n.min(1000),
        Some(Err(_)) => {
            return r.bad_request(
                "Invalid value at 'page_size' (TYPE_INT32)",
                Some("pageSize"),
            );
        }
    };
    let n = page_size(size);
    let start = match query.get("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => match t
            .strip_prefix("fake-page-")
            .and_then(|o| o.parse::<usize>().ok())
        {
            Some(o) if o <= all.len() => o,
            _ => return r.bad_request("Invalid page token.", Some("pageToken")),
        },
    };
    let end = (start + n).min(all.len());
    let data: Vec<Value> = all[start..end]
        .iter()
        .map(|e| {
            let methods = match e.kind {
                Kind::Chat => json!([
                    "generateContent",
                    "countTokens",
                    "createCachedContent",
                    "batchGenerateContent"
                ]),
                Kind::Embedding => json!(["embedContent", "countTextTokens", "countTokens"]),
            };
            let mut v = json!({
                "name": format!("models/{}", e.id),
                "version": "001",
                "displayName": display_name(&e.id),
                "description": "A model served by llmprobe's fake provider.",
                "inputTokenLimit": e.context,
                "outputTokenLimit": e.max_output,
                "supportedGenerationMethods": methods,
            });
            if e.is_chat() {
                v["temperature"] = json!(1.0);
                v["topP"] = json!(0.95);
                v["topK"] = json!(64);
                v["maxTemperature"] = json!(2.0);
            }
            v
        })
        .collect();
    let mut body = json!({ "models": data });
    if end < all.len() {
        body["nextPageToken"] = json!(format!("fake-page-{end}"));
    }
    json_response(StatusCode::OK, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_behaviours_parse_and_name_themselves() {
        for name in LIST_NAMES.split(", ") {
            let name = name.replace("MS", "250").replace(":N", ":30");
            let b: ListBehaviour = name.parse().unwrap();
            assert_eq!(b.to_string(), name);
        }
        let s = parse_list_script("groq=e500,ok").unwrap();
        assert_eq!(s.scope.as_deref(), Some("groq"));
        assert_eq!(
            s.behaviours,
            [
                ListBehaviour::Is(Behaviour::E500),
                ListBehaviour::Is(Behaviour::Ok(Duration::ZERO))
            ]
        );
        assert!(s.applies(Dialect::Openai, "/groq/openai/v1/models"));
        assert!(!s.applies(Dialect::Openai, "/v1/models"));
        let all = parse_list_script("unauthorized").unwrap();
        assert_eq!(all.scope, None);
        assert!(all.applies(Dialect::Gemini, "/v1beta/models"));
        let gem = parse_list_script("gemini=html200").unwrap();
        assert!(gem.applies(Dialect::Gemini, "/v1beta/models"));
        assert!(!gem.applies(Dialect::Anthropic, "/v1/models"));
        for bad in [
            "bogus",
            "think",
            "=e500",
            "a/b=e500",
            "e500,",
            "x=decommissioned",
        ] {
            let e = parse_list_script(bad).unwrap_err();
            assert_eq!(e.exit_code(), crate::exit::USAGE);
            assert!(
                e.to_string()
                    .starts_with(&format!("--list-behaviour {bad:?}")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_path_and_headers_pick_dialect_and_flavour() {
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, HeaderValue::from_static(v));
            }
            m
        };
        let bearer = h(&[("authorization", "Bearer k")]);
        let cases = [
            (
                "/v1/models",
                bearer.clone(),
                Some((Dialect::Openai, Flavour::Plain)),
            ),
            (
                "/openrouter/api/v1/models",
                bearer.clone(),
                Some((Dialect::Openai, Flavour::OpenRouter)),
            ),
            (
                "/mistral/v1/models",
                bearer.clone(),
                Some((Dialect::Openai, Flavour::Mistral)),
            ),
            (
                "/together/v1/models",
                bearer.clone(),
                Some((Dialect::Openai, Flavour::Together)),
            ),
            (
                "/groq/openai/v1/models",
                bearer.clone(),
                Some((Dialect::Openai, Flavour::Groq)),
            ),
            (
                "/v1/models",
                h(&[("x-api-key", "k")]),
                Some((Dialect::Anthropic, Flavour::Plain)),
            ),
            (
                "/v1/models",
                h(&[("anthropic-version", "2023-06-01")]),
                Some((Dialect::Anthropic, Flavour::Plain)),
            ),
            (
                "/groq/v1/models",
                h(&[("x-api-key", "k")]),
                Some((Dialect::Anthropic, Flavour::Plain)),
            ),
            (
                "/v1beta/models",
                h(&[("x-goog-api-key", "k")]),
                Some((Dialect::Gemini, Flavour::Plain)),
            ),
            (
                "/v1beta/models?key=k&pageSize=2",
                HeaderMap::new(),
                Some((Dialect::Gemini, Flavour::Plain)),
            ),
            // Keyless: the path decides.
            (
                "/v1beta/models",
                HeaderMap::new(),
                Some((Dialect::Gemini, Flavour::Plain)),
            ),
            (
                "/v1beta/openai/models",
                HeaderMap::new(),
                Some((Dialect::Openai, Flavour::Plain)),
            ),
            (
                "/v1/models",
                HeaderMap::new(),
                Some((Dialect::Openai, Flavour::Plain)),
            ),
            ("/v1/models/gpt-4o", bearer.clone(), None),
            ("/v1/chat/completions", bearer, None),
        ];
        for (path, headers, want) in cases {
            let uri: Uri = path.parse().unwrap();
            assert_eq!(endpoint(&uri, &headers), want, "{path}");
        }
    }

    #[test]
    fn display_names_read_like_the_providers() {
        assert_eq!(display_name("claude-haiku-4-5"), "Claude Haiku 4 5");
        assert_eq!(
            display_name("meta-llama/llama-3.3-70b-instruct:free"),
            "Llama 3.3 70b Instruct (free)"
        );
    }
}
