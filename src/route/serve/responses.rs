//! `POST /v1/responses`: the OpenAI Responses API, which Codex CLI and
//! the OpenAI SDKs' `responses.create` speak. Every upstream's reply is
//! parsed and rendered as a `response` object or the Responses events
//! ([`responses`]); errors are OpenAI's.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, complete, open};
use crate::route::surface::Shape;
use crate::route::surface::openai::ApiError;
use crate::route::surface::responses::{self, Parsed, ResponsesBody};

pub async fn responses(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<ResponsesBody, ApiError>,
) -> Response {
    let Parsed { req, dropped, echo } = match body {
        Ok(ResponsesBody(p)) => p,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    let stream = req.stream;
    let mut r = Routing::new(req, &headers);
    r.dropped = dropped;
    r.native = false;
    if stream {
        match open(&app, r).await {
            Ok(o) => {
                let writer = responses::EventWriter::new(&o.model, echo);
                let mut resp = responses::event_stream(o.events, writer);
                app.headers(&mut resp, &o.routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    } else {
        match complete(&app, r).await {
            Ok((c, routed)) => {
                let mut resp = axum::Json(responses::response_body(&c, &echo)).into_response();
                app.headers(&mut resp, &routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    }
}
