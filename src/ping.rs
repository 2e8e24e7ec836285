//! `check --ping-url`: tell a monitor such as healthchecks.io that a run
//! started and how it ended, so that a scheduled job that stops running, or
//! keeps failing, is noticed by someone.
//!
//! The conventions are healthchecks.io's: `GET URL/start` when the run
//! starts, then `URL` when it succeeded (exit 0) or `URL/fail` when it did
//! not (any other exit, offline included), as a POST whose body is the run's
//! summary. A ping is a courtesy to the monitor, never part of the run: each
//! one has a short timeout and a few quick retries, and a monitor that
//! cannot be reached costs one warning on stderr, never the run's exit code.
//!
//! Pings go through [`crate::upstream::http::client`], so they use the same proxy
//! settings as the probes, and a monitor on a loopback address is never sent
//! through a proxy. The URL's path is the check's secret (anyone who has it
//! can ping), so messages name only its scheme and host.

use reqwest::{Method, Url};

use crate::error::{Error, Result};
use crate::exit;
use crate::run_observer::{FinishedRun, Ran, RunObserver};
use crate::webhook::{self, Request};

/// The most of the summary that is sent; healthchecks.io keeps the first
/// 100 kB of a body, and a summary is a few lines per model.
pub const BODY_CAP: usize = 10_000;

/// Pings for one run.
#[derive(Debug)]
pub struct Pinger {
    base: Url,
    start: Option<std::thread::JoinHandle<()>>,
}

impl Pinger {
    /// Check the URL (exit 2 when it is not an http(s) URL).
    pub fn new(url: &str) -> Result<Pinger> {
        let bad = |why: String| Error::config(format!("--ping-url {why}"));
        let base = Url::parse(url.trim()).map_err(|e| bad(format!("is not a URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(bad("must be an http:// or https:// URL".into()));
        }
        Ok(Pinger { base, start: None })
    }

    /// The URL with `/suffix` added to its path, before any query.
    fn url(&self, suffix: Option<&str>) -> Url {
        let mut u = self.base.clone();
        if let (Some(s), Ok(mut path)) = (suffix, u.path_segments_mut()) {
            path.pop_if_empty().push(s);
        }
        u
    }

    /// `https://hc-ping.com`: where pings go, without the secret path.
    fn shown(&self) -> String {
        webhook::label(&self.base)
    }

    /// `GET URL/start`, in the background: the probes do not wait for it.
    pub fn start(&mut self) {
        let (url, shown) = (self.url(Some("start")), self.shown());
        self.start = Some(std::thread::spawn(move || {
            deliver(Method::GET, url, None, &shown, "start");
        }));
    }

    /// `URL` (success) or `URL/fail`, with the summary as the body, once
    /// the start ping (if any) is done, so that the monitor sees them in
    /// order.
    pub fn finish(&mut self, success: bool, summary: &str) {
        if let Some(t) = self.start.take() {
            let _ = t.join();
        }
        let (url, what) = if success {
            (self.url(None), "success")
        } else {
            (self.url(Some("fail")), "fail")
        };
        let body = truncate(summary, BODY_CAP).to_string();
        deliver(Method::POST, url, Some(body), &self.shown(), what);
    }
}

/// `check --ping-url` as a run's channel: the start ping when the run
/// starts, and the end ping (success for exit 0, fail for anything else,
/// with the run's summary) however the invocation ended.
#[derive(Debug)]
pub struct PingObserver {
    pinger: Pinger,
    /// The run's summary, for the end ping, once the run has one.
    summary: Option<String>,
}

impl PingObserver {
    pub fn new(pinger: Pinger) -> PingObserver {
        PingObserver {
            pinger,
            summary: None,
        }
    }
}

impl RunObserver for PingObserver {
    fn on_start(&mut self) -> Result<()> {
        self.pinger.start();
        Ok(())
    }

    fn on_finish(&mut self, run: &FinishedRun<'_>) -> Result<()> {
        self.summary = Some(run.summary.to_string());
        Ok(())
    }

    fn on_end(&mut self, result: &Result<Ran>) {
        let (code, error) = match result {
            Ok(Ran::NotARun(_) | Ran::NotDue) => return,
            Ok(Ran::Completed(code)) => (*code, None),
            // A closed stdout is not a failure (see `crate::run`).
            Err(e) if e.is_broken_pipe() => (exit::SUCCESS, None),
            Err(e) => (e.exit_code(), Some(e)),
        };
        let mut body = format!("llmprobe check: exit {code} ({})\n", exit::meaning(code));
        if let Some(summary) = &self.summary {
            body.push_str(summary);
        }
        if let Some(e) = error {
            body.push_str(&format!("error: {e}\n"));
        }
        self.pinger.finish(code == exit::SUCCESS, &body);
    }
}

/// At most `cap` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, cap: usize) -> &str {
    let mut end = s.len().min(cap);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Send one ping with [`webhook`]'s retries; warn on stderr if it never
/// got through.
fn deliver(method: Method, url: Url, body: Option<String>, shown: &str, what: &str) {
    let headers = match body {
        Some(_) => vec![(
            "content-type".to_string(),
            "text/plain; charset=utf-8".to_string(),
        )],
        None => Vec::new(),
    };
    let req = Request {
        method,
        url,
        headers,
        body,
    };
    let result =
        webhook::block_on(|client| async move { webhook::send(&client, &req, what, shown).await })
            .and_then(|r| r);
    match result {
        Ok(status) => tracing::debug!(ping = what, to = shown, status, "ping delivered"),
        Err(why) => eprintln!(
            "warning: --ping-url: the {what} ping to {shown} failed ({why}); the run's result is unchanged"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_healthchecks_and_messages_hide_the_path() {
        let p = Pinger::new("https://hc-ping.com/0b1d3a7e-uuid").unwrap();
        assert_eq!(p.url(None).as_str(), "https://hc-ping.com/0b1d3a7e-uuid");
        assert_eq!(
            p.url(Some("start")).as_str(),
            "https://hc-ping.com/0b1d3a7e-uuid/start"
        );
        assert_eq!(p.shown(), "https://hc-ping.com");
        let p = Pinger::new("http://127.0.0.1:8000/ping/key/slug/?create=1").unwrap();
        assert_eq!(
            p.url(Some("fail")).as_str(),
            "http://127.0.0.1:8000/ping/key/slug/fail?create=1"
        );
        assert_eq!(p.shown(), "http://127.0.0.1:8000");
        for bad in ["hc-ping.com/uuid", "ftp://host/x", "", "mailto:a@b"] {
            let err = Pinger::new(bad).unwrap_err();
            assert_eq!(err.exit_code(), crate::exit::USAGE, "{bad}");
            assert!(err.to_string().starts_with("--ping-url"), "{err}");
        }
    }

    #[test]
    fn the_body_is_capped_on_a_character_boundary() {
        assert_eq!(truncate("ééé", 3), "é");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
