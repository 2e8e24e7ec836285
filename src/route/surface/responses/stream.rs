//! A served stream as the Responses API's named events
//! (`response.created`, …, `response.completed`), each written as
//! server-sent event text straight from a typed struct: no JSON tree is
//! built per event.

use std::future::Future;
use std::pin::Pin;

use axum::response::Response;
use serde::Serialize;

use super::Echo;
use super::reply::{
    Failure, Head, OutputItem, ResponseObject, TextPart, ending, new_id, unix_now, usage,
};
use crate::route::domain::StreamEvent;
use crate::route::surface::calls::Holdback;
use crate::upstream::dialect::{ReplyDelta, Usage};

/// The output item a stream is writing.
#[derive(Debug)]
enum Open {
    Text {
        id: String,
        text: String,
    },
    Call {
        id: String,
        index: usize,
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// The fields of each event besides its `type` and `sequence_number`,
/// in the order clients see them.
#[derive(Serialize)]
#[serde(untagged)]
enum Data<'a> {
    Response {
        response: ResponseObject<'a>,
    },
    Item {
        output_index: usize,
        item: &'a OutputItem,
    },
    Part {
        item_id: &'a str,
        output_index: usize,
        content_index: u32,
        part: TextPart<'a>,
    },
    TextDelta {
        item_id: &'a str,
        output_index: usize,
        content_index: u32,
        delta: &'a str,
        logprobs: [(); 0],
    },
    TextDone {
        item_id: &'a str,
        output_index: usize,
        content_index: u32,
        text: &'a str,
        logprobs: [(); 0],
    },
    ArgumentsDelta {
        item_id: &'a str,
        output_index: usize,
        delta: &'a str,
    },
    ArgumentsDone {
        item_id: &'a str,
        output_index: usize,
        arguments: &'a str,
    },
}

/// An event's data: its fields, then `type` and `sequence_number`.
#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(flatten)]
    data: Data<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
    sequence_number: u64,
}

/// One event, written: its type and its server-sent event text.
#[derive(Debug)]
pub struct Event {
    pub kind: &'static str,
    /// `event: <type>`, its data, and the blank line that ends it.
    pub sse: String,
}

impl Event {
    /// Its data as JSON (for tests and checks).
    #[cfg(test)]
    pub fn data(&self) -> serde_json::Value {
        let json = self
            .sse
            .split_once("\ndata: ")
            .map_or("", |(_, d)| d.trim_end());
        serde_json::from_str(json).expect("an event's data is JSON")
    }
}

/// The response's fields every event that carries it repeats.
#[derive(Debug)]
struct Fixed {
    id: String,
    created_at: i64,
    model: String,
    echo: Echo,
}

impl Fixed {
    fn response<'a>(&'a self, status: &'a str, output: &'a [OutputItem]) -> ResponseObject<'a> {
        let head = Head {
            id: &self.id,
            created_at: self.created_at,
            model: &self.model,
            echo: &self.echo,
        };
        ResponseObject::new(head, status, output)
    }
}

/// Writes one served stream's events as the Responses API's: first
/// `response.created` and `response.in_progress`; then each output item
/// opened with `response.output_item.added` and closed with
/// `response.output_item.done`, text as `response.content_part.added`,
/// `response.output_text.delta`s, `response.output_text.done` and
/// `response.content_part.done`, a tool call as
/// `response.function_call_arguments.delta`s and `.done`; then
/// `response.completed` (or `response.incomplete`) with the whole
/// response, or `response.failed` when the upstream failed after the
/// first byte. Text and calls may interleave in a reply: each item is
/// closed before the next opens. The first call streams live; parallel
/// calls interleaved with it, and text while it is open, are written
/// whole after it at the end ([`Holdback`]). Every event has a
/// `sequence_number` counting from 0.
#[derive(Debug)]
pub struct EventWriter {
    fixed: Fixed,
    seq: u64,
    started: bool,
    ended: bool,
    output: Vec<OutputItem>,
    open: Option<Open>,
    /// Parallel calls and text held while a call streams: a closed item
    /// takes no more fragments.
    hold: Holdback,
    finish: Option<String>,
    usage: Option<Usage>,
}

/// Write one event, numbered from `seq`, onto `out`.
fn push(seq: &mut u64, out: &mut Vec<Event>, kind: &'static str, data: Data<'_>) {
    let mut sse = Vec::with_capacity(256);
    sse.extend_from_slice(b"event: ");
    sse.extend_from_slice(kind.as_bytes());
    sse.extend_from_slice(b"\ndata: ");
    let envelope = Envelope {
        data,
        kind,
        sequence_number: *seq,
    };
    // Writing into a Vec cannot fail, nor can these structs.
    let _ = serde_json::to_writer(&mut sse, &envelope);
    sse.extend_from_slice(b"\n\n");
    *seq += 1;
    out.push(Event {
        kind,
        // JSON text is UTF-8, as are the names.
        sse: String::from_utf8(sse).unwrap_or_default(),
    });
}

impl EventWriter {
    /// For a reply from `model` (the candidate's id) to a request whose
    /// settings are `echo`.
    pub fn new(model: &str, echo: Echo) -> EventWriter {
        EventWriter {
            fixed: Fixed {
                id: new_id("resp"),
                created_at: unix_now(),
                model: model.to_string(),
                echo,
            },
            seq: 0,
            started: false,
            ended: false,
            output: Vec::new(),
            open: None,
            hold: Holdback::new(),
            finish: None,
            usage: None,
        }
    }

    /// The events `ev` becomes, in order.
    pub fn events(&mut self, ev: StreamEvent) -> Vec<Event> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if !self.started {
            self.started = true;
            for kind in ["response.created", "response.in_progress"] {
                let response = self.fixed.response("in_progress", &self.output);
                push(&mut self.seq, &mut out, kind, Data::Response { response });
            }
        }
        match ev {
            StreamEvent::Delta(d) => {
                if let Some(d) = self.hold.pass(d) {
                    self.delta(&mut out, d);
                }
            }
            StreamEvent::Usage { counts, .. } => self.usage = Some(counts),
            StreamEvent::Done => {
                // The live call stays open to the end; calls and text
                // held meanwhile follow it, each a whole item.
                for d in self.hold.end() {
                    self.delta(&mut out, d);
                }
                self.close(&mut out);
                self.ended = true;
                let (status, incomplete) = ending(self.finish.as_deref());
                let response = self
                    .fixed
                    .response(status, &self.output)
                    .ended(incomplete, usage(self.usage));
                let kind = if status == "completed" {
                    "response.completed"
                } else {
                    "response.incomplete"
                };
                push(&mut self.seq, &mut out, kind, Data::Response { response });
            }
            StreamEvent::Failed(msg) => {
                self.ended = true;
                let response = self
                    .fixed
                    .response("failed", &self.output)
                    .failed(Failure::server_error(msg));
                push(
                    &mut self.seq,
                    &mut out,
                    "response.failed",
                    Data::Response { response },
                );
            }
            // The engine turns a stall into a failure; an upstream's own
            // chunks are never asked for, and their deltas come anyway.
            StreamEvent::Stalled | StreamEvent::Raw(_) => {}
        }
        out
    }

    /// The response's id and output items, taken once it has ended.
    pub fn take_output(&mut self) -> (String, Vec<OutputItem>) {
        (self.fixed.id.clone(), std::mem::take(&mut self.output))
    }

    /// The events a delta the holdback passed on becomes.
    fn delta(&mut self, out: &mut Vec<Event>, d: ReplyDelta) {
        match d {
            ReplyDelta::Text(t) if !t.is_empty() => self.text(out, &t),
            ReplyDelta::ToolCall(d) => {
                let same =
                    matches!(&self.open, Some(Open::Call { index, .. }) if *index == d.index);
                if !same {
                    self.close(out);
                    let id = new_id("fc");
                    let call_id = d.id.clone().unwrap_or_else(|| new_id("call"));
                    let name = d.name.clone().unwrap_or_default();
                    let item = OutputItem::call(
                        id.clone(),
                        call_id.clone(),
                        name.clone(),
                        String::new(),
                        "in_progress",
                    );
                    let output_index = self.output.len();
                    push(
                        &mut self.seq,
                        out,
                        "response.output_item.added",
                        Data::Item {
                            output_index,
                            item: &item,
                        },
                    );
                    self.open = Some(Open::Call {
                        id,
                        index: d.index,
                        call_id,
                        name,
                        arguments: String::new(),
                    });
                }
                if !d.arguments.is_empty() {
                    let output_index = self.output.len();
                    let Some(Open::Call { id, arguments, .. }) = &mut self.open else {
                        return;
                    };
                    arguments.push_str(&d.arguments);
                    push(
                        &mut self.seq,
                        out,
                        "response.function_call_arguments.delta",
                        Data::ArgumentsDelta {
                            item_id: id,
                            output_index,
                            delta: &d.arguments,
                        },
                    );
                }
            }
            ReplyDelta::Finish(r) => self.finish = Some(r),
            // Reasoning is left out (see `response_body`); usage, errors
            // and the end come as their own stream events.
            _ => {}
        }
    }

    fn text(&mut self, out: &mut Vec<Event>, t: &str) {
        if !matches!(self.open, Some(Open::Text { .. })) {
            self.close(out);
            let output_index = self.output.len();
            let id = new_id("msg");
            let item = OutputItem::message(id.clone(), None, "in_progress");
            push(
                &mut self.seq,
                out,
                "response.output_item.added",
                Data::Item {
                    output_index,
                    item: &item,
                },
            );
            push(
                &mut self.seq,
                out,
                "response.content_part.added",
                Data::Part {
                    item_id: &id,
                    output_index,
                    content_index: 0,
                    part: TextPart::new(""),
                },
            );
            self.open = Some(Open::Text {
                id,
                text: String::new(),
            });
        }
        let output_index = self.output.len();
        let Some(Open::Text { id, text }) = &mut self.open else {
            return;
        };
        text.push_str(t);
        push(
            &mut self.seq,
            out,
            "response.output_text.delta",
            Data::TextDelta {
                item_id: id,
                output_index,
                content_index: 0,
                delta: t,
                logprobs: [],
            },
        );
    }

    /// Close the open item, if any, and add it to the output.
    fn close(&mut self, out: &mut Vec<Event>) {
        let output_index = self.output.len();
        let seq = &mut self.seq;
        let item = match self.open.take() {
            None => return,
            Some(Open::Text { id, text }) => {
                push(
                    seq,
                    out,
                    "response.output_text.done",
                    Data::TextDone {
                        item_id: &id,
                        output_index,
                        content_index: 0,
                        text: &text,
                        logprobs: [],
                    },
                );
                push(
                    seq,
                    out,
                    "response.content_part.done",
                    Data::Part {
                        item_id: &id,
                        output_index,
                        content_index: 0,
                        part: TextPart::new(&text),
                    },
                );
                OutputItem::message(id, Some(text), "completed")
            }
            Some(Open::Call {
                id,
                call_id,
                name,
                arguments,
                ..
            }) => {
                push(
                    seq,
                    out,
                    "response.function_call_arguments.done",
                    Data::ArgumentsDone {
                        item_id: &id,
                        output_index,
                        arguments: &arguments,
                    },
                );
                OutputItem::call(id, call_id, name, arguments, "completed")
            }
        };
        push(
            seq,
            out,
            "response.output_item.done",
            Data::Item {
                output_index,
                item: &item,
            },
        );
        self.output.push(item);
    }
}

/// What is done with a streamed response's id and output items before
/// `response.completed` (or `response.incomplete`) reaches the client:
/// keeping them in the item store.
pub type BeforeEnd =
    Box<dyn FnOnce(String, Vec<OutputItem>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// A served stream as a Responses `text/event-stream` response
/// ([`EventWriter`]). The stream ends after `response.completed`,
/// `response.incomplete` or `response.failed`; there is no `[DONE]`.
/// `before_end`, when given, is awaited with the final response's id and
/// output before the event that carries it is sent (not for
/// `response.failed`).
pub fn event_stream(
    events: impl futures_util::Stream<Item = StreamEvent> + Send + 'static,
    mut writer: EventWriter,
    mut before_end: Option<BeforeEnd>,
) -> Response {
    use futures_util::StreamExt;
    let body = events
        .map(move |ev| {
            let out = writer.events(ev);
            let text: String = out.iter().map(|e| e.sse.as_str()).collect();
            // Taken once the last event is written, so that the output
            // moves to the hook instead of being copied.
            let hook = match out.last().map(|e| e.kind) {
                Some("response.completed" | "response.incomplete") => {
                    before_end.take().map(|h| (h, writer.take_output()))
                }
                _ => None,
            };
            (text, hook)
        })
        .then(|(text, hook)| async move {
            // The hook is awaited before the text reaches the client.
            if let Some((hook, (id, output))) = hook {
                hook(id, output).await;
            }
            text
        })
        .filter(|text| std::future::ready(!text.is_empty()));
    super::super::sse_response(body)
}
