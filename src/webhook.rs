//! One request to a monitor or a webhook, as a courtesy that is never part
//! of the run: a short deadline per attempt, a few quick retries, and an
//! answer saying whether it got through. `check --ping-url` ([`crate::ping`])
//! and the alert channels ([`crate::notify`]) both send through here, so
//! they share one backoff and one idea of what is worth another attempt.
//!
//! Requests go through [`crate::upstream::http::client`], so they use the
//! same proxy settings as the probes, and a receiver on a loopback address
//! is never sent through a proxy. A monitor's or a webhook's URL path is
//! often its secret, so whatever is shown names it by [`label`] only.

use std::future::Future;
use std::time::Duration;

use reqwest::{Method, Url};

use crate::upstream::http::TransportError;

/// One attempt's deadline, from connecting to the response's head.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts per request, and the wait before the second (doubling after).
pub const ATTEMPTS: u32 = 3;
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// One request, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub url: Url,
    /// Header names and values, `Content-Type` included when there is a
    /// body.
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
}

/// `https://hooks.slack.com` or `http://127.0.0.1:8000`: where a URL
/// points, without its path, query or user info, which may be secrets.
pub fn label(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(p) => format!("{}://{host}:{p}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// Send `req` with [`ATTEMPTS`] tries, on `client`. The status of the
/// delivered request, or why none was (`what` and `to` name it in the debug
/// log only).
pub async fn send(
    client: &reqwest::Client,
    req: &Request,
    what: &str,
    to: &str,
) -> std::result::Result<u16, String> {
    with_retries(ATTEMPTS, FIRST_BACKOFF, |n| {
        tracing::debug!(what, to, attempt = n, "webhook request");
        let mut b = client.request(req.method.clone(), req.url.clone());
        for (k, v) in &req.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        if let Some(body) = &req.body {
            b = b.body(body.clone());
        }
        async move { classify(crate::upstream::http::open(b, ATTEMPT_TIMEOUT).await) }
    })
    .await
}

/// Run `f` on a small runtime of its own, for callers that are not async
/// (`check`'s observers run after its runtime is gone), with the one HTTP
/// client. `Err` says why it could not start.
pub fn block_on<F, Fut, T>(f: F) -> std::result::Result<T, String>
where
    F: FnOnce(reqwest::Client) -> Fut,
    Fut: Future<Output = T>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let client = crate::upstream::http::client().map_err(|e| e.to_string())?;
    Ok(rt.block_on(f(client)))
}

/// How one attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Try {
    Delivered(u16),
    /// Worth another attempt: a timeout, a dropped connection, a 5xx, 429
    /// or 408.
    Again(String),
    /// Not worth another: nothing listens there, the name does not
    /// resolve, or the receiver refused the request (404: a wrong URL).
    Refused(String),
}

fn classify(r: std::result::Result<reqwest::Response, TransportError>) -> Try {
    match r {
        Ok(resp) => match resp.status().as_u16() {
            s @ 200..=299 => Try::Delivered(s),
            s @ (408 | 429 | 500..=599) => Try::Again(format!("HTTP {s}")),
            s => Try::Refused(format!("HTTP {s}")),
        },
        Err(
            e @ (TransportError::Timeout(_)
            | TransportError::ConnectTimeout(_)
            | TransportError::Reset(_)),
        ) => Try::Again(e.to_string()),
        Err(e) => Try::Refused(e.to_string()),
    }
}

/// Up to `attempts` tries, waiting `first_backoff`, then twice that, and so
/// on between them. The status of the delivered request, or why none was.
pub async fn with_retries<F, Fut>(
    attempts: u32,
    first_backoff: Duration,
    mut attempt: F,
) -> std::result::Result<u16, String>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Try>,
{
    let mut backoff = first_backoff;
    let mut n = 1;
    loop {
        match attempt(n).await {
            Try::Delivered(status) => return Ok(status),
            Try::Refused(why) => return Err(why),
            Try::Again(why) if n >= attempts => {
                return Err(format!("{why}, {n} attempts"));
            }
            Try::Again(why) => {
                tracing::debug!(attempt = n, %why, "webhook: trying again");
                tokio::time::sleep(backoff).await;
                backoff = backoff.saturating_mul(2);
                n += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn labels_name_scheme_host_and_port_only() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            label(&u("https://hooks.slack.com/services/T0/B0/SECRET")),
            "https://hooks.slack.com"
        );
        assert_eq!(
            label(&u("http://user:pw@127.0.0.1:8000/p/q?token=SECRET")),
            "http://127.0.0.1:8000"
        );
    }

    /// Runs `with_retries` over scripted outcomes; returns the result and
    /// when (in paused virtual time) each attempt was made.
    async fn scripted(outcomes: Vec<Try>) -> (std::result::Result<u16, String>, Vec<f64>) {
        let t0 = tokio::time::Instant::now();
        let calls = Mutex::new(Vec::new());
        let outcomes = Mutex::new(outcomes.into_iter());
        let r = with_retries(3, Duration::from_secs(1), |_| {
            calls.lock().unwrap().push(t0.elapsed().as_secs_f64());
            let next = outcomes
                .lock()
                .unwrap()
                .next()
                .expect("no more attempts scripted");
            async move { next }
        })
        .await;
        (r, calls.into_inner().unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn retries_back_off_and_stop() {
        let again = || Try::Again("HTTP 503".into());
        let (r, at) = scripted(vec![again(), again(), Try::Delivered(200)]).await;
        assert_eq!(r, Ok(200));
        assert_eq!(at, [0.0, 1.0, 3.0]);
        let (r, at) = scripted(vec![again(), again(), again()]).await;
        assert_eq!(r, Err("HTTP 503, 3 attempts".into()));
        assert_eq!(at, [0.0, 1.0, 3.0]);
        // Nothing listening: no point in waiting to try again.
        let (r, at) = scripted(vec![Try::Refused("connection refused".into())]).await;
        assert_eq!(r, Err("connection refused".into()));
        assert_eq!(at, [0.0]);
    }
}
