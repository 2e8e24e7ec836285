//! `POST /v1/responses`: the OpenAI Responses API, which Codex CLI and
//! the OpenAI SDKs' `responses.create` speak. Every upstream's reply is
//! parsed and rendered as a `response` object or the Responses events
//! ([`responses`]); errors are OpenAI's.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, answer};
use crate::route::surface::openai::ApiError;
use crate::route::surface::responses::{self, Parsed};
use crate::route::surface::{JsonBody, Shape};

pub async fn responses(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<JsonBody, ApiError>,
) -> Response {
    let Parsed { req, dropped, echo } = match body.and_then(|JsonBody(b)| responses::parse(&b)) {
        Ok(p) => p,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    let mut r = Routing::new(req, &headers);
    r.dropped = dropped;
    r.renamed = responses::RENAMED;
    answer(
        &app,
        r,
        Shape::OpenAi,
        |c| axum::Json(responses::response_body(&c, &echo)).into_response(),
        |events, model| {
            responses::event_stream(events, responses::EventWriter::new(model, echo.clone()))
        },
    )
    .await
}
