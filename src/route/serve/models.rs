//! `GET /v1/models` and `GET /v1/models/{id}`: what a client can ask
//! for. OpenAI's shape (`{"object":"list","data":[{"id","object":"model",
//! "created","owned_by"}]}`), or Anthropic's
//! (`{"data":[{"type":"model","id","display_name","created_at",
//! "lifecycle"}],"has_more","first_id","last_id"}`) for a request that
//! carries `anthropic-version`.
//!
//! In OpenAI's shape, each routable `provider::model` also carries what
//! route knows of it, in the fields OpenAI-compatible clients read
//! (OpenRouter's): its known
//! context window as `context_length` (with `context_length_source`:
//! `catalog`, `listing` or `learned`; absent when unknown), the request
//! parameters its passed probes vouch for as `supported_parameters`, and
//! each capability as routing judges it, `capabilities: {"tools": "yes",
//! "json": "unknown", "vision": "no"}`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::App;
use crate::capabilities::{Capability, Judgement};
use crate::catalog::ModelKey;
use crate::route::engine::Facts;
use crate::route::surface::Shape;
use crate::route::surface::error::{ApiError, ErrorKind};
use crate::route::verdicts::WindowSource;

/// Anthropic's `created_at` for every model: route does not know when a
/// provider released one.
const CREATED_AT: &str = "1970-01-01T00:00:00Z";

/// `auto` first, then each alias with a routable model (a client that
/// picks its model from the list sees the names route maps for it), then
/// every routable `provider::model` with what route knows of it.
async fn listed(app: &App) -> Vec<(String, Option<Facts>)> {
    let engine = app.engine.clone();
    tokio::task::spawn_blocking(move || {
        let routable = engine.routable();
        let set: BTreeSet<&String> = routable.iter().collect();
        let aliases: Vec<(String, Option<Facts>)> = engine
            .alias_names()
            .filter(|a| {
                engine
                    .candidates(Some(a))
                    .is_ok_and(|cs| cs.iter().any(|c| set.contains(&c.key())))
            })
            .map(|a| (a.to_string(), None))
            .collect();
        let facts = engine.facts(&routable);
        std::iter::once(("auto".to_string(), None))
            .chain(aliases)
            .chain(routable.into_iter().zip(facts.into_iter().map(Some)))
            .collect()
    })
    .await
    .unwrap_or_else(|_| vec![("auto".to_string(), None)])
}

/// The request parameters a passed probe of each capability vouches for,
/// in OpenRouter's `supported_parameters` words.
fn parameters(cap: Capability) -> &'static [&'static str] {
    match cap {
        Capability::Tools => &["tools", "tool_choice"],
        Capability::Json => &["response_format", "structured_outputs"],
        // An image is a message part, not a parameter; speed is no
        // parameter at all.
        Capability::Vision | Capability::Speed => &[],
    }
}

/// One model's entry in OpenAI's shape, with what route knows of a
/// routable `provider::model` in OpenRouter's fields.
#[derive(Serialize)]
struct OpenAiModel<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_length_source: Option<WindowSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capabilities: Option<Capabilities>,
    #[serde(skip_serializing_if = "Option::is_none")]
    supported_parameters: Option<Vec<&'static str>>,
}

/// Each capability as routing judges it, `{"tools": "yes", …}`, in
/// [`Capability::ALL`]'s order.
struct Capabilities([Judgement; 3]);

impl Serialize for Capabilities {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(
            Capability::ALL
                .iter()
                .zip(self.0)
                .map(|(cap, j)| (cap.as_str(), j.as_str())),
        )
    }
}

/// One model's entry in Anthropic's shape.
#[derive(Serialize)]
struct AnthropicModel<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    display_name: &'a str,
    created_at: &'static str,
    lifecycle: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Entry<'a> {
    OpenAi(OpenAiModel<'a>),
    Anthropic(AnthropicModel<'a>),
}

/// `GET /v1/models` in OpenAI's shape.
#[derive(Serialize)]
struct OpenAiList<'a> {
    object: &'static str,
    data: Vec<Entry<'a>>,
}

/// `GET /v1/models` in Anthropic's shape: one page, all of it.
#[derive(Serialize)]
struct AnthropicList<'a> {
    data: Vec<Entry<'a>>,
    has_more: bool,
    first_id: Option<&'a str>,
    last_id: Option<&'a str>,
}

/// One model's entry in `shape`: its provider owns a `provider::model`;
/// route owns `auto`, aliases and bare model ids (it picks who serves).
fn entry<'a>(id: &'a str, shape: Shape, facts: Option<&Facts>) -> Entry<'a> {
    match shape {
        Shape::OpenAi => {
            let owner = ModelKey::split(id).map_or("llmprobe", |(p, _)| p);
            let mut entry = OpenAiModel {
                id,
                object: "model",
                created: 0,
                owned_by: owner,
                context_length: None,
                context_length_source: None,
                capabilities: None,
                supported_parameters: None,
            };
            if let Some(f) = facts {
                entry.context_length = f.window.map(|(window, _)| window);
                entry.context_length_source = f.window.map(|(_, source)| source);
                let mut supported = Vec::new();
                for (cap, j) in Capability::ALL.iter().zip(f.capabilities) {
                    if j == Judgement::Yes {
                        supported.extend_from_slice(parameters(*cap));
                    }
                }
                entry.capabilities = Some(Capabilities(f.capabilities));
                entry.supported_parameters = Some(supported);
            }
            Entry::OpenAi(entry)
        }
        // Anthropic's model object has no fields for what route knows:
        // its shape stays its own.
        Shape::Anthropic => Entry::Anthropic(AnthropicModel {
            kind: "model",
            id,
            display_name: id,
            created_at: CREATED_AT,
            lifecycle: "active",
        }),
    }
}

/// `GET /v1/models`: `auto`, the aliases, and every routable
/// `provider::model`.
pub async fn list(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap) -> Response {
    let shape = Shape::of(uri.path(), &headers);
    let listed = listed(&app).await;
    let data: Vec<Entry<'_>> = listed
        .iter()
        .map(|(id, facts)| entry(id, shape, facts.as_ref()))
        .collect();
    match shape {
        Shape::OpenAi => axum::Json(OpenAiList {
            object: "list",
            data,
        })
        .into_response(),
        Shape::Anthropic => axum::Json(AnthropicList {
            data,
            has_more: false,
            first_id: listed.first().map(|(id, _)| id.as_str()),
            last_id: listed.last().map(|(id, _)| id.as_str()),
        })
        .into_response(),
    }
}

/// `GET /v1/models/{id}`: the model's entry when a request for it would
/// be routed now (`auto`; a listed `provider::model`; an alias or a bare
/// model id with a listed candidate), else a 404 `model_not_found`. The
/// id may hold `/` and `::`, as written or percent-encoded.
pub async fn one(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let shape = Shape::of(uri.path(), &headers);
    let engine = app.engine.clone();
    let asked = id.clone();
    let found = tokio::task::spawn_blocking(move || {
        if asked == "auto" {
            return Some(None);
        }
        let routable: BTreeSet<String> = engine.routable().into_iter().collect();
        if routable.contains(&asked) {
            return Some(engine.facts(std::slice::from_ref(&asked)).pop());
        }
        engine
            .candidates(Some(&asked))
            .is_ok_and(|cs| cs.iter().any(|c| routable.contains(&c.key())))
            .then_some(None)
    })
    .await
    .unwrap_or(None);
    if let Some(facts) = found {
        return axum::Json(entry(&id, shape, facts.as_ref())).into_response();
    }
    let e = ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorKind::InvalidRequest,
        "model_not_found",
        format!(
            "The model `{id}` does not exist or nothing routable serves it now; \
             GET /v1/models lists what does"
        ),
    );
    shape.error(e, app.engine.clock.now())
}
