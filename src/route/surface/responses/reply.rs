//! What the Responses surface answers with: the `response` object and its
//! output items (`message`, `function_call`), as typed structs serialized
//! straight into the reply or a stream event. Fields are declared in the
//! order clients have always seen them; a `type` field is a field like
//! the others (not a serde tag), so that it keeps its place.

use serde::Serialize;

use super::Echo;
use crate::route::send::Completion;
use crate::route::surface::openai_finish_reason;
use crate::upstream::dialect::{ChatReply, Usage};

/// `resp_`, `msg_`, `fc_` and 32 hex digits.
pub(super) fn new_id(prefix: &str) -> String {
    format!(
        "{prefix}_{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    )
}

pub(super) fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Why a response is `incomplete`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Incomplete {
    reason: &'static str,
}

/// How a reply ended, as a response's `status` and `incomplete_details`:
/// cut by the output cap or by a content filter is `incomplete`.
pub(super) fn ending(finish: Option<&str>) -> (&'static str, Option<Incomplete>) {
    match finish.map(openai_finish_reason) {
        Some("length") => (
            "incomplete",
            Some(Incomplete {
                reason: "max_output_tokens",
            }),
        ),
        Some("content_filter") => (
            "incomplete",
            Some(Incomplete {
                reason: "content_filter",
            }),
        ),
        _ => ("completed", None),
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
struct CachedTokens {
    cached_tokens: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
struct ReasoningTokens {
    reasoning_tokens: u64,
}

/// The Responses `usage` object.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ResponseUsage {
    input_tokens: u64,
    input_tokens_details: CachedTokens,
    output_tokens: u64,
    output_tokens_details: ReasoningTokens,
    total_tokens: u64,
}

/// The `usage` object, when both counts are known.
pub(super) fn usage(u: Option<Usage>) -> Option<ResponseUsage> {
    match u {
        Some(Usage {
            input_tokens: Some(i),
            output_tokens: Some(o),
        }) => Some(ResponseUsage {
            input_tokens: i,
            input_tokens_details: CachedTokens { cached_tokens: 0 },
            output_tokens: o,
            output_tokens_details: ReasoningTokens {
                reasoning_tokens: 0,
            },
            total_tokens: i + o,
        }),
        _ => None,
    }
}

/// A failed response's `error`.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    code: &'static str,
    message: String,
}

impl Failure {
    pub(super) fn server_error(message: String) -> Failure {
        Failure {
            code: "server_error",
            message,
        }
    }
}

/// The text of an assistant `message` item. A stream's content part
/// events carry it without `logprobs` ([`TextPart`]).
#[derive(Debug, Clone, Serialize)]
pub struct OutputText {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
    annotations: [(); 0],
    logprobs: [(); 0],
}

/// The content part a stream's `response.content_part.*` events carry.
#[derive(Debug, Clone, Serialize)]
pub(super) struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    annotations: [(); 0],
}

impl TextPart<'_> {
    pub(super) fn new(text: &str) -> TextPart<'_> {
        TextPart {
            kind: "output_text",
            text,
            annotations: [],
        }
    }
}

/// An assistant `message` output item.
#[derive(Debug, Clone, Serialize)]
pub struct MessageItem {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    status: &'static str,
    role: &'static str,
    content: Vec<OutputText>,
}

/// A `function_call` output item.
#[derive(Debug, Clone, Serialize)]
pub struct CallItem {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    status: &'static str,
    call_id: String,
    name: String,
    arguments: String,
}

/// One output item of a response, as route's item store keeps it too.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum OutputItem {
    Message(MessageItem),
    Call(CallItem),
}

impl OutputItem {
    /// A `message` item of `text` (no content part when `None`: a stream's
    /// item as it opens).
    pub(super) fn message(id: String, text: Option<String>, status: &'static str) -> OutputItem {
        OutputItem::Message(MessageItem {
            id,
            kind: "message",
            status,
            role: "assistant",
            content: text
                .map(|text| OutputText {
                    kind: "output_text",
                    text,
                    annotations: [],
                    logprobs: [],
                })
                .into_iter()
                .collect(),
        })
    }

    pub(super) fn call(
        id: String,
        call_id: String,
        name: String,
        arguments: String,
        status: &'static str,
    ) -> OutputItem {
        OutputItem::Call(CallItem {
            id,
            kind: "function_call",
            status,
            call_id,
            name,
            arguments,
        })
    }

    /// The text of a `message` item.
    pub(super) fn text(&self) -> impl Iterator<Item = &str> {
        let content = match self {
            OutputItem::Message(m) => &m.content[..],
            OutputItem::Call(_) => &[],
        };
        content.iter().map(|p| p.text.as_str())
    }
}

/// A `response` object: `id`, `created_at`, `model`, `status`, `output`,
/// `output_text`, `usage`, and the echoed request settings, serialized as
/// it stands (a reply is written straight from it, with no JSON map built).
/// It borrows its output, so that a stream's events copy none of it.
#[derive(Debug, Serialize)]
pub struct ResponseObject<'a> {
    pub(super) id: &'a str,
    object: &'static str,
    created_at: i64,
    status: &'a str,
    background: bool,
    error: Option<Failure>,
    incomplete_details: Option<Incomplete>,
    model: &'a str,
    output: &'a [OutputItem],
    output_text: String,
    usage: Option<ResponseUsage>,
    #[serde(flatten)]
    echo: &'a Echo,
}

/// A response's fields besides its `output`, `output_text` and ending.
pub(super) struct Head<'a> {
    pub id: &'a str,
    pub created_at: i64,
    pub model: &'a str,
    pub echo: &'a Echo,
}

impl<'a> ResponseObject<'a> {
    /// A response of `output` in `status`; `output_text` is the text of
    /// its `message` items.
    pub(super) fn new(
        head: Head<'a>,
        status: &'a str,
        output: &'a [OutputItem],
    ) -> ResponseObject<'a> {
        let output_text = output.iter().flat_map(OutputItem::text).collect();
        ResponseObject {
            id: head.id,
            object: "response",
            created_at: head.created_at,
            status,
            background: false,
            error: None,
            incomplete_details: None,
            model: head.model,
            output,
            output_text,
            usage: None,
            echo: head.echo,
        }
    }

    pub(super) fn ended(
        mut self,
        incomplete: Option<Incomplete>,
        usage: Option<ResponseUsage>,
    ) -> Self {
        self.incomplete_details = incomplete;
        self.usage = usage;
        self
    }

    pub(super) fn failed(mut self, error: Failure) -> Self {
        self.error = Some(error);
        self
    }
}

/// A reply's `response` object, which owns its id and output: the store
/// takes both once it is written ([`Reply::into_kept`]).
#[derive(Debug)]
pub struct Reply<'a> {
    id: String,
    created_at: i64,
    status: &'static str,
    incomplete: Option<Incomplete>,
    model: &'a str,
    output: Vec<OutputItem>,
    text: &'a str,
    usage: Option<ResponseUsage>,
    echo: &'a Echo,
}

impl Serialize for Reply<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ResponseObject {
            id: &self.id,
            object: "response",
            created_at: self.created_at,
            status: self.status,
            background: false,
            error: None,
            incomplete_details: self.incomplete,
            model: self.model,
            output: &self.output[..],
            output_text: self.text.to_string(),
            usage: self.usage,
            echo: self.echo,
        }
        .serialize(s)
    }
}

impl Reply<'_> {
    /// Its id and output items, taken (once the response is written).
    pub fn into_kept(self) -> (String, Vec<OutputItem>) {
        (self.id, self.output)
    }
}

/// A completion as a `response` object: the answer text as one `message`
/// item, then each tool call as a `function_call` item; `status`
/// `incomplete` (with `incomplete_details.reason`) when the output cap or
/// a content filter cut the reply. Reasoning is left out: only the model
/// that wrote it could read it back.
pub fn response_body<'a>(c: &'a Completion, echo: &'a Echo) -> Reply<'a> {
    reply_object(&c.reply, &c.model, echo)
}

pub(super) fn reply_object<'a>(reply: &'a ChatReply, model: &'a str, echo: &'a Echo) -> Reply<'a> {
    let (status, incomplete) = ending(reply.finish_reason.as_deref());
    let mut output = Vec::new();
    if !reply.text.is_empty() {
        output.push(OutputItem::message(
            new_id("msg"),
            Some(reply.text.clone()),
            status,
        ));
    }
    for call in &reply.tool_calls {
        let call_id = if call.id.is_empty() {
            new_id("call")
        } else {
            call.id.clone()
        };
        output.push(OutputItem::call(
            new_id("fc"),
            call_id,
            call.name.clone(),
            call.arguments.clone(),
            "completed",
        ));
    }
    Reply {
        id: new_id("resp"),
        created_at: unix_now(),
        status,
        incomplete,
        model,
        output,
        text: &reply.text,
        usage: usage(reply.usage),
        echo,
    }
}
