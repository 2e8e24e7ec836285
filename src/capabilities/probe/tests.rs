//! The capability probes against the fake provider, over real HTTP on
//! 127.0.0.1, in every dialect.

use super::*;
use crate::catalog::Catalog;
use crate::fake::{self, Behaviour, FakeConfig, FakeServer};
use crate::upstream::http;

const KEY: &str = "canary-key-9d2e7c4b1a6f3e8d";

const DIALECTS: [Dialect; 3] = [Dialect::Openai, Dialect::Anthropic, Dialect::Gemini];

/// A provider of `dialect` at the fake, with [`KEY`].
fn provider(dialect: Dialect, fake: &FakeServer) -> Resolved {
    crate::catalog::test_provider(dialect.as_str(), &format!("{}/v1", fake.url()), Some(KEY))
}

async fn start() -> FakeServer {
    fake::start(FakeConfig::default()).await.unwrap()
}

/// Probe `model` (a behaviour name) at `fake` for `cap` in `dialect`.
async fn run(fake: &FakeServer, dialect: Dialect, model: &str, cap: Capability) -> CapOutcome {
    probe(
        &http::client().unwrap(),
        &provider(dialect, fake),
        model,
        cap,
        256,
        Duration::from_secs(10),
        &Redactor::default(),
    )
    .await
    .0
}

#[tokio::test]
async fn every_probe_passes_against_a_capable_model_in_every_dialect() {
    let fake = start().await;
    for d in DIALECTS {
        for cap in Capability::ALL {
            let o = run(&fake, d, "ok", cap).await;
            assert_eq!(o.outcome.failure, None, "{d:?} {cap}: {o:?}");
            assert_eq!(o.outcome.status, Some(200), "{d:?} {cap}");
            assert_eq!(o.decided, Some(Judgement::Yes), "{d:?} {cap}");
            assert!(o.outcome.latency_ms > 0);
        }
    }
    // Temperature 0, the capability budget, and what each probe asks for.
    let sent: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.dialect == Some(Dialect::Openai))
        .map(|r| r.body.unwrap())
        .collect();
    assert_eq!(sent.len(), 3);
    for body in &sent {
        assert_eq!(body["temperature"], 0.0, "{body}");
        assert_eq!(body["max_tokens"], 256, "{body}");
    }
    assert_eq!(sent[0]["tools"][0]["function"]["name"], "add");
    assert_eq!(
        sent[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["a", "b"])
    );
    assert_eq!(sent[1]["response_format"]["type"], "json_schema");
    let image = &sent[2]["messages"][0]["content"][0]["image_url"]["url"];
    assert!(
        image
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{image}"
    );
    assert_eq!(
        sent[2]["messages"][0]["content"][1]["text"],
        VISION_QUESTION
    );
    // Anthropic got JSON mode as a forced call, Gemini as a schema.
    let bodies = |d| {
        fake.requests()
            .into_iter()
            .filter(move |r| r.dialect == Some(d))
            .map(|r| r.body.unwrap())
    };
    let anthropic: Vec<_> = bodies(Dialect::Anthropic).collect();
    assert_eq!(anthropic[1]["tool_choice"]["name"], "json_output");
    assert_eq!(anthropic[2]["messages"][0]["content"][0]["type"], "image");
    let gemini: Vec<_> = bodies(Dialect::Gemini).collect();
    assert_eq!(
        gemini[1]["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(
        gemini[2]["contents"][0]["parts"][0]["inlineData"]["mimeType"],
        "image/png"
    );
}

#[tokio::test]
async fn each_failing_behaviour_is_a_wrong_answer_that_decides_no() {
    let fake = start().await;
    let cases: [(&str, Capability, &str); 6] = [
        (
            "text-not-call",
            Capability::Tools,
            "answered in text, no call of add",
        ),
        ("wrong-args", Capability::Tools, "called add with a="),
        (
            "invented-tool",
            Capability::Tools,
            "called calculate, not add",
        ),
        (
            "bad-json",
            Capability::Json,
            "not JSON: \"Sure! The answer is",
        ),
        ("json-wrong", Capability::Json, "answer is "),
        ("misread", Capability::Vision, "wrong answer: expected "),
    ];
    for d in DIALECTS {
        for (model, cap, reason) in cases {
            let o = run(&fake, d, model, cap).await;
            assert_eq!(
                o.outcome.failure,
                Some(FailureType::WrongAnswer),
                "{d:?} {model}: {o:?}"
            );
            assert_eq!(o.decided, Some(Judgement::No), "{d:?} {model}");
            let e = o.outcome.error.unwrap();
            assert!(e.starts_with(reason), "{d:?} {model}: {e}");
            // The same model passes the other probes: it fails only its
            // own capability.
            for other in Capability::ALL.into_iter().filter(|c| *c != cap) {
                let o = run(&fake, d, model, other).await;
                assert_eq!(o.decided, Some(Judgement::Yes), "{d:?} {model} {other}");
            }
        }
    }
}

#[tokio::test]
async fn reasons_name_the_numbers() {
    let fake = start().await;
    let o = run(&fake, Dialect::Openai, "wrong-args", Capability::Tools).await;
    let e = o.outcome.error.unwrap();
    // "called add with a=1235, b=5678; asked 1234 and 5678"
    let (got, asked) = e.split_once("; asked ").unwrap();
    let nums = |s: &str| -> Vec<i64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    let (got, asked) = (nums(got), nums(asked));
    assert_eq!(got[0], asked[0] + 1, "{e}");
    assert_eq!(got[1], asked[1], "{e}");
    let o = run(&fake, Dialect::Gemini, "json-wrong", Capability::Json).await;
    let e = o.outcome.error.unwrap();
    let n = nums(&e.replace('-', ""));
    assert!(e.contains(", expected "), "{e}");
    assert_eq!(n.len(), 2, "{e}");
}

#[tokio::test]
async fn a_refused_capability_decides_no() {
    let fake = start().await;
    let cases = [
        ("no-tools", Capability::Tools),
        ("no-json", Capability::Json),
        ("no-images", Capability::Vision),
    ];
    for d in DIALECTS {
        for (model, cap) in cases {
            let o = run(&fake, d, model, cap).await;
            assert_eq!(
                o.outcome.failure,
                Some(FailureType::Error),
                "{d:?} {model}: {o:?}"
            );
            assert_eq!(o.outcome.status, Some(400), "{d:?} {model}");
            assert_eq!(o.decided, Some(Judgement::No), "{d:?} {model}: {o:?}");
        }
    }
    // Refusing one capability says nothing about the others.
    let o = run(&fake, Dialect::Openai, "no-tools", Capability::Vision).await;
    assert_eq!(o.decided, Some(Judgement::Yes));
    let o = run(&fake, Dialect::Openai, "ollama-no-tools", Capability::Tools).await;
    assert_eq!(o.decided, Some(Judgement::No), "{o:?}");
}

#[tokio::test]
async fn failures_that_say_nothing_about_the_capability_decide_nothing() {
    let fake = start().await;
    for d in DIALECTS {
        for model in [
            "rate-limit",
            "e500",
            "overloaded",
            "unauthorized",
            "not-found",
            "context-length",
            "garbage",
            "error-in-200",
        ] {
            for cap in Capability::ALL {
                let o = run(&fake, d, model, cap).await;
                assert!(o.outcome.failure.is_some(), "{d:?} {model} {cap}");
                assert_eq!(o.decided, None, "{d:?} {model} {cap}: {o:?}");
            }
        }
    }
    // A model that refuses tools, probed for JSON (OpenAI), is not refused.
    let o = run(&fake, Dialect::Openai, "no-json", Capability::Tools).await;
    assert_eq!(o.decided, Some(Judgement::Yes));
}

#[tokio::test]
async fn a_reply_cut_off_before_its_answer_is_wrong_but_decides_nothing() {
    // `truncated`: reasoning cut off by the token limit, no answer. A
    // larger budget might pass, so the verdict stands.
    let fake = start().await;
    for d in DIALECTS {
        for cap in Capability::ALL {
            let o = run(&fake, d, "truncated", cap).await;
            assert_eq!(
                o.outcome.failure,
                Some(FailureType::WrongAnswer),
                "{d:?} {cap}: {o:?}"
            );
            assert_eq!(o.decided, None, "{d:?} {cap}: {o:?}");
        }
    }
}

#[tokio::test]
async fn timeouts_and_unreachable_hosts_decide_nothing() {
    let fake = start().await;
    let p = provider(Dialect::Openai, &fake);
    let o = probe(
        &http::client().unwrap(),
        &p,
        "slow",
        Capability::Tools,
        256,
        Duration::from_millis(200),
        &Redactor::default(),
    )
    .await
    .0;
    assert_eq!(o.outcome.failure, Some(FailureType::Timeout));
    assert_eq!(o.decided, None);
    let url = fake.url();
    fake.shutdown().await;
    let gone = FakeServerless(url);
    let o = probe(
        &http::client().unwrap(),
        &gone.provider(),
        "ok",
        Capability::Vision,
        256,
        Duration::from_secs(5),
        &Redactor::default(),
    )
    .await
    .0;
    assert_eq!(o.outcome.failure, Some(FailureType::Error), "{o:?}");
    assert!(o.outcome.unreachable, "{o:?}");
    assert_eq!(o.decided, None);
}

/// A base URL where nothing listens any more.
struct FakeServerless(String);

impl FakeServerless {
    fn provider(&self) -> Resolved {
        let c = Catalog::from_toml_str(
            &format!(
                r#"
                include_default_catalog = false
                [[providers]]
                name = "local"
                dialect = "openai"
                base_url = "{}/v1"
                models = ["m"]
                "#,
                self.0
            ),
            "test.toml",
        )
        .unwrap();
        c.providers[0].resolve_with(|_| None).unwrap()
    }
}

#[tokio::test]
async fn no_api_key_reaches_the_outcome() {
    let fake = start().await;
    for d in DIALECTS {
        for cap in Capability::ALL {
            // `echo-key` answers 401 with the key in its message.
            let o = run(&fake, d, "echo-key", cap).await;
            let shown = format!("{o:?}");
            assert!(o.outcome.error.is_some(), "{d:?} {cap}");
            assert!(!shown.contains(KEY), "{d:?} {cap}: {shown}");
            assert!(!shown.contains("3e8d"), "{d:?} {cap}: {shown}");
            assert_eq!(o.decided, None);
        }
    }
    // Nor does a wrong answer that quotes it.
    let o = run(&fake, Dialect::Openai, "text-not-call", Capability::Tools).await;
    assert!(!format!("{o:?}").contains(KEY));
}

#[test]
fn two_probes_draw_different_operands() {
    for cap in Capability::ALL {
        let drawn: Vec<Check> = (0..5)
            .map(|_| task("m", cap, 256, &mut rand::rng()).1)
            .collect();
        assert!(drawn.iter().any(|c| *c != drawn[0]), "{cap}: {drawn:?}");
        let (r1, _) = task("m", cap, 256, &mut rand::rng());
        let (r2, _) = task("m", cap, 256, &mut rand::rng());
        let (r3, _) = task("m", cap, 256, &mut rand::rng());
        assert!(r1 != r2 || r2 != r3, "{cap}");
    }
}

#[test]
fn the_vision_image_shows_the_expected_number() {
    for _ in 0..20 {
        let (req, check) = task("m", Capability::Vision, 256, &mut rand::rng());
        let Check::Reading { expected } = check else {
            panic!("{check:?}")
        };
        assert!((100..=99_999).contains(&expected));
        let Some(Content::Parts(parts)) = &req.messages[0].content else {
            panic!("{req:?}")
        };
        let url = parts[0]["image_url"]["url"].as_str().unwrap();
        let data = url.strip_prefix("data:image/png;base64,").unwrap();
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        assert_eq!(glyphs::read(&png), Some(expected as u64));
    }
}

fn reply(text: &str, calls: &[(&str, &str)]) -> ChatReply {
    ChatReply {
        text: text.into(),
        reasoning: None,
        finish_reason: Some("stop".into()),
        usage: None,
        tool_calls: calls
            .iter()
            .map(|(n, a)| crate::upstream::dialect::ToolCall {
                id: "c1".into(),
                name: n.to_string(),
                arguments: a.to_string(),
            })
            .collect(),
    }
}

#[test]
fn calls_are_judged_by_name_and_arguments() {
    let check = Check::Call { a: 4, b: 9 };
    let judge = |r: ChatReply| check.judge(&r);
    assert_eq!(judge(reply("", &[("add", r#"{"a":4,"b":9}"#)])), Ok(()));
    // Addition commutes; 9.0 is a whole number.
    assert_eq!(judge(reply("", &[("add", r#"{"b":4,"a":9.0}"#)])), Ok(()));
    // Another call first, then add: the call of add counts.
    assert_eq!(
        judge(reply("", &[("log", "{}"), ("add", r#"{"a":4,"b":9}"#)])),
        Ok(())
    );
    assert_eq!(
        judge(reply("", &[("add", r#"{"a":3,"b":9}"#)])),
        Err("called add with a=3, b=9; asked 4 and 9".into())
    );
    assert_eq!(
        judge(reply("", &[("add", r#"{"a":"4","b":9}"#)])),
        Err("called add with a=\"4\", b=9; asked 4 and 9".into())
    );
    assert_eq!(
        judge(reply("", &[("add", r#"{"a":4}"#)])),
        Err("called add with a=4, b=missing; asked 4 and 9".into())
    );
    assert_eq!(
        judge(reply("", &[("add", r#"{"a":4,"b":9"#)])),
        Err("called add with arguments that are not JSON: {\"a\":4,\"b\":9".into())
    );
    assert_eq!(
        judge(reply("", &[("add", "[4,9]")])),
        Err("called add with arguments that are not an object: [4,9]".into())
    );
    assert_eq!(
        judge(reply("", &[("sub", r#"{"a":4,"b":9}"#)])),
        Err("called sub, not add".into())
    );
    assert_eq!(
        judge(reply("13", &[])),
        Err("answered in text, no call of add: \"13\"".into())
    );
    assert_eq!(
        judge(reply("", &[])),
        Err("no call of add: an empty reply".into())
    );
}

#[test]
fn json_is_judged_by_shape_and_number() {
    let check = Check::Json { expected: 13 };
    let judge = |t: &str| check.judge(&reply(t, &[]));
    assert_eq!(judge(r#"{"answer": 13}"#), Ok(()));
    assert_eq!(judge(" {\"answer\":13}\n"), Ok(()));
    assert_eq!(
        judge(r#"{"answer": 12}"#),
        Err("answer is 12, expected 13".into())
    );
    assert_eq!(judge("13"), Err("not a JSON object: 13".into()));
    assert_eq!(
        judge("```json\n{\"answer\": 13}\n```"),
        Err("not JSON: \"```json {\"answer\": 13} ```\"".into())
    );
    assert_eq!(
        judge(r#"{"answer": "13"}"#),
        Err("answer is \"13\", not an integer".into())
    );
    assert_eq!(
        judge(r#"{"result": 13}"#).unwrap_err(),
        "a field the schema forbids: \"result\""
    );
    assert_eq!(judge("{}"), Err("no \"answer\" field".into()));
    assert_eq!(judge(""), Err("an empty reply".into()));
}

#[test]
fn readings_are_judged_as_plain_answers() {
    let check = Check::Reading { expected: 4071 };
    assert_eq!(check.judge(&reply("4071", &[])), Ok(()));
    assert_eq!(
        check.judge(&reply("The image shows **4,071**.", &[])),
        Ok(())
    );
    assert!(
        check
            .judge(&reply("4017", &[]))
            .unwrap_err()
            .contains("expected 4071")
    );
}

#[tokio::test]
async fn a_scripted_model_fails_then_passes() {
    // A probe is one request: each run of the script is judged on its own.
    let fake = fake::start(FakeConfig::default().script(
        "m",
        &[
            Behaviour::RateLimit,
            Behaviour::TextNotCall,
            Behaviour::Ok(Duration::ZERO),
        ],
    ))
    .await
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            run(&fake, Dialect::Openai, "m", Capability::Tools)
                .await
                .decided,
        );
    }
    assert_eq!(seen, vec![None, Some(Judgement::No), Some(Judgement::Yes)]);
}

#[tokio::test]
async fn a_probe_can_run_on_any_thread() {
    // `check` spawns its probes: the future must be Send.
    fn spawnable<F: std::future::Future + Send>(f: F) -> F {
        f
    }
    let fake = start().await;
    let p = provider(Dialect::Gemini, &fake);
    let client = http::client().unwrap();
    let redactor = Redactor::default();
    let o = spawnable(probe(
        &client,
        &p,
        "ok",
        Capability::Vision,
        256,
        Duration::from_secs(10),
        &redactor,
    ))
    .await
    .0;
    assert_eq!(o.decided, Some(Judgement::Yes));
}

#[tokio::test]
async fn the_speed_probe_counts_streamed_and_measures_in_every_dialect() {
    let fake = start().await;
    for d in DIALECTS {
        let o = run(&fake, d, "ok", Capability::Speed).await;
        assert_eq!(o.outcome.failure, None, "{d:?}: {o:?}");
        assert_eq!(o.decided, Some(Judgement::Yes), "{d:?}");
        let t = o.outcome.timing;
        assert!(t.ttft_ms.is_some(), "{d:?}: {t:?}");
        assert!(t.output_tokens.is_some_and(|n| n > 50), "{d:?}: {t:?}");
        assert!(t.tokens_per_s.is_some_and(|r| r > 0.0), "{d:?}: {t:?}");
        let o = run(&fake, d, "wrong", Capability::Speed).await;
        assert_eq!(o.outcome.failure, Some(FailureType::WrongAnswer), "{d:?}");
        assert_eq!(o.decided, Some(Judgement::No), "{d:?}");
        assert!(
            o.outcome.error.unwrap().starts_with("not a count from "),
            "{d:?}"
        );
    }
    // Streamed, with just enough tokens for the count asked.
    for r in fake.requests() {
        assert!(r.stream, "{r:?}");
        let body = r.body.unwrap();
        if r.dialect == Some(Dialect::Openai) {
            let q = body["messages"][0]["content"].as_str().unwrap().to_string();
            let words: Vec<&str> = q.split_whitespace().collect();
            let number = |w: &str| w.trim_end_matches(',').parse::<i64>().unwrap();
            let (from, to) = (number(words[2]), number(words[4]));
            assert_eq!(q, count_question(from, to));
            assert!((55..=65).contains(&(to - from)), "{q}");
            assert_eq!(body["max_tokens"], count_max_tokens(from, to), "{body}");
        }
    }
}

#[test]
fn the_count_budget_allows_a_token_a_digit_and_one_a_space() {
    // 61 two-digit numbers: 3 tokens each, and 8 spare.
    assert_eq!(count_max_tokens(10, 70), 61 * 3 + 8);
    assert_eq!(count_max_tokens(30, 95), 66 * 3 + 8);
    let mut rng = rand::rng();
    for _ in 0..100 {
        let (r, check) = task("m", Capability::Speed, 256, &mut rng);
        let Check::Count { from, to } = check else {
            panic!("{check:?}")
        };
        assert!((10..=30).contains(&from) && (55..=65).contains(&(to - from)));
        assert!(r.stream);
        assert_eq!(r.max_tokens, Some(count_max_tokens(from, to)));
        let right = ChatReply {
            text: (from..=to)
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            ..ChatReply::default()
        };
        assert_eq!(check.judge(&right), Ok(()));
    }
}
