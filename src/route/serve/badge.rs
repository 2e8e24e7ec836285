//! `GET /badge/{provider}.svg` and `GET /badge/{provider}/{model}.svg`:
//! the badges `rollup --format badge` writes (`crate::badge`), with the
//! queries `window` (default 24h, as rollup's; one of [`WINDOWS`]) and
//! `metric` (`uptime`, the default, or `latency`).
//!
//! The provider is the path's first segment; the model is everything after
//! it, so a model id may hold `/` and `:` as written or percent-encoded
//! (`/badge/openrouter/meta-llama%2Fllama-3.3-70b%3Afree.svg`); the path
//! is percent-decoded once. A model id ending in `.svg` is written with a
//! second `.svg`.
//!
//! Many README viewers fetch the same badges, so the figures are cached
//! per window for [`FIGURES_TTL_SECS`] of route's clock, and computed on the
//! blocking pool one read at a time: a request never reads the log
//! itself while a fresh read is at hand, and however many arrive, at most
//! one log read runs.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::badge::{self, Badge, Figures, Known};
use crate::cli::BadgeMetric;
use crate::window::Window;

use super::App;

/// How long one read of the log serves every badge of its window, in
/// seconds of route's clock.
pub const FIGURES_TTL_SECS: i64 = 10;
/// How long clients and proxies may keep a badge.
const CACHE_CONTROL: &str = "max-age=60";
/// The windows a served badge takes: each costs a read of the log at most
/// every [`FIGURES_TTL_SECS`], so a client cannot make a read per request
/// by asking for new ones.
pub const WINDOWS: [&str; 5] = ["24h", "7d", "30d", "90d", "all"];
/// Windows cached at once; the least recently computed goes first.
const SLOTS: usize = 8;

/// The badges' figures, one read of the log per window at most every
/// [`FIGURES_TTL_SECS`].
pub struct Cache {
    log: PathBuf,
    known: Known,
    /// Held across a read, so that requests arriving meanwhile wait for
    /// its figures instead of reading the log too.
    slots: tokio::sync::Mutex<Vec<Slot>>,
}

struct Slot {
    window: String,
    at: DateTime<Utc>,
    figures: Arc<Figures>,
}

impl Cache {
    /// Badges over the log at `log`, of the catalog's providers and models
    /// (`known`) and whatever the log has probed.
    pub fn new(log: PathBuf, known: Known) -> Cache {
        Cache {
            log,
            known,
            slots: tokio::sync::Mutex::new(Vec::new()),
        }
    }

    /// The figures over `window` as of `now`: cached, or read on the
    /// blocking pool.
    async fn figures(
        &self,
        window: &Window,
        now: DateTime<Utc>,
    ) -> crate::error::Result<Arc<Figures>> {
        let mut slots = self.slots.lock().await;
        let fresh = |s: &Slot| {
            let age = (now - s.at).num_seconds();
            s.window == window.label && now >= s.at && age < FIGURES_TTL_SECS
        };
        if let Some(s) = slots.iter().find(|s| fresh(s)) {
            return Ok(s.figures.clone());
        }
        let (log, w) = (self.log.clone(), window.clone());
        let figures = tokio::task::spawn_blocking(move || {
            crate::healthlog::rollup::compute(&log, &w, now.timestamp(), false)
                .map(|r| Arc::new(Figures::of(&r)))
        })
        .await
        .map_err(|e| crate::error::Error::Internal(format!("badge figures: {e}")))??;
        slots.retain(|s| s.window != window.label);
        if slots.len() >= SLOTS {
            slots.remove(0);
        }
        slots.push(Slot {
            window: window.label.clone(),
            at: now,
            figures: figures.clone(),
        });
        Ok(figures)
    }
}

#[derive(Debug, Deserialize)]
pub struct Params {
    window: Option<String>,
    metric: Option<String>,
}

/// A plain-text answer for a badge URL that cannot be drawn.
fn refuse(status: StatusCode, message: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        message + "\n",
    )
        .into_response()
}

pub async fn badge(
    State(app): State<Arc<App>>,
    Path(path): Path<String>,
    Query(q): Query<Params>,
) -> Response {
    let forms = "badge URLs are /badge/PROVIDER.svg and /badge/PROVIDER/MODEL.svg";
    let Some((provider, model)) = path
        .strip_suffix(".svg")
        .map(|stem| match stem.split_once('/') {
            Some((p, m)) => (p, Some(m)),
            None => (stem, None),
        })
        .filter(|(p, m)| !p.is_empty() && *m != Some(""))
    else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("no badge at /badge/{path}: {forms}"),
        );
    };
    let window = match Window::parse_as(
        q.window
            .as_deref()
            .unwrap_or(crate::healthlog::rollup::DEFAULT_WINDOW),
        "window",
    ) {
        Ok(w) if WINDOWS.contains(&w.label.as_str()) => w,
        Ok(w) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "invalid window '{}': a served badge's window is one of {}",
                    w.label,
                    WINDOWS.join(", ")
                ),
            );
        }
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let metric = match q.metric.as_deref() {
        None | Some("uptime") => BadgeMetric::Uptime,
        Some("latency") => BadgeMetric::Latency,
        Some(other) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("invalid metric '{other}': expected uptime or latency"),
            );
        }
    };
    let figures = match app.badges.figures(&window, app.engine.clock.now()).await {
        Ok(f) => f,
        Err(e) => {
            // The path of the log is the server's business, not the
            // viewer's.
            eprintln!("warning: badge: {e}");
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot read the health log; route's stderr says why".into(),
            );
        }
    };
    let row = match figures.find(&app.badges.known, provider, model) {
        Ok(row) => row,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e.to_string()),
    };
    let svg = Badge::of(&badge::subject(provider, model), metric, &window, row).svg();
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml; charset=utf-8"),
            (header::CACHE_CONTROL, CACHE_CONTROL),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        svg,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every caller at once on a cold cache gets the one read's figures;
    /// they stay until [`FIGURES_TTL_SECS`] have passed, per window.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_read_serves_every_badge_of_a_window_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("health_log.json");
        let now = Utc::now();
        let ts = (now - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%SZ");
        std::fs::write(
            &log,
            format!("[\n{{\"ts\":\"{ts}\",\"provider\":\"p\",\"model\":\"m\",\"ok\":1,\"latency_ms\":5}}\n]\n"),
        )
        .unwrap();
        let cache = Arc::new(Cache::new(log, Known::default()));
        let day = Window::parse("24h").unwrap();
        let calls: Vec<_> = (0..16)
            .map(|_| {
                let (cache, day) = (cache.clone(), day.clone());
                tokio::spawn(async move { cache.figures(&day, now).await.unwrap() })
            })
            .collect();
        let mut got = Vec::new();
        for c in calls {
            got.push(c.await.unwrap());
        }
        assert!(got.iter().all(|f| Arc::ptr_eq(f, &got[0])));
        assert_eq!(got[0].providers[0].uptime, Some(1.0));
        let at = |secs: i64| now + chrono::Duration::seconds(secs);
        let same = cache.figures(&day, at(FIGURES_TTL_SECS - 1)).await.unwrap();
        assert!(Arc::ptr_eq(&same, &got[0]));
        // Another window is read on its own, and keeps the first one's.
        let week = Window::parse("7d").unwrap();
        let w = cache.figures(&week, at(1)).await.unwrap();
        assert!(!Arc::ptr_eq(&w, &got[0]));
        assert!(Arc::ptr_eq(
            &cache.figures(&day, at(2)).await.unwrap(),
            &got[0]
        ));
        // A clock that went back, and one past the TTL, read again.
        let back = cache.figures(&day, at(-1)).await.unwrap();
        assert!(!Arc::ptr_eq(&back, &got[0]));
        let later = cache
            .figures(&day, at(FIGURES_TTL_SECS + 30))
            .await
            .unwrap();
        assert!(!Arc::ptr_eq(&later, &back));
        // At most SLOTS windows are kept.
        for h in 1..=20 {
            let w = Window::parse(&format!("{h}h")).unwrap();
            cache.figures(&w, at(FIGURES_TTL_SECS + 30)).await.unwrap();
        }
        assert_eq!(cache.slots.lock().await.len(), SLOTS);
    }
}
