//! Recent health per model, from the tail of the health log: 24 h uptime,
//! median latency and median time to first token, which order `route`'s
//! candidates (and seed its measured speed, [`crate::route::speed`]). Read backwards as
//! `brief` does, so the cost does not grow with the log's history, and
//! cached until the log changes (its length or mtime).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::catalog::ModelKey;
use crate::error::Result;
use crate::healthlog::read::{Record, Sink};
use crate::healthlog::recent::{self, Recent};
use crate::healthlog::summary::{Latencies, Probes};

/// The window the order looks at.
pub const WINDOW_SECS: i64 = 24 * 3600;

/// One model's recent record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelHealth {
    pub probes: Probes,
    /// Latencies of passing probes, in ms.
    latencies: Latencies,
    /// Times to first token of passing streamed probes, in ms.
    ttfts: Latencies,
}

impl ModelHealth {
    #[cfg(test)]
    pub fn new(samples: f64, passed: f64, latencies: Vec<f64>) -> ModelHealth {
        ModelHealth {
            probes: Probes::new(samples, passed),
            latencies: Latencies::new(latencies),
            ttfts: Latencies::default(),
        }
    }

    /// [`ModelHealth::new`] with the probes' times to first token.
    #[cfg(test)]
    pub fn with_ttfts(mut self, ttfts: Vec<f64>) -> ModelHealth {
        self.ttfts = Latencies::new(ttfts);
        self
    }

    /// The health that the figures of a summary give (probes, passed, the
    /// median latency), as a shared record carries them
    /// ([`crate::route::shared::record`]): it ranks as the model it sums up.
    pub fn summarised(samples: f64, passed: f64, median_ms: Option<f64>) -> ModelHealth {
        ModelHealth {
            probes: Probes::of(samples, passed),
            latencies: Latencies::of(median_ms.into_iter().collect()),
            ttfts: Latencies::default(),
        }
    }

    /// Passed ÷ probed; `None` without probes.
    pub fn uptime(&self) -> Option<f64> {
        self.probes.uptime()
    }

    /// The median latency of passing probes; `None` without any.
    pub fn median_latency_ms(&self) -> Option<f64> {
        self.latencies.median()
    }

    /// The median time to first token of passing streamed probes; `None`
    /// without any (probes before streaming, or none passed).
    pub fn median_ttft_ms(&self) -> Option<f64> {
        self.ttfts.median()
    }

    fn add(&mut self, r: &Record<'_>) {
        self.probes.add(r);
        self.latencies.add(r);
        if let Some(t) = r.ttft_ms.filter(|_| r.passed > 0.0) {
            self.ttfts.merge(Latencies::of(vec![t]));
        }
    }
}

/// `provider::model` → its health in the window.
pub type HealthMap = HashMap<ModelKey, ModelHealth>;

struct Collect {
    since: i64,
    map: HealthMap,
}

impl Sink for Collect {
    fn record(&mut self, r: &Record<'_>) {
        if r.ts >= self.since && r.is_sample() {
            self.map
                .entry(ModelKey::new(r.provider, r.model))
                .or_default()
                .add(r);
        }
    }

    fn merge(&mut self, later: Self) {
        for (k, v) in later.map {
            let e = self.map.entry(k).or_default();
            e.probes.merge(&v.probes);
            e.latencies.merge(v.latencies);
            e.ttfts.merge(v.ttfts);
        }
    }
}

impl Recent for Collect {}

/// Read the health of every model since `since` (Unix seconds).
pub fn read(log: &Path, since: i64) -> Result<HealthMap> {
    let (col, _) = recent::read_recent(log, Some(since), |_| Collect {
        since,
        map: HashMap::new(),
    })?;
    Ok(col.map)
}

/// The health map, re-read only when the log changed.
#[derive(Debug)]
pub struct HealthCache {
    log: PathBuf,
    stamp: Option<(u64, Option<SystemTime>)>,
    map: Arc<HealthMap>,
}

impl HealthCache {
    pub fn new(log: PathBuf) -> HealthCache {
        HealthCache {
            log,
            stamp: None,
            map: Arc::new(HashMap::new()),
        }
    }

    /// The current map, re-reading the log first if it changed since the
    /// last call. `now` is Unix seconds.
    pub fn get(&mut self, now: i64) -> Result<Arc<HealthMap>> {
        let stamp = std::fs::metadata(&self.log)
            .ok()
            .map(|m| (m.len(), m.modified().ok()));
        if stamp != self.stamp || self.stamp.is_none() {
            self.map = Arc::new(read(&self.log, now - WINDOW_SECS)?);
            self.stamp = stamp;
        }
        Ok(self.map.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ts: &str, p: &str, m: &str, ok: bool, lat: u64) -> String {
        format!(
            r#"{{"ts":"{ts}","provider":"{p}","model":"{m}","ok":{},"latency_ms":{lat},"failure_type":"{}"}}"#,
            ok as u8,
            if ok { "" } else { "timeout" }
        )
    }

    #[test]
    fn uptime_and_median_over_the_window_only() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("health_log.json");
        let lines = [
            line("2026-11-29T00:00:00Z", "a", "m", false, 0), // outside
            line("2026-11-30T12:00:00Z", "a", "m", true, 100),
            line("2026-11-30T13:00:00Z", "a", "m", true, 300),
            line("2026-11-30T14:00:00Z", "a", "m", false, 0),
            line("2026-11-30T15:00:00Z", "a", "m", true, 200),
            line("2026-11-30T15:00:00Z", "b", "x", true, 50),
        ];
        std::fs::write(&log, format!("[\n{}\n]\n", lines.join(",\n"))).unwrap();
        let since = chrono::DateTime::parse_from_rfc3339("2026-11-30T00:00:00Z")
            .unwrap()
            .timestamp();
        let h = read(&log, since).unwrap();
        let a = &h["a::m"];
        assert_eq!(a.uptime(), Some(0.75));
        assert_eq!(a.median_latency_ms(), Some(200.0));
        assert_eq!(h["b::x"].median_latency_ms(), Some(50.0));
        // No streamed probe: no TTFT.
        assert_eq!(a.median_ttft_ms(), None);
        // The same through the cache, which re-reads only on change.
        let mut cache = HealthCache::new(log.clone());
        let now = since + WINDOW_SECS;
        let first = cache.get(now).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.get(now).unwrap()));
        assert_eq!(first["a::m"].uptime(), Some(0.75));
    }

    #[test]
    fn median_ttft_is_of_passing_streamed_probes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("health_log.json");
        let with = |l: String, t: u64| l.replace("}", &format!(r#","ttft_ms":{t}}}"#));
        let lines = [
            with(line("2026-11-30T12:00:00Z", "a", "m", true, 900), 100),
            with(line("2026-11-30T13:00:00Z", "a", "m", true, 900), 300),
            with(line("2026-11-30T14:00:00Z", "a", "m", true, 900), 200),
            line("2026-11-30T15:00:00Z", "a", "m", true, 900),
        ];
        std::fs::write(&log, format!("[\n{}\n]\n", lines.join(",\n"))).unwrap();
        let h = read(&log, 0).unwrap();
        assert_eq!(h["a::m"].median_ttft_ms(), Some(200.0));
        assert_eq!(h["a::m"].median_latency_ms(), Some(900.0));
    }

    #[test]
    fn a_missing_log_is_no_data() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(&dir.path().join("nope.json"), 0).unwrap().is_empty());
    }
}
