//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic
//! Messages, the API Anthropic's SDKs and coding agents speak. Every
//! upstream's reply is rendered from its parsed deltas ([`anthropic`]),
//! and every error is Anthropic-shaped.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, answer};
use crate::route::surface::anthropic::wire::TokenCount;
use crate::route::surface::anthropic::{self, Purpose};
use crate::route::surface::error::ApiError;
use crate::route::surface::{JsonBody, Shape};

/// A Messages request, routed: a `message`, or a stream of its events.
pub async fn messages(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<JsonBody, ApiError>,
) -> Response {
    let m = match body.and_then(|JsonBody(b)| anthropic::read_messages(&b, Purpose::Create)) {
        Ok(m) => m,
        Err(e) => return app.refuse(e, Shape::Anthropic),
    };
    let stop = m.req.stop.clone();
    let mut r = Routing::new(m.req, &headers);
    // After the router has read `metadata.user_id` as the conversation.
    anthropic::metadata_to_user(&mut r.req);
    r.dropped = m.dropped;
    let estimate = r.ask.prompt_tokens;
    answer(
        &app,
        r,
        Shape::Anthropic,
        |c| axum::Json(anthropic::message_body(&c, estimate, &stop)).into_response(),
        |events, model| {
            anthropic::event_stream(
                events,
                anthropic::MessageWriter::new(model, estimate, &stop),
            )
        },
    )
    .await
}

/// `{"input_tokens"}`: route's own estimate of the prompt (text, tool
/// declarations and calls, four characters a token), the number the
/// router checks context windows and token limits with.
pub async fn count_tokens(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<JsonBody, ApiError>,
) -> Response {
    match body.and_then(|JsonBody(b)| anthropic::read_messages(&b, Purpose::Count)) {
        Ok(m) => {
            let r = Routing::new(m.req, &headers);
            axum::Json(TokenCount {
                input_tokens: r.ask.prompt_tokens,
            })
            .into_response()
        }
        Err(e) => app.refuse(e, Shape::Anthropic),
    }
}
