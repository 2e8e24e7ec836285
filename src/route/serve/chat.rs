//! `POST /v1/chat/completions`: OpenAI Chat Completions, the surface every
//! OpenAI client speaks. An OpenAI upstream's body and chunks pass on as
//! they came; any other's are rendered ([`openai`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, answer};
use crate::route::surface::error::ApiError;
use crate::route::surface::openai::{self, ChatBody};
use crate::route::surface::{Shape, event_stream};

pub async fn chat(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<ChatBody, ApiError>,
) -> Response {
    let req = match body {
        Ok(ChatBody(req)) => req,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    let wants_usage = req.wants_stream_usage();
    let mut r = Routing::new(req, &headers);
    r.native = true;
    answer(
        &app,
        r,
        Shape::OpenAi,
        |c| axum::Json(openai::completion_body(c)).into_response(),
        |events, model| event_stream(events, openai::ChunkWriter::new(model, wants_usage)),
    )
    .await
}
