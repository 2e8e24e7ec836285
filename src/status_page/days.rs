//! The status page's one pass over the health log: per provider, one
//! [`Figures`] per UTC calendar day of the window (the bars), the window's
//! probes and those of the last 1 h, 24 h, 7 d and 30 d, and the median
//! time to first token over the window; per model, its newest probe's
//! result and its median time to first token.
//!
//! The figures mean what `rollup`'s do (they are the same accumulators,
//! [`crate::healthlog::summary`]): a legacy averaged entry counts
//! `sample_count` probes, a `disabled_skip` row is not a probe, a re-probe
//! is a probe. A window counts the entries at or after its start, as
//! `rollup --window` does, so the 1 h, 24 h, 7 d and 30 d figures are those of
//! `rollup --format json --window 1h|24h|7d|30d`, and the bars of the window
//! add up to `rollup --window <the page's window>`'s samples.

use crate::healthlog::read::{FastMap, Record, Sink};
use crate::healthlog::summary::{Figures, Probes, Ttft};

pub const DAY: i64 = 86_400;

/// The rolling windows the page gives uptime for, in seconds.
pub const ROLLING: [i64; 4] = [3600, DAY, 7 * DAY, 30 * DAY];

/// Where the page's days lie: the window's start, and the UTC days from
/// the one holding the start to the one holding now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days {
    /// The window's first second (entries before it are not in a bar).
    pub start: i64,
    /// The first bar's day, in days since the epoch.
    pub first: i64,
    /// How many bars.
    pub count: usize,
    pub now: i64,
}

impl Days {
    /// The bars of a window from `start` to `now`.
    pub fn new(start: i64, now: i64) -> Days {
        let first = start.div_euclid(DAY);
        let last = now.div_euclid(DAY).max(first);
        Days {
            start,
            first,
            count: (last - first + 1) as usize,
            now,
        }
    }

    /// The bars of `--window all`: every entry counts, and the bars run
    /// from the day of `first` (the log's first entry; an older entry
    /// further on lands in the first bar).
    pub fn all(first: i64, now: i64) -> Days {
        Days {
            start: i64::MIN,
            ..Days::new(first, now)
        }
    }

    /// The bar an entry at `ts` (at or after the start) falls in; entries
    /// from the future (a clock ahead) fall in today's.
    #[inline]
    pub fn index(&self, ts: i64) -> usize {
        (ts.div_euclid(DAY) - self.first).clamp(0, self.count as i64 - 1) as usize
    }

    /// The Unix time of the start of bar `i`'s day.
    pub fn day_start(&self, i: usize) -> i64 {
        (self.first + i as i64) * DAY
    }
}

/// One provider's figures.
#[derive(Clone, Default)]
pub struct ProviderFigures {
    /// One per day of the window, oldest first; empty until a probe lands.
    pub days: Vec<Figures>,
    pub window: Probes,
    /// Over [`ROLLING`]'s windows.
    pub rolling: [Probes; 4],
    /// Time to first token of streamed passes over the window.
    pub ttft: Ttft,
    /// The newest probe in the whole log.
    pub newest: Option<i64>,
    /// The oldest probe in the whole log: where its history starts.
    pub oldest: Option<i64>,
    /// The newest probe a scheduled run made (re-probes left out, as the
    /// staleness rule wants: [`crate::stale`]).
    pub newest_scheduled: Option<i64>,
}

/// One model's newest probe.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LastProbe {
    pub ts: i64,
    pub samples: f64,
    pub passed: f64,
    pub failure: Box<str>,
    pub http_status: Option<u16>,
}

impl LastProbe {
    /// `ok`, `timeout (504)`, `averaged 92% of 13`: as every view says it.
    pub fn label(&self) -> String {
        Record {
            ts: self.ts,
            provider: "",
            model: "",
            samples: self.samples,
            passed: self.passed,
            latency_ms: 0.0,
            failure: &self.failure,
            http_status: self.http_status,
            probe: "",
            source: "",
            ttft_ms: None,
            tokens_per_s: None,
        }
        .result_label()
    }
}

/// The sink. Like rollup's, maps hold indices so the hot path hashes once
/// per level.
pub struct PageAcc {
    days: Days,
    providers: FastMap<Box<str>, usize>,
    pub names: Vec<Box<str>>,
    pub figures: Vec<ProviderFigures>,
    models: Vec<FastMap<Box<str>, usize>>,
    /// (provider index, model name, newest probe).
    pub model_list: Vec<(usize, Box<str>, Option<LastProbe>)>,
    /// Each model's time to first token over the window, by the index of
    /// `model_list`.
    pub model_ttft: Vec<Ttft>,
    pub newest: Option<i64>,
}

impl PageAcc {
    pub fn new(days: Days) -> PageAcc {
        PageAcc {
            days,
            providers: FastMap::default(),
            names: Vec::new(),
            figures: Vec::new(),
            models: Vec::new(),
            model_list: Vec::new(),
            model_ttft: Vec::new(),
            newest: None,
        }
    }

    #[inline]
    fn provider_slot(&mut self, provider: &str) -> usize {
        match self.providers.get(provider) {
            Some(&p) => p,
            None => {
                self.names.push(provider.into());
                self.figures.push(ProviderFigures::default());
                self.models.push(FastMap::default());
                self.providers.insert(provider.into(), self.names.len() - 1);
                self.names.len() - 1
            }
        }
    }

    #[inline]
    fn slot(&mut self, provider: &str, model: &str) -> (usize, usize) {
        let p = self.provider_slot(provider);
        let m = match self.models[p].get(model) {
            Some(&m) => m,
            None => {
                self.model_list.push((p, model.into(), None));
                self.model_ttft.push(Ttft::default());
                self.models[p].insert(model.into(), self.model_list.len() - 1);
                self.model_list.len() - 1
            }
        };
        (p, m)
    }
}

impl Sink for PageAcc {
    #[inline]
    fn record(&mut self, r: &Record<'_>) {
        // Every model seen anywhere is listed, as rollup lists it.
        let (p, m) = self.slot(r.provider, r.model);
        if !r.is_sample() {
            return;
        }
        self.newest = self.newest.max(Some(r.ts));
        let d = self.days;
        let f = &mut self.figures[p];
        f.newest = f.newest.max(Some(r.ts));
        f.oldest = Some(f.oldest.map_or(r.ts, |o| o.min(r.ts)));
        if !r.is_reprobe() {
            f.newest_scheduled = f.newest_scheduled.max(Some(r.ts));
        }
        for (probes, secs) in f.rolling.iter_mut().zip(ROLLING) {
            if r.ts >= d.now - secs {
                probes.add(r);
            }
        }
        if r.ts >= d.start {
            f.window.add(r);
            f.ttft.add(r);
            self.model_ttft[m].add(r);
            if f.days.is_empty() {
                f.days = vec![Figures::default(); d.count];
            }
            f.days[d.index(r.ts)].add(r);
        }
        let last = &mut self.model_list[m].2;
        match last {
            Some(l) if r.ts < l.ts => {}
            Some(l) => {
                l.ts = r.ts;
                l.samples = r.samples;
                l.passed = r.passed;
                l.http_status = r.http_status;
                if *l.failure != *r.failure {
                    l.failure = r.failure.into();
                }
            }
            None => {
                *last = Some(LastProbe {
                    ts: r.ts,
                    samples: r.samples,
                    passed: r.passed,
                    failure: r.failure.into(),
                    http_status: r.http_status,
                })
            }
        }
    }

    fn merge(&mut self, later: PageAcc) {
        self.newest = self.newest.max(later.newest);
        let PageAcc {
            names,
            figures,
            model_list,
            model_ttft,
            ..
        } = later;
        for (p, name) in names.iter().enumerate() {
            let mine = self.provider_slot(name);
            let f = &figures[p];
            let dst = &mut self.figures[mine];
            if !f.days.is_empty() {
                if dst.days.is_empty() {
                    dst.days = f.days.clone();
                } else {
                    for (a, b) in dst.days.iter_mut().zip(&f.days) {
                        a.merge(b);
                    }
                }
            }
            dst.window.merge(&f.window);
            dst.ttft.merge(&f.ttft);
            for (a, b) in dst.rolling.iter_mut().zip(&f.rolling) {
                a.merge(b);
            }
            dst.newest = dst.newest.max(f.newest);
            dst.oldest = match (dst.oldest, f.oldest) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            dst.newest_scheduled = dst.newest_scheduled.max(f.newest_scheduled);
        }
        for ((p, model, last), ttft) in model_list.into_iter().zip(&model_ttft) {
            let (_, m) = self.slot(&names[p], &model);
            self.model_ttft[m].merge(ttft);
            let mine = &mut self.model_list[m].2;
            if let Some(l) = last
                && mine.as_ref().is_none_or(|x| l.ts >= x.ts)
            {
                *mine = Some(l);
            }
        }
    }
}
