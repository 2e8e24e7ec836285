//! The HTTP layer every upstream call goes through: one shared client, and
//! [`send`], which reads a whole response under one deadline and a size cap
//! and sorts transport failures into the few kinds that classification and
//! routing care about.
//!
//! Nothing here knows about dialects or failure types; [`crate::upstream::classify`]
//! turns a [`RawResponse`] or a [`TransportError`] into an outcome.
//! Transport messages are fixed phrases built from the error's `source()`
//! chain, never reqwest's Display, because that Display embeds the URL.

use std::error::Error as StdError;
use std::io;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;

/// The largest body [`send`] reads by default. A probe answer or a chat
/// completion is a few KiB; anything near this is a misbehaving upstream.
pub const DEFAULT_BODY_CAP: usize = 1 << 20;

/// How long to wait for a TCP (and TLS) connection before giving up. The
/// request deadline in [`send`] still bounds the whole exchange; this only
/// keeps a black-holed host from eating all of a long deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A complete response: the body has been read to the end.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// From just before the request was sent to the last body byte.
    pub elapsed: Duration,
}

impl RawResponse {
    /// The body as text, with invalid UTF-8 replaced.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }
}

/// Why no complete response arrived. Messages are short, lowercase and free
/// of URLs, so they can go into a log after redaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The whole exchange, body included, did not finish within the deadline.
    #[error("timed out after {}", human_duration(*.0))]
    Timeout(Duration),
    /// No TCP (or TLS) connection within [`CONNECT_TIMEOUT`]: the host is
    /// black-holed or the network is down.
    #[error("connect timed out after {}", human_duration(*.0))]
    ConnectTimeout(Duration),
    /// No connection: refused, unreachable, or the name did not resolve.
    #[error("{0}")]
    Connect(String),
    /// The TLS handshake failed (bad certificate, not a TLS server, …).
    #[error("tls handshake failed{}", detail(.0))]
    Tls(String),
    /// The connection closed before the response was complete.
    #[error("{0}")]
    Reset(String),
    /// The body exceeded the cap; it is not parsed at all.
    #[error("response larger than {}", human_bytes(*.0))]
    TooLarge(usize),
    /// A stream that had sent this many bytes then went silent for longer
    /// than its stall limit, or ended without its terminating event
    /// ([`crate::upstream::streamed`]): as temporary as a timeout.
    #[error("stalled after {0} bytes")]
    Stalled(u64),
    /// Anything else (an invalid request, a protocol error).
    #[error("{0}")]
    Other(String),
}

impl TransportError {
    /// The host could not be reached, or the connection broke before a
    /// response: nothing about the model, everything about the path to it.
    /// A deadline that passed while the upstream was working, a body over
    /// the cap and an invalid request are not.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            TransportError::ConnectTimeout(_)
                | TransportError::Connect(_)
                | TransportError::Tls(_)
                | TransportError::Reset(_)
        )
    }
}

fn detail(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

/// `30s`, `1.5s`, `200ms`: the shape people write in configs.
pub fn human_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", (d.as_secs_f64() * 1000.0).round() / 1000.0)
    }
}

fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// The client every probe and routed request shares, so connections are
/// pooled per upstream.
///
/// - rustls is the only TLS backend compiled in, on *ring* (see
///   [`install_tls_provider`]).
/// - Redirects are not followed: a redirect would resend `x-api-key` or
///   `x-goog-api-key` (reqwest strips only `Authorization` across hosts) to
///   wherever the upstream points, and an API that redirects a POST is
///   misconfigured anyway; the 3xx is reported as an error instead.
/// - Proxies: `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` are
///   honoured for remote hosts, because people behind corporate proxies
///   need them to reach cloud providers. Loopback hosts always bypass the
///   proxy: a proxy cannot reach the user's local Ollama or llama.cpp, and
///   tests on 127.0.0.1 must never leave the machine.
///
/// Building fails only when the TLS backend cannot start; that stops the
/// command, because a default client would follow redirects with the key.
pub fn client() -> Result<reqwest::Client, ClientError> {
    install_tls_provider();
    let builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("llmprobe/", env!("CARGO_PKG_VERSION")))
        .tcp_nodelay(true);
    let builder = env_proxies(|k| std::env::var(k))
        .into_iter()
        .fold(builder.no_proxy(), |b, p| b.proxy(p));
    builder.build().map_err(|e| ClientError(innermost(&e)))
}

pub use crate::error::ClientError;

/// Make *ring* the process's rustls crypto provider, once. reqwest is built
/// with `rustls-no-provider` because its default provider, aws-lc-rs, more
/// than doubles a cold build; without a provider, building a
/// `reqwest::Client` panics. [`client`] calls this, and so must anything
/// else that builds one (tests).
pub fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // An error means another thread installed one first: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Proxies from the usual environment variables, each excluding loopback
/// hosts as well as whatever `NO_PROXY` lists. An unparseable proxy URL is
/// ignored rather than fatal, as curl does.
fn env_proxies(var: impl Fn(&str) -> Result<String, std::env::VarError>) -> Vec<reqwest::Proxy> {
    let get = |upper: &str| {
        var(upper)
            .or_else(|_| var(&upper.to_ascii_lowercase()))
            .ok()
            .filter(|v| !v.trim().is_empty())
    };
    let mut bypass = String::from("localhost,127.0.0.0/8,::1");
    if let Some(extra) = get("NO_PROXY") {
        bypass.push(',');
        bypass.push_str(&extra);
    }
    let mut out = Vec::new();
    let mut add = |p: reqwest::Result<reqwest::Proxy>| {
        if let Ok(p) = p {
            out.push(p.no_proxy(reqwest::NoProxy::from_string(&bypass)));
        }
    };
    if let Some(url) = get("HTTPS_PROXY") {
        add(reqwest::Proxy::https(url.as_str()));
    }
    if let Some(url) = get("HTTP_PROXY") {
        add(reqwest::Proxy::http(url.as_str()));
    }
    if let Some(url) = get("ALL_PROXY") {
        add(reqwest::Proxy::all(url.as_str()));
    }
    out
}

/// Send a request and read the whole body, all under one `timeout`, reading
/// at most `cap` bytes.
pub async fn send(
    builder: reqwest::RequestBuilder,
    timeout: Duration,
    cap: usize,
) -> Result<RawResponse, TransportError> {
    let started = Instant::now();
    let exchange = async {
        let response = builder.send().await.map_err(|e| from_reqwest(e, false))?;
        read_body(response, cap, started).await
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(TransportError::Timeout(timeout)),
    }
}

/// Read the rest of a response whose head has arrived, at most `cap`
/// bytes; `elapsed` runs from `started`. No deadline applies here: the
/// caller bounds the wait ([`send`], and a stream's request answered
/// whole, by an error status or a plain reply).
pub async fn read_body(
    mut response: reqwest::Response,
    cap: usize,
    started: Instant,
) -> Result<RawResponse, TransportError> {
    let status = response.status().as_u16();
    let headers = std::mem::take(response.headers_mut());
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(TransportError::TooLarge(cap));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| from_reqwest(e, true))? {
        if body.len() + chunk.len() > cap {
            return Err(TransportError::TooLarge(cap));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(RawResponse {
        status,
        headers,
        body,
        elapsed: started.elapsed(),
    })
}

/// Send a request and wait for the response's head only, under `timeout`:
/// for streams, whose body is read event by event by the caller. Errors
/// while reading that body go through [`body_error`].
pub async fn open(
    builder: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<reqwest::Response, TransportError> {
    match tokio::time::timeout(timeout, builder.send()).await {
        Ok(r) => r.map_err(|e| from_reqwest(e, false)),
        Err(_) => Err(TransportError::Timeout(timeout)),
    }
}

/// A failure while reading a response body that is being streamed (the
/// headers have arrived), sorted like [`send`]'s.
pub fn body_error(e: reqwest::Error) -> TransportError {
    from_reqwest(e, true)
}

/// Sort a reqwest error by walking its `source()` chain. `in_body` says the
/// headers had already arrived, so a broken connection is a reset mid-body.
fn from_reqwest(e: reqwest::Error, in_body: bool) -> TransportError {
    let e = e.without_url();
    let chain = || {
        std::iter::successors(
            Some(&e as &(dyn StdError + 'static)),
            |err: &&(dyn StdError + 'static)| (*err).source(),
        )
    };
    let io_kinds: Vec<io::ErrorKind> = chain()
        .filter_map(|err| err.downcast_ref::<io::Error>().map(io::Error::kind))
        .collect();
    let texts: Vec<String> = chain().map(|err| err.to_string().to_lowercase()).collect();
    let mentions = |needles: &[&str]| texts.iter().any(|t| needles.iter().any(|n| t.contains(n)));

    if e.is_timeout() {
        // Only the connect timeout can fire here; the overall deadline is
        // enforced around the whole exchange. A black-holed host is as
        // temporary as a slow one.
        return TransportError::ConnectTimeout(CONNECT_TIMEOUT);
    }
    if e.is_builder() {
        return TransportError::Other(format!("invalid request{}", detail(&innermost(&e))));
    }
    if e.is_connect() {
        if io_kinds.contains(&io::ErrorKind::ConnectionRefused) {
            return TransportError::Connect("connection refused".into());
        }
        if e.is_dns() {
            return TransportError::Connect("dns lookup failed".into());
        }
        // rustls reports handshake failures as io::ErrorKind::InvalidData
        // wrapping a rustls::Error; its text names the certificate problem.
        if io_kinds.contains(&io::ErrorKind::InvalidData)
            || mentions(&["certificate", "tls", "handshake", "corrupt message"])
        {
            return TransportError::Tls(innermost(&e));
        }
        if io_kinds.iter().any(|k| {
            matches!(
                k,
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::UnexpectedEof
            )
        }) {
            return TransportError::Reset("connection reset during connect".into());
        }
        return TransportError::Connect(format!("connection failed{}", detail(&innermost(&e))));
    }
    let broken = io_kinds.iter().any(|k| {
        matches!(
            k,
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof
        )
    }) || mentions(&[
        "connection closed",
        "end of file",
        "incomplete",
        "connection reset",
    ]);
    if in_body || e.is_body() || e.is_decode() {
        return TransportError::Reset("connection closed mid-body".into());
    }
    if broken {
        return TransportError::Reset("connection closed before a response".into());
    }
    TransportError::Other(format!("request failed{}", detail(&innermost(&e))))
}

/// The deepest error's text: the most specific, and (unlike reqwest's own
/// Display) never carrying the URL.
fn innermost(e: &(dyn StdError + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    let text = cur.to_string();
    if text.contains("://") {
        // A URL slipped into some layer's message; drop the detail rather
        // than risk echoing a query string.
        return String::new();
    }
    text.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Serve one connection: read the request head, then write `reply`
    /// (and, with `hold`, keep the socket open after it).
    async fn one_shot(reply: Vec<u8>, hold: bool) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = sock.read(&mut buf).await;
            let _ = sock.write_all(&reply).await;
            if hold {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            let _ = sock.shutdown().await;
        });
        format!("http://{addr}/")
    }

    /// GET `url` with a 5 s deadline and a body cap of `cap` bytes.
    async fn get(url: &str, cap: usize) -> Result<RawResponse, TransportError> {
        send(client().unwrap().get(url), Duration::from_secs(5), cap).await
    }

    #[tokio::test]
    async fn reads_a_whole_body() {
        let url = one_shot(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-a: b\r\n\r\nhello".to_vec(),
            false,
        )
        .await;
        let r = get(&url, DEFAULT_BODY_CAP).await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"hello");
        assert_eq!(r.headers["x-a"], "b");
    }

    #[tokio::test]
    async fn the_deadline_covers_the_body() {
        // Headers arrive at once, the body never does.
        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{".to_vec();
        let url = one_shot(reply, true).await;
        let err = send(
            client().unwrap().get(&url),
            Duration::from_millis(200),
            DEFAULT_BODY_CAP,
        )
        .await
        .unwrap_err();
        assert_eq!(err, TransportError::Timeout(Duration::from_millis(200)));
        assert_eq!(err.to_string(), "timed out after 200ms");
    }

    #[tokio::test]
    async fn chunked_body_over_the_cap_is_an_error() {
        let mut reply = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..20 {
            reply.extend_from_slice(b"400\r\n");
            reply.extend_from_slice(&[b'a'; 0x400]);
            reply.extend_from_slice(b"\r\n");
        }
        reply.extend_from_slice(b"0\r\n\r\n");
        let url = one_shot(reply, false).await;
        let err = get(&url, 8 * 1024).await.unwrap_err();
        assert_eq!(err, TransportError::TooLarge(8 * 1024));
        assert_eq!(err.to_string(), "response larger than 8 KiB");
    }

    #[tokio::test]
    async fn plain_http_server_on_https_is_a_tls_failure() {
        let url = one_shot(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), false).await;
        let url = url.replace("http://", "https://");
        let err = get(&url, DEFAULT_BODY_CAP).await.unwrap_err();
        assert!(matches!(err, TransportError::Tls(_)), "{err:?}");
        assert!(!err.to_string().contains("127.0.0.1"), "{err}");
    }

    #[tokio::test]
    async fn close_before_any_response_is_a_reset() {
        let url = one_shot(Vec::new(), false).await;
        let err = get(&url, DEFAULT_BODY_CAP).await.unwrap_err();
        assert!(matches!(err, TransportError::Reset(_)), "{err:?}");
    }

    #[test]
    fn proxies_from_env_and_loopback_bypass() {
        let env = |k: &str| match k {
            "https_proxy" => Ok("http://proxy.example:3128".to_string()),
            "NO_PROXY" => Ok("internal.example".to_string()),
            _ => Err(std::env::VarError::NotPresent),
        };
        let proxies = env_proxies(env);
        assert_eq!(proxies.len(), 1);
        let debug = format!("{:?}", proxies[0]);
        assert!(debug.contains("127.0.0.0/8"), "{debug}");
        assert!(debug.contains("internal.example"), "{debug}");
        assert!(env_proxies(|_| Err(std::env::VarError::NotPresent)).is_empty());
    }

    /// A TLS server on loopback with a certificate from a test CA
    /// (tests/fixtures/tls: P-256, valid for 100 years, made with openssl).
    /// Serves one connection with a fixed answer.
    fn tls_one_shot() -> String {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        use std::io::{Read, Write};
        let chain = vec![
            CertificateDer::from_pem_slice(include_bytes!("../../tests/fixtures/tls/server.pem"))
                .unwrap(),
        ];
        let key =
            PrivateKeyDer::from_pem_slice(include_bytes!("../../tests/fixtures/tls/server.key"))
                .unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (sock, _) = listener.accept().unwrap();
            let conn = rustls::ServerConnection::new(std::sync::Arc::new(config)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, sock);
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = tls
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
            tls.conn.send_close_notify();
            let _ = tls.flush();
        });
        format!("https://{addr}/")
    }

    #[tokio::test]
    async fn https_handshakes_with_the_ring_provider() {
        install_tls_provider();
        let ca = reqwest::Certificate::from_pem(include_bytes!("../../tests/fixtures/tls/ca.pem"))
            .unwrap();
        // The same verifier as `client()` (the platform's roots), plus the
        // test CA.
        let c = reqwest::Client::builder()
            .no_proxy()
            .tls_certs_merge([ca])
            .build()
            .unwrap();
        let r = send(
            c.get(tls_one_shot()),
            Duration::from_secs(10),
            DEFAULT_BODY_CAP,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"ok");
    }

    #[test]
    fn durations_read_like_config_values() {
        assert_eq!(human_duration(Duration::from_secs(30)), "30s");
        assert_eq!(human_duration(Duration::from_millis(200)), "200ms");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
    }
}
