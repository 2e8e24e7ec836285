//! `POST /v1/completions`: legacy OpenAI Completions (editors' ghost
//! text), served through chat models and rendered as `text_completion`
//! ([`completions`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, complete, open};
use crate::route::surface::Shape;
use crate::route::surface::completions::{self, CompletionsBody, TextWriter};
use crate::route::surface::openai::{self, ApiError};

pub async fn completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<CompletionsBody, ApiError>,
) -> Response {
    let req = match body {
        Ok(CompletionsBody(req)) => req,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    let (stream, wants_usage) = (req.stream, req.wants_stream_usage());
    let r = Routing::new(req, &headers);
    if stream {
        match open(&app, r).await {
            Ok(o) => {
                let writer = TextWriter::new(&o.model, wants_usage);
                let mut resp = openai::event_stream(o.events, writer);
                app.headers(&mut resp, &o.routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    } else {
        match complete(&app, r).await {
            Ok((c, routed)) => {
                let mut resp = axum::Json(completions::text_completion(&c)).into_response();
                app.headers(&mut resp, &routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    }
}

/// `POST /v1/embeddings`: not served yet; a 404 that says so and names
/// what is, in the shape of the API the client spoke.
pub async fn embeddings(uri: axum::http::Uri, headers: HeaderMap) -> Response {
    Shape::of(uri.path(), &headers).error(openai::not_served("embeddings"), chrono::Utc::now())
}
