//! One probe: ask one model one question through its provider's dialect,
//! streamed, read the whole response under the provider's deadline (and,
//! once it streams, its stall limit), and classify it.
//! [`exchange`] is that path for any request and check; the capability
//! probes (`capabilities::probe`) take it too.
//!
//! A probe never fails: every problem, from a refused connection to a wrong
//! answer, becomes an [`Outcome`] for the health log.

use std::time::Duration;

use crate::catalog::{Resolved, model_key};
use crate::outcome::{FailureType, Outcome, Timing, truncate_reason};
use crate::prompts::Question;
use crate::upstream::classify;
use crate::upstream::dialect::{self, ChatRequest, StreamMapper};
use crate::upstream::http;
use crate::upstream::secret::Redactor;
use crate::upstream::streamed::{self, Answer, Broken};

/// Send `question` to `model` of `provider`, streamed, and classify what
/// comes back. Never fails: every failure is an [`Outcome`]. Sent with
/// temperature 0 and the provider's `max_tokens`; `latency_ms` is the time
/// to the full response, and `timing.ttft_ms` to its first content token
/// (none when the provider answered whole). The headers come back beside
/// the outcome, for the ledger.
pub async fn probe(
    client: &reqwest::Client,
    provider: &Resolved,
    model: &str,
    question: &Question,
    timeout: Duration,
    redactor: &Redactor,
) -> classify::Classified {
    let mut request = ChatRequest::probe(model, &question.text, provider.provider.max_tokens);
    request.stream = true;
    let mut c = exchange(
        client,
        provider,
        &request,
        timeout,
        redactor,
        classify::answers(question.expected),
    )
    .await;
    // The health log keeps the time to the first token; the rate is the
    // speed probe's, whose answer is long enough to measure one.
    c.outcome.timing = Timing {
        ttft_ms: c.outcome.timing.ttft_ms,
        ..Timing::default()
    };
    c
}

/// Send `request` to `provider` through its dialect, read the whole
/// response under `timeout`, and classify it, a usable reply being judged
/// by `judge`: the path every probe takes, the plain one ([`probe`]) and
/// the capability probes (`capabilities::probe`). Never fails. The
/// provider's own key is masked in every message, whatever `redactor`
/// knows.
///
/// A request with `stream` on is read as a stream, bounded by `timeout`
/// before its first byte and by the provider's `stall_secs` after it
/// ([`streamed`]), and its outcome carries its timing. A provider that
/// refuses the stream (a 4xx naming it) is sent the request again
/// unstreamed at once (`requests` 2, for the ledger), and, for the rest of
/// the process, only that way.
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
    let refusal = model_key(&provider.provider.name, &request.model);
    let plain;
    let request = if request.stream && streamed::refused(&refusal) {
        plain = ChatRequest {
            stream: false,
            ..request.clone()
        };
        &plain
    } else {
        request
    };
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
                requests: 0,
            };
        }
    };
    let dialect = provider.provider.dialect;
    if !request.stream {
        let result = http::send(built.builder, timeout, http::DEFAULT_BODY_CAP).await;
        return classify::classify(dialect, &result, built.plan, judge, &redactor);
    }
    let limits = streamed::Limits {
        timeout,
        stall: provider.provider.stall,
    };
    let mapper = StreamMapper::new(dialect).plan(built.plan);
    match streamed::read(built.builder, mapper, dialect, limits).await {
        Ok(Answer::Streamed(s)) => classify::classify_streamed(&s, judge, &redactor),
        Ok(Answer::Whole(resp)) if streamed::refuses_streaming(&resp) => {
            streamed::remember_refusal(&refusal);
            let plain = ChatRequest {
                stream: false,
                ..request.clone()
            };
            let mut c = Box::pin(exchange(
                client, provider, &plain, timeout, &redactor, judge,
            ))
            .await;
            c.requests += 1;
            c
        }
        Ok(Answer::Whole(resp)) => {
            classify::classify_response(dialect, &resp, built.plan, judge, &redactor)
        }
        Err(Broken::Transport(e)) => {
            classify::classify(dialect, &Err(e), built.plan, judge, &redactor)
        }
        Err(Broken::Event {
            status,
            headers,
            error,
        }) => classify::stream_event_error(status, &headers, &error, &redactor),
    }
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
                req.starts_with("POST /v1/models/m:streamGenerateContent?alt=sse "),
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

    /// The fake provider, in-process, and a provider of `dialect` at it
    /// named `name` whose streams stall after `stall`.
    async fn fake_provider(
        dialect: &str,
        name: &str,
        stall: Duration,
    ) -> (crate::fake::FakeServer, Resolved) {
        let fake = crate::fake::start(crate::fake::FakeConfig::default())
            .await
            .unwrap();
        let mut p = provider(dialect, &format!("{}/v1", fake.url()));
        p.provider.name = name.into();
        p.provider.stall = stall;
        (fake, p)
    }

    /// A probe of `model` (a behaviour name) at `p`, with a question from
    /// the fake's own pool.
    async fn probe_fake(p: &Resolved, model: &str) -> classify::Classified {
        let q = crate::prompts::Pool::embedded().draw(&mut rand::rng());
        probe(
            &http::client().unwrap(),
            p,
            model,
            &q,
            Duration::from_secs(10),
            &Redactor::default(),
        )
        .await
    }

    #[tokio::test]
    async fn a_streamed_probe_times_its_first_token_in_every_dialect() {
        for d in ["openai", "anthropic", "gemini"] {
            let (fake, p) = fake_provider(d, "streams", Duration::from_secs(10)).await;
            let c = probe_fake(&p, "ok").await;
            let o = &c.outcome;
            assert_eq!(o.failure, None, "{d}: {o:?}");
            let ttft = o.timing.ttft_ms.unwrap_or_else(|| panic!("{d}: {o:?}"));
            assert!(ttft >= 1 && ttft <= o.latency_ms, "{d}: {o:?}");
            // The rate is the speed probe's, not the health log's.
            assert_eq!(
                (o.timing.output_tokens, o.timing.tokens_per_s),
                (None, None)
            );
            assert_eq!(c.requests, 1);
            assert!(fake.requests().iter().all(|r| r.stream), "{d}");
            // A wrong answer is judged from the assembled stream too.
            let c = probe_fake(&p, "wrong").await;
            assert_eq!(c.outcome.failure, Some(FailureType::WrongAnswer), "{d}");
        }
    }

    #[tokio::test]
    async fn a_stream_that_stalls_or_ends_unfinished_is_a_timeout() {
        for d in ["openai", "anthropic", "gemini"] {
            let (_fake, p) = fake_provider(d, "stalls", Duration::from_millis(300)).await;
            for model in ["stream-stall", "no-done", "no-done-hang", "stream-cut"] {
                let o = probe_fake(&p, model).await.outcome;
                assert_eq!(o.failure, Some(FailureType::Timeout), "{d} {model}: {o:?}");
                let e = o.error.clone().unwrap();
                let n: u64 = e
                    .strip_prefix("stalled after ")
                    .and_then(|r| r.strip_suffix(" bytes"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{d} {model}: {e}"));
                assert!(n > 0, "{d} {model}: {e}");
                assert_eq!(o.verdict(), crate::outcome::Verdict::Temporary("timeout"));
            }
            // An error event inside the stream is the upstream's failure.
            let o = probe_fake(&p, "stream-error").await.outcome;
            assert_eq!(o.failure, Some(FailureType::HttpError), "{d}: {o:?}");
            assert!(o.error.unwrap().starts_with("error in the stream"), "{d}");
        }
    }

    #[tokio::test]
    async fn a_provider_that_refuses_streams_is_asked_again_whole_and_remembered() {
        for d in ["openai", "anthropic", "gemini"] {
            let name = format!("refuses-{d}");
            let (fake, p) = fake_provider(d, &name, Duration::from_secs(10)).await;
            let c = probe_fake(&p, "no-stream").await;
            assert_eq!(c.outcome.failure, None, "{d}: {:?}", c.outcome);
            assert_eq!(c.outcome.timing.ttft_ms, None, "{d}");
            assert_eq!(c.requests, 2, "{d}");
            // Remembered: the next probe goes whole at once.
            let c = probe_fake(&p, "no-stream").await;
            assert_eq!((c.outcome.failure, c.requests), (None, 1), "{d}");
            let streamed: Vec<bool> = fake.requests().iter().map(|r| r.stream).collect();
            assert_eq!(streamed, [true, false, false], "{d}");
        }
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
