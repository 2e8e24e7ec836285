//! `POST /v1/chat/completions`: OpenAI Chat Completions, the surface every
//! OpenAI client speaks. An OpenAI upstream's body and chunks pass on as
//! they came; any other's are rendered ([`openai`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, complete, open};
use crate::route::surface::Shape;
use crate::route::surface::openai::{self, ApiError, ChatBody};

pub async fn chat(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<ChatBody, ApiError>,
) -> Response {
    let req = match body {
        Ok(ChatBody(req)) => req,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    let (stream, wants_usage) = (req.stream, req.wants_stream_usage());
    let mut r = Routing::new(req, &headers);
    r.native = true;
    if stream {
        match open(&app, r).await {
            Ok(o) => {
                let writer = openai::ChunkWriter::new(&o.model, wants_usage);
                let mut resp = openai::event_stream(o.events, writer);
                app.headers(&mut resp, &o.routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    } else {
        match complete(&app, r).await {
            Ok((c, routed)) => {
                let mut resp = axum::Json(openai::completion_body(c)).into_response();
                app.headers(&mut resp, &routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    }
}
