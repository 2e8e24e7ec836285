//! Whether this machine can reach each provider at all.
//!
//! A model can be active in the record and still be out of reach from
//! where `route --serve` runs: no network, a firewall, a `base_url` typed
//! wrong. The server finds out before it says it is ready: one plain `GET`
//! of each provider's base URL, through the same client (and proxies) as
//! real requests, with no key. Any HTTP answer, a 404 or a 401 included,
//! means the host is reachable; only a failure to connect (the name did not
//! resolve, the connection was refused or timed out, TLS failed) means it is
//! not. Providers found unreachable are probed again while they stay so
//! ([`crate::route::serve::health_poller`]).
//!
//! Reachability is this instance's own view, never shared: another
//! instance on another machine may reach what this one cannot. It does not
//! take a model out of the candidate order (a request still tries it, and
//! a failure benches it as usual); it decides what the startup line and
//! `/readyz` say.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::catalog::Resolved;
use crate::upstream::http::{self, TransportError};

/// How long one reachability probe may take, connection and answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Providers this instance could not reach, with why.
#[derive(Debug, Default)]
pub struct Reach {
    down: Mutex<BTreeMap<String, String>>,
}

impl Reach {
    /// Each unreachable provider and why, by name.
    pub fn unreachable(&self) -> BTreeMap<String, String> {
        self.down
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Probe `providers` in parallel and record each verdict.
    pub async fn probe<'a>(
        &self,
        client: &reqwest::Client,
        providers: impl IntoIterator<Item = &'a Arc<Resolved>>,
    ) {
        let probes = providers.into_iter().map(|p| {
            let name = p.provider.name.clone();
            let url = p.base_url.clone();
            async move { (name, probe_one(client, &url).await) }
        });
        let verdicts = futures_util::future::join_all(probes).await;
        let mut down = self.down.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, verdict) in verdicts {
            match verdict {
                Ok(()) => down.remove(&name),
                Err(why) => down.insert(name, why),
            };
        }
    }
}

/// `Ok` when `base_url` answers with any HTTP status; the connection
/// failure, described with the host, when it does not.
async fn probe_one(client: &reqwest::Client, base_url: &str) -> Result<(), String> {
    let host = reqwest::Url::parse(base_url)
        .ok()
        .and_then(|u| {
            let host = u.host_str()?.to_string();
            Some(match u.port_or_known_default() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            })
        })
        .unwrap_or_else(|| base_url.to_string());
    match http::send(client.get(base_url), PROBE_TIMEOUT, 4096).await {
        Ok(_) => Ok(()),
        // An answer that broke off or was too big still came from the host.
        Err(TransportError::TooLarge(_) | TransportError::Reset(_)) => Ok(()),
        Err(e) => Err(format!("{host}: {e}")),
    }
}

/// What the startup line adds about reach, if anything: every routable
/// provider unreachable, or some.
pub fn startup_note(
    routable_providers: &[String],
    down: &BTreeMap<String, String>,
) -> Option<String> {
    let out: Vec<String> = routable_providers
        .iter()
        .filter_map(|p| down.get(p).map(|why| format!("{p} ({why})")))
        .collect();
    if out.is_empty() {
        return None;
    }
    Some(if out.len() == routable_providers.len() {
        format!(
            "no routable provider is reachable from here: {}. Requests will fail until the network or the provider's base_url is fixed; /readyz answers 503 meanwhile",
            out.join("; ")
        )
    } else {
        format!("unreachable from here: {}", out.join("; "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> reqwest::Client {
        http::install_tls_provider();
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    #[tokio::test]
    async fn a_listening_host_is_reachable_whatever_it_answers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app =
            axum::Router::new().fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "no") });
        tokio::spawn(async move { axum::serve(listener, app).await });
        assert_eq!(
            probe_one(&client(), &format!("http://{addr}/v1")).await,
            Ok(())
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_and_named() {
        // Bind, then drop, to get a port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let why = probe_one(&client(), &format!("http://127.0.0.1:{port}/v1"))
            .await
            .unwrap_err();
        assert!(why.starts_with(&format!("127.0.0.1:{port}: ")), "{why}");
    }

    #[test]
    fn the_startup_note_says_when_nothing_is_reachable() {
        let down = BTreeMap::from([(
            "groq".to_string(),
            "api.groq.com:443: dns error".to_string(),
        )]);
        let all = startup_note(&["groq".to_string()], &down).unwrap();
        assert!(
            all.starts_with(
                "no routable provider is reachable from here: groq (api.groq.com:443: dns error)"
            ),
            "{all}"
        );
        let some = startup_note(&["groq".to_string(), "local".to_string()], &down).unwrap();
        assert_eq!(
            some,
            "unreachable from here: groq (api.groq.com:443: dns error)"
        );
        assert_eq!(startup_note(&["local".to_string()], &down), None);
    }
}
