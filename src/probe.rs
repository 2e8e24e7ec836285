//! One probe: ask one model one question and classify the result. (Skeleton.)

use std::time::Duration;

use crate::catalog::Resolved;
use crate::outcome::{FailureType, Outcome};
use crate::prompts::Question;
use crate::secret::Redactor;

/// The HTTP client every probe shares.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::new()
}

/// Send `question` to `model` of `provider` and classify what comes back.
/// Never fails: every failure is an [`Outcome`].
pub async fn probe(
    _client: &reqwest::Client,
    _provider: &Resolved,
    _model: &str,
    _question: &Question,
    _timeout: Duration,
    _redactor: &Redactor,
) -> Outcome {
    Outcome {
        failure: Some(FailureType::Error),
        latency_ms: 0,
        status: None,
        error: Some("not implemented".into()),
    }
}
