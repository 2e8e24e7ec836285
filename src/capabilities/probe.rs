//! One capability probe: a randomised task with an exact check, sent
//! through the provider's dialect like the plain probe
//! ([`crate::probe`]), and judged into an [`Outcome`] with the five
//! failure classes. A text answer where a call was asked, or JSON with the
//! wrong number, is `wrong_answer`.

use std::time::Duration;

use super::{Capability, Judgement};
use crate::catalog::Resolved;
use crate::outcome::Outcome;
use crate::upstream::secret::Redactor;

/// What one capability probe came to: the log entry's outcome, and what it
/// decides about the capability.
#[derive(Debug, Clone, PartialEq)]
pub struct CapOutcome {
    pub outcome: Outcome,
    /// `Some(Yes)` when the check passed; `Some(No)` when the model
    /// answered and the answer failed the check (`wrong_answer`), or the
    /// upstream refused the capability itself (a 400 such as "tools are not
    /// supported"); `None` for anything that says nothing about the
    /// capability (a rate limit, a 5xx, a timeout, an unreachable host, a
    /// bad key): the verdict stays as it was.
    pub decided: Option<Judgement>,
}

/// Probe `model` of `provider` for `cap`, with `max_tokens` for the answer.
/// Never fails: every failure is a [`CapOutcome`].
pub async fn probe(
    client: &reqwest::Client,
    provider: &Resolved,
    model: &str,
    cap: Capability,
    max_tokens: u32,
    timeout: Duration,
    redactor: &Redactor,
) -> CapOutcome {
    let _ = (client, provider, model, cap, max_tokens, timeout, redactor);
    todo!("issue 18: capability probes")
}
