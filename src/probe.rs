//! One probe: ask one model one question through its provider's dialect,
//! read the whole response under the provider's deadline, and classify it.
//! [`exchange`] is that path for any request and check; the capability
//! probes (`capabilities::probe`) take it too.
//!
//! A probe never fails: every problem, from a refused connection to a wrong
//! answer, becomes an [`Outcome`] for the health log.

use std::time::Duration;

use crate::catalog::Resolved;
use crate::outcome::{FailureType, Outcome, truncate_reason};
use crate::prompts::Question;
use crate::upstream::classify;
use crate::upstream::dialect::{self, ChatRequest};
use crate::upstream::http;
use crate::upstream::secret::Redactor;

/// Send `question` to `model` of `provider` and classify what comes back.
/// Never fails: every failure is an [`Outcome`]. Sent with temperature 0 and
/// the provider's `max_tokens`; `latency_ms` is the time to the full
/// response. The headers come back beside the outcome, for the ledger.
pub async fn probe(
    client: &reqwest::Client,
    provider: &Resolved,
    model: &str,
    question: &Question,
    timeout: Duration,
    redactor: &Redactor,
) -> classify::Classified {
    let request = ChatRequest::probe(model, &question.text, provider.provider.max_tokens);
    exchange(
        client,
        provider,
        &request,
        timeout,
        redactor,
        classify::answers(question.expected),
    )
    .await
}

/// Send `request` to `provider` through its dialect, read the whole
/// response under `timeout`, and classify it, a usable reply being judged
/// by `judge`: the path every probe takes, the plain one ([`probe`]) and
/// the capability probes (`capabilities::probe`). Never fails. The
/// provider's own key is masked in every message, whatever `redactor`
/// knows.
pub async fn exchange(
    client: &reqwest::Client,
    provider: &Resolved,
    request: &ChatRequest,
    timeout: Duration,
    redactor: &Redactor,
    judge: impl classify::Judge,
) -> classify::Classified {
    let key = provider.first_key().map(|k| &k.secret);
    let redactor = redactor.with(key);
    let built = match dialect::build_request(client, provider.endpoint(), key, request) {
        // A probe's request holds nothing a dialect could drop.
        Ok(b) => b,
        Err(e) => {
            return classify::Classified {
                outcome: Outcome {
                    failure: Some(FailureType::Error),
                    latency_ms: 0,
                    status: None,
                    error: Some(truncate_reason(&redactor.redact(&e.to_string()))),
                    unreachable: false,
                    retry_at: None,
                    model_gone: false,
                    timing: Default::default(),
                },
                error: None,
                headers: None,
            };
        }
    };
    let result = http::send(built.builder, timeout, http::DEFAULT_BODY_CAP).await;
    classify::classify(
        provider.provider.dialect,
        &result,
        built.plan,
        judge,
        &redactor,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    const KEY: &str = "canary-key-5c1d9e7a3b2f4e6d";

    fn provider(dialect: &str, base_url: &str) -> Resolved {
        crate::catalog::test_provider(dialect, base_url, Some(KEY))
    }

    fn question() -> Question {
        Question {
            text: "What is 7 + 7? Reply with only the number.".into(),
            expected: 14,
        }
    }

    /// A one-connection server: reads the request, hands its text to
    /// `check`, then writes `reply` (or nothing, with `reply = None`, and
    /// holds the socket open).
    async fn serve_once(
        reply: Option<Vec<u8>>,
        check: impl FnOnce(String) + Send + 'static,
    ) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let request = read_request(&mut sock).await;
            check(request);
            match reply {
                Some(bytes) => {
                    let _ = sock.write_all(&bytes).await;
                    let _ = sock.shutdown().await;
                }
                None => tokio::time::sleep(Duration::from_secs(30)).await,
            }
        });
        format!("http://{addr}/v1")
    }

    /// Read a request's head and its content-length body.
    async fn read_request(sock: &mut tokio::net::TcpStream) -> String {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = sock.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let len = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if buf.len() >= head_end + 4 + len {
                    return text;
                }
            }
        }
        String::from_utf8_lossy(&buf).to_string()
    }

    fn http_reply(status: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    async fn run(p: &Resolved, timeout: Duration) -> Outcome {
        probe(
            &http::client().unwrap(),
            p,
            "m",
            &question(),
            timeout,
            &Redactor::default(),
        )
        .await
        .outcome
    }

    #[tokio::test]
    async fn a_right_answer_is_ok() {
        let body = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"14"},"finish_reason":"stop"}]}"#;
        let url = serve_once(Some(http_reply("200 OK", body)), |req| {
            assert!(req.starts_with("POST /v1/chat/completions "), "{req}");
            assert!(
                req.contains(&format!("authorization: Bearer {KEY}")),
                "{req}"
            );
            assert!(req.contains("\"temperature\":0"), "{req}");
            assert!(req.contains("\"max_tokens\":16"), "{req}");
        })
        .await;
        let o = run(&provider("openai", &url), Duration::from_secs(5)).await;
        assert_eq!(o.failure, None, "{o:?}");
        assert_eq!(o.status, Some(200));
        assert_eq!(o.error, None);
    }

    #[tokio::test]
    async fn gemini_and_anthropic_round_trips() {
        let gemini = r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"14"}]},"finishReason":"STOP"}]}"#;
        let url = serve_once(Some(http_reply("200 OK", gemini)), |req| {
            assert!(
                req.starts_with("POST /v1/models/m:generateContent "),
                "{req}"
            );
            assert!(req.contains(&format!("x-goog-api-key: {KEY}")), "{req}");
        })
        .await;
        let o = run(&provider("gemini", &url), Duration::from_secs(5)).await;
        assert_eq!(o.failure, None, "{o:?}");

        let anthropic = r#"{"type":"message","content":[{"type":"text","text":"15"}],"stop_reason":"end_turn"}"#;
        let url = serve_once(Some(http_reply("200 OK", anthropic)), |req| {
            assert!(req.starts_with("POST /v1/messages "), "{req}");
            assert!(req.contains("anthropic-version: 2023-06-01"), "{req}");
        })
        .await;
        let o = run(&provider("anthropic", &url), Duration::from_secs(5)).await;
        assert_eq!(o.failure, Some(FailureType::WrongAnswer), "{o:?}");
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        let url = serve_once(None, |_| {}).await;
        let o = run(&provider("openai", &url), Duration::from_millis(200)).await;
        assert_eq!(o.failure, Some(FailureType::Timeout));
        assert_eq!(o.latency_ms, 0);
        assert_eq!(o.status, None);
        assert_eq!(o.error.as_deref(), Some("timed out after 200ms"));
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let o = run(
            &provider("openai", &format!("http://{addr}/v1")),
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(o.failure, Some(FailureType::Error));
        assert_eq!(o.error.as_deref(), Some("connection refused"));
        assert_eq!(o.latency_ms, 0);
    }

    #[tokio::test]
    async fn a_connection_closed_mid_body_is_an_error() {
        let reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"choices\":[{\"message\":".to_vec();
        let url = serve_once(Some(reply), |_| {}).await;
        let o = run(&provider("openai", &url), Duration::from_secs(5)).await;
        assert_eq!(o.failure, Some(FailureType::Error), "{o:?}");
        assert_eq!(o.error.as_deref(), Some("connection closed mid-body"));
    }

    #[tokio::test]
    async fn an_oversized_body_is_an_error() {
        let big = format!(
            r#"{{"choices":[{{"message":{{"content":"14"}}}}],"pad":"{}"}}"#,
            "x".repeat(http::DEFAULT_BODY_CAP)
        );
        let url = serve_once(Some(http_reply("200 OK", &big)), |_| {}).await;
        let o = run(&provider("openai", &url), Duration::from_secs(5)).await;
        assert_eq!(o.failure, Some(FailureType::Error));
        assert_eq!(o.error.as_deref(), Some("response larger than 1 MiB"));
    }

    #[tokio::test]
    async fn a_key_echoed_in_a_401_is_redacted() {
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
        );
        let url = serve_once(Some(http_reply("401 Unauthorized", &body)), |_| {}).await;
        // The caller's redactor knows nothing; the probe adds the key itself.
        let o = run(&provider("openai", &url), Duration::from_secs(5)).await;
        assert_eq!(o.failure, Some(FailureType::Error));
        assert_eq!(o.status, Some(401));
        let e = o.error.unwrap();
        assert!(!e.contains(KEY), "{e}");
        assert!(!e.contains("4e6d"), "{e}");
        assert!(
            e.starts_with("HTTP 401: Incorrect API key provided: [REDACTED]"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_tls_failure_is_an_error_without_the_url() {
        // A plain-text server: it answers the ClientHello with garbage.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let _ = sock.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        });
        let url = format!("https://{addr}/v1");
        let o = run(&provider("openai", &url), Duration::from_secs(5)).await;
        assert_eq!(o.failure, Some(FailureType::Error));
        let e = o.error.unwrap();
        assert!(e.starts_with("tls handshake failed"), "{e}");
        assert!(!e.contains("127.0.0.1"), "{e}");
    }
}
