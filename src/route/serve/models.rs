//! `GET /v1/models` and `GET /v1/models/{id}`: what a client can ask
//! for. OpenAI's shape (`{"object":"list","data":[{"id","object":"model",
//! "created","owned_by"}]}`), or Anthropic's
//! (`{"data":[{"type":"model","id","display_name","created_at",
//! "lifecycle"}],"has_more","first_id","last_id"}`) for a request that
//! carries `anthropic-version`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::App;
use crate::route::surface::Shape;
use crate::route::surface::openai::ApiError;

/// Anthropic's `created_at` for every model: route does not know when a
/// provider released one.
const CREATED_AT: &str = "1970-01-01T00:00:00Z";

/// `auto` first, then each alias with a routable model (a client that
/// picks its model from the list sees the names route maps for it), then
/// every routable `provider::model`.
async fn listed(app: &App) -> Vec<String> {
    let engine = app.engine.clone();
    tokio::task::spawn_blocking(move || {
        let routable = engine.routable();
        let set: BTreeSet<&String> = routable.iter().collect();
        let aliases: Vec<String> = engine
            .alias_names()
            .filter(|a| {
                engine
                    .candidates(Some(a))
                    .is_ok_and(|cs| cs.iter().any(|c| set.contains(&c.key())))
            })
            .map(str::to_string)
            .collect();
        std::iter::once("auto".to_string())
            .chain(aliases)
            .chain(routable)
            .collect()
    })
    .await
    .unwrap_or_else(|_| vec!["auto".to_string()])
}

/// One model's entry in `shape`: its provider owns a `provider::model`;
/// route owns `auto`, aliases and bare model ids (it picks who serves).
fn entry(id: &str, shape: Shape) -> Value {
    match shape {
        Shape::OpenAi => {
            let owner = id.split_once("::").map_or("llmprobe", |(p, _)| p);
            json!({"id": id, "object": "model", "created": 0, "owned_by": owner})
        }
        Shape::Anthropic => {
            json!({
                "type": "model",
                "id": id,
                "display_name": id,
                "created_at": CREATED_AT,
                "lifecycle": "active",
            })
        }
    }
}

/// `GET /v1/models`: `auto`, the aliases, and every routable
/// `provider::model`.
pub async fn list(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap) -> Response {
    let shape = Shape::of(uri.path(), &headers);
    let ids = listed(&app).await;
    let data: Vec<Value> = ids.iter().map(|id| entry(id, shape)).collect();
    let body = match shape {
        Shape::OpenAi => json!({"object": "list", "data": data}),
        Shape::Anthropic => json!({
            "data": data,
            "has_more": false,
            "first_id": ids.first(),
            "last_id": ids.last(),
        }),
    };
    axum::Json(body).into_response()
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
            return true;
        }
        let routable: BTreeSet<String> = engine.routable().into_iter().collect();
        engine
            .candidates(Some(&asked))
            .is_ok_and(|cs| cs.iter().any(|c| routable.contains(&c.key())))
    })
    .await
    .unwrap_or(false);
    if found {
        return axum::Json(entry(&id, shape)).into_response();
    }
    let e = ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "model_not_found",
        format!(
            "The model `{id}` does not exist or nothing routable serves it now; \
             GET /v1/models lists what does"
        ),
    );
    shape.error(e, app.engine.clock.now())
}
