//! `route --serve`: one endpoint for every client, whatever API it speaks.
//!
//! - `POST /v1/chat/completions` (OpenAI Chat Completions), and the other
//!   surfaces beside it (`serve/`): each handler parses its request with
//!   its surface (`route::surface`), routes it here ([`complete`],
//!   [`open`]), and renders the reply, stream or error in its own shape.
//!   Failures before the first byte fall over invisibly; a failure after
//!   it ends the stream with the surface's error event.
//! - `GET /v1/models`: the routable models, plus `auto`; `GET
//!   /v1/models/{id}`: one of them (`serve/models.rs`).
//! - `GET /livez`, `GET /readyz`, and `GET /v1/providers` and `/metrics`
//!   for watching route; these read the shared state when there is one
//!   (one round trip to Redis), requests never wait for them. `/readyz`
//!   and `/v1/providers` say when route is degraded (`route::degraded`).
//! - `GET /badge/{provider}.svg`, `GET /badge/{provider}/{model}.svg`:
//!   README badges (`serve/badge.rs`), behind the token unless `[route]
//!   public_status`.
//!
//! Every routed response carries `X-Routed-Via`, `X-Fallback-Attempts`,
//! `X-Fallback-Trail` and, when the request lost anything on the way,
//! `X-Llmprobe-Dropped` ([`Routed`]). Bad input gets a 4xx in the shape of
//! the API the client spoke, and the server stays up.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};
use serde_json::json;

use crate::upstream::dialect::ChatRequest;
use crate::upstream::secret::Secret;

use super::ask::Ask;
use super::engine::{Attempt, Engine, Exhausted, trail};
use super::providers::{RouteSnapshot, Source, Want};
use super::send::{self, Completion, StreamEvent};
use super::surface::error::{self, ApiError};
use super::surface::{BodyLimit, Shape};

mod badge;
mod chat;
mod completions;
mod messages;
mod models;
mod responses;
pub mod status_page;

pub use badge::Cache as BadgeCache;

/// Request heads larger than this get a 431.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// `X-Fallback-Trail` is cut to about this many characters.
pub const TRAIL_CAP: usize = 512;

pub struct App {
    pub engine: Arc<Engine>,
    /// The inbound bearer token, if auth is on.
    pub token: Option<Secret>,
    /// The figures `/badge/…` draws, cached.
    pub badges: BadgeCache,
    /// `GET /status`'s page, built at most every few seconds.
    pub status: status_page::Cache,
    /// The Responses surface's items and responses, for `item_reference`
    /// and `previous_response_id` ([`super::items`]).
    pub items: Arc<super::items::ItemStore>,
}

impl axum::extract::FromRef<Arc<App>> for BodyLimit {
    fn from_ref(app: &Arc<App>) -> BodyLimit {
        BodyLimit(
            app.engine.settings.max_body_bytes,
            app.engine.settings.read_timeout,
        )
    }
}

/// The router, with its limits.
pub fn router(app: Arc<App>) -> Router {
    let limit = app.engine.settings.max_body_bytes;
    let v1 = Router::new()
        .route("/v1/chat/completions", post(chat::chat))
        .route("/v1/completions", post(completions::completions))
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*id}", get(models::one))
        .route("/v1/messages", post(messages::messages))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/responses", post(responses::responses))
        .route("/v1/providers", get(providers))
        .route_layer(middleware::from_fn_with_state(app.clone(), auth));
    // The status page and badges: behind the token like /v1/*, unless
    // `[route] public_status` serves their public form to anyone.
    let pages = Router::new()
        .route("/status", get(status_page::page))
        .route("/badge/{*path}", get(badge::badge))
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            auth_unless_public,
        ));
    Router::new()
        .merge(v1)
        .merge(pages)
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/embeddings", post(completions::embeddings))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(header_limit))
        .with_state(app)
}

async fn header_limit(req: Request, next: Next) -> Response {
    let size: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if size > MAX_HEADER_BYTES {
        let shape = Shape::of(req.uri().path(), req.headers());
        return shape.error(
            error::headers_too_large(MAX_HEADER_BYTES),
            chrono::Utc::now(),
        );
    }
    next.run(req).await
}

/// The inbound token, compared in constant time, from `Authorization:
/// Bearer …` or, as Anthropic's clients send it, `x-api-key`.
async fn auth(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if let Some(token) = &app.token {
        let h = req.headers();
        let bearer = h
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let given = bearer
            .or_else(|| h.get("x-api-key").and_then(|v| v.to_str().ok()))
            .unwrap_or("");
        let ok: bool =
            subtle::ConstantTimeEq::ct_eq(given.as_bytes(), token.expose().as_bytes()).into();
        if !ok {
            let shape = Shape::of(req.uri().path(), h);
            return shape.error(ApiError::unauthorized(), app.engine.clock.now());
        }
    }
    next.run(req).await
}

/// [`auth`], unless `[route] public_status` opens the status page and the
/// badges to anyone (they then show only their public form).
async fn auth_unless_public(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if app.engine.settings.public_status {
        return next.run(req).await;
    }
    auth(State(app), req, next).await
}

async fn not_found(uri: axum::http::Uri, headers: HeaderMap) -> Response {
    Shape::of(uri.path(), &headers).error(error::unknown_url(uri.path()), chrono::Utc::now())
}

async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    Shape::of(uri.path(), &headers).error(
        error::method_not_allowed(method.as_str(), uri.path()),
        chrono::Utc::now(),
    )
}

async fn livez() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// A view of the state (shared, when it is) for a status endpoint: read
/// off the request path, then built on the blocking pool.
async fn from_snapshot<T: Send + 'static>(
    engine: &Arc<Engine>,
    want: Want,
    build: impl FnOnce(&Engine, &RouteSnapshot) -> T + Send + 'static,
) -> Option<T> {
    let snap = RouteSnapshot::read(engine, want).await;
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || build(&engine, &snap))
        .await
        .ok()
}

/// `/readyz`: `ready` (200); `degraded` (200, with the counts) while
/// degraded mode holds and something is routable, active models or, as a
/// last resort, paused ones; `not_ready` (503) with the reason when nothing
/// is.
async fn readyz(State(app): State<Arc<App>>) -> Response {
    let seen = from_snapshot(&app.engine, Want::Cooldowns, |e, snap| {
        let routable = e.routable_under(&snap.cooldowns, snap.now);
        let mode = e.mode();
        let last_resort = e.last_resort_usable(&mode, &snap.cooldowns, snap.now);
        (
            e.not_ready(&routable),
            routable.len(),
            snap.source,
            Some(mode),
            last_resort,
        )
    })
    .await
    .unwrap_or((Some("internal_error"), 0, Source::Local, None, 0));
    let (not_ready, routable, state, mode, last_resort) = seen;
    let degraded = mode.is_some_and(|m| m.degraded());
    let (status, mut body) = match not_ready {
        None if degraded => (
            StatusCode::OK,
            json!({"status": "degraded", "routable_models": routable}),
        ),
        None => (
            StatusCode::OK,
            json!({"status": "ready", "routable_models": routable}),
        ),
        // No active model can serve, but paused ones may: still serving.
        Some(reason) if degraded && last_resort > 0 => (
            StatusCode::OK,
            json!({"status": "degraded", "reason": reason, "routable_models": 0}),
        ),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "not_ready", "reason": reason, "routable_models": 0}),
        ),
    };
    if let Some(m) = mode {
        body["providers"] = json!(m.counts.providers);
        body["active_providers"] = json!(m.counts.active_providers);
        if degraded {
            body["last_resort_models"] = json!(last_resort);
            body["since"] = json!(m.since);
        }
    }
    let down = app.engine.telemetry.reach.unreachable();
    if !down.is_empty() {
        body["unreachable"] = json!(down);
    }
    // Serving from local state while Redis is away is still ready.
    if let Some(s) = app.engine.ledger.shared() {
        body["shared_state"] = json!(s.describe());
        body["state"] = json!(state);
    }
    // So is routing on the last shared record seen: it says so.
    if let Some(r) = app.engine.record_view() {
        body["record"] = json!(r);
    }
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    app.items.sweep(app.engine.clock.now());
    let text = from_snapshot(
        &app.engine,
        Want::Everything,
        super::providers::metrics_text,
    )
    .await
    .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn providers(State(app): State<Arc<App>>) -> Response {
    match from_snapshot(&app.engine, Want::Everything, super::providers::view).await {
        Some(v) => axum::Json(v).into_response(),
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// What every routed response carries besides its body, whichever
/// surface renders it: where it went, what was tried, what the request
/// lost on the way.
#[derive(Debug, Default)]
pub struct Routed {
    /// `provider::model` that served; `None` for an error.
    pub via: Option<String>,
    pub attempts: Vec<Attempt>,
    /// For `X-Llmprobe-Dropped`: what the surface dropped before routing,
    /// the router's clamps, then the fields the dialect could not carry.
    pub dropped: Vec<String>,
}

impl Routed {
    /// A served request's headers: where it went, what was tried, and
    /// what it lost: the surface's own drops, then `lost` (the router's
    /// clamps, the dialect's drops) in the surface's words (`renamed`).
    fn served(
        via: String,
        attempts: Vec<Attempt>,
        mut dropped: Vec<String>,
        lost: [&[String]; 2],
        renamed: &'static [(&'static str, &'static str)],
    ) -> Routed {
        for names in lost {
            dropped.extend(rename(names, renamed));
        }
        Routed {
            via: Some(via),
            attempts,
            dropped,
        }
    }

    /// `X-Routed-Via`, `X-Fallback-Attempts`, `X-Fallback-Trail`,
    /// `X-Llmprobe-Dropped`, and `X-Fallback-Detail` when `[route]
    /// detail_header` is on.
    pub fn apply(&self, h: &mut HeaderMap, detail: bool) {
        routed_headers(h, self.via.as_deref(), &self.attempts);
        dropped_header(h, &self.dropped);
        if detail {
            detail_header(h, &self.attempts);
        }
    }
}

/// One request as a surface hands it to the server: the chat request
/// every dialect starts from, the router's view of it, and what the
/// surface itself dropped.
#[derive(Debug)]
pub struct Routing {
    pub req: ChatRequest,
    pub ask: Ask,
    /// Dropped by the surface before routing (`thinking`, a built-in
    /// tool), reported ahead of everything else in `X-Llmprobe-Dropped`.
    pub dropped: Vec<String>,
    /// Pass an OpenAI upstream's body or chunks on as they came (the Chat
    /// Completions surface); other surfaces render from parsed replies.
    pub native: bool,
    /// Chat field names the surface mapped from fields of its own, with
    /// their names there (`verbosity` is `text.verbosity` on the
    /// Responses surface): the router's clamps and the dialect's dropped
    /// fields are reported under the client's name.
    pub renamed: &'static [(&'static str, &'static str)],
}

impl Routing {
    /// `req` as asked with these headers (a session header names the
    /// conversation).
    pub fn new(req: ChatRequest, headers: &HeaderMap) -> Routing {
        let model = Some(req.model.clone()).filter(|m| !m.is_empty());
        let session = super::ask::SESSION_HEADERS
            .iter()
            .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()));
        let ask = Ask::new(model.as_deref(), &req).with_session(session);
        Routing {
            req,
            ask,
            dropped: Vec::new(),
            native: false,
            renamed: &[],
        }
    }
}

/// A request that was not served: the error, for the surface to render
/// in its shape, and the headers to set on it.
#[derive(Debug)]
pub struct Failure {
    pub error: ApiError,
    pub routed: Routed,
}

impl Failure {
    fn exhausted(x: Exhausted) -> Failure {
        Failure {
            error: error::route_error(&x),
            routed: Routed {
                via: None,
                attempts: x.attempts,
                dropped: Vec::new(),
            },
        }
    }

    /// The error as `shape` writes it, with the routing headers.
    pub fn into_response(self, app: &App, shape: Shape) -> Response {
        let mut resp = shape.error(self.error, app.engine.clock.now());
        self.routed
            .apply(resp.headers_mut(), app.engine.settings.detail_header);
        resp
    }
}

impl App {
    /// Count a request refused before routing (a body that does not
    /// parse) and render its error in `shape`.
    pub fn refuse(&self, e: ApiError, shape: Shape) -> Response {
        self.engine.telemetry.count_request("refused");
        shape.error(e, self.engine.clock.now())
    }

    /// Set the routing headers on a served response.
    pub fn headers(&self, resp: &mut Response, routed: &Routed) {
        routed.apply(resp.headers_mut(), self.engine.settings.detail_header);
    }
}

/// Route a non-streamed request within the request timeout: the
/// completion (in no surface's shape) and its headers, or why not.
pub async fn complete(app: &App, r: Routing) -> Result<(Completion, Routed), Failure> {
    let engine = app.engine.clone();
    let timeout = engine.settings.request_timeout;
    let Routing {
        req,
        ask,
        dropped,
        native,
        renamed,
    } = r;
    let e2 = engine.clone();
    let routed = engine.route(&ask, |c, key| {
        let (e, req) = (e2.clone(), req.clone());
        async move { send::complete(&e, &c, key.as_ref(), &req, native).await }
    });
    match tokio::time::timeout(timeout, routed).await {
        Ok(Ok(s)) => {
            let lost = [&s.clamped[..], &s.value.dropped[..]];
            let routed = Routed::served(s.via, s.attempts, dropped, lost, renamed);
            Ok((s.value, routed))
        }
        Ok(Err(x)) => Err(Failure::exhausted(x)),
        Err(_) => Err(Failure {
            error: error::request_timeout(timeout),
            routed: Routed::default(),
        }),
    }
}

/// A served stream's events, for a surface's writer: the reply's deltas
/// (or, natively, an OpenAI upstream's chunks), usage, then the end or a
/// failure. Usage correction and failure accounting are already applied.
pub type Events = Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// A stream that has begun: its events, the candidate's model id (which
/// rendered events name), and its headers.
pub struct Opened {
    pub events: Events,
    pub model: String,
    pub routed: Routed,
}

/// Route a streamed request: returns once the first event has arrived,
/// so every failure before it falls over; or why nothing could serve it.
pub async fn open(app: &App, r: Routing) -> Result<Opened, Failure> {
    let engine = app.engine.clone();
    let Routing {
        req,
        ask,
        dropped,
        native,
        renamed,
    } = r;
    let e2 = engine.clone();
    let served = engine
        .route(&ask, |c, key| {
            let (e, req) = (e2.clone(), req.clone());
            async move { send::open_stream(&e, &c, key.as_ref(), &req, native).await }
        })
        .await;
    let s = match served {
        Ok(s) => s,
        Err(x) => return Err(Failure::exhausted(x)),
    };
    let lost = [&s.clamped[..], &s.value.dropped[..]];
    let routed = Routed::served(s.via, s.attempts, dropped, lost, renamed);
    let first = futures_util::stream::iter(s.value.first);
    let events = engine.watch_stream(
        s.target.clone(),
        s.reservation,
        ask.prompt_tokens,
        Some(s.timing),
        first.chain(s.value.rest),
    );
    Ok(Opened {
        events: Box::pin(events),
        model: s.value.model,
        routed,
    })
}

/// Route `r` and answer it whole: when the client asked for a stream
/// (`r.req.stream`), `stream` renders the events once the first has come;
/// otherwise `reply` renders the completion. Either way the response gets
/// the routing headers; a request nothing served gets its error in
/// `shape`. Every surface's handler ends here.
pub async fn answer(
    app: &App,
    r: Routing,
    shape: Shape,
    reply: impl FnOnce(Completion) -> Response,
    stream: impl FnOnce(Events, &str) -> Response,
) -> Response {
    let served = if r.req.stream {
        open(app, r)
            .await
            .map(|o| (stream(o.events, &o.model), o.routed))
    } else {
        complete(app, r).await.map(|(c, routed)| (reply(c), routed))
    };
    match served {
        Ok((mut resp, routed)) => {
            app.headers(&mut resp, &routed);
            resp
        }
        Err(f) => f.into_response(app, shape),
    }
}

/// A header value that says `text` as written, whatever it holds: UTF-8
/// passes as obs-text (as in `X-Llmprobe-Dropped`), and each ASCII control
/// character, which cannot be in a header and would end one, is written
/// `%XX`. A model named in a config or an upstream's listing with CR/LF or
/// non-ASCII in it thus never splits a routing header, nor loses it.
fn header_text(text: &str) -> HeaderValue {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_control() && c != '\t' {
            let _ = write!(out, "%{:02X}", c as u32);
        } else {
            out.push(c);
        }
    }
    HeaderValue::from_bytes(out.as_bytes()).unwrap_or(HeaderValue::from_static("?"))
}

fn routed_headers(h: &mut HeaderMap, via: Option<&str>, attempts: &[Attempt]) {
    let mut set = |name: &'static str, value: String| {
        h.insert(name, header_text(&value));
    };
    if let Some(via) = via {
        set("x-routed-via", via.to_string());
    }
    set(
        "x-fallback-attempts",
        attempts.iter().filter(|a| a.failed()).count().to_string(),
    );
    // Present on every routed response: `none` says the first candidate
    // tried served (or, for an error, that nothing was tried).
    set(
        "x-fallback-trail",
        if attempts.is_empty() {
            "none".to_string()
        } else {
            trail(attempts, TRAIL_CAP)
        },
    );
}

/// `X-Fallback-Detail: p::m=rate_limit (429: slow down); …`: each failed
/// attempt's class and its short, redacted reason. Off unless `[route]
/// detail_header = true`: the reasons are the upstreams' words.
fn detail_header(h: &mut HeaderMap, attempts: &[Attempt]) {
    let mut out = String::new();
    for a in attempts.iter().filter(|a| a.failed()) {
        let mut reason: String = a
            .message
            .as_deref()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_control())
            .take(DETAIL_REASON_CAP)
            .collect();
        // The classifier's own words often start with the status already
        // (`HTTP 500: …`); say it once.
        if let Some(status) = a.status
            && !reason.starts_with(&format!("HTTP {status}"))
        {
            reason = format!("{status}: {reason}");
        }
        let item = format!("{}={} ({})", a.model, a.class, reason.trim());
        if out.len() + item.len() + 2 > DETAIL_CAP {
            out.push_str("; …");
            break;
        }
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(&item);
    }
    if out.is_empty() {
        return;
    }
    h.insert("x-fallback-detail", header_text(&out));
}

/// Each reason in `X-Fallback-Detail` is cut to this many characters.
const DETAIL_REASON_CAP: usize = 120;
/// `X-Fallback-Detail` is cut to about this many bytes.
const DETAIL_CAP: usize = 2048;

/// `X-Llmprobe-Dropped: seed, logit_bias`: what the request lost on the
/// way to the upstream that answered, when it lost anything.
/// `names` with each chat field name in `renamed` as the surface's client
/// names it: `verbosity` and a clamp `max_tokens→8192` become
/// `text.verbosity` and `max_output_tokens→8192`.
fn rename<'a>(
    names: &'a [String],
    renamed: &'static [(&'static str, &'static str)],
) -> impl Iterator<Item = String> + 'a {
    names.iter().map(move |n| {
        let (head, tail) = n.split_at(n.find('→').unwrap_or(n.len()));
        match renamed.iter().find(|(chat, _)| *chat == head) {
            Some((_, theirs)) => format!("{theirs}{tail}"),
            None => n.clone(),
        }
    })
}

fn dropped_header(h: &mut HeaderMap, dropped: &[String]) {
    if let Some(v) = dropped_value(dropped) {
        h.insert("x-llmprobe-dropped", v);
    }
}

/// The header's value: the names that can be in a header, UTF-8 bytes
/// included (obs-text, so the clamp `max_tokens→8192` stays as written).
/// A client's unknown field can be named anything, a control character
/// say; such a name is left out rather than the whole header.
///
/// A client can send any number of unknown fields, with names of any
/// length: the header names the first [`DROPPED_NAMES`] (each cut at
/// [`DROPPED_NAME_CHARS`] characters, `…` marking the cut) and then says
/// how many more there were (`… and 3 more`), so that it stays readable by
/// every client.
fn dropped_value(dropped: &[String]) -> Option<HeaderValue> {
    let names: Vec<&str> = dropped
        .iter()
        .map(String::as_str)
        .filter(|n| !n.is_empty() && HeaderValue::from_bytes(n.as_bytes()).is_ok())
        .collect();
    if names.is_empty() {
        return None;
    }
    let mut text = String::new();
    for (i, n) in names.iter().take(DROPPED_NAMES).enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        match n.char_indices().nth(DROPPED_NAME_CHARS) {
            Some((cut, _)) => {
                text.push_str(&n[..cut]);
                text.push('…');
            }
            None => text.push_str(n),
        }
    }
    if names.len() > DROPPED_NAMES {
        text.push_str(&format!(", … and {} more", names.len() - DROPPED_NAMES));
    }
    HeaderValue::from_bytes(text.as_bytes()).ok()
}

/// How many names `X-Llmprobe-Dropped` lists before it counts the rest.
const DROPPED_NAMES: usize = 32;
/// How long a name in it may be, in characters.
const DROPPED_NAME_CHARS: usize = 64;

/// Save the cooldowns shortly after they change, until `stop` fires.
pub async fn saver(engine: Arc<Engine>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = engine.ledger.changed.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::time::sleep(super::engine::SAVE_DEBOUNCE).await;
        let e = engine.clone();
        if let Ok(Err(err)) = tokio::task::spawn_blocking(move || e.save_if_dirty()).await {
            // The server keeps serving from memory; the next change (or
            // the shutdown) tries the save again.
            eprintln!("warning: route: cannot save the route state: {err}; serving on from memory");
        }
    }
}

/// How often the state file and the capability verdicts are checked for
/// changes.
pub const STATE_POLL: Duration = Duration::from_millis(500);
/// Keep the shared record current (`--record shared`): poll its version
/// every [`STATE_POLL`], as the state file is polled otherwise.
pub async fn record_poller(engine: Arc<Engine>) {
    let mut tick = tokio::time::interval(STATE_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        engine.sync_record().await;
    }
}

/// How often every model's cost is recomputed (the fade of traffic
/// figures, [`crate::route::speed`]), and, with shared state, merged with
/// the other instances'.
pub const SPEED_TICK: Duration = Duration::from_secs(1);

/// Keep the measured costs current, off the request path: every
/// [`SPEED_TICK`], merge with the other instances' figures (with shared
/// state: one round trip) and recompute every cost.
pub async fn speed_keeper(engine: Arc<Engine>) {
    let mut tick = tokio::time::interval(SPEED_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        engine.merge_speed().await;
        engine.tick_speed();
    }
}

/// How often the health log is checked for new probes.
pub const HEALTH_POLL: Duration = Duration::from_secs(5);

/// How often degraded mode's grace periods are stepped (besides each
/// `/readyz`, `/v1/providers` and request that finds no active candidate).
pub const MODE_POLL: Duration = Duration::from_secs(1);

/// Step degraded mode's grace periods every [`MODE_POLL`], so that a
/// change of mode is timed from the state change and logged when it
/// happens, whether or not anything asks ([`Engine::mode`]); then the
/// alerts, if any ([`Engine::tick_alerts`]): ended benches resolved, a
/// batch whose window has passed sent.
pub async fn mode_watcher(engine: Arc<Engine>) {
    let mut tick = tokio::time::interval(MODE_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        engine.mode();
        engine.tick_alerts();
    }
}

/// Keep the candidate order's health data current, off the request path,
/// and probe again the providers found unreachable ([`super::reach`]).
pub async fn health_poller(engine: Arc<Engine>) {
    let mut tick = tokio::time::interval(HEALTH_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let e = engine.clone();
        if let Ok(Err(err)) = tokio::task::spawn_blocking(move || e.refresh_health()).await {
            eprintln!("warning: {err}; the candidate order keeps the health read before");
        }
        engine.sync_verdicts().await;
        let down = engine.telemetry.reach.unreachable();
        if !down.is_empty() {
            let again: Vec<_> = engine
                .providers()
                .iter()
                .filter(|p| down.contains_key(&p.provider.name))
                .cloned()
                .collect();
            engine.telemetry.reach.probe(&engine.client, &again).await;
            for name in down.keys() {
                if !engine.telemetry.reach.unreachable().contains_key(name) {
                    eprintln!("route: {name} is reachable again");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_chat_names_are_reported_by_the_surfaces_names() {
        let renamed = &[
            ("max_tokens", "max_output_tokens"),
            ("verbosity", "text.verbosity"),
        ];
        let names: Vec<String> = ["max_tokens→8192", "verbosity", "seed"]
            .map(String::from)
            .into();
        let got: Vec<String> = rename(&names, renamed).collect();
        assert_eq!(got, ["max_output_tokens→8192", "text.verbosity", "seed"]);
    }

    #[test]
    fn header_text_escapes_control_characters_and_keeps_utf8() {
        let v = header_text("p::evil\r\nX-Injected: 1\u{7f}");
        assert_eq!(v.as_bytes(), b"p::evil%0D%0AX-Injected: 1%7F");
        let v = header_text("p::caf\u{e9}\ttab");
        assert_eq!(v.as_bytes(), "p::caf\u{e9}\ttab".as_bytes());
        let mut h = HeaderMap::new();
        routed_headers(&mut h, Some("p::a\nb"), &[]);
        assert_eq!(h["x-routed-via"], "p::a%0Ab");
        assert_eq!(h["x-fallback-trail"], "none");
    }

    #[test]
    fn dropped_names_that_cannot_be_in_a_header_are_left_out_alone() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let v = dropped_value(&names(&["max_tokens→8192", "bad\nname", "seed"])).unwrap();
        assert_eq!(v.as_bytes(), "max_tokens→8192, seed".as_bytes());
        assert!(dropped_value(&names(&["\r"])).is_none());
        assert!(dropped_value(&[]).is_none());
        // A flood of unknown fields, one of them very long: the header
        // stays short.
        let long = "x".repeat(10_000);
        let many: Vec<String> = std::iter::once(long)
            .chain((0..1000).map(|i| format!("f{i}")))
            .collect();
        let v = dropped_value(&many).unwrap();
        let text = std::str::from_utf8(v.as_bytes()).unwrap();
        assert!(text.len() < 512, "{}", text.len());
        assert!(
            text.starts_with(&format!("{}…, f0, f1,", "x".repeat(64))),
            "{text}"
        );
        assert!(text.ends_with(", f30, … and 969 more"), "{text}");
    }
}
