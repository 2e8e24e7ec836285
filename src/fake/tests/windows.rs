//! Context-length errors in each provider's wording, sent by the fake and
//! read by the classifier the way `check` and `route` read them: the window
//! is learned where the wording states one, and Groq's per-minute size
//! limit is never taken for a window.

use super::*;
use crate::upstream::classify::{self, ErrorClass, capability_of};
use crate::upstream::dialect::ChatRequest;
use crate::upstream::hints::Refusal;
use crate::upstream::secret::Redactor;

/// What a plain request to `model` at `fake` in `d` came back as.
async fn error_of(fake: &FakeServer, d: Dialect, model: &str) -> classify::UpstreamError {
    let provider = crate::catalog::test_provider(d.as_str(), &format!("{}/v1", fake.url()), None);
    // About 100 tokens of prompt, over `context-window:50`.
    let prompt = format!("What is 2 + 2? {}", "Pad the prompt. ".repeat(25));
    let request = ChatRequest::probe(model, &prompt, 16);
    let c = crate::probe::exchange(
        &client(),
        &provider,
        &request,
        Duration::from_secs(10),
        &Redactor::default(),
        classify::answers(4),
    )
    .await;
    c.error
        .unwrap_or_else(|| panic!("{d:?} {model}: no error: {:?}", c.outcome))
}

#[tokio::test]
async fn each_providers_context_wording_teaches_its_window() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let cases = [
        // OpenAI: "This model's maximum context length is 8192 tokens. …"
        (Dialect::Openai, "context-length", Some(8192)),
        (Dialect::Openai, "context-window:50", Some(50)),
        // Anthropic: "prompt is too long: N tokens > M maximum"
        (Dialect::Anthropic, "context-length", Some(200000)),
        (Dialect::Anthropic, "context-window:50", Some(50)),
        // Gemini: "… exceeds the maximum number of tokens allowed (M)."
        (Dialect::Gemini, "context-length", Some(1048576)),
        (Dialect::Gemini, "context-window:50", Some(50)),
        // Groq's `context_length_exceeded` states no window.
        (Dialect::Openai, "groq-context-length", None),
    ];
    for (d, model, window) in cases {
        let e = error_of(&fake, d, model).await;
        assert_eq!(e.status, Some(400), "{d:?} {model}");
        assert_eq!(e.class, ErrorClass::ContextLength, "{d:?} {model}: {e:?}");
        assert_eq!(
            capability_of(&e),
            Some(Refusal::Context(window)),
            "{d:?} {model}: {}",
            e.message
        );
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn groqs_tokens_per_minute_limit_is_not_a_window() {
    let fake = start(FakeConfig::default()).await.unwrap();
    let e = error_of(&fake, Dialect::Openai, "groq-tpm").await;
    assert_eq!(e.status, Some(413));
    assert!(
        e.message.contains("tokens per minute (TPM): Limit 6000"),
        "{}",
        e.message
    );
    // Too large for now, but no window is learned from its 6000.
    assert_eq!(e.class, ErrorClass::ContextLength);
    assert_eq!(capability_of(&e), Some(Refusal::Context(None)));
    assert_eq!(
        crate::upstream::hints::context_window_stated(&e.message),
        None
    );
    fake.shutdown().await;
}
