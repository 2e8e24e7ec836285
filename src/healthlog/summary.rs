//! The figures every reader of the health log computes: uptime, latency and
//! latency percentiles, accumulated one [`Record`] at a time.
//!
//! They mean the same in `rollup`, `brief`, `state` and `route`'s ordering,
//! per docs/formats.md: a legacy averaged entry counts as
//! `sample_count` probes with `uptime × sample_count` passes, and its latency
//! weighs `sample_count`; a `disabled_skip` row is not a probe. Each
//! accumulator is a few numbers (the histogram a fixed array), so no reader's
//! memory grows with the log, and each has a `merge` for the two halves of a
//! split read ([`super::read::Sink::merge`]).

use super::read::Record;

/// Probes and passes: what uptime is computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Probes {
    /// How many probes, legacy averaged entries counting `sample_count`.
    pub samples: f64,
    /// How many of those passed.
    pub passed: f64,
}

impl Probes {
    #[cfg(test)]
    pub fn new(samples: f64, passed: f64) -> Probes {
        Probes::of(samples, passed)
    }

    /// Counts summed elsewhere (a shared record's figures).
    pub fn of(samples: f64, passed: f64) -> Probes {
        Probes { samples, passed }
    }

    #[inline]
    pub fn add(&mut self, r: &Record<'_>) {
        self.samples += r.samples;
        self.passed += r.passed;
    }

    pub fn merge(&mut self, o: &Probes) {
        self.samples += o.samples;
        self.passed += o.passed;
    }

    /// Passed ÷ probed, within 0–1; `None` without probes.
    pub fn uptime(&self) -> Option<f64> {
        (self.samples > 0.0).then(|| (self.passed / self.samples).clamp(0.0, 1.0))
    }
}

/// The mean, minimum and maximum latency of probes that got a response
/// (`latency_ms > 0`), each weighted by the probes it stands for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    pub sum: f64,
    pub weight: f64,
    /// Meaningful only when `weight > 0`.
    pub min: f64,
    pub max: f64,
}

impl Latency {
    /// Count `r`'s latency if it got a response; returns whether it did.
    #[inline]
    pub fn add(&mut self, r: &Record<'_>) -> bool {
        self.add_ms(r.latency_ms, r.samples)
    }

    /// Count a time of `ms` (when above 0) standing for `w` probes.
    #[inline]
    fn add_ms(&mut self, ms: f64, w: f64) -> bool {
        if ms <= 0.0 {
            return false;
        }
        if self.weight == 0.0 {
            self.min = ms;
            self.max = ms;
        } else {
            self.min = self.min.min(ms);
            self.max = self.max.max(ms);
        }
        self.sum += ms * w;
        self.weight += w;
        true
    }

    pub fn merge(&mut self, o: &Latency) {
        if o.weight > 0.0 {
            if self.weight == 0.0 {
                self.min = o.min;
                self.max = o.max;
            } else {
                self.min = self.min.min(o.min);
                self.max = self.max.max(o.max);
            }
        }
        self.sum += o.sum;
        self.weight += o.weight;
    }

    /// The weighted mean, to 0.1 ms as every report shows it; `None`
    /// without a response.
    pub fn mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| (self.sum / self.weight * 10.0).round() / 10.0)
    }
}

/// Time to the first token of streamed probes that passed (`ttft_ms`),
/// for its median: a [`Hist`], allocated at the first such probe.
#[derive(Clone, Default)]
pub struct Ttft {
    range: Latency,
    hist: Option<Hist>,
}

impl Ttft {
    #[inline]
    pub fn add(&mut self, r: &Record<'_>) {
        if let Some(ms) = r.ttft_ms.filter(|_| r.passed > 0.0)
            && self.range.add_ms(ms, r.passed)
        {
            self.hist.get_or_insert_with(Hist::new).add(ms, r.passed);
        }
    }

    pub fn merge(&mut self, o: &Ttft) {
        self.range.merge(&o.range);
        if let Some(h) = &o.hist {
            self.hist.get_or_insert_with(Hist::new).merge(h);
        }
    }

    /// The median, within the observed range (±2%); `None` without a
    /// streamed pass.
    pub fn median(&self) -> Option<f64> {
        let r = &self.range;
        self.hist
            .as_ref()
            .and_then(|h| h.quantile(0.5, r.weight).map(|v| v.clamp(r.min, r.max)))
    }
}

/// The spans every view shows uptime over, whatever its window: the last
/// hour, day and week.
pub const SPANS: [(&str, i64); 3] = [("1h", 3600), ("24h", 86_400), ("7d", 7 * 86_400)];

/// Uptime over each of [`SPANS`] ending at `now`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spans([Probes; 3]);

impl Spans {
    /// Count `r` in every span ending at `now` that holds it.
    #[inline]
    pub fn add(&mut self, r: &Record<'_>, now: i64) {
        let age = now - r.ts;
        for (p, (_, secs)) in self.0.iter_mut().zip(SPANS) {
            if age < secs {
                p.add(r);
            }
        }
    }

    pub fn merge(&mut self, o: &Spans) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            a.merge(b);
        }
    }

    /// Uptime per span, in [`SPANS`]' order.
    pub fn uptimes(&self) -> [Option<f64>; 3] {
        self.0.map(|p| p.uptime())
    }

    /// The uptimes as JSON shows them: `{"1h": 1.0, "24h": 0.98, "7d": null}`.
    pub fn by_span(self) -> std::collections::BTreeMap<&'static str, Option<f64>> {
        SPANS.iter().map(|(n, _)| *n).zip(self.uptimes()).collect()
    }

    /// `100% · 98.1% · —`: the three together, as a table cell.
    pub fn cell(&self) -> String {
        self.uptimes()
            .map(|u| u.map_or_else(|| "—".to_string(), crate::format::fmt_pct))
            .join(" · ")
    }
}

/// One group's figures over a span: probes and passes, latency, and the
/// latency histogram for percentiles (allocated at the first response),
/// and the time to first token of streamed passes.
/// What a `rollup` row and a status-page bar are computed from.
#[derive(Clone, Default)]
pub struct Figures {
    pub probes: Probes,
    pub latency: Latency,
    pub hist: Option<Hist>,
    pub ttft: Ttft,
}

impl Figures {
    #[inline]
    pub fn add(&mut self, r: &Record<'_>) {
        self.probes.add(r);
        if self.latency.add(r) {
            self.hist
                .get_or_insert_with(Hist::new)
                .add(r.latency_ms, r.samples);
        }
        self.ttft.add(r);
    }

    pub fn merge(&mut self, o: &Figures) {
        self.probes.merge(&o.probes);
        self.latency.merge(&o.latency);
        if let Some(h) = &o.hist {
            self.hist.get_or_insert_with(Hist::new).merge(h);
        }
        self.ttft.merge(&o.ttft);
    }

    /// A latency percentile (`q` in 0..1) from the histogram, within the
    /// observed range; `None` without a response.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let lat = &self.latency;
        self.hist
            .as_ref()
            .and_then(|h| h.quantile(q, lat.weight).map(|v| v.clamp(lat.min, lat.max)))
    }

    /// The 95th percentile latency.
    pub fn p95(&self) -> Option<f64> {
        self.quantile(0.95)
    }

    /// The median latency.
    pub fn median(&self) -> Option<f64> {
        self.quantile(0.5)
    }
}

/// A latency histogram with fixed, log-scale buckets: exact below 64 ms,
/// then 32 buckets per power of two (each within ±1.6% of its midpoint), up
/// to 2³² ms. Fixed size, so a percentile costs no memory per sample.
#[derive(Clone)]
pub struct Hist(Box<[f64; HIST]>);

const HIST: usize = 64 + 26 * 32;

impl Default for Hist {
    fn default() -> Hist {
        Hist::new()
    }
}

impl Hist {
    pub fn new() -> Hist {
        Hist(Box::new([0.0; HIST]))
    }

    /// Count a latency (ms) with weight `w`.
    #[inline]
    pub fn add(&mut self, latency_ms: f64, w: f64) {
        self.0[Hist::bucket(latency_ms.round() as u64)] += w;
    }

    pub fn merge(&mut self, o: &Hist) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            *a += b;
        }
    }

    #[inline]
    fn bucket(v: u64) -> usize {
        let v = v.min(u32::MAX as u64);
        if v < 64 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize;
        64 + (e - 6) * 32 + ((v >> (e - 5)) & 31) as usize
    }

    fn midpoint(i: usize) -> f64 {
        if i < 64 {
            return i as f64;
        }
        let e = (i - 64) / 32 + 6;
        let sub = ((i - 64) % 32) as u64;
        let lo = (32 + sub) << (e - 5);
        let width = 1u64 << (e - 5);
        lo as f64 + (width - 1) as f64 / 2.0
    }

    /// The nearest-rank `q` quantile: the smallest bucket whose cumulative
    /// weight reaches `q` of the total.
    pub fn quantile(&self, q: f64, total: f64) -> Option<f64> {
        if total <= 0.0 {
            return None;
        }
        let target = q * total - 1e-9;
        let mut cum = 0.0;
        for (i, w) in self.0.iter().enumerate() {
            cum += w;
            if *w > 0.0 && cum >= target {
                return Some(Hist::midpoint(i));
            }
        }
        None
    }
}

/// Exact latencies of passing probes, for a median over a short window
/// (`route` orders by the last 24 hours). Unlike [`Hist`] it grows with the
/// probes it holds: only for windows that are small by design.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies(Vec<f64>);

impl Latencies {
    #[cfg(test)]
    pub fn new(v: Vec<f64>) -> Latencies {
        Latencies::of(v)
    }

    /// Latencies gathered elsewhere (a shared record's median).
    pub fn of(v: Vec<f64>) -> Latencies {
        Latencies(v)
    }

    /// Keep `r`'s latency if it passed with a response.
    pub fn add(&mut self, r: &Record<'_>) {
        if r.passed > 0.0 && r.latency_ms > 0.0 {
            self.0.push(r.latency_ms);
        }
    }

    pub fn merge(&mut self, o: Latencies) {
        self.0.extend(o.0);
    }

    /// The median; `None` without any.
    pub fn median(&self) -> Option<f64> {
        if self.0.is_empty() {
            return None;
        }
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(samples: f64, passed: f64, latency_ms: f64) -> Record<'static> {
        Record {
            ts: 0,
            provider: "p",
            model: "m",
            samples,
            passed,
            latency_ms,
            failure: "",
            http_status: None,
            probe: "",
            source: "",
            ttft_ms: None,
            tokens_per_s: None,
        }
    }

    #[test]
    fn legacy_averages_weigh_their_sample_count() {
        let (mut p, mut l) = (Probes::default(), Latency::default());
        for r in [
            rec(12.0, 6.0, 200.0),
            rec(1.0, 1.0, 100.0),
            rec(1.0, 0.0, 0.0),
        ] {
            p.add(&r);
            l.add(&r);
        }
        assert_eq!(p, Probes::new(14.0, 7.0));
        assert_eq!(p.uptime(), Some(0.5));
        // (12 × 200 + 100) / 13; the failed probe without a response is out.
        assert_eq!(l.mean(), Some(192.3));
        assert_eq!((l.min, l.max), (100.0, 200.0));
        assert_eq!(Probes::default().uptime(), None);
        assert_eq!(Latency::default().mean(), None);
    }

    #[test]
    fn merging_halves_is_reading_the_whole() {
        let rs = [
            rec(1.0, 1.0, 50.0),
            rec(3.0, 2.0, 900.0),
            rec(1.0, 0.0, 0.0),
        ];
        let (mut whole, mut a, mut b) =
            (Latency::default(), Latency::default(), Latency::default());
        for r in &rs {
            whole.add(r);
        }
        a.add(&rs[0]);
        b.add(&rs[1]);
        b.add(&rs[2]);
        let mut empty = Latency::default();
        empty.merge(&a);
        empty.merge(&b);
        assert_eq!(empty, whole);
        let mut m = Latencies::default();
        for r in &rs {
            m.add(r);
        }
        m.merge(Latencies::new(vec![10.0]));
        assert_eq!(m.median(), Some(50.0));
    }

    #[test]
    fn histogram_buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in [
            0u64,
            1,
            63,
            64,
            65,
            100,
            1000,
            4095,
            4096,
            30_000,
            1 << 31,
            u64::MAX,
        ] {
            let b = Hist::bucket(v);
            assert!(b >= last && b < HIST, "{v}");
            last = b;
            let mid = Hist::midpoint(b);
            let v = v.min(u32::MAX as u64) as f64;
            assert!((mid - v).abs() <= v * 0.016 + 0.5, "{v} → {mid}");
        }
        let mut h = Hist::new();
        for v in 1..=100u64 {
            h.0[Hist::bucket(v)] += 1.0;
        }
        let p95 = h.quantile(0.95, 100.0).unwrap();
        assert!((p95 - 95.0).abs() <= 95.0 * 0.016, "{p95}");
    }
}
