//! `GET /status`: the status page `rollup --format html` writes
//! ([`crate::status_page`]), built from route's live state (the model states it
//! watches, the cooldowns in force: the shared ones when instances share
//! them) and the health log on disk.
//!
//! Never built per request: a page is kept for [`FRESH_SECS`] of route's
//! clock, built on the blocking pool, and one build runs at a time
//! (requests that arrive meanwhile wait for it and get its page). A build
//! that failed is kept as long, so a log route cannot read costs one read
//! and one line on stderr per [`FRESH_SECS`], not one per request. With
//! `[route] public_status`, anyone may ask, and everyone gets the public
//! form.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use crate::catalog::Catalog;
use crate::route::engine::Engine;
use crate::route::providers::{RouteSnapshot, Want, page_cooldowns};
use crate::window::Window;

use super::App;

/// How long a built page (or a failed build) is served, in seconds of
/// route's clock, before the next request builds another.
pub const FRESH_SECS: i64 = 5;

/// A page, or a build that failed (its error already on stderr).
type Built = Result<Arc<String>, ()>;

/// The latest page, and the lock one build at a time holds.
pub struct Cache {
    catalog: Arc<Catalog>,
    built: Mutex<Option<(DateTime<Utc>, Built)>>,
    building: tokio::sync::Mutex<()>,
    /// Whether a bad `capabilities.json` was reported (once: it is read
    /// at every build).
    findings_warned: AtomicBool,
}

impl Cache {
    pub fn new(catalog: Catalog) -> Cache {
        Cache {
            catalog: Arc::new(catalog),
            built: Mutex::new(None),
            building: tokio::sync::Mutex::new(()),
            findings_warned: AtomicBool::new(false),
        }
    }

    /// The page built less than [`FRESH_SECS`] before `now` (a clock that
    /// went back builds again).
    fn fresh(&self, now: DateTime<Utc>) -> Option<Built> {
        let built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        built
            .as_ref()
            .filter(|(at, _)| now >= *at && (now - *at).num_seconds() < FRESH_SECS)
            .map(|(_, page)| page.clone())
    }

    /// The page as of `now`: the one kept, or one `make` builds, one build
    /// at a time.
    async fn get<F, Fut>(&self, now: DateTime<Utc>, make: F) -> Built
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = crate::error::Result<String>>,
    {
        if let Some(p) = self.fresh(now) {
            return p;
        }
        let _one = self.building.lock().await;
        // Built while this request waited.
        if let Some(p) = self.fresh(now) {
            return p;
        }
        let built = match make().await {
            Ok(text) => Ok(Arc::new(text)),
            Err(e) => {
                // A log route cannot read is the operator's to fix: say
                // which, once per build.
                eprintln!("route: /status: {e}");
                Err(())
            }
        };
        *self.built.lock().unwrap_or_else(PoisonError::into_inner) = Some((now, built.clone()));
        built
    }
}

pub async fn page(State(app): State<Arc<App>>) -> Response {
    let cache = &app.status;
    let now = app.engine.clock.now();
    let built = cache
        .get(now, || async {
            let snap = RouteSnapshot::read(&app.engine, Want::Cooldowns).await;
            let (engine, app2) = (app.engine.clone(), app.clone());
            tokio::task::spawn_blocking(move || build(&engine, &app2.status, &snap))
                .await
                .map_err(|e| crate::error::Error::Internal(format!("/status: {e}")))?
        })
        .await;
    match built {
        Ok(text) => html(text),
        Err(()) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "the status page could not be built; route's stderr says why\n",
        )
            .into_response(),
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
fn build(engine: &Engine, cache: &Cache, snap: &RouteSnapshot) -> crate::error::Result<String> {
    let catalog = &*cache.catalog;
    let dir = engine.stats_dir();
    let mut states = crate::state::States::default();
    for (k, e) in engine.record.states.current().out_of_rotation() {
        states.set(k, e.clone());
    }
    // As `rollup --format html` does: a bad file costs the verdicts, and
    // a warning (once: every build reads it).
    let findings =
        match crate::capabilities::Findings::load(&dir.join(crate::capabilities::FINDINGS_FILE)) {
            Ok(f) => {
                cache.findings_warned.store(false, Ordering::Relaxed);
                f
            }
            Err(e) => {
                if !cache.findings_warned.swap(true, Ordering::Relaxed) {
                    eprintln!("warning: route: /status: {e}; every verdict is shown as unknown");
                }
                Default::default()
            }
        };
    let cooldowns = page_cooldowns(&snap.cooldowns, snap.now);
    let window = Window::parse(crate::status_page::WINDOW)?;
    let everyone = |_: &str| true;
    let from = match snap.source {
        super::Source::Local => "cooldowns from route (live)",
        super::Source::Redis => "cooldowns from route (shared state)",
        super::Source::RedisUnavailable => {
            "cooldowns from route (live; the shared state unavailable)"
        }
    };
    let page = crate::status_page::build(&crate::status_page::Inputs {
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
        cooldowns_note: from,
    })?;
    Ok(crate::status_page::render(&page))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Every caller at once on a cold cache gets the one build's page; it
    /// stays for [`FRESH_SECS`] of the clock given, and so does a failed
    /// build, so that no request builds a page of its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_build_serves_every_request_until_it_expires_even_a_failed_one() {
        let cache = Arc::new(Cache::new(Catalog::embedded()));
        let builds = Arc::new(AtomicUsize::new(0));
        let now = Utc::now();
        let at = move |secs: i64| now + chrono::Duration::seconds(secs);
        let get = |secs: i64, ok: bool| {
            let (cache, builds) = (cache.clone(), builds.clone());
            async move {
                cache
                    .get(at(secs), || async move {
                        let n = builds.fetch_add(1, Ordering::SeqCst) + 1;
                        tokio::task::yield_now().await;
                        if ok {
                            Ok(format!("page {n}"))
                        } else {
                            Err(crate::error::Error::config("unreadable"))
                        }
                    })
                    .await
            }
        };
        let calls: Vec<_> = (0..16).map(|_| tokio::spawn(get(0, true))).collect();
        let mut got = Vec::new();
        for c in calls {
            got.push(c.await.unwrap().unwrap());
        }
        assert!(got.iter().all(|p| Arc::ptr_eq(p, &got[0])));
        assert_eq!(*got[0], "page 1");
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        let same = get(FRESH_SECS - 1, true).await.unwrap();
        assert!(Arc::ptr_eq(&same, &got[0]));
        assert_eq!(builds.load(Ordering::SeqCst), 1, "never built per request");
        // Expired on the clock: built again; a clock that went back too.
        assert_eq!(*get(FRESH_SECS, true).await.unwrap(), "page 2");
        assert_eq!(*get(FRESH_SECS - 1, true).await.unwrap(), "page 3");
        // A failed build is kept as long as a page.
        let t = 10 * FRESH_SECS;
        assert!(get(t, false).await.is_err());
        assert!(get(t + 1, true).await.is_err(), "the failure is kept");
        assert!(get(t + FRESH_SECS - 1, true).await.is_err());
        assert_eq!(builds.load(Ordering::SeqCst), 4);
        assert_eq!(*get(t + FRESH_SECS, true).await.unwrap(), "page 5");
    }
}
