//! `GET /status`: the status page `rollup --format html` writes
//! ([`crate::status`]), built from route's live state (the model states it
//! watches, the cooldowns in force: the shared ones when instances share
//! them) and the health log on disk.
//!
//! Never built per request: a page is kept for [`FRESH`], built on the
//! blocking pool, and one build runs at a time (requests that arrive
//! meanwhile wait for it and get its page). With `[route] public_status`,
//! anyone may ask, and everyone gets the public form.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::catalog::Catalog;
use crate::route::engine::Engine;
use crate::route::status::{RouteSnapshot, Want, page_cooldowns};
use crate::window::Window;

use super::App;

/// How long a built page is served before the next request builds another.
pub const FRESH: Duration = Duration::from_secs(5);

/// The latest page, and the lock one build at a time holds.
pub struct Cache {
    catalog: Arc<Catalog>,
    built: Mutex<Option<(Instant, Arc<String>)>>,
    building: tokio::sync::Mutex<()>,
}

impl Cache {
    pub fn new(catalog: Catalog) -> Cache {
        Cache {
            catalog: Arc::new(catalog),
            built: Mutex::new(None),
            building: tokio::sync::Mutex::new(()),
        }
    }

    fn fresh(&self) -> Option<Arc<String>> {
        let built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        built
            .as_ref()
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, page)| page.clone())
    }
}

pub async fn page(State(app): State<Arc<App>>) -> Response {
    let cache = &app.status;
    if let Some(p) = cache.fresh() {
        return html(p);
    }
    let _one = cache.building.lock().await;
    // Built while this request waited.
    if let Some(p) = cache.fresh() {
        return html(p);
    }
    let snap = RouteSnapshot::read(&app.engine, Want::Cooldowns).await;
    let (engine, catalog) = (app.engine.clone(), cache.catalog.clone());
    match tokio::task::spawn_blocking(move || build(&engine, &catalog, &snap)).await {
        Ok(Ok(text)) => {
            let text = Arc::new(text);
            *cache.built.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((Instant::now(), text.clone()));
            html(text)
        }
        Ok(Err(e)) => {
            // A log route cannot read is the operator's to fix: say which.
            eprintln!("route: /status: {e}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "the status page could not be built; route's stderr says why\n",
            )
                .into_response()
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn html(page: Arc<String>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        page.as_str().to_owned(),
    )
        .into_response()
}

/// The page from the engine's live state and the log on disk.
fn build(engine: &Engine, catalog: &Catalog, snap: &RouteSnapshot) -> crate::error::Result<String> {
    let dir = engine.stats_dir();
    let mut states = crate::state::States::default();
    for (k, e) in engine.states.current().out_of_rotation() {
        states.set(k, e.clone());
    }
    let findings =
        crate::capabilities::Findings::load(&dir.join(crate::capabilities::FINDINGS_FILE))
            .unwrap_or_default();
    let cooldowns = page_cooldowns(&snap.cooldowns, snap.now);
    let window = Window::parse(crate::status::WINDOW)?;
    let everyone = |_: &str| true;
    let from = match snap.source {
        super::Source::Local => "route (live)",
        super::Source::Redis => "route (shared state)",
        super::Source::RedisUnavailable => "route (live; the shared state unavailable)",
    };
    let page = crate::status::build(&crate::status::Inputs {
        log: &dir.join(crate::settings::LOG_FILE),
        stats_dir: dir,
        catalog,
        window: &window,
        now: snap.now,
        states: &states,
        findings: &findings,
        cooldowns: &cooldowns,
        shown: &everyone,
        public: engine.settings.public_status,
        redactor: &engine.redactor,
        cooldowns_from: from,
    })?;
    Ok(crate::status::render(&page))
}
