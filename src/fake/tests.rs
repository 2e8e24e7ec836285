//! The fake provider over real HTTP on 127.0.0.1, port 0.

use std::time::{Duration, Instant};

use rand::SeedableRng;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::*;
use crate::prompts::{Question, check_answer};

mod agent;
mod lists;
mod shapes;
mod tools;
mod windows;

const KEY: &str = "sk-fake-0123456789abcdef";

fn client() -> reqwest::Client {
    crate::upstream::http::install_tls_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client builds")
}

fn question(seed: u64) -> Question {
    Pool::embedded().draw(&mut rand::rngs::StdRng::seed_from_u64(seed))
}

struct Reply {
    status: u16,
    headers: HeaderMap,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }

    /// The answer text of a success in any dialect.
    fn content(&self, d: Dialect) -> String {
        let v = self.json();
        let s = match d {
            Dialect::Openai => &v["choices"][0]["message"]["content"],
            Dialect::Anthropic => &v["content"][0]["text"],
            Dialect::Gemini => &v["candidates"][0]["content"]["parts"][0]["text"],
        };
        s.as_str()
            .unwrap_or_else(|| panic!("no content: {v}"))
            .to_string()
    }
}

/// Build a request the way each dialect's client does.
fn request(
    c: &reqwest::Client,
    base: &str,
    d: Dialect,
    model: &str,
    prompt: &str,
) -> reqwest::RequestBuilder {
    match d {
        Dialect::Openai => c
            .post(format!("{base}/v1/chat/completions"))
            .header("authorization", format!("Bearer {KEY}"))
            .header("content-type", "application/json")
            .body(
                json!({
                    "model": model,
                    "messages": [
                        {"role": "system", "content": "Be brief."},
                        {"role": "user", "content": prompt},
                    ],
                    "temperature": 0,
                    "max_tokens": 16,
                })
                .to_string(),
            ),
        Dialect::Anthropic => c
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01")
            .body(
                json!({
                    "model": model,
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": 16,
                    "temperature": 0,
                })
                .to_string(),
            ),
        Dialect::Gemini => c
            .post(format!("{base}/v1beta/models/{model}:generateContent"))
            .header("x-goog-api-key", KEY)
            .body(
                json!({
                    "contents": [{"role": "user", "parts": [{"text": prompt}]}],
                    "generationConfig": {"temperature": 0, "maxOutputTokens": 16},
                })
                .to_string(),
            ),
    }
}

async fn send(rb: reqwest::RequestBuilder) -> Reply {
    let resp = rb.send().await.expect("request is answered");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body arrives whole");
    Reply {
        status,
        headers,
        text,
    }
}

async fn ask(base: &str, d: Dialect, model: &str, prompt: &str) -> Reply {
    send(request(&client(), base, d, model, prompt)).await
}

const DIALECTS: [Dialect; 3] = [Dialect::Openai, Dialect::Anthropic, Dialect::Gemini];

#[tokio::test]
async fn every_dialect_answers_correctly() {
    let fake = start(FakeConfig::default()).await.unwrap();
    for (i, d) in DIALECTS.into_iter().enumerate() {
        for seed in 0..5 {
            let q = question(seed * 10 + i as u64);
            let r = ask(&fake.url(), d, "llama-3.1-8b-instant", &q.text).await;
            assert_eq!(r.status, 200, "{d:?}: {}", r.text);
            let v = r.json();
            match d {
                Dialect::Openai => {
                    assert_eq!(v["object"], "chat.completion");
                    assert_eq!(v["model"], "llama-3.1-8b-instant");
                    assert_eq!(v["choices"][0]["finish_reason"], "stop");
                    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
                    assert!(v["usage"]["total_tokens"].as_u64().unwrap() > 0);
                }
                Dialect::Anthropic => {
                    assert_eq!(v["type"], "message");
                    assert_eq!(v["role"], "assistant");
                    assert_eq!(v["content"][0]["type"], "text");
                    assert_eq!(v["stop_reason"], "end_turn");
                    assert!(v["usage"]["output_tokens"].as_u64().unwrap() > 0);
                }
                Dialect::Gemini => {
                    assert_eq!(v["candidates"][0]["content"]["role"], "model");
                    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
                    assert!(v["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0);
                }
            }
            assert_eq!(r.content(d), q.expected.to_string(), "{d:?} {}", q.text);
        }
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn any_path_prefix_works() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(1);
    let c = client();
    for path in [
        "/chat/completions",
        "/openai/v1/chat/completions",
        "/api/v1/chat/completions",
        "/client/v4/accounts/abc/ai/v1/chat/completions",
    ] {
        let r = send(c.post(format!("{}{path}", fake.url())).body(
            json!({"model": "m", "messages": [{"role": "user", "content": q.text}]}).to_string(),
        ))
        .await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert_eq!(r.content(Dialect::Openai), q.expected.to_string());
    }
    // Content as a list of parts, as some clients send it.
    let r = send(
        c.post(format!("{}/v1/messages", fake.url()))
            .header("anthropic-version", "2023-06-01")
            .body(
                json!({"model": "claude", "max_tokens": 5, "messages": [
                    {"role": "user", "content": [{"type": "text", "text": q.text}]}
                ]})
                .to_string(),
            ),
    )
    .await;
    assert_eq!(r.content(Dialect::Anthropic), q.expected.to_string());
    // Gemini without a role, and a model id with a path.
    let r = send(
        c.post(format!(
            "{}/v1beta/models/gemini-2.5-flash:generateContent",
            fake.url()
        ))
        .body(json!({"contents": [{"parts": [{"text": q.text}]}]}).to_string()),
    )
    .await;
    assert_eq!(r.content(Dialect::Gemini), q.expected.to_string());
    assert_eq!(
        fake.requests().last().unwrap().model.as_deref(),
        Some("gemini-2.5-flash")
    );
}

/// The status each behaviour answers with, per dialect.
fn expected_status(b: Behaviour, d: Dialect) -> u16 {
    match b {
        Behaviour::RateLimit | Behaviour::RetryAfter(_) => 429,
        Behaviour::E500 => 500,
        Behaviour::Overloaded => 529,
        Behaviour::E503 => 503,
        Behaviour::Unauthorized if d == Dialect::Gemini => 400,
        Behaviour::Unauthorized | Behaviour::EchoKey => 401,
        Behaviour::Forbidden => 403,
        Behaviour::NotFound => 404,
        // Groq's status for a retired model; the others say not found.
        Behaviour::Decommissioned if d == Dialect::Openai => 400,
        Behaviour::Decommissioned => 404,
        Behaviour::ContextLength | Behaviour::GroqContextLength => 400,
        Behaviour::GroqTpm => 413,
        Behaviour::Html => 502,
        _ => 200,
    }
}

/// The error object of a dialect-shaped error body.
fn error_of(d: Dialect, v: &Value) -> &Value {
    match d {
        Dialect::Anthropic => {
            assert_eq!(v["type"], "error", "{v}");
            &v["error"]
        }
        _ => &v["error"],
    }
}

#[tokio::test]
async fn every_behaviour_in_every_dialect() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(3);
    let right = q.expected.to_string();
    let all: Vec<Behaviour> = behaviour::NAMES
        .split(", ")
        .map(|n| n.replace("MS", "5").replace(":N", ":30").parse().unwrap())
        .filter(|b| !matches!(b, Behaviour::Slow(d) if d.as_secs() >= 60))
        .filter(|b| *b != Behaviour::Reset)
        // Transport faults that never finish or are slow to read; the
        // integration tests (tests/faults.rs) meet them.
        .filter(|b| !matches!(b, Behaviour::HangHeaders | Behaviour::Drip))
        // Drawn per request; `behaviour::tests` meets them.
        .filter(|b| !matches!(b, Behaviour::Flaky(_) | Behaviour::Spike(_)))
        .filter(|b| !matches!(b, Behaviour::Huge(n) if *n != behaviour::HUGE_DEFAULT_MIB))
        .collect();
    for d in DIALECTS {
        for &b in &all {
            // The model id is the behaviour: no script needed.
            let model = b.to_string();
            let r = ask(&fake.url(), d, &model, &q.text).await;
            let ctx = format!(
                "{d:?} {b}: {} {}",
                r.status,
                &r.text[..r.text.len().min(300)]
            );
            assert_eq!(r.status, expected_status(b, d), "{ctx}");
            match b {
                // Unstreamed, the stream-breaking behaviours answer like ok.
                Behaviour::Ok(_)
                | Behaviour::Slow(_)
                | Behaviour::StreamCut
                | Behaviour::StreamError
                | Behaviour::StreamStall
                | Behaviour::NoStream
                | Behaviour::NoDone
                | Behaviour::NoDoneHang => {
                    assert!(check_answer(&r.content(d), q.expected), "{ctx}")
                }
                // Read lossily, the bad bytes show as U+FFFD before the
                // answer.
                Behaviour::BadUtf8 => {
                    assert!(r.text.contains('\u{FFFD}'), "{ctx}");
                    assert!(check_answer(&r.content(d), q.expected), "{ctx}");
                }
                // A plain question has nothing for these to refuse.
                Behaviour::NoTools
                | Behaviour::OllamaNoTools
                | Behaviour::NoJson
                | Behaviour::NoImages
                | Behaviour::MaxTokens(_)
                | Behaviour::ContextWindow(_)
                // Nor for these to get wrong (`capabilities::probe`'s tests
                // meet each with the probe it fails).
                | Behaviour::TextNotCall
                | Behaviour::WrongArgs
                | Behaviour::InventedTool
                | Behaviour::BadJson
                | Behaviour::JsonWrong
                | Behaviour::Misread
                // Nor for `agent` to call.
                | Behaviour::Agent => {
                    assert_eq!(r.content(d), right, "{ctx}")
                }
                // Groq speaks only OpenAI's dialect: its errors keep that
                // shape wherever they are sent.
                Behaviour::GroqContextLength | Behaviour::GroqTpm => {
                    let e = &r.json()["error"];
                    let code = if b == Behaviour::GroqTpm {
                        "rate_limit_exceeded"
                    } else {
                        "context_length_exceeded"
                    };
                    assert_eq!(e["code"], code, "{ctx}");
                }
                Behaviour::RetryAfter(n) => {
                    assert_eq!(n, 30);
                    assert_eq!(r.headers["retry-after"], "30", "{ctx}");
                }
                Behaviour::RpmHeaders(n) => {
                    assert!(check_answer(&r.content(d), q.expected), "{ctx}");
                    assert_eq!(r.headers["x-ratelimit-limit-requests"], "30", "{ctx}");
                    assert_eq!(n, 30);
                    assert_eq!(r.headers["x-ratelimit-remaining-requests"], "29");
                    assert_eq!(r.headers["x-ratelimit-reset-requests"], "1m0s");
                }
                Behaviour::Wrong => {
                    let c = r.content(d);
                    assert!(c.parse::<i64>().is_ok() && c != right, "{ctx}");
                    assert!(!check_answer(&c, q.expected), "{ctx}");
                }
                Behaviour::Think => {
                    let c = r.content(d);
                    assert!(c.starts_with("<think>") && c.ends_with(&right), "{ctx}");
                    assert!(check_answer(&c, q.expected), "{ctx}");
                }
                Behaviour::Truncated => {
                    assert_eq!(r.content(d), "<think>Let me compute", "{ctx}");
                    let v = r.json();
                    let reason = match d {
                        Dialect::Openai => &v["choices"][0]["finish_reason"],
                        Dialect::Anthropic => &v["stop_reason"],
                        Dialect::Gemini => &v["candidates"][0]["finishReason"],
                    };
                    let want = ["length", "max_tokens", "MAX_TOKENS"];
                    assert!(want.contains(&reason.as_str().unwrap()), "{ctx}");
                    assert!(!check_answer(&r.content(d), q.expected));
                }
                Behaviour::EmptyChoices => {
                    let v = r.json();
                    let list = match d {
                        Dialect::Openai => &v["choices"],
                        Dialect::Anthropic => &v["content"],
                        Dialect::Gemini => &v["candidates"],
                    };
                    assert_eq!(list, &json!([]), "{ctx}");
                }
                Behaviour::ErrorIn200 => {
                    let v = r.json();
                    assert_eq!(v["error"]["code"], 429, "{ctx}");
                    assert_eq!(v["error"]["message"], "Provider returned error");
                    assert!(v["error"]["metadata"]["raw"].is_string());
                }
                Behaviour::Garbage => {
                    assert!(serde_json::from_str::<Value>(&r.text).is_err(), "{ctx}")
                }
                Behaviour::Html | Behaviour::Html200 => {
                    assert!(r.text.contains("<html>") || r.text.contains("<!DOCTYPE html>"));
                    let ct = r.headers["content-type"].to_str().unwrap();
                    assert!(ct.starts_with("text/html"), "{ctx}");
                    if b == Behaviour::Html {
                        assert!(r.text.contains("<h1>502 Bad Gateway</h1>"));
                    }
                }
                Behaviour::Huge(_) => {
                    assert!(r.text.len() >= 8 << 20, "{}", r.text.len());
                    assert!(check_answer(&r.content(d), q.expected));
                }
                Behaviour::RateLimit => {
                    let v = r.json();
                    let e = error_of(d, &v);
                    match d {
                        Dialect::Openai => {
                            assert_eq!(e["code"], "rate_limit_exceeded");
                            assert!(e["message"].as_str().unwrap().contains("try again in 7s"));
                            assert_eq!(r.headers["retry-after"], "7");
                        }
                        Dialect::Anthropic => {
                            assert_eq!(e["type"], "rate_limit_error");
                            assert_eq!(r.headers["retry-after"], "7");
                        }
                        Dialect::Gemini => {
                            assert_eq!(e["status"], "RESOURCE_EXHAUSTED");
                            let info = e["details"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .find(|d| d["@type"] == "type.googleapis.com/google.rpc.RetryInfo")
                                .unwrap();
                            assert_eq!(info["retryDelay"], "7s");
                        }
                    }
                }
                Behaviour::Overloaded if d == Dialect::Anthropic => {
                    assert_eq!(error_of(d, &r.json())["type"], "overloaded_error");
                }
                Behaviour::Unauthorized if d == Dialect::Gemini => {
                    let v = r.json();
                    assert_eq!(
                        v["error"]["details"][0]["reason"], "API_KEY_INVALID",
                        "{ctx}"
                    );
                    assert!(!r.text.contains(KEY));
                }
                Behaviour::NotFound | Behaviour::Decommissioned => {
                    let v = r.json();
                    assert!(
                        error_of(d, &v)["message"]
                            .as_str()
                            .unwrap()
                            .contains(&model)
                    );
                }
                Behaviour::EchoKey => {
                    let v = r.json();
                    assert!(
                        error_of(d, &v)["message"].as_str().unwrap().contains(KEY),
                        "{ctx}"
                    );
                }
                _ => {
                    // Every other error is in the dialect's shape.
                    let v = r.json();
                    let e = error_of(d, &v);
                    assert!(e["message"].is_string(), "{ctx}");
                    if d == Dialect::Gemini {
                        assert_eq!(e["code"], r.status, "{ctx}");
                        assert!(e["status"].is_string(), "{ctx}");
                    }
                    assert!(!r.text.contains(KEY), "{ctx}");
                }
            }
        }
    }
}

#[tokio::test]
async fn scripts_cycle_per_model() {
    let cfg = FakeConfig::default().script(
        "gpt-x",
        &[
            Behaviour::Ok(Duration::ZERO),
            Behaviour::E500,
            Behaviour::Wrong,
        ],
    );
    let fake = start(cfg).await.unwrap();
    let q = question(5);
    let mut statuses = Vec::new();
    for i in 0..7 {
        // Alternate dialects: the cycle is per model, whatever the dialect.
        let d = DIALECTS[i % 3];
        let r = ask(&fake.url(), d, "gpt-x", &q.text).await;
        let passed = r.status == 200 && check_answer(&r.content(d), q.expected);
        statuses.push((r.status, passed));
    }
    assert_eq!(
        statuses,
        [
            (200, true),
            (500, false),
            (200, false),
            (200, true),
            (500, false),
            (200, false),
            (200, true)
        ]
    );
    // An unscripted model is unaffected by another model's script.
    let r = ask(&fake.url(), Dialect::Openai, "other", &q.text).await;
    assert_eq!(r.status, 200);
    let recorded: Vec<_> = fake
        .requests()
        .iter()
        .map(|r| r.behaviour.clone().unwrap())
        .collect();
    assert_eq!(
        recorded,
        ["ok", "e500", "wrong", "ok", "e500", "wrong", "ok", "ok"]
    );
}

#[tokio::test]
async fn reset_is_a_transport_error_for_the_client() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(6);
    for d in DIALECTS {
        let resp = request(&client(), &fake.url(), d, "reset", &q.text)
            .send()
            .await;
        // The headers arrive whole; the body must then fail, not end cleanly.
        let resp = resp.expect("headers arrive");
        assert_eq!(resp.status(), 200);
        let body = resp.bytes().await;
        assert!(body.is_err(), "{d:?}: body ended cleanly: {body:?}");
    }
    // The server survives it.
    let r = ask(&fake.url(), Dialect::Openai, "ok", &q.text).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn slow_and_latency_delay_the_answer() {
    let cfg = FakeConfig {
        latency: Duration::from_millis(100),
        ..FakeConfig::default()
    };
    let fake = start(cfg).await.unwrap();
    let q = question(7);
    let t = Instant::now();
    let r = ask(&fake.url(), Dialect::Openai, "slow:200", &q.text).await;
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(r.content(Dialect::Openai), q.expected.to_string());
    let t = Instant::now();
    ask(&fake.url(), Dialect::Gemini, "ok:150", &q.text).await;
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    // A client timeout shorter than `slow` fires.
    crate::upstream::http::install_tls_provider();
    let c = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let err = request(&c, &fake.url(), Dialect::Openai, "slow", &q.text)
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
}

#[tokio::test]
async fn errors_are_not_delayed_by_latency() {
    // A latency far beyond the client's deadline: an error answered in time
    // proves it was not delayed, with no upper bound on the machine's speed.
    let cfg = FakeConfig {
        latency: Duration::from_secs(3600),
        ..FakeConfig::default()
    };
    let fake = start(cfg).await.unwrap();
    let q = question(7);
    let c = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    for (dialect, model, status) in [
        (Dialect::Anthropic, "e500", 500),
        (Dialect::Openai, "rate-limit", 429),
    ] {
        let r = request(&c, &fake.url(), dialect, model, &q.text)
            .send()
            .await
            .expect("answered without the latency");
        assert_eq!(r.status(), status);
    }
}

#[tokio::test]
async fn shutdown_cuts_slow_requests_short() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let url = fake.url();
    let q = question(8);
    let pending = tokio::spawn(async move { ask(&url, Dialect::Openai, "slow", &q.text).await });
    // Let the request arrive before stopping.
    for _ in 0..100 {
        if !fake.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let addr = fake.addr();
    // `slow` alone would hold for minutes; the shutdown's grace period ends
    // it. The bound is generous so that a loaded machine cannot fail it.
    tokio::time::timeout(Duration::from_secs(30), fake.shutdown())
        .await
        .expect("shutdown ends within its grace period");
    let r = pending.await.unwrap();
    assert_eq!(r.status, 200);
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// A config that records every request to `requests.jsonl` in `dir`, and
/// that file.
fn recording(dir: &std::path::Path) -> (FakeConfig, PathBuf) {
    let file = dir.join("requests.jsonl");
    let cfg = FakeConfig {
        record: Some(file.clone()),
        ..FakeConfig::default()
    };
    (cfg, file)
}

#[tokio::test]
async fn requests_are_recorded_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, file) = recording(dir.path());
    std::fs::write(&file, "{\"earlier\":true}\n").unwrap();
    let fake = start(cfg).await.unwrap();
    let q = question(9);
    let before = chrono::Utc::now().timestamp_millis();
    ask(&fake.url(), Dialect::Openai, "ok", &q.text).await;
    ask(&fake.url(), Dialect::Anthropic, "echo-key", &q.text).await;
    ask(&fake.url(), Dialect::Gemini, "e503", &q.text).await;
    // Gemini's key in the query string, and no key at all.
    let c = client();
    send(
        c.post(format!(
            "{}/v1beta/models/gm:generateContent?key={KEY}",
            fake.url()
        ))
        .body(json!({"contents": [{"parts": [{"text": q.text}]}]}).to_string()),
    )
    .await;
    send(c.post(format!("{}/v1/chat/completions", fake.url())).body(
        json!({"model": "local", "messages": [{"role": "user", "content": q.text}]}).to_string(),
    ))
    .await;
    let unknown = send(c.get(format!("{}/v1/nothing", fake.url()))).await;
    assert_eq!(unknown.status, 404);

    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(KEY), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert_eq!(lines[0], "{\"earlier\":true}");
    let from_file: Vec<RecordedRequest> = lines[1..]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(from_file, fake.requests());

    let summary: Vec<_> = from_file
        .iter()
        .map(|r| {
            (
                r.dialect,
                r.model.as_deref(),
                r.behaviour.as_deref(),
                r.auth,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (Some(Dialect::Openai), Some("ok"), Some("ok"), true),
            (
                Some(Dialect::Anthropic),
                Some("echo-key"),
                Some("echo-key"),
                true
            ),
            (Some(Dialect::Gemini), Some("e503"), Some("e503"), true),
            (Some(Dialect::Gemini), Some("gm"), Some("ok"), true),
            (Some(Dialect::Openai), Some("local"), Some("ok"), false),
            (None, None, None, false),
        ]
    );
    assert!(from_file.iter().all(|r| r.at_ms >= before));
    assert_eq!(from_file[3].path, "/v1beta/models/gm:generateContent");
    assert_eq!(from_file[5].method, "GET");

    // The same list over HTTP, serialised the same way.
    let listed = send(c.get(format!("{}/_fake/requests", fake.url()))).await;
    assert_eq!(listed.status, 200);
    assert!(!listed.text.contains(KEY));
    let listed: Vec<RecordedRequest> = serde_json::from_str(&listed.text).unwrap();
    assert_eq!(listed, from_file);
    assert_eq!(listed[0].dialect, Some(Dialect::Openai));
    assert!(text.contains("\"dialect\":\"openai\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_record_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, file) = recording(dir.path());
    let cfg = cfg.script("mix", &[Behaviour::Ok(Duration::ZERO), Behaviour::E503]);
    let fake = start(cfg).await.unwrap();
    let q = question(10);
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let (url, text) = (fake.url(), q.text.clone());
            tokio::spawn(async move { ask(&url, DIALECTS[i % 3], "mix", &text).await.status })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        if t.await.unwrap() == 200 {
            ok += 1;
        }
    }
    // The cycle is shared by concurrent requests: exactly half succeed.
    assert_eq!(ok, 20);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<RecordedRequest> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(lines.len(), 40);
    assert_eq!(lines, fake.requests());
}

#[tokio::test]
async fn malformed_requests_are_rejected_like_the_real_thing() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let c = client();
    let url = fake.url();
    let r = send(
        c.post(format!("{url}/v1/chat/completions"))
            .body("{not json"),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    let r = send(
        c.post(format!("{url}/v1/chat/completions"))
            .body(json!({"messages": [{"role": "user", "content": "hi"}]}).to_string()),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("model"), "{}", r.text);
    let r = send(
        c.post(format!("{url}/v1/messages"))
            .header("x-api-key", KEY)
            .body(
                json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
                    .to_string(),
            ),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["type"], "error");
    assert!(r.text.contains("anthropic-version"), "{}", r.text);
    let r = send(
        c.post(format!("{url}/v1beta/models/m:generateContent"))
            .body("{}"),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["status"], "INVALID_ARGUMENT");
    // A question from elsewhere gets an answer with no number.
    let r = ask(
        &url,
        Dialect::Openai,
        "ok",
        "What is the capital of France?",
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(!check_answer(&r.content(Dialect::Openai), 14));
    let r = send(c.get(format!("{url}/v1/chat/completions"))).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn custom_pool_answers_its_own_questions() {
    let pool = Pool::parse(
        "[[template]]\nquestion = \"Add {x} and {y}.\"\nanswer = \"x + y\"\nvars = { x = [100, 200], y = [300, 400] }\n",
        "custom.toml",
    )
    .unwrap();
    let fake = start(FakeConfig::new(pool.clone())).await.unwrap();
    let q = pool.draw(&mut rand::rngs::StdRng::seed_from_u64(1));
    let r = ask(&fake.url(), Dialect::Anthropic, "m", &q.text).await;
    assert_eq!(r.content(Dialect::Anthropic), q.expected.to_string());
    assert!(q.expected >= 400);
}

/// A streamed request, as each dialect's client sends it.
fn stream_request(
    c: &reqwest::Client,
    base: &str,
    d: Dialect,
    model: &str,
    prompt: &str,
    include_usage: bool,
) -> reqwest::RequestBuilder {
    let user = json!([{"role": "user", "content": prompt}]);
    match d {
        Dialect::Openai => {
            let mut body = json!({"model": model, "messages": user, "stream": true});
            if include_usage {
                body["stream_options"] = json!({"include_usage": true});
            }
            c.post(format!("{base}/v1/chat/completions"))
                .header("authorization", format!("Bearer {KEY}"))
                .body(body.to_string())
        }
        Dialect::Anthropic => c
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01")
            .body(
                json!({"model": model, "messages": user, "max_tokens": 16, "stream": true})
                    .to_string(),
            ),
        Dialect::Gemini => c
            .post(format!(
                "{base}/v1beta/models/{model}:streamGenerateContent?alt=sse"
            ))
            .header("x-goog-api-key", KEY)
            .body(json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}]}).to_string()),
    }
}

/// One server-sent event: a comment, or an optional name and its data.
#[derive(Debug, Clone, PartialEq)]
enum Sse {
    Comment(String),
    Event(Option<String>, String),
}

impl Sse {
    fn json(&self) -> Value {
        match self {
            Sse::Event(_, data) => {
                serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
            }
            Sse::Comment(c) => panic!("a comment, not data: {c}"),
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            Sse::Event(name, _) => name.as_deref(),
            Sse::Comment(_) => None,
        }
    }
}

/// Parse whole events from an SSE body; a trailing partial event is left
/// out.
fn parse_sse(text: &str) -> Vec<Sse> {
    let mut events = Vec::new();
    let mut blocks: Vec<&str> = text.split("\n\n").collect();
    blocks.pop(); // After the last blank line: empty, or an unfinished event.
    for block in blocks {
        let (mut name, mut data, mut comment) = (None, Vec::new(), None);
        for line in block.lines() {
            if let Some(c) = line.strip_prefix(':') {
                comment = Some(c.trim().to_string());
            } else if let Some(n) = line.strip_prefix("event:") {
                name = Some(n.trim().to_string());
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push(d.strip_prefix(' ').unwrap_or(d));
            } else {
                panic!("not an SSE line: {line:?} in {text:?}");
            }
        }
        events.push(match comment {
            Some(c) if data.is_empty() => Sse::Comment(c),
            _ => Sse::Event(name, data.join("\n")),
        });
    }
    events
}

/// The text pieces a stream carried, in order.
fn stream_pieces(d: Dialect, events: &[Sse]) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let Sse::Event(name, data) = e else { continue };
        if data == "[DONE]" || name.as_deref() == Some("error") {
            continue;
        }
        let v = e.json();
        match d {
            Dialect::Openai => {
                if let Some(t) = v["choices"][0]["delta"]["content"].as_str() {
                    out.push(t.to_string());
                }
            }
            Dialect::Anthropic => {
                if name.as_deref() == Some("content_block_delta") {
                    assert_eq!(v["delta"]["type"], "text_delta", "{v}");
                    out.push(v["delta"]["text"].as_str().unwrap().to_string());
                }
            }
            Dialect::Gemini => {
                for p in v["candidates"][0]["content"]["parts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    out.push(p["text"].as_str().unwrap().to_string());
                }
            }
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// Read a body chunk by chunk until it ends or fails. The bound is only a
/// safety net.
async fn read_rest(resp: &mut reqwest::Response, text: &mut String) -> Result<(), reqwest::Error> {
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match resp.chunk().await {
                Ok(Some(b)) => text.push_str(std::str::from_utf8(&b).unwrap()),
                Ok(None) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the body ends")
}

/// Read until the first piece of text has arrived.
async fn read_first_piece(resp: &mut reqwest::Response, d: Dialect) -> String {
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while stream_pieces(d, &parse_sse(&text)).is_empty() {
            let b = resp
                .chunk()
                .await
                .expect("no error yet")
                .expect("not ended yet");
            text.push_str(std::str::from_utf8(&b).unwrap());
        }
    })
    .await
    .expect("the first piece arrives");
    text
}

fn is_sse(resp: &reqwest::Response) -> bool {
    resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream")
}

/// The events of a streamed answer, which must come as SSE with a 200.
async fn sse_events(
    base: &str,
    d: Dialect,
    model: &str,
    prompt: &str,
    include_usage: bool,
) -> Vec<Sse> {
    let resp = stream_request(&client(), base, d, model, prompt, include_usage)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(is_sse(&resp));
    parse_sse(&resp.text().await.unwrap())
}

#[tokio::test]
async fn openai_streams_chunks_then_done() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(11);
    for include_usage in [false, true] {
        let events = sse_events(
            &fake.url(),
            Dialect::Openai,
            "gpt-s",
            &q.text,
            include_usage,
        )
        .await;
        assert_eq!(
            events.last(),
            Some(&Sse::Event(None, "[DONE]".into())),
            "{events:?}"
        );
        assert!(
            events.contains(&Sse::Comment("keep-alive".into())),
            "{events:?}"
        );
        let chunks: Vec<Value> = events
            .iter()
            .filter(|e| matches!(e, Sse::Event(_, d) if d != "[DONE]"))
            .map(Sse::json)
            .collect();
        for c in &chunks {
            assert_eq!(c["object"], "chat.completion.chunk", "{c}");
            assert_eq!(c["id"], chunks[0]["id"]);
            assert_eq!(c["created"], chunks[0]["created"]);
            assert_eq!(c["model"], "gpt-s");
        }
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let pieces = stream_pieces(Dialect::Openai, &events);
        assert!(pieces.len() >= 2, "{pieces:?}");
        assert_eq!(pieces.concat(), q.expected.to_string());
        let finishes: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["finish_reason"].as_str().map(|_| c))
            .collect();
        assert_eq!(finishes.len(), 1);
        assert_eq!(finishes[0]["choices"][0]["finish_reason"], "stop");
        let usage: Vec<&Value> = chunks.iter().filter(|c| !c["usage"].is_null()).collect();
        if include_usage {
            // The last chunk, with no choices.
            assert_eq!(usage.len(), 1);
            assert_eq!(usage[0], chunks.last().unwrap());
            assert_eq!(usage[0]["choices"], json!([]));
            assert!(usage[0]["usage"]["total_tokens"].as_u64().unwrap() > 0);
        } else {
            assert!(usage.is_empty(), "{usage:?}");
        }
    }
    // Truncated: finish_reason length.
    let resp = stream_request(
        &client(),
        &fake.url(),
        Dialect::Openai,
        "truncated",
        &q.text,
        false,
    )
    .send()
    .await
    .unwrap();
    let events = parse_sse(&resp.text().await.unwrap());
    assert_eq!(
        stream_pieces(Dialect::Openai, &events).concat(),
        "<think>Let me compute"
    );
    assert!(events.iter().any(|e| matches!(e, Sse::Event(_, d)
        if d != "[DONE]" && e.json()["choices"][0]["finish_reason"] == "length")));
    assert!(fake.requests().iter().all(|r| r.stream));
}

#[tokio::test]
async fn anthropic_streams_events_in_order() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(12);
    let events = sse_events(&fake.url(), Dialect::Anthropic, "claude-s", &q.text, false).await;
    let names: Vec<&str> = events.iter().map(|e| e.name().unwrap()).collect();
    let deltas = names
        .iter()
        .filter(|n| **n == "content_block_delta")
        .count();
    assert!(deltas >= 2, "{names:?}");
    let mut want = vec!["message_start", "content_block_start", "ping"];
    want.extend(std::iter::repeat_n("content_block_delta", deltas));
    want.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names, want);
    for e in &events {
        assert_eq!(e.json()["type"], e.name().unwrap());
    }
    let start = events[0].json();
    assert_eq!(start["message"]["model"], "claude-s");
    assert!(start["message"]["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let delta = events[events.len() - 2].json();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        stream_pieces(Dialect::Anthropic, &events).concat(),
        q.expected.to_string()
    );
    assert!(fake.requests()[0].stream);
}

#[tokio::test]
async fn gemini_streams_sse_or_a_json_array() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(13);
    let events = sse_events(&fake.url(), Dialect::Gemini, "gemini-s", &q.text, false).await;
    assert!(events.len() >= 2, "{events:?}");
    for (i, e) in events.iter().enumerate() {
        let v = e.json();
        assert!(v["candidates"][0]["content"]["parts"].is_array(), "{v}");
        let last = i == events.len() - 1;
        assert_eq!(v["candidates"][0]["finishReason"] == "STOP", last, "{v}");
        assert_eq!(v["usageMetadata"]["totalTokenCount"].is_u64(), last, "{v}");
    }
    assert_eq!(
        stream_pieces(Dialect::Gemini, &events).concat(),
        q.expected.to_string()
    );
    // Without alt=sse: one JSON array of the same responses.
    let r = send(
        client()
            .post(format!(
                "{}/v1beta/models/gemini-s:streamGenerateContent",
                fake.url()
            ))
            .body(json!({"contents": [{"parts": [{"text": q.text}]}]}).to_string()),
    )
    .await;
    assert_eq!(r.status, 200);
    let list = r.json();
    let list = list.as_array().unwrap();
    assert!(list.len() >= 2);
    let text: String = list
        .iter()
        .map(|v| {
            v["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(text, q.expected.to_string());
    assert_eq!(
        list.last().unwrap()["candidates"][0]["finishReason"],
        "STOP"
    );
    let recorded = fake.requests();
    assert!(
        recorded
            .iter()
            .all(|r| r.stream && r.model.as_deref() == Some("gemini-s"))
    );
    assert_eq!(
        recorded[0].path,
        "/v1beta/models/gemini-s:streamGenerateContent"
    );
}

#[tokio::test]
async fn errors_answer_before_any_stream() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(14);
    for d in DIALECTS {
        for b in [Behaviour::E500, Behaviour::RateLimit, Behaviour::NotFound] {
            let r = send(stream_request(
                &client(),
                &fake.url(),
                d,
                &b.to_string(),
                &q.text,
                true,
            ))
            .await;
            assert_eq!(r.status, expected_status(b, d), "{d:?} {b}");
            let ct = r.headers["content-type"].to_str().unwrap();
            assert!(ct.starts_with("application/json"), "{d:?} {b}: {ct}");
            assert!(error_of(d, &r.json())["message"].is_string());
        }
        // An empty answer streams with no text at all.
        let r = send(stream_request(
            &client(),
            &fake.url(),
            d,
            "empty-choices",
            &q.text,
            false,
        ))
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(stream_pieces(d, &parse_sse(&r.text)), Vec::<String>::new());
    }
}

/// The marks of a stream that finished.
fn finished(d: Dialect, events: &[Sse]) -> bool {
    events.iter().any(|e| match d {
        Dialect::Openai => e == &Sse::Event(None, "[DONE]".into()),
        Dialect::Anthropic => e.name() == Some("message_stop"),
        Dialect::Gemini => matches!(e, Sse::Event(_, data) if data.contains("finishReason")),
    })
}

#[tokio::test]
async fn stream_cut_drops_the_connection_after_the_first_piece() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(15);
    let right = q.expected.to_string();
    for d in DIALECTS {
        let mut resp = stream_request(&client(), &fake.url(), d, "stream-cut", &q.text, true)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut text = String::new();
        let end = read_rest(&mut resp, &mut text).await;
        assert!(end.is_err(), "{d:?}: the body ended cleanly: {text}");
        let events = parse_sse(&text);
        let pieces = stream_pieces(d, &events);
        assert_eq!(pieces.len(), 1, "{d:?}: {text}");
        assert!(
            right.starts_with(&pieces[0]) && pieces[0] != right,
            "{d:?}: {pieces:?}"
        );
        assert!(!finished(d, &events), "{d:?}: {text}");
    }
    // The server survives it.
    assert_eq!(
        ask(&fake.url(), Dialect::Openai, "ok", &q.text)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn stream_error_sends_an_error_event_after_the_first_piece() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let q = question(16);
    for d in DIALECTS {
        let r = send(stream_request(
            &client(),
            &fake.url(),
            d,
            "stream-error",
            &q.text,
            true,
        ))
        .await;
        assert_eq!(r.status, 200);
        let events = parse_sse(&r.text);
        assert_eq!(stream_pieces(d, &events).len(), 1, "{d:?}: {}", r.text);
        assert!(!finished(d, &events), "{d:?}: {}", r.text);
        let last = events.last().unwrap();
        let v = last.json();
        match d {
            Dialect::Openai => {
                assert!(v["error"]["message"].is_string(), "{v}");
                assert_eq!(v["choices"][0]["finish_reason"], "error");
            }
            Dialect::Anthropic => {
                assert_eq!(last.name(), Some("error"));
                assert_eq!(v["error"]["type"], "overloaded_error");
            }
            Dialect::Gemini => {
                assert_eq!(v["error"]["status"], "UNAVAILABLE", "{v}");
                assert!(v.get("candidates").is_none());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_stall_holds_until_shutdown() {
    let q = question(17);
    for d in DIALECTS {
        let fake = start(FakeConfig::default()).await.unwrap();
        let mut resp = stream_request(&client(), &fake.url(), d, "stream-stall", &q.text, false)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut text = read_first_piece(&mut resp, d).await;
        // Nothing more comes until the server stops; then the stream ends,
        // unfinished.
        let (_, end) = tokio::join!(fake.shutdown(), read_rest(&mut resp, &mut text));
        let events = parse_sse(&text);
        assert_eq!(stream_pieces(d, &events).len(), 1, "{d:?}: {text}");
        assert!(!finished(d, &events), "{d:?}: {text}");
        assert!(end.is_err(), "{d:?}: ended cleanly: {text}");
    }
}
