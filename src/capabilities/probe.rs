//! One capability probe: a randomised task with an exact check, sent
//! through the provider's dialect like the plain probe
//! ([`crate::probe`]), and judged into an [`Outcome`] with the five
//! failure classes. A text answer where a call was asked, or JSON with the
//! wrong number, is `wrong_answer`.

use std::time::Duration;

use super::Capability;
use crate::catalog::Resolved;
use crate::outcome::Outcome;
use crate::upstream::secret::Redactor;

/// Probe `model` of `provider` for `cap`, with `max_tokens` for the answer.
/// Never fails: every failure is an [`Outcome`].
pub async fn probe(
    client: &reqwest::Client,
    provider: &Resolved,
    model: &str,
    cap: Capability,
    max_tokens: u32,
    timeout: Duration,
    redactor: &Redactor,
) -> Outcome {
    let _ = (client, provider, model, cap, max_tokens, timeout, redactor);
    todo!("issue 18: capability probes")
}
