//! Running a plan's lanes: one task per provider, its models one after
//! another with starts at least `spacing` apart, each result sent to the
//! writer as soon as it is known. Probes go through the [`Prober`] trait,
//! so the scheduling is tested with tokio's paused time and a mock.

use std::future::Future;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::plan::{Lane, start_offset};
use crate::error::{Error, Result};
use crate::outcome::{Entry, Outcome, Verdict};
use crate::prompts::Pool;
use crate::upstream::secret::Redactor;

/// Asks one model one question. The real one is [`HttpProber`]; tests of the
/// scheduler use a mock under tokio's paused time.
pub trait Prober: Send + Sync + 'static {
    fn probe(&self, lane: &Lane, model: &str) -> impl Future<Output = Outcome> + Send;
}

/// The real prober: a randomised question from the pool, over HTTP.
pub struct HttpProber {
    client: reqwest::Client,
    pool: Pool,
    redactor: Redactor,
}

impl HttpProber {
    pub fn new(client: reqwest::Client, pool: Pool, redactor: Redactor) -> HttpProber {
        HttpProber {
            client,
            pool,
            redactor,
        }
    }
}

impl Prober for HttpProber {
    async fn probe(&self, lane: &Lane, model: &str) -> Outcome {
        let question = {
            let mut rng = rand::rng();
            self.pool.draw(&mut rng)
        };
        crate::probe::probe(
            &self.client,
            &lane.resolved,
            model,
            &question,
            lane.timeout,
            &self.redactor,
        )
        .await
    }
}

/// One finished probe on its way to the writer.
#[derive(Debug)]
pub struct Probed {
    pub entry: Entry,
    pub verdict: Verdict,
    /// The provider is not on this machine.
    pub remote: bool,
    /// No response: the host could not be reached.
    pub unreachable: bool,
}

/// Run every lane at once and wait for all of them. A lane that fails or
/// panics fails the run, after the others have finished.
pub async fn run_lanes<P: Prober>(
    lanes: Vec<Lane>,
    prober: Arc<P>,
    tx: mpsc::Sender<Probed>,
    bars: Vec<ProgressBar>,
) -> Result<()> {
    let mut tasks = Vec::new();
    for (lane, bar) in lanes.into_iter().zip(bars) {
        let name = lane.resolved.provider.name.clone();
        let (prober, tx) = (prober.clone(), tx.clone());
        tasks.push((
            name,
            tokio::spawn(async move { run_lane(lane, prober, tx, bar).await }),
        ));
    }
    drop(tx);
    let mut first_error = None;
    for (name, task) in tasks {
        let err = match task.await {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(join) => Error::Internal(format!(
                "the {name} lane {}",
                if join.is_panic() {
                    format!("panicked: {}", panic_text(&*join.into_panic()))
                } else {
                    "was cancelled".to_string()
                }
            )),
        };
        first_error.get_or_insert(err);
    }
    first_error.map_or(Ok(()), Err)
}

pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// One provider: its models one after another, starts `spacing` apart.
async fn run_lane<P: Prober>(
    lane: Lane,
    prober: Arc<P>,
    tx: mpsc::Sender<Probed>,
    bar: ProgressBar,
) -> Result<()> {
    let name = lane.resolved.provider.name.clone();
    let remote = !lane.resolved.is_loopback();
    let n = lane.models.len();
    let first_start = tokio::time::Instant::now();
    for (i, model) in lane.models.iter().enumerate() {
        let next_start = first_start
            .checked_add(start_offset(&lane, i)?)
            .ok_or_else(|| {
                Error::config(format!(
                    "provider {name}: spacing {} is too long",
                    crate::duration::format_secs(lane.spacing)
                ))
            })?;
        // Count down to this model's start, a second at a time, for the TTY.
        loop {
            let now = tokio::time::Instant::now();
            if now >= next_start {
                break;
            }
            let left = next_start - now;
            bar.set_message(format!(
                "next: {model} in {}s  ({}/{n})",
                left.as_secs_f64().ceil() as u64,
                i + 1
            ));
            tokio::time::sleep(left.min(Duration::from_secs(1))).await;
        }
        let ts = crate::time::now_rfc3339();
        bar.set_message(format!("probing {model}  ({}/{n})", i + 1));
        tracing::debug!(provider = %name, model = %model, "probe sent");
        let outcome = prober.probe(&lane, model).await;
        // The error is redacted where the outcome was made.
        tracing::debug!(
            provider = %name,
            model = %model,
            class = outcome.failure.map(|f| f.as_str()).unwrap_or("ok"),
            latency_ms = outcome.latency_ms,
            status = outcome.status,
            unreachable = outcome.unreachable,
            error = outcome.error.as_deref(),
            "probe answered"
        );
        let probed = Probed {
            entry: Entry::new(ts, &name, model, &outcome),
            verdict: outcome.verdict(),
            remote,
            unreachable: outcome.unreachable,
        };
        if tx.send(probed).is_err() {
            // The writer stopped on an error; it is reported from there.
            break;
        }
    }
    bar.finish_with_message(format!("done ({n} probed)"));
    Ok(())
}

/// Per-provider progress lines on stderr, only when stderr is a terminal.
pub struct Progress {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
}

impl Progress {
    pub fn new(lanes: &[Lane]) -> Progress {
        // Not under -v: its lines would tear the bars.
        let target = if std::io::stderr().is_terminal() && !tracing::enabled!(tracing::Level::INFO)
        {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let multi = MultiProgress::with_draw_target(target);
        let width = lanes
            .iter()
            .map(|l| l.resolved.provider.name.len())
            .max()
            .unwrap_or(8);
        let style =
            ProgressStyle::with_template(&format!("{{spinner}} {{prefix:{width}}}  {{wide_msg}}"))
                .expect("valid template");
        let bars = lanes
            .iter()
            .map(|l| {
                let b = multi.add(ProgressBar::new_spinner());
                b.set_style(style.clone());
                b.set_prefix(l.resolved.provider.name.clone());
                b.enable_steady_tick(Duration::from_millis(120));
                b
            })
            .collect();
        Progress { multi, bars }
    }

    pub fn bar(&self, i: usize) -> ProgressBar {
        self.bars[i].clone()
    }

    pub fn clear(&self) {
        let _ = self.multi.clear();
    }
}

#[cfg(test)]
mod tests {
    //! The scheduler under tokio's paused time: spacing, parallel lanes and
    //! lane failures are asserted exactly, whatever the machine's load.

    use std::sync::Mutex;

    use super::*;
    use crate::catalog::Catalog;
    use crate::exit;
    use crate::outcome::FailureType;

    /// Records when each model was probed, in virtual time since the start;
    /// takes `busy` per probe; panics on a model named "panic".
    struct Mock {
        t0: tokio::time::Instant,
        busy: Duration,
        calls: Mutex<Vec<(String, Duration)>>,
    }

    impl Prober for Mock {
        async fn probe(&self, lane: &Lane, model: &str) -> Outcome {
            let at = self.t0.elapsed();
            self.calls
                .lock()
                .unwrap()
                .push((format!("{}::{model}", lane.resolved.provider.name), at));
            assert!(model != "panic", "scripted panic");
            tokio::time::sleep(self.busy).await;
            Outcome {
                failure: (model == "down").then_some(FailureType::Error),
                latency_ms: 1,
                status: None,
                error: None,
                unreachable: model == "down",
            }
        }
    }

    fn lane(name: &str, url: &str, models: &[&str], spacing_secs: f64) -> Lane {
        let c = Catalog::from_toml_str(
            &format!(
                "include_default_catalog = false\n[[providers]]\nname = {name:?}\ndialect = \"openai\"\nbase_url = {url:?}\nmodels = {models:?}\n"
            ),
            "test.toml",
        )
        .unwrap();
        Lane {
            resolved: c.providers[0].resolve_with(|_| None).unwrap(),
            models: models.iter().map(|m| m.to_string()).collect(),
            spacing: Duration::from_secs_f64(spacing_secs),
            timeout: Duration::from_secs(30),
        }
    }

    async fn run(
        lanes: Vec<Lane>,
        busy: Duration,
    ) -> (Result<()>, Vec<(String, Duration)>, Vec<Probed>) {
        let mock = Arc::new(Mock {
            t0: tokio::time::Instant::now(),
            busy,
            calls: Mutex::new(Vec::new()),
        });
        let (tx, rx) = mpsc::channel();
        let bars = lanes.iter().map(|_| ProgressBar::hidden()).collect();
        let r = run_lanes(lanes, mock.clone(), tx, bars).await;
        let calls = mock.calls.lock().unwrap().clone();
        (r, calls, rx.try_iter().collect())
    }

    fn secs(calls: &[(String, Duration)], provider: &str) -> Vec<f64> {
        calls
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{provider}::")))
            .map(|(_, at)| at.as_secs_f64())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn lanes_run_in_parallel_with_starts_spacing_apart() {
        let lanes = vec![
            lane("a", "https://a.example/v1", &["1", "2", "3"], 90.0),
            lane("b", "https://b.example/v1", &["1", "2"], 30.0),
            lane("c", "https://c.example/v1", &["1"], 90.0),
        ];
        let t0 = tokio::time::Instant::now();
        let (r, calls, probed) = run(lanes, Duration::from_secs(2)).await;
        r.unwrap();
        assert_eq!(secs(&calls, "a"), [0.0, 90.0, 180.0]);
        assert_eq!(secs(&calls, "b"), [0.0, 30.0]);
        assert_eq!(secs(&calls, "c"), [0.0]);
        // The whole run: (largest model count − 1) × spacing + one probe.
        assert_eq!(t0.elapsed(), Duration::from_secs(182));
        assert_eq!(probed.len(), 6);
        assert!(
            probed
                .iter()
                .all(|p| p.remote && p.verdict == Verdict::Pass)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_longer_than_the_spacing_delays_the_next_start_only() {
        let lanes = vec![lane("a", "http://127.0.0.1:9/v1", &["1", "2", "3"], 10.0)];
        let (r, calls, probed) = run(lanes, Duration::from_secs(25)).await;
        r.unwrap();
        // Starts are at least `spacing` apart and never overlap a probe.
        assert_eq!(secs(&calls, "a"), [0.0, 25.0, 50.0]);
        assert!(probed.iter().all(|p| !p.remote), "127.0.0.1 is loopback");
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_lane_fails_the_run_after_the_others_finish() {
        let lanes = vec![
            lane("a", "https://a.example/v1", &["1", "panic", "3"], 5.0),
            lane("b", "https://b.example/v1", &["1", "2", "3", "4"], 5.0),
        ];
        let (r, calls, probed) = run(lanes, Duration::ZERO).await;
        let err = r.unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err}");
        assert_eq!(err.exit_code(), exit::INTERNAL);
        assert!(
            err.to_string()
                .contains("the a lane panicked: scripted panic"),
            "{err}"
        );
        // b ran to the end; a's result before the panic was delivered.
        assert_eq!(secs(&calls, "b"), [0.0, 5.0, 10.0, 15.0]);
        assert_eq!(probed.len(), 5);
    }

    #[test]
    fn start_offsets_are_checked() {
        let mut l = lane("a", "https://a.example/v1", &["1", "2", "3"], 3600.0);
        assert_eq!(start_offset(&l, 2).unwrap(), Duration::from_secs(7200));
        l.spacing = Duration::MAX;
        let err = start_offset(&l, 2).unwrap_err();
        assert_eq!(err.exit_code(), exit::USAGE);
    }
}
