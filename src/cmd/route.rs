//! `llmprobe route`: one prompt from the command line, or `--serve` for an
//! endpoint for OpenAI and Anthropic clients. Both go through one [`Engine`].

use std::io::{IsTerminal, Read};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::catalog::{Origin, Record, RouteSettings, bounded_secs};
use crate::cli::RouteArgs;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::exit;
use crate::http_server;
use crate::output;
use crate::route::ask::Ask;
use crate::route::engine::{Engine, Exhausted, trail};
use crate::route::providers::{RouteSnapshot, Source, Want};
use crate::route::shared::SharedState;
use crate::route::surface::{error, openai};
use crate::route::{send, serve};
use crate::settings::Settings;
use crate::upstream::dialect::{ChatMessage, ChatRequest};
use crate::upstream::secret::Secret;

/// How long in-flight requests may take to finish after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long the alerts still in their window may take to go, after that.
const ALERT_GRACE: Duration = Duration::from_secs(5);

pub fn run(s: &Settings, a: RouteArgs) -> Result<u8> {
    // Discovered models that passed their probe are candidates like the
    // catalog's (read at start: a restart takes newly passed ones).
    let (adopted, _) = crate::discovery::with_adopted(
        s,
        crate::discovery::For::Route,
        crate::clock::Clock::from_env().now(),
    )?;
    let s = &adopted;
    let settings = settings(&s.catalog.route, &a)?;
    if !a.serve && a.listen.is_some() {
        return Err(Error::config("--listen goes with --serve"));
    }
    // One worker per core this process may run on (taskset and cgroups
    // included): more threads than cores only adds context switches.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = http_server::server_runtime(cores)?;
    // `--status` shows the shared state too; without Redis it falls back
    // to this machine's route_state.json, and says so.
    let mut unreachable = false;
    let shared_record = settings.record == Record::Shared;
    let shared = match &settings.shared_state {
        Some(url) if a.serve => Some(rt.block_on(SharedState::connect(url))?),
        // A one-shot route on a shared record reads it once.
        Some(url) if a.status || shared_record => match rt.block_on(SharedState::connect(url)) {
            Ok(s) => Some(s),
            Err(e) if !a.status => {
                eprintln!(
                    "warning: {e}; no shared record to route on: every model counts as active"
                );
                None
            }
            Err(e) => {
                eprintln!("warning: {e}; showing this machine's route_state.json instead");
                unreachable = true;
                None
            }
        },
        _ => None,
    };
    let mut engine = Engine::new(
        &s.catalog,
        settings,
        s.stats_dir.clone(),
        crate::upstream::http::client()?,
        Clock::from_env(),
    )?;
    if let Some(sh) = shared {
        engine = engine.with_shared(sh);
        // What other instances learned, before the first request; the
        // health poller keeps it current.
        rt.block_on(engine.sync_verdicts());
    }
    if a.serve
        && let Some(n) = crate::notify::Notifier::configured(s, &a.notify)?
    {
        eprintln!(
            "route: alerts (day-long benches, degraded mode) go to {}",
            n.labels().join(", ")
        );
        engine = engine.with_alerts(crate::route::alerts::RouteAlerts::new(n));
    }
    if shared_record {
        // The record as `check --shared-state` last published it, before
        // the first request; the record poller keeps it current.
        engine = engine.with_shared_record();
        rt.block_on(engine.sync_record());
    }
    let engine = Arc::new(engine);
    if a.status {
        engine.refresh_health()?;
        let snap = if unreachable {
            RouteSnapshot::local(&engine, Want::Everything, Source::RedisUnavailable)
        } else {
            rt.block_on(RouteSnapshot::read(&engine, Want::Everything))
        };
        let v = crate::route::providers::view(&engine, &snap);
        if a.json {
            output::print_json(&v)?;
        } else {
            output::print(&crate::route::providers::table(&v))?;
        }
        return Ok(exit::SUCCESS);
    }
    if a.serve {
        let reprober = crate::route::prober::Reprober::new(s, engine.clone());
        serve_until_signal(&rt, engine, badges(s), &s.catalog, reprober, |_| Ok(()))
    } else {
        one_shot(&rt, engine, &a)
    }
}

/// `[route]` (the environment's and the file's) with the command line's
/// overrides, validated; each flag given is recorded as its key's origin.
fn settings(base: &RouteSettings, a: &RouteArgs) -> Result<RouteSettings> {
    let mut s = base.clone();
    let given = [
        ("max_attempts", a.max_attempts.is_some()),
        ("budget_secs", a.budget.is_some()),
        ("listen", a.listen.is_some()),
        ("auth_token_env", a.auth_token_env.is_some()),
        ("shared_state", a.shared_state.is_some()),
        ("record", a.record.is_some()),
    ];
    for (key, _) in given.iter().filter(|(_, given)| *given) {
        s.origins.route.insert(key.to_string(), Origin::Flag);
    }
    if let Some(n) = a.max_attempts {
        if !crate::catalog::route_bounds::MAX_ATTEMPTS.contains(&n) {
            return Err(Error::config(format!(
                "--max-attempts {n} is out of range: expected 1 to 100"
            )));
        }
        s.max_attempts = n;
    }
    if let Some(b) = a.budget {
        s.time_budget = bounded_secs(b, crate::catalog::route_bounds::BUDGET_SECS, true)
            .map_err(|why| Error::config(format!("--budget {why}")))?;
    }
    if let Some(l) = a.listen {
        s.listen = l;
    }
    if let Some(v) = &a.auth_token_env {
        s.auth_token_env = Some(v.clone());
    }
    if let Some(url) = &a.shared_state {
        if !url.starts_with("redis://") {
            return Err(Error::config(format!(
                "--shared-state {url:?}: expected a redis:// URL"
            )));
        }
        s.shared_state = Some(url.clone());
    }
    if let Some(r) = a.record {
        s.record = r;
    }
    if s.record == Record::Shared && s.shared_state.is_none() {
        return Err(Error::config(
            "record = \"shared\" (--record shared, [route] record, LLMPROBE_ROUTE_RECORD) reads the record from Redis: give its URL with --shared-state redis://…, [route] shared_state or LLMPROBE_ROUTE_SHARED_STATE",
        ));
    }
    if s.item_store_shared && s.shared_state.is_none() {
        return Err(Error::config(
            "item_store_shared = true ([route] item_store_shared, LLMPROBE_ROUTE_ITEM_STORE_SHARED) keeps the Responses surface's items in Redis: give its URL with --shared-state redis://…, [route] shared_state or LLMPROBE_ROUTE_SHARED_STATE, or drop the setting",
        ));
    }
    Ok(s)
}

fn request(a: &RouteArgs) -> Result<ChatRequest> {
    let prompt = match &a.prompt {
        Some(p) => p.clone(),
        None if std::io::stdin().is_terminal() => {
            return Err(Error::config(
                "no prompt: give one as an argument (llmprobe route \"...\") or on stdin",
            ));
        }
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| Error::io("cannot read the prompt from stdin", e))?;
            text
        }
    };
    if prompt.trim().is_empty() {
        return Err(Error::config("the prompt is empty"));
    }
    let mut req = ChatRequest::new(
        a.model.as_deref().unwrap_or("auto"),
        vec![ChatMessage::user(prompt)],
    );
    req.system = a.system.clone();
    req.max_tokens = a.max_tokens;
    req.temperature = a.temperature;
    Ok(req)
}

fn one_shot(rt: &tokio::runtime::Runtime, engine: Arc<Engine>, a: &RouteArgs) -> Result<u8> {
    let req = request(a)?;
    engine.refresh_health()?;
    let e = engine.clone();
    let result = rt.block_on(engine.route(&Ask::new(a.model.as_deref(), &req), |c, key| {
        let (e, req) = (e.clone(), req.clone());
        async move { send::complete(&e, &c, key.as_ref(), &req, true).await }
    }));
    // The answer was paid for: it is shown even when the route state
    // cannot be saved, and that failure (exit 7) is reported after it.
    let saved = engine.save_if_dirty();
    let code = match result {
        Ok(s) => {
            let fallbacks = s.fallbacks();
            let body =
                serde_json::to_value(openai::completion_body(s.value)).expect("serialisable");
            if a.json {
                output::print_json(&json!({
                    "routed_via": s.via,
                    "fallback_attempts": fallbacks,
                    "attempts": s.attempts,
                    "response": body,
                }))?;
            } else {
                output::println(&answer_text(&body))?;
            }
            let mut via = format!("via {}", s.via);
            if !s.clamped.is_empty() {
                via.push_str(&format!(" ({})", s.clamped.join(", ")));
            }
            if fallbacks > 0 {
                via.push_str(&format!(" after {} failed attempt(s)", fallbacks));
            }
            if !s.attempts.is_empty() {
                via.push_str(&format!(": {}", trail(&s.attempts, 300)));
            }
            eprintln!("{via}");
            exit::SUCCESS
        }
        Err(x) => {
            let code = exhausted_code(&x);
            if a.json {
                output::print_json(&json!({
                    // The one-shot JSON names errors as the server does.
                    "error": error::route_error(&x).body().error,
                    "attempts": x.attempts,
                }))?;
            }
            eprintln!("{}", exhausted_text(&x));
            code
        }
    };
    saved?;
    Ok(code)
}

/// The text of the first choice.
fn answer_text(body: &Value) -> String {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// 2 for a request that can never succeed as written (unknown model, or
/// refused by the upstream as malformed); 5 when candidates were exhausted.
fn exhausted_code(x: &Exhausted) -> u8 {
    if x.error.is_usage_error() {
        exit::USAGE
    } else {
        exit::EXHAUSTED
    }
}

fn exhausted_text(x: &Exhausted) -> String {
    let mut out = format!("error: {}", x.message());
    for a in &x.attempts {
        out.push_str(&format!("\n  {}", a.model));
        if let Some(k) = &a.key {
            out.push_str(&format!(" (key {k})"));
        }
        out.push_str(&format!(": {}", a.class));
        if let Some(st) = a.status {
            out.push_str(&format!(" ({st})"));
        }
        if let Some(m) = &a.message {
            out.push_str(&format!(": {m}"));
        }
        if let Some(at) = a.retry_at {
            out.push_str(&format!("; retry after {}", crate::time::format_ts(at)));
        }
    }
    if let Some(at) = x.error.retry_at() {
        out.push_str(&format!(
            "\nthe first candidate is usable again at {}",
            crate::time::format_ts(at)
        ));
    }
    out
}

/// What `/badge/…` draws from: the health log, and the catalog's names.
pub(crate) fn badges(s: &Settings) -> serve::BadgeCache {
    serve::BadgeCache::new(s.log_path(), crate::badge::Known::of(&s.catalog))
}

/// `route --serve` until SIGTERM or Ctrl-C, with `reprober` in the
/// background when there is one. `on_ready` is told the base URL once the
/// server listens (the demo prints lines to paste there).
pub(crate) fn serve_until_signal(
    rt: &tokio::runtime::Runtime,
    engine: Arc<Engine>,
    badges: serve::BadgeCache,
    catalog: &crate::catalog::Catalog,
    reprober: Option<crate::route::prober::Reprober>,
    on_ready: impl FnOnce(&str) -> Result<()>,
) -> Result<u8> {
    let token = match &engine.settings.auth_token_env {
        None => None,
        Some(var) => Some(Secret::new(
            std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    Error::config(format!(
                        "auth_token_env names {var}, which is not set: set it, or drop the setting to serve without auth"
                    ))
                })?,
        )),
    };
    let listen = engine.settings.listen;
    if !listen.ip().is_loopback() && token.is_none() {
        eprintln!(
            "warning: listening on {listen}, beyond this machine, without auth: anyone who can reach it spends your quotas. Set [route] auth_token_env or --auth-token-env."
        );
    }
    let (public, has_token) = (engine.settings.public_status, token.is_some());
    let app = Arc::new(serve::App {
        engine: engine.clone(),
        token,
        badges,
        status: serve::status_page::Cache::new(catalog.clone()),
        items: Arc::new(crate::route::items::ItemStore::new(
            &engine.settings,
            engine
                .ledger
                .shared()
                .filter(|_| engine.settings.item_store_shared)
                .cloned(),
            &engine.telemetry.metrics,
        )),
    });
    rt.block_on(async {
        // Before the server says it listens: from then on SIGHUP no longer
        // kills it.
        let hangup = on_hangup()?;
        // A shared record comes from Redis: the stats directory's files
        // are not read.
        let (poller, capabilities) = if engine.record.reads_shared() {
            (tokio::spawn(serve::record_poller(engine.clone())), None)
        } else {
            (
                engine.record.states.clone().spawn_poller(serve::STATE_POLL),
                Some(
                    engine
                        .record
                        .capabilities
                        .clone()
                        .spawn_poller(serve::STATE_POLL),
                ),
            )
        };
        let health = tokio::spawn(serve::health_poller(engine.clone()));
        // `check`'s probe counts, seen within a poll of being written.
        let probe_counts = engine
            .ledger
            .check_probes
            .clone()
            .spawn_poller(serve::STATE_POLL);
        let mode = tokio::spawn(serve::mode_watcher(engine.clone()));
        let speed = tokio::spawn(serve::speed_keeper(engine.clone()));
        let watch = engine
            .ledger
            .shared()
            .cloned()
            .map(|s| tokio::spawn(s.watch()));
        let routable = engine.routable();
        engine
            .telemetry
            .reach
            .probe(&engine.client, &engine.routable_resolved(&routable))
            .await;
        #[cfg(unix)]
        http_server::raise_fd_limit("route");
        let serving = http_server::Serving {
            header_timeout: Some(engine.settings.read_timeout),
        };
        let (srv, stopping) =
            http_server::start(listen, serve::router(app), "route", serving).await?;
        let saver = tokio::spawn(serve::saver(engine.clone(), stopping));
        let reprobes = reprober.map(|r| r.spawn());
        let reach = crate::route::reach::startup_note(
            &crate::route::engine::routable_providers(&routable),
            &engine.telemetry.reach.unreachable(),
        );
        output::println(&format!(
            "llmprobe route: listening on {}/v1 ({}{}){}",
            srv.url(),
            crate::format::count(routable.len(), "routable model", "routable models"),
            if engine.ledger.shared().is_some() {
                ", state shared through Redis"
            } else {
                ""
            },
            reach.map(|r| format!("; {r}")).unwrap_or_default(),
        ))?;
        eprintln!("{}", status_line(&srv.url(), public, has_token));
        on_ready(&srv.url())?;
        http_server::wait_for_signal().await?;
        eprintln!("route: shutting down; letting requests in flight finish");
        srv.shutdown(SHUTDOWN_GRACE).await;
        if let Some(a) = engine.telemetry.alerts() {
            a.flush(&engine.client, engine.ledger.shared(), ALERT_GRACE)
                .await;
        }
        poller.abort();
        probe_counts.abort();
        if let Some(c) = capabilities {
            c.abort();
        }
        health.abort();
        mode.abort();
        speed.abort();
        if let Some(r) = reprobes {
            r.abort();
        }
        if let Some(h) = hangup {
            h.abort();
        }
        if let Some(w) = watch {
            w.abort();
        }
        let _ = saver.await;
        Ok::<(), Error>(())
    })?;
    engine.save_if_dirty()?;
    Ok(exit::SUCCESS)
}

/// `route --serve`'s startup line on where the status page and badges
/// are, and who may open them (docs/status-page.md).
fn status_line(url: &str, public: bool, has_token: bool) -> String {
    let who = match (public, has_token) {
        (true, _) => "public: [route] public_status = true",
        (false, true) => "needs the token",
        (false, false) => "open: no token is set",
    };
    format!("route: status page: {url}/status, badges: {url}/badge/PROVIDER.svg ({who})")
}

/// What `route --serve` says on SIGHUP, which conventionally asks a server
/// to re-read its configuration. The catalog and settings live in many
/// parts of the engine, so they are read at start only (docs/configuration.md).
#[cfg(unix)]
const HANGUP_LINE: &str = "route: SIGHUP: llmprobe.toml is read at start only; restart route --serve to apply changes (the running configuration is kept)";

/// Catch SIGHUP for the server's lifetime (by default it would end the
/// process): each one prints [`HANGUP_LINE`] to stderr and the server
/// keeps serving. `None` where there is no SIGHUP (Windows).
#[cfg(unix)]
fn on_hangup() -> Result<Option<tokio::task::JoinHandle<()>>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup =
        signal(SignalKind::hangup()).map_err(|e| Error::io("cannot listen for SIGHUP", e))?;
    Ok(Some(tokio::spawn(async move {
        while hup.recv().await.is_some() {
            eprintln!("{HANGUP_LINE}");
        }
    })))
}

#[cfg(not(unix))]
fn on_hangup() -> Result<Option<tokio::task::JoinHandle<()>>> {
    Ok(None)
}
