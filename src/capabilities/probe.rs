//! One capability probe: a randomised task with an exact check, sent
//! through the provider's dialect like the plain probe
//! ([`crate::probe::exchange`]), and judged into an [`Outcome`] with the
//! five failure classes. A text answer where a call was asked, or JSON with
//! the wrong number, is `wrong_answer`.
//!
//! - **tools**: the function `add(a, b)` (integers, both required) is
//!   offered, and the question asks for the sum of two random four-digit
//!   numbers with it. A call of `add` whose arguments are those numbers
//!   (either way round) passes.
//! - **json**: `response_format` `json_schema` `{"answer": integer}`, for a
//!   random sum, difference or product. Content that parses as that
//!   object, with the right number, passes.
//! - **vision**: a PNG drawn at probe time ([`glyphs::draw`]) showing a
//!   random number of three to five digits, sent as a `data:` URL; a reply
//!   that is that number passes ([`crate::prompts::check_answer`]).
//! - **speed**: "Count from A to B, separated by spaces.", A from 10 to
//!   30 and B 55 to 65 above it, streamed, with `max_tokens` just large
//!   enough ([`count_max_tokens`]); the numbers A to B, each once and in
//!   order, pass ([`crate::prompts::check_count`]). The outcome carries
//!   the time to the first token, the output tokens and their rate.

use std::time::Duration;

use base64::Engine as _;
use rand::RngExt;
use serde_json::{Value, json};

use super::{Capability, Judgement, glyphs};
use crate::catalog::Resolved;
use crate::outcome::{FailureType, Outcome};
use crate::upstream::classify::{self, ErrorClass, UpstreamError};
use crate::upstream::dialect::{
    self, ChatMessage, ChatReply, ChatRequest, Content, Dialect, JsonMode, Need,
};
use crate::upstream::hints::Refusal;
use crate::upstream::secret::Redactor;

/// The function the tools probe offers.
pub const TOOL: &str = "add";

/// The vision probe's question.
pub const VISION_QUESTION: &str = "What number does this image show? Reply with only the number.";

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

/// Probe `model` of `provider` for `cap`, with `max_tokens` for the answer
/// (or the provider's own `max_tokens`, when that is larger; the speed
/// probe asks for its own, [`count_max_tokens`]). Never fails: every
/// failure is a [`CapOutcome`]; beside it, the response's headers (when
/// there was a response), for the ledger to learn rate limits from, and
/// the requests sent ([`classify::Classified::requests`]).
pub async fn probe(
    client: &reqwest::Client,
    provider: &Resolved,
    model: &str,
    cap: Capability,
    max_tokens: u32,
    timeout: Duration,
    redactor: &Redactor,
) -> (CapOutcome, Option<reqwest::header::HeaderMap>, u32) {
    // A reasoning model may think past a small budget: ask for at least
    // what the provider's plain probe may use.
    let max_tokens = max_tokens.max(provider.provider.max_tokens);
    let (mut request, check) = task(model, cap, max_tokens, &mut rand::rng());
    if cap == Capability::Speed {
        // Never below what the provider's plain probe asks for.
        request.max_tokens = request
            .max_tokens
            .map(|m| m.max(provider.provider.max_tokens));
    }
    let unfinished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = unfinished.clone();
    let classified = crate::probe::exchange(
        client,
        provider,
        &request,
        timeout,
        redactor,
        move |reply: &ChatReply| {
            let verdict = check.judge(reply);
            if verdict.is_err() && unfinished_reply(reply) {
                seen.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            verdict
        },
    )
    .await;
    let decided = if unfinished.load(std::sync::atomic::Ordering::Relaxed) {
        // The model never got to answer: that says nothing about it.
        None
    } else {
        decide(
            cap,
            provider.provider.dialect,
            &classified.outcome,
            classified.error.as_ref(),
        )
    };
    (
        CapOutcome {
            outcome: classified.outcome,
            decided,
        },
        classified.headers,
        classified.requests,
    )
}

/// What a probe's result says about `cap`: a passed check is yes; a failed
/// one, or a refusal naming the capability, no; anything else nothing.
fn decide(
    cap: Capability,
    dialect: Dialect,
    outcome: &Outcome,
    error: Option<&UpstreamError>,
) -> Option<Judgement> {
    match outcome.failure {
        None => return Some(Judgement::Yes),
        Some(FailureType::WrongAnswer) => return Some(Judgement::No),
        Some(_) => {}
    }
    let e = error.filter(|e| e.class == ErrorClass::Unsupported)?;
    let Some(Refusal::Lacks(need)) = classify::capability_of(e) else {
        return None;
    };
    // A dialect that takes JSON mode as a forced tool call (Anthropic):
    // a model that refuses tools refuses JSON mode there too.
    let forced_tool = dialect::wire(dialect).json_mode() == JsonMode::ForcedTool;
    let refused =
        Some(need) == cap.need() || (cap == Capability::Json && forced_tool && need == Need::Tools);
    refused.then_some(Judgement::No)
}

/// What a reply must be for the probe to pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// A call of [`TOOL`] with these two operands, either way round.
    Call { a: i64, b: i64 },
    /// Content `{"answer": expected}`.
    Json { expected: i64 },
    /// Text that is this number.
    Reading { expected: i64 },
    /// Text that counts from `from` to `to`.
    Count { from: i64, to: i64 },
}

/// The speed probe's question.
pub fn count_question(from: i64, to: i64) -> String {
    format!("Count from {from} to {to}, separated by spaces.")
}

/// The speed probe's `max_tokens`: just enough for the count, so that a
/// model that runs on is cut off soon. Each number may take a token a
/// digit (tokenizers that split digits, as Gemini's do) plus one for the
/// space before it; 8 more for an opening or closing word.
pub fn count_max_tokens(from: i64, to: i64) -> u32 {
    let numbers = (to - from + 1).max(0).unsigned_abs();
    let digits = u64::from(to.unsigned_abs().max(1).ilog10() + 1);
    u32::try_from(numbers * (digits + 1) + 8).unwrap_or(u32::MAX)
}

/// A capability probe's request for `model`, with fresh random operands,
/// and its check.
pub fn task(
    model: &str,
    cap: Capability,
    max_tokens: u32,
    rng: &mut impl rand::Rng,
) -> (ChatRequest, Check) {
    let request = |message: ChatMessage| ChatRequest {
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        ..ChatRequest::new(model, vec![message])
    };
    match cap {
        Capability::Tools => {
            let a = rng.random_range(1000..=9999);
            let b = rng.random_range(1000..=9999);
            let mut r = request(ChatMessage::user(format!(
                "What is {a} + {b}? Use the {TOOL} tool to work it out."
            )));
            r.insert(
                "tools".into(),
                json!([{
                    "type": "function",
                    "function": {
                        "name": TOOL,
                        "description": "Add two integers and return their sum.",
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "a": {"type": "integer", "description": "The first addend."},
                                "b": {"type": "integer", "description": "The second addend."},
                            },
                            "required": ["a", "b"],
                        },
                    },
                }]),
            );
            r.insert("tool_choice".into(), json!("auto"));
            (r, Check::Call { a, b })
        }
        Capability::Json => {
            let a: i64 = rng.random_range(10..=99);
            let b: i64 = rng.random_range(10..=99);
            let (op, expected) = match rng.random_range(0..3) {
                0 => ("+", a + b),
                1 => ("-", a - b),
                _ => ("*", a * b),
            };
            let mut r = request(ChatMessage::user(format!(
                "What is {a} {op} {b}? Give the number as \"answer\" in a JSON object."
            )));
            r.insert(
                "response_format".into(),
                json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": "answer",
                        "strict": true,
                        "schema": {
                            "type": "object",
                            "properties": {"answer": {"type": "integer"}},
                            "required": ["answer"],
                            "additionalProperties": false,
                        },
                    },
                }),
            );
            (r, Check::Json { expected })
        }
        Capability::Vision => {
            let n: u64 = rng.random_range(100..=99_999);
            let url = format!(
                "data:image/png;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(glyphs::draw(n))
            );
            let message = ChatMessage {
                content: Some(Content::Parts(vec![
                    json!({"type": "image_url", "image_url": {"url": url}}),
                    json!({"type": "text", "text": VISION_QUESTION}),
                ])),
                ..ChatMessage::user("")
            };
            let expected = i64::try_from(n).unwrap_or(i64::MAX);
            (request(message), Check::Reading { expected })
        }
        Capability::Speed => {
            let from: i64 = rng.random_range(10..=30);
            let to = from + rng.random_range(55..=65);
            let mut r =
                ChatRequest::probe(model, &count_question(from, to), count_max_tokens(from, to));
            r.stream = true;
            (r, Check::Count { from, to })
        }
    }
}

impl Check {
    /// `Ok(())` when `reply` passes, or why it does not.
    pub fn judge(&self, reply: &ChatReply) -> Result<(), String> {
        match *self {
            Check::Call { a, b } => judge_call(reply, a, b),
            Check::Json { expected } => judge_json(reply, expected),
            Check::Reading { expected } => classify::answers(expected)(reply),
            Check::Count { from, to } => judge_count(reply, from, to),
        }
    }
}

/// At most 60 characters of `s`, on one line, for a reason (and for the
/// status page's error text).
pub fn snippet(s: &str) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// A reply that never got to its answer: cut off at `max_tokens`, or
/// reasoning with nothing after it. A failed check of one is logged as
/// `wrong_answer` but decides nothing, since a larger budget might pass.
fn unfinished_reply(reply: &ChatReply) -> bool {
    reply.truncated()
        || (reply.tool_calls.is_empty()
            && reply.text.trim().is_empty()
            && reply.reasoning.is_some())
}

/// Why there is no answer at all, or `None` when there is text.
fn no_text(reply: &ChatReply) -> Option<&'static str> {
    if !reply.text.trim().is_empty() {
        None
    } else if reply.truncated() {
        Some("an empty reply (cut off at max_tokens)")
    } else if reply.reasoning.is_some() {
        Some("only reasoning, no answer")
    } else {
        Some("an empty reply")
    }
}

/// A JSON number that is a whole number (`7` or `7.0`).
fn whole(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    })
}

fn judge_call(reply: &ChatReply, a: i64, b: i64) -> Result<(), String> {
    let Some(call) = reply.tool_calls.iter().find(|c| c.name == TOOL) else {
        return Err(match (reply.tool_calls.first(), no_text(reply)) {
            (Some(other), _) => format!("called {}, not {TOOL}", snippet(&other.name)),
            (None, Some(why)) => format!("no call of {TOOL}: {why}"),
            (None, None) => format!(
                "answered in text, no call of {TOOL}: \"{}\"",
                snippet(&reply.text)
            ),
        });
    };
    let args = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return Err(format!(
                "called {TOOL} with arguments that are not an object: {}",
                snippet(&call.arguments)
            ));
        }
        Err(_) => {
            return Err(format!(
                "called {TOOL} with arguments that are not JSON: {}",
                snippet(&call.arguments)
            ));
        }
    };
    let (x, y) = (args.get("a").and_then(whole), args.get("b").and_then(whole));
    if (x, y) == (Some(a), Some(b)) || (x, y) == (Some(b), Some(a)) {
        return Ok(());
    }
    let shown = |k: &str| {
        args.get(k)
            .map_or_else(|| "missing".to_string(), |v| snippet(&v.to_string()))
    };
    Err(format!(
        "called {TOOL} with a={}, b={}; asked {a} and {b}",
        shown("a"),
        shown("b")
    ))
}

fn judge_count(reply: &ChatReply, from: i64, to: i64) -> Result<(), String> {
    if let Some(why) = no_text(reply) {
        return Err(why.to_string());
    }
    if crate::prompts::check_count(&reply.text, from, to) {
        Ok(())
    } else {
        Err(format!(
            "not a count from {from} to {to}: \"{}\"",
            snippet(&reply.text)
        ))
    }
}

fn judge_json(reply: &ChatReply, expected: i64) -> Result<(), String> {
    if let Some(why) = no_text(reply) {
        return Err(why.to_string());
    }
    let value: Value = serde_json::from_str(reply.text.trim())
        .map_err(|_| format!("not JSON: \"{}\"", snippet(&reply.text)))?;
    let Value::Object(m) = &value else {
        return Err(format!(
            "not a JSON object: {}",
            snippet(&value.to_string())
        ));
    };
    if let Some(other) = m.keys().find(|k| k.as_str() != "answer") {
        return Err(format!(
            "a field the schema forbids: \"{}\"",
            snippet(other)
        ));
    }
    let Some(answer) = m.get("answer") else {
        return Err("no \"answer\" field".into());
    };
    match whole(answer) {
        Some(n) if n == expected => Ok(()),
        Some(n) => Err(format!("answer is {n}, expected {expected}")),
        None => Err(format!(
            "answer is {}, not an integer",
            snippet(&answer.to_string())
        )),
    }
}

#[cfg(test)]
mod tests;
