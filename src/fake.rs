//! A scriptable fake LLM provider on 127.0.0.1, for tests, demos and
//! benchmarks.
//!
//! One server speaks all three dialects (OpenAI chat completions, Anthropic
//! Messages, Gemini generateContent) under any path prefix, so a catalog can
//! point every provider at it, streamed or not (`"stream": true`, Gemini's
//! `:streamGenerateContent`). Each request gets a [`Behaviour`]: scripted
//! per model with `--script MODEL=B1,B2,…` (cycled), or read from the model
//! id itself, so a model named `e500` always fails with a 500. Correct
//! answers come from [`Pool::solve`], so the fake needs no shared state with
//! the prober. A request that declares tools gets a tool call, one that
//! asks for JSON gets JSON, and refusing behaviours turn down tools, JSON
//! mode, images, large output caps or long prompts as real providers do
//! (`fake/asks.rs`); the `agent` behaviour calls a tool only when the
//! user's turn names it (`[[call NAME {args}]]`), for real coding agents
//! run against `route`. Whatever the behaviour, a conversation the real
//! provider refuses for its shape (a tool result that answers no call, a
//! call left unanswered, a role it does not know, empty content) gets that
//! provider's 400 ([`DialectResponder::malformed`]), so that a translation
//! that breaks a provider's rules fails against the fake as it would
//! against the provider. Every request is recorded with its body (never
//! the key), in memory for `GET /_fake/requests` and optionally as JSON
//! lines in a file.
//!
//! `GET {prefix}/models` answers the providers' model lists
//! (`fake/lists.rs`): the dialect is read from the headers (`x-goog-api-key`
//! or `?key=` Gemini, `x-api-key` or `anthropic-version` Anthropic, else
//! OpenAI; keyless, a `v1beta` segment is Gemini), and OpenAI's flavour from
//! a path segment of the base URL: `/openrouter/`, `/mistral/`, `/together/`
//! and `/groq/` answer those providers' shapes, any other path the plain
//! one. Anthropic's and Gemini's lists page, at most two models a page. The
//! models listed are `--models-file`'s ([`FakeConfig::models_file`]), a JSON
//! array read again for every request, so that a test drops a model by
//! rewriting it:
//!
//! ```json
//! [{"id": "m", "free": true, "context": 131072, "max_output": 8192,
//!   "tools": true, "json": true, "vision": false, "deprecation": "2027-01-01",
//!   "kind": "chat", "aliases": [], "listed": true, "behaviour": "ok"}]
//! ```
//!
//! (all but `id` optional; `free` defaults to an id ending in `:free`;
//! `listed: false` keeps an entry out of the lists, and `behaviour` is what
//! chat requests for it get, before `--script`), or without the file every
//! scripted model. A file that cannot be read or parsed answers 500 naming
//! it. `--list-behaviour [SCOPE=]B,…` ([`FakeConfig::list_scripts`]) makes
//! the lists fail: `unauthorized`, `html200`, `e500`, `not-found` (no list
//! endpoint) and more.
//!
//! This file only routes a request to its dialect and picks its behaviour;
//! what each dialect reads and sends is its responder's
//! (`fake/responder.rs`, one file per dialect).

mod anthropic;
mod arith;
mod asks;
mod behaviour;
mod gemini;
mod lists;
mod openai;
mod respond;
mod responder;
mod stream;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::fs::OpenOptions;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use self::behaviour::INVENTED_TOOL;
pub use self::behaviour::{Behaviour, parse_script, script_help};
use self::lists::ListBehaviour;
pub use self::lists::{ListScript, MODELS_FILE_HELP, list_help, parse_list_script};
use self::responder::{DialectResponder, Failure, Malformed};
use crate::error::{Error, Result};
use crate::http_server::{self, Server};
use crate::prompts::Pool;
pub use crate::upstream::dialect::Dialect;
use crate::upstream::dialect::JSON_TOOL;

/// How long a graceful shutdown may wait for open requests before they are
/// cut off.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Everything a fake server needs, validated.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Behaviours cycled per request, by model id.
    pub scripts: BTreeMap<String, Vec<Behaviour>>,
    /// Added to every successful answer.
    pub latency: Duration,
    /// Where correct answers come from.
    pub pool: Pool,
    /// Append one JSON line per request to this file.
    pub record: Option<PathBuf>,
    /// Append one JSON line ([`ClosedEarly`]) to this file for each
    /// streamed answer whose client went away before its end.
    pub record_closes: Option<PathBuf>,
    /// Answer nothing until this file exists (recorded requests wait): a
    /// test's way to hold a run in the middle while it changes something.
    pub hold_until: Option<PathBuf>,
    /// The models the lists carry (`fake/lists.rs`), read again for each
    /// list request; `None`: the scripted models.
    pub models_file: Option<PathBuf>,
    /// How list requests fail (`--list-behaviour`), the first that applies.
    pub list_scripts: Vec<ListScript>,
}

impl Default for FakeConfig {
    fn default() -> FakeConfig {
        FakeConfig::new(Pool::embedded())
    }
}

impl FakeConfig {
    pub fn new(pool: Pool) -> FakeConfig {
        FakeConfig {
            port: 0,
            scripts: BTreeMap::new(),
            latency: Duration::ZERO,
            pool,
            record: None,
            record_closes: None,
            hold_until: None,
            models_file: None,
            list_scripts: Vec::new(),
        }
    }

    /// Script `model` to cycle through `behaviours`.
    pub fn script(mut self, model: &str, behaviours: &[Behaviour]) -> FakeConfig {
        self.scripts.insert(model.to_string(), behaviours.to_vec());
        self
    }
}

/// One request as the fake saw it. Holds whether a key was sent, never the
/// key; the path is recorded without its query, which may carry `?key=`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Arrival time, Unix milliseconds.
    pub at_ms: i64,
    pub method: String,
    pub path: String,
    /// `None` for a path that is no dialect's endpoint.
    pub dialect: Option<Dialect>,
    pub model: Option<String>,
    /// The behaviour chosen, or `None` when the request was rejected first.
    pub behaviour: Option<String>,
    pub auth: bool,
    /// The client asked for a streamed answer.
    #[serde(default)]
    pub stream: bool,
    /// The body, parsed; `None` when it is not JSON. Keys travel in
    /// headers or the query, never here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

/// A streamed answer whose client closed the connection before its end
/// (`--record-closes`): the proof that a client upstream of the fake, such
/// as `route`, cancelled the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClosedEarly {
    /// When the close was seen, Unix milliseconds.
    pub at_ms: i64,
    pub model: String,
    /// Body bytes handed to the connection before it closed.
    pub sent_bytes: u64,
}

struct Inner {
    cfg: FakeConfig,
    /// Requests so far per scripted model, to pick the next behaviour.
    counters: Mutex<HashMap<String, usize>>,
    /// Requests so far, for `flaky` and `spike`'s draws.
    draws: std::sync::atomic::AtomicU64,
    /// List requests so far per `--list-behaviour`, to cycle its behaviours.
    list_counts: Vec<std::sync::atomic::AtomicUsize>,
    requests: Mutex<Vec<RecordedRequest>>,
    record: Option<Recorder>,
    closes: Option<Recorder>,
    shutdown: watch::Receiver<bool>,
}

/// A running fake provider. Dropping it stops the server without waiting.
pub struct FakeServer {
    server: Server,
    /// What the unit tests read back ([`FakeServer::requests`]).
    #[cfg_attr(not(test), allow(dead_code))]
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer")
            .field("addr", &self.server.addr())
            .finish()
    }
}

/// Bind 127.0.0.1 and serve in the background of the current tokio runtime.
pub async fn start(cfg: FakeConfig) -> Result<FakeServer> {
    let record = Recorder::open_off_runtime(cfg.record.clone()).await?;
    let closes = Recorder::open_off_runtime(cfg.record_closes.clone()).await?;
    let bind = SocketAddr::from((Ipv4Addr::LOCALHOST, cfg.port));
    // The handlers need the shutdown signal before the server exists, to
    // cut sleeping behaviours short; they get it through a relay.
    let (relay, shutdown) = watch::channel(false);
    let inner = Arc::new(Inner {
        list_counts: cfg.list_scripts.iter().map(|_| 0.into()).collect(),
        cfg,
        counters: Mutex::new(HashMap::new()),
        draws: std::sync::atomic::AtomicU64::new(0),
        requests: Mutex::new(Vec::new()),
        record,
        closes,
        shutdown,
    });
    let app = Router::new()
        .route("/_fake/requests", get(list_requests))
        .fallback(handle)
        .with_state(inner.clone());
    let (server, mut stopping) =
        http_server::start(bind, app, "fake provider", http_server::Serving::default()).await?;
    tokio::spawn(async move {
        let _ = stopping.wait_for(|stop| *stop).await;
        let _ = relay.send(true);
    });
    Ok(FakeServer { server, inner })
}

impl FakeServer {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        self.server.url()
    }

    #[cfg(test)]
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Every request so far, oldest first.
    #[cfg(test)]
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.requests).clone()
    }

    /// Stop accepting, cut short sleeping behaviours, and wait (briefly) for
    /// open responses to finish.
    pub async fn shutdown(self) {
        self.server.shutdown(SHUTDOWN_GRACE).await;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves the data usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn list_requests(State(inner): State<Arc<Inner>>) -> Response {
    let list = lock(&inner.requests).clone();
    let body = serde_json::to_value(list).unwrap_or(Value::Null);
    respond::json_response(StatusCode::OK, &body)
}

/// The fake's side of dialect `d`: one responder per dialect, each in its
/// own file.
fn responder(d: Dialect) -> &'static dyn DialectResponder {
    match d {
        Dialect::Openai => &openai::OpenAi,
        Dialect::Anthropic => &anthropic::Anthropic,
        Dialect::Gemini => &gemini::Gemini,
    }
}

/// What a request asks for, read from its path, headers and body.
struct Call {
    dialect: Dialect,
    model: String,
    prompt: String,
    /// The key sent, kept only for `echo-key`.
    key: Option<String>,
    /// `None`: one JSON answer.
    stream: Option<stream::Mode>,
    /// OpenAI `stream_options.include_usage`.
    include_usage: bool,
    /// Tools, JSON mode, images, the output cap, the prompt's length.
    asks: asks::Asks,
}

/// Which dialect's endpoint a path is.
struct Endpoint {
    dialect: Dialect,
    /// Gemini's model, from the path.
    model: Option<String>,
    /// Gemini's `:streamGenerateContent`, and how it streams.
    stream: Option<stream::Mode>,
}

fn endpoint(uri: &Uri) -> Option<Endpoint> {
    let path = uri.path();
    let plain = |dialect| Endpoint {
        dialect,
        model: None,
        stream: None,
    };
    if path.ends_with("/chat/completions") {
        return Some(plain(Dialect::Openai));
    }
    if path.ends_with("/messages") {
        return Some(plain(Dialect::Anthropic));
    }
    let (rest, stream) = match path.strip_suffix(":generateContent") {
        Some(rest) => (rest, None),
        None => {
            let sse = uri
                .query()
                .is_some_and(|q| q.split('&').any(|kv| kv == "alt=sse"));
            let mode = if sse {
                stream::Mode::Sse
            } else {
                stream::Mode::JsonArray
            };
            (path.strip_suffix(":streamGenerateContent")?, Some(mode))
        }
    };
    let model = &rest[rest.rfind("/models/")? + "/models/".len()..];
    (!model.is_empty()).then(|| Endpoint {
        dialect: Dialect::Gemini,
        model: Some(model.to_string()),
        stream,
    })
}

/// Read the request, or say why the real provider would reject it: a
/// body that is not JSON, a missing field or header, or a conversation of
/// the wrong shape ([`DialectResponder::malformed`]), all before any
/// behaviour is chosen.
fn parse_call(
    ep: Endpoint,
    headers: &HeaderMap,
    uri: &Uri,
    body: std::result::Result<&Value, &serde_json::Error>,
) -> std::result::Result<Call, Malformed> {
    let dialect = ep.dialect;
    let r = responder(dialect);
    let json = body.map_err(|e| Malformed::new(format!("the body is not valid JSON: {e}")))?;
    if !json.is_object() {
        return Err(Malformed::new("the body is not a JSON object"));
    }
    let model = match ep.model {
        Some(m) => m,
        None => json
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .ok_or(Malformed::new("model: field required"))?
            .to_string(),
    };
    if let Some(missing) = r.missing_header(headers) {
        return Err(Malformed::new(missing));
    }
    if let Some(m) = r.malformed(headers, json) {
        return Err(m);
    }
    let prompt = r.prompt(json).ok_or(Malformed::new(r.no_prompt()))?;
    let stream = r.stream_mode(ep.stream, json);
    let include_usage = json
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Call {
        dialect,
        model,
        prompt,
        key: r.api_key(headers, uri),
        stream,
        include_usage,
        asks: r.asks(json),
    })
}

impl Inner {
    /// The next behaviour of `model`: cycled through its models file
    /// entry's `behaviour` if it has one (`from_file`), else its script,
    /// else read from its id.
    fn behaviour_for(&self, model: &str, from_file: Option<&[Behaviour]>) -> Behaviour {
        match from_file.or(self.cfg.scripts.get(model).map(Vec::as_slice)) {
            Some(list) if !list.is_empty() => {
                let mut counters = lock(&self.counters);
                let n = counters.entry(model.to_string()).or_insert(0);
                let b = list[*n % list.len()];
                *n += 1;
                b
            }
            _ => Behaviour::for_model(model),
        }
    }

    /// The models file's entries now, or the scripted models without one.
    async fn entries(&self) -> std::result::Result<Vec<lists::Entry>, String> {
        match &self.cfg.models_file {
            Some(path) => lists::load(path).await,
            None => Ok(self
                .cfg
                .scripts
                .keys()
                .map(|m| lists::Entry::new(m))
                .collect()),
        }
    }

    /// The `behaviour` the models file gives `model` now, if any.
    async fn file_behaviours(
        &self,
        model: &str,
    ) -> std::result::Result<Option<Vec<Behaviour>>, String> {
        if self.cfg.models_file.is_none() {
            return Ok(None);
        }
        let entries = self.entries().await?;
        Ok(entries
            .into_iter()
            .find(|e| e.id == model)
            .and_then(|e| e.behaviour))
    }

    /// The next behaviour of a list request in dialect `d` to `path`: the
    /// first `--list-behaviour` that applies, cycled; else the list.
    fn list_behaviour(&self, d: Dialect, path: &str) -> ListBehaviour {
        let scripts = self.cfg.list_scripts.iter().zip(&self.list_counts);
        for (script, count) in scripts {
            if script.applies(d, path) && !script.behaviours.is_empty() {
                let n = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return script.behaviours[n % script.behaviours.len()];
            }
        }
        ListBehaviour::Is(Behaviour::Ok(Duration::ZERO))
    }

    /// Wait until [`FakeConfig::hold_until`]'s file exists, if one is set.
    async fn hold(&self) {
        if let Some(file) = &self.cfg.hold_until {
            while !file.exists() {
                self.sleep(HOLD_POLL).await;
                if *self.shutdown.borrow() {
                    break;
                }
            }
        }
    }

    /// Keep `r`, and wait until it is in the record file, so that a client
    /// that has its answer finds its request there.
    async fn record(&self, r: RecordedRequest) {
        let written = {
            // Queueing the line under the list's lock keeps the file in the
            // same order as `GET /_fake/requests`.
            let mut list = lock(&self.requests);
            let written = self.record.as_ref().map(|rec| rec.append(&r));
            list.push(r);
            written
        };
        if let Some(w) = written {
            // An error means the writer is gone; it said why on stderr.
            let _ = w.await;
        }
    }

    /// Sleep, unless the server is shutting down.
    async fn sleep(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        let mut stop = self.shutdown.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
    }
}

/// Appends record lines on a thread of its own, so that request handlers
/// never block a runtime thread on file I/O. Lines are written in the order
/// they were queued; each is acknowledged once written.
struct Recorder {
    queue: std::sync::mpsc::Sender<(String, oneshot::Sender<()>)>,
}

impl Recorder {
    /// [`Recorder::open`] on a blocking thread, for a path that is set.
    async fn open_off_runtime(path: Option<PathBuf>) -> Result<Option<Recorder>> {
        let Some(p) = path else { return Ok(None) };
        let opened = tokio::task::spawn_blocking(move || Recorder::open(&p))
            .await
            .map_err(|e| Error::Internal(format!("opening the record file: {e}")))??;
        Ok(Some(opened))
    }

    fn open(path: &std::path::Path) -> Result<Recorder> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(format!("cannot open record file {}", path.display()), e))?;
        let (queue, lines) = std::sync::mpsc::channel::<(String, oneshot::Sender<()>)>();
        std::thread::Builder::new()
            .name("fake-record".into())
            .spawn(move || {
                // Ends when the server, and with it the queue, is dropped.
                while let Ok(first) = lines.recv() {
                    // Lines that queued up meanwhile go out in one write.
                    // Whole lines per write keep them whole when several
                    // fakes share the file in append mode.
                    let batch: Vec<_> = std::iter::once(first).chain(lines.try_iter()).collect();
                    let text: String = batch.iter().map(|(l, _)| l.as_str()).collect();
                    if let Err(e) = file.write_all(text.as_bytes()).and_then(|()| file.flush()) {
                        eprintln!("fake provider: cannot append to the record file: {e}");
                    }
                    for (_, done) in batch {
                        let _ = done.send(());
                    }
                }
            })
            .map_err(|e| Error::io("cannot start the record file writer", e))?;
        Ok(Recorder { queue })
    }

    /// Queue `r`; the receiver fires once it is written.
    fn append(&self, r: &impl Serialize) -> oneshot::Receiver<()> {
        let mut line = serde_json::to_string(r).unwrap_or_default();
        line.push('\n');
        let (done, written) = oneshot::channel();
        let _ = self.queue.send((line, done));
        written
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut rec = RecordedRequest {
        at_ms: chrono::Utc::now().timestamp_millis(),
        method: method.to_string(),
        path: uri.path().to_string(),
        dialect: None,
        model: None,
        behaviour: None,
        auth: false,
        stream: false,
        body: None,
    };
    let parsed = serde_json::from_slice::<Value>(&body);
    rec.body = parsed.as_ref().ok().cloned();
    if method == Method::GET
        && let Some(list) = lists::endpoint(&uri, &headers)
    {
        return lists::serve(&inner, list, &uri, &headers, rec).await;
    }
    let Some(ep) = endpoint(&uri).filter(|_| method == Method::POST) else {
        let msg = format!("no fake endpoint for {method} {}", uri.path());
        inner.record(rec).await;
        return respond::json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": {"message": msg, "type": "invalid_request_error"}}),
        );
    };
    let dialect = ep.dialect;
    rec.dialect = Some(dialect);
    rec.model = ep.model.clone();
    rec.auth = responder(dialect).api_key(&headers, &uri).is_some();
    rec.stream = ep.stream.is_some();
    // Refused whatever the model's behaviour, before one is chosen.
    let call = match parse_call(ep, &headers, &uri, parsed.as_ref()) {
        Ok(c) => c,
        Err(m) => {
            inner.record(rec).await;
            return responder(dialect).bad_request(&m.message, m.param.as_deref());
        }
    };
    let from_file = match inner.file_behaviours(&call.model).await {
        Ok(b) => b,
        Err(message) => {
            rec.model = Some(call.model.clone());
            inner.record(rec).await;
            return responder(dialect).failure(Failure::Internal { message: &message });
        }
    };
    let behaviour = inner.behaviour_for(&call.model, from_file.as_deref());
    let behaviour = match behaviour {
        Behaviour::Flaky(_) | Behaviour::Spike(_) => {
            let n = inner
                .draws
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            behaviour.resolve(splitmix64(FAULT_SEED ^ n))
        }
        b => b,
    };
    rec.model = Some(call.model.clone());
    rec.behaviour = Some(behaviour.to_string());
    rec.stream = call.stream.is_some();
    inner.record(rec).await;
    inner.hold().await;
    let resp = answer(&inner, &call, behaviour).await;
    if call.stream.is_some() && inner.closes.is_some() {
        return watch_close(inner.clone(), call.model.clone(), resp);
    }
    resp
}

/// `resp` with its body watched: dropped before its end (the client went
/// away; not the fake's own cut, which ends the body with an error), it
/// appends a [`ClosedEarly`] line to the closes record.
fn watch_close(inner: Arc<Inner>, model: String, resp: Response) -> Response {
    use futures_util::StreamExt;
    struct Guard {
        inner: Arc<Inner>,
        model: String,
        sent: u64,
        ended: bool,
    }
    impl Drop for Guard {
        fn drop(&mut self) {
            if self.ended {
                return;
            }
            if let Some(rec) = &self.inner.closes {
                // Written by the recorder's thread; nothing waits for it.
                drop(rec.append(&ClosedEarly {
                    at_ms: chrono::Utc::now().timestamp_millis(),
                    model: std::mem::take(&mut self.model),
                    sent_bytes: self.sent,
                }));
            }
        }
    }
    let (parts, body) = resp.into_parts();
    let guard = Guard {
        inner,
        model,
        sent: 0,
        ended: false,
    };
    let data = body.into_data_stream();
    let watched = futures_util::stream::unfold((data, guard), |(mut data, mut guard)| async move {
        let item = data.next().await;
        match &item {
            Some(Ok(b)) => guard.sent += b.len() as u64,
            Some(Err(_)) | None => guard.ended = true,
        }
        item.map(|i| (i, (data, guard)))
    });
    Response::from_parts(parts, axum::body::Body::from_stream(watched))
}

/// The seed of `flaky` and `spike`'s draws: fixed, so a run repeats.
const FAULT_SEED: u64 = 0x5eed_11a9_b0be;

/// SplitMix64: a well-mixed u64 from a counter.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How often a held request ([`FakeConfig::hold_until`]) looks for its file.
const HOLD_POLL: Duration = Duration::from_millis(20);

/// What a behaviour answers with.
enum Reply {
    /// Text, streamed when asked: the text, whether the token limit cut it,
    /// and how a stream of it ends.
    Text(String, bool, stream::Ending),
    /// A tool call, streamed when asked, and how a stream of it ends.
    Tool(asks::ToolCall, stream::Ending),
    /// No choices, content blocks or candidates.
    Empty,
    /// The same whether streamed or not.
    Fixed(Response),
}

/// How a behaviour that fails a capability probe answers, when the request
/// asks for that capability: `tool` is the right call, `right` the right
/// answer, `reading` what the request's image shows.
fn capability_failure(
    behaviour: Behaviour,
    call: &Call,
    tool: Option<&asks::ToolCall>,
    right: &str,
    reading: Option<u64>,
) -> Option<Reply> {
    let finish = stream::Ending::Finish;
    // A call of a tool the request offered (not JSON mode's, on Anthropic).
    let offered = tool.filter(|t| t.name != JSON_TOOL);
    let off_by_one = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_or_else(|_| "13".to_string(), |n| n.saturating_add(1).to_string())
    };
    let reply = match behaviour {
        Behaviour::TextNotCall => {
            offered?;
            Reply::Text(right.to_string(), false, finish)
        }
        Behaviour::WrongArgs => {
            let mut c = offered?.clone();
            asks::bump_first_number(&mut c.args);
            Reply::Tool(c, finish)
        }
        Behaviour::InventedTool => {
            let mut c = offered?.clone();
            c.name = INVENTED_TOOL.to_string();
            Reply::Tool(c, finish)
        }
        Behaviour::BadJson => {
            call.asks.json.as_ref()?;
            Reply::Text(format!("Sure! The answer is {right}."), false, finish)
        }
        Behaviour::JsonWrong => {
            call.asks.json.as_ref()?;
            let wrong = off_by_one(right);
            match call.asks.tool_call(&asks::question(&call.prompt), &wrong) {
                Some(t) => Reply::Tool(t, finish),
                None => Reply::Text(call.asks.text(&wrong), false, finish),
            }
        }
        Behaviour::Misread => Reply::Text(off_by_one(&reading?.to_string()), false, finish),
        _ => return None,
    };
    Some(reply)
}

async fn answer(inner: &Inner, call: &Call, behaviour: Behaviour) -> Response {
    let d = call.dialect;
    let r = responder(d);
    // What the user asked, without the context an agent wraps it in.
    let question = asks::question(&call.prompt);
    let expected = inner.cfg.pool.solve(&question);
    // What the image shows, when the request holds one the fake can read.
    let reading = call.asks.reading();
    // A probe's question, else an image's number, else any arithmetic
    // question a person typed.
    let count = arith::count(&question);
    let right = expected
        .map(|n| n.to_string())
        .or_else(|| reading.map(|n| n.to_string()))
        .or_else(|| count.map(|(from, to)| arith::counted(from, to, None)))
        .unwrap_or_else(|| {
            arith::answer(&question).unwrap_or_else(|| arith::NOT_ARITHMETIC.to_string())
        });
    let latency = inner.cfg.latency;
    let finish = stream::Ending::Finish;
    if let Some(why) = asks::refusal(behaviour, &call.asks) {
        return r.refuse(&why, &call.model);
    }
    // What a correct answer is: a tool call, or text (JSON when asked for,
    // a sentence quoting a tool result).
    let tool = call.asks.tool_call(&question, &right);
    let text = call.asks.text(&right);
    let answered = |ending| match &tool {
        Some(t) => Reply::Tool(t.clone(), ending),
        None => Reply::Text(text.clone(), false, ending),
    };
    let reply = match behaviour {
        Behaviour::Ok(extra) => {
            inner.sleep(latency + extra).await;
            answered(finish)
        }
        // Resolved to a concrete behaviour per request in `handle`.
        Behaviour::Flaky(_) | Behaviour::Spike(_) => {
            inner.sleep(latency).await;
            answered(finish)
        }
        Behaviour::Slow(wait) => {
            inner.sleep(latency + wait).await;
            answered(finish)
        }
        // A request they do not refuse, these answer like `ok`.
        Behaviour::NoTools
        | Behaviour::OllamaNoTools
        | Behaviour::NoJson
        | Behaviour::NoImages
        | Behaviour::MaxTokens(_)
        | Behaviour::ContextWindow(_) => {
            inner.sleep(latency).await;
            answered(finish)
        }
        // The capability failures: each answers like `ok` a request that
        // does not ask for what it gets wrong.
        Behaviour::TextNotCall
        | Behaviour::WrongArgs
        | Behaviour::InventedTool
        | Behaviour::BadJson
        | Behaviour::JsonWrong
        | Behaviour::Misread => {
            inner.sleep(latency).await;
            capability_failure(behaviour, call, tool.as_ref(), &right, reading)
                .unwrap_or_else(|| answered(finish))
        }
        // A coding agent's model, for real agents run against route: it
        // calls a tool only where the user's turn says which and with what
        // (`[[call NAME {args}]]`), its ids numbered through the
        // conversation; it answers a tool result, JSON mode and anything
        // else like `ok`, never calling a tool of its own accord.
        Behaviour::Agent => {
            inner.sleep(latency).await;
            match call.asks.directed_call(&call.prompt) {
                Some(c) => Reply::Tool(c, finish),
                None if call.asks.json.is_some() => answered(finish),
                None => Reply::Text(text.clone(), false, finish),
            }
        }
        Behaviour::GroqContextLength => Reply::Fixed(respond::groq_context_length()),
        Behaviour::GroqTpm => Reply::Fixed(respond::groq_tpm(&call.model)),
        Behaviour::Wrong => {
            inner.sleep(latency).await;
            let wrong = match count {
                // A count that skips a number in its middle.
                Some((from, to)) => arith::counted(from, to, Some(from + (to - from) / 2)),
                None => expected.map_or(13, |n| n.saturating_add(1)).to_string(),
            };
            Reply::Text(wrong, false, finish)
        }
        Behaviour::NoStream if call.stream.is_some() => Reply::Fixed(r.bad_request(
            "Streaming is not supported for this model; send the request without stream",
            Some("stream"),
        )),
        Behaviour::NoStream => {
            inner.sleep(latency).await;
            answered(finish)
        }
        // A reasoning model: its reasoning in the text before the answer.
        // Asked to call a tool or for JSON, it does so (the reasoning then
        // stays apart, as such models keep it out of JSON and calls).
        Behaviour::Think => {
            inner.sleep(latency).await;
            if tool.is_some() || call.asks.json.is_some() {
                answered(finish)
            } else {
                let text = format!(
                    "<think>Let me work this out. 12 + 30 = 42? No, that is another \
                     question. Check twice: 3 steps, 2 carries.</think>\n\n{text}"
                );
                Reply::Text(text, false, finish)
            }
        }
        Behaviour::Truncated => {
            inner.sleep(latency).await;
            Reply::Text("<think>Let me compute".into(), true, finish)
        }
        // Unstreamed, these are `ok`.
        Behaviour::StreamCut => {
            inner.sleep(latency).await;
            answered(stream::Ending::Cut)
        }
        Behaviour::StreamError => {
            inner.sleep(latency).await;
            answered(stream::Ending::Error)
        }
        Behaviour::StreamStall => {
            inner.sleep(latency).await;
            answered(stream::Ending::Stall)
        }
        Behaviour::RpmHeaders(_) => {
            inner.sleep(latency).await;
            answered(finish)
        }
        Behaviour::EmptyChoices => {
            inner.sleep(latency).await;
            Reply::Empty
        }
        Behaviour::Huge(mib) => Reply::Fixed(respond::huge(
            respond::success(r, &call.model, &right, false, &call.prompt),
            mib,
        )),
        Behaviour::HangHeaders => Reply::Fixed(respond::hang_headers(inner.shutdown.clone())),
        Behaviour::Drip => Reply::Fixed(respond::drip(
            &respond::success(r, &call.model, &right, false, &call.prompt),
            inner.shutdown.clone(),
        )),
        Behaviour::BadUtf8 => Reply::Fixed(respond::bad_utf8(
            &respond::success(r, &call.model, &right, false, &call.prompt),
            &right,
        )),
        Behaviour::NoDone => {
            inner.sleep(latency).await;
            answered(stream::Ending::NoDone)
        }
        Behaviour::NoDoneHang => {
            inner.sleep(latency).await;
            answered(stream::Ending::NoDoneHang)
        }
        Behaviour::RateLimit => Reply::Fixed(r.rate_limit()),
        Behaviour::RetryAfter(secs) => {
            let mut resp = r.rate_limit();
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
            Reply::Fixed(resp)
        }
        Behaviour::E500 => Reply::Fixed(r.failure(Failure::E500)),
        Behaviour::Overloaded => Reply::Fixed(r.failure(Failure::Overloaded)),
        Behaviour::E503 => Reply::Fixed(r.failure(Failure::E503)),
        Behaviour::Unauthorized => Reply::Fixed(r.failure(Failure::Unauthorized)),
        Behaviour::Forbidden => Reply::Fixed(r.failure(Failure::Forbidden)),
        Behaviour::NotFound => Reply::Fixed(r.failure(Failure::NotFound { model: &call.model })),
        Behaviour::Decommissioned => {
            Reply::Fixed(r.failure(Failure::Decommissioned { model: &call.model }))
        }
        Behaviour::ContextLength => Reply::Fixed(r.failure(Failure::ContextLength)),
        Behaviour::EchoKey => Reply::Fixed(r.failure(Failure::EchoKey {
            key: call.key.as_deref().unwrap_or(""),
        })),
        Behaviour::ErrorIn200 => Reply::Fixed(respond::error_in_200()),
        Behaviour::Garbage => Reply::Fixed(respond::garbage()),
        Behaviour::Html => Reply::Fixed(respond::html(StatusCode::BAD_GATEWAY)),
        Behaviour::Html200 => Reply::Fixed(respond::html(StatusCode::OK)),
        Behaviour::Reset => Reply::Fixed(respond::reset()),
    };
    let streamed = |text: &str, tool, truncated, empty, ending, mode| {
        let a = stream::Answer {
            model: &call.model,
            prompt: &call.prompt,
            text,
            tool,
            truncated,
            empty,
            include_usage: call.include_usage,
        };
        r.stream(&a, mode, ending, inner.shutdown.clone())
    };
    let mut resp = match (reply, call.stream) {
        (Reply::Fixed(resp), _) => resp,
        (Reply::Text(text, truncated, ending), Some(mode)) => {
            streamed(&text, None, truncated, false, ending, mode)
        }
        (Reply::Tool(t, ending), Some(mode)) => {
            streamed(&t.args_text(), Some(&t), false, false, ending, mode)
        }
        (Reply::Tool(t, _), None) => respond::json_response(
            StatusCode::OK,
            &r.tool_success(
                &call.model,
                &t,
                responder::Usage::of(&call.prompt, &t.args_text()),
            ),
        ),
        (Reply::Text(text, truncated, _), None) => respond::json_response(
            StatusCode::OK,
            &respond::success(r, &call.model, &text, truncated, &call.prompt),
        ),
        (Reply::Empty, Some(mode)) => streamed("", None, false, true, finish, mode),
        (Reply::Empty, None) => {
            respond::json_response(StatusCode::OK, &respond::empty(r, &call.model))
        }
    };
    if let Behaviour::RpmHeaders(n) = behaviour {
        respond::rpm_headers(resp.headers_mut(), n);
    }
    resp
}
