//! `POST /v1/responses`: the OpenAI Responses API, which Codex CLI and
//! the OpenAI SDKs' `responses.create` speak. Every upstream's reply is
//! parsed and rendered as a `response` object or the Responses events
//! ([`responses`]); errors are OpenAI's. What a request refers to
//! (`item_reference`s, `previous_response_id`) is looked up in route's
//! item store ([`crate::route::items`]) before it is translated, and a
//! served response is kept there (unless `store: false`) before its body,
//! or its stream's last event, reaches the client.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::{App, Routing, complete, open};
use crate::route::items::{Found, ItemStore, Keep, Wanted};
use crate::route::surface::error::ApiError;
use crate::route::surface::responses::{self, Held, OutputItem, Parsed, ToKeep};
use crate::route::surface::{JsonBody, Shape};

pub async fn responses(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<JsonBody, ApiError>,
) -> Response {
    let request = match body.and_then(|JsonBody(b)| responses::Request::read(&b)) {
        Ok(r) => r,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    let want = Wanted {
        items: request.references(),
        previous: request.previous_response_id(),
    };
    let Found {
        items,
        history,
        chain,
        unavailable,
    } = app.items.find(want, app.engine.clock.now()).await;
    let held = Held {
        secs: app.items.secs(),
        items,
        history,
        unavailable,
    };
    // The references a kept response renews, taken before the request
    // moves into its translation; only when route keeps anything.
    let used_items = (held.secs > 0).then(|| request.references().to_vec());
    let Parsed {
        req,
        dropped,
        echo,
        keep,
    } = match request.translate(&held) {
        Ok(p) => p,
        Err(e) => return app.refuse(e, Shape::OpenAi),
    };
    // What the new response renews when it is kept: the items it
    // referred to, and the responses of the chain it follows.
    let keeper = keep.map(|k| Keeper {
        store: app.items.clone(),
        clock: app.engine.clock.clone(),
        keep: k,
        used_items: used_items.unwrap_or_default(),
        used_responses: chain,
    });
    let mut r = Routing::new(req, &headers);
    r.dropped = dropped;
    r.renamed = responses::RENAMED;
    if r.req.stream {
        match open(&app, r).await {
            Ok(o) => {
                let writer = responses::EventWriter::new(&o.model, echo);
                let before_end = keeper.map(|k| -> responses::BeforeEnd {
                    Box::new(move |id, output| Box::pin(k.keep(id, output)))
                });
                let mut resp = responses::event_stream(o.events, writer, before_end);
                app.headers(&mut resp, &o.routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    } else {
        match complete(&app, r).await {
            Ok((c, routed)) => {
                let body = responses::response_body(&c, &echo);
                // Written first, so that its items move into the store
                // instead of being copied; kept before the client has it.
                let mut resp = axum::Json(&body).into_response();
                if let Some(k) = keeper {
                    let (id, output) = body.into_kept();
                    k.keep(id, output).await;
                }
                app.headers(&mut resp, &routed);
                resp
            }
            Err(f) => f.into_response(&app, Shape::OpenAi),
        }
    }
}

/// A response to keep once it is answered, and what it used.
struct Keeper {
    store: Arc<ItemStore>,
    clock: crate::clock::Clock,
    keep: ToKeep,
    used_items: Vec<String>,
    used_responses: Vec<String>,
}

impl Keeper {
    async fn keep(self, id: String, output: Vec<OutputItem>) {
        let now = self.clock.now();
        // The store keeps each item as JSON text; written through a Value
        // only here, once per kept response.
        let output = output
            .iter()
            .filter_map(|item| serde_json::to_value(item).ok())
            .collect();
        let k = Keep {
            id,
            previous: self.keep.previous,
            input: self.keep.input,
            output,
            used_items: self.used_items,
            used_responses: self.used_responses,
        };
        self.store.keep(k, now).await;
    }
}
