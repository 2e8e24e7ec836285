//! `POST /v1/completions`: legacy OpenAI Completions (editors' ghost
//! text), served through chat models and rendered as `text_completion`
//! ([`completions`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, answer};
use crate::route::surface::completions::{self, TextWriter};
use crate::route::surface::error::{self, ApiError};
use crate::route::surface::{JsonBody, Shape, event_stream};

pub async fn completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<JsonBody, ApiError>,
) -> Response {
    let req = match body.and_then(|JsonBody(b)| completions::parse(&b)) {
        Ok(req) => req,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    let wants_usage = req.wants_stream_usage();
    answer(
        &app,
        Routing::new(req, &headers),
        Shape::OpenAi,
        |c| axum::Json(completions::text_completion(&c)).into_response(),
        |events, model| event_stream(events, TextWriter::new(model, wants_usage)),
    )
    .await
}

/// `POST /v1/embeddings`: not served yet; a 404 that says so and names
/// what is, in the shape of the API the client spoke.
pub async fn embeddings(uri: axum::http::Uri, headers: HeaderMap) -> Response {
    Shape::of(uri.path(), &headers).error(error::not_served("embeddings"), chrono::Utc::now())
}
