//! Fuzz entry points for what comes over HTTP: upstream streams and
//! responses, and inbound requests to `route --serve`.
//!
//! - [`sse_stream`]: the SSE framing every upstream stream goes through
//!   ([`map_byte_stream`]);
//! - [`stream_openai`], [`stream_anthropic`], [`stream_gemini`]: each
//!   dialect's [`StreamMapper`] over the events of a fuzzed stream;
//! - [`decode_anthropic`], [`decode_gemini`]: the readers of a whole reply
//!   and of an error body (the first also reads the bytes as OpenAI's);
//! - [`inbound_chat`], [`inbound_messages`], [`inbound_responses`],
//!   [`inbound_completions`]: each surface's request parser, as its HTTP
//!   handler calls it on the body, and the translation of what it accepts
//!   to each upstream dialect.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use futures_util::{FutureExt, Stream, StreamExt};
use serde_json::{Value, json};

use crate::route::surface::anthropic::{self, Purpose};
use crate::route::surface::error::{self, ApiError};
use crate::route::surface::{completions, responses};
use crate::upstream::dialect::{
    self, ChatMessage, ChatRequest, Content, Dialect, Endpoint, ROLES, ReplyDelta, ReplyPlan,
    StreamMapper, map_byte_stream,
};
use crate::upstream::http::{DEFAULT_BODY_CAP, TransportError};

type Item = Result<ReplyDelta, TransportError>;

/// Everything a stream over ready input yields. Such a stream never waits,
/// so polling once per item is enough; one that is pending is a bug.
fn drain(s: impl Stream<Item = Item>) -> Vec<Item> {
    let mut s = std::pin::pin!(s);
    let mut out = Vec::new();
    loop {
        match s.next().now_or_never() {
            Some(Some(item)) => out.push(item),
            Some(None) => return out,
            None => panic!("a stream over ready input is pending"),
        }
    }
}

/// `body` cut into `pieces`, as [`map_byte_stream`] would get it from the
/// network, mapped with `mapper`.
fn mapped(pieces: Vec<Vec<u8>>, mapper: StreamMapper) -> Vec<Item> {
    let chunks = futures_util::stream::iter(pieces.into_iter().map(Ok));
    drain(map_byte_stream(
        chunks,
        mapper,
        |e: std::convert::Infallible| match e {},
    ))
}

/// `body` cut at `cuts` (offsets, in any order, repeats giving empty
/// chunks).
fn cut(body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for c in cuts {
        pieces.push(body[at..c].to_vec());
        at = c;
    }
    pieces.push(body[at..].to_vec());
    pieces
}

/// The mapper a fuzzer's flag byte picks: the dialect, and native chunks
/// (OpenAI) or JSON mode through a forced tool (Anthropic).
fn mapper_for(flags: u8) -> StreamMapper {
    let (dialect, special) = match flags & 3 {
        0 => (Dialect::Openai, false),
        1 => (Dialect::Anthropic, false),
        2 => (Dialect::Gemini, false),
        _ => (Dialect::Openai, true),
    };
    let special = special || flags & 0x80 != 0;
    let mapper = StreamMapper::new(dialect);
    match dialect {
        Dialect::Openai => mapper.native(special),
        Dialect::Anthropic => mapper.plan(ReplyPlan { json_tool: special }),
        Dialect::Gemini => mapper,
    }
}

/// The line cap of [`map_byte_stream`].
const LINE_CAP: usize = DEFAULT_BODY_CAP;

/// The SSE framing of upstream streams ([`map_byte_stream`], over
/// eventsource-stream). Input: a flag byte (the dialect mapping the
/// events; bits 2-4 all set: the endless mode below), a count `n` of cuts,
/// `n` little-endian u16 cut offsets, then the body.
///
/// - The body fed whole, cut at the fuzzer's offsets, and (when short)
///   one byte at a time gives the same items: the framing does not depend
///   on how the network split the bytes.
/// - The stream ends after its first error or `Done`, and an error ends it.
/// - Endless mode: the body's last 1-16 bytes (chosen by bits 5-7 and the
///   cut count) are a tail repeated without end after the body. If the
///   tail has no line break, the stream must end (the line cap) within
///   `LINE_CAP` bytes of tail; so must it if the bytes hold invalid UTF-8,
///   which can never become valid however much follows. Either way the
///   buffered bytes stay bounded.
pub fn sse_stream(data: &[u8]) {
    let [flags, n, rest @ ..] = data else { return };
    let n = usize::from(n % 16);
    if rest.len() < 2 * n {
        return;
    }
    let (offsets, body) = rest.split_at(2 * n);
    let cuts: Vec<usize> = offsets
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    if (flags >> 2) & 7 == 7 {
        return endless(*flags, &cuts, body);
    }
    let whole = mapped(vec![body.to_vec()], mapper_for(*flags));
    check_ending(&whole);
    let split = mapped(cut(body, &cuts), mapper_for(*flags));
    assert_eq!(whole, split, "cutting the bytes changed the stream's items");
    if body.len() <= 512 {
        let bytes = body.iter().map(|b| vec![*b]).collect();
        let single = mapped(bytes, mapper_for(*flags));
        assert_eq!(whole, single, "byte-at-a-time delivery changed the items");
    }
}

/// [`sse_stream`]'s endless mode.
fn endless(flags: u8, cuts: &[usize], body: &[u8]) {
    let k = 1 + usize::from(flags >> 5) * 2 + cuts.len() % 2;
    if body.len() < k {
        return;
    }
    let (body, tail) = body.split_at(body.len() - k);
    let no_break = !tail.iter().any(|b| matches!(b, b'\n' | b'\r'));
    let joined = [body, tail, tail].concat();
    let invalid = std::str::from_utf8(&joined).is_err_and(|e| e.error_len().is_some());
    if !no_break && !invalid {
        // Endless short lines may rightly go on for ever, and the SSE
        // parser copies its buffer for every line (quadratic in a chunk's
        // lines): nothing to check, and too slow to try.
        return;
    }
    // At least 64 KiB a chunk: the SSE parser scans a line it buffers
    // again with every chunk, so a line of LINE_CAP bytes in small chunks
    // takes quadratic time (seconds with 4 KiB chunks, under the fuzzer).
    let chunk = tail.repeat((64 << 10) / tail.len() + 1);
    let limit = LINE_CAP / chunk.len() + 3;
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let tails = futures_util::stream::iter(0..limit).map(move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
        Ok::<_, std::convert::Infallible>(chunk.clone())
    });
    let head = futures_util::stream::iter(cut(body, cuts).into_iter().map(Ok));
    let items = drain(map_byte_stream(
        head.chain(tails),
        mapper_for(flags),
        |e| match e {},
    ));
    check_ending(&items);
    let pulled = pulled.load(Ordering::Relaxed);
    assert!(
        pulled < limit,
        "the stream read {pulled} chunks of an endless tail without ending \
         (line break in the tail: {}, invalid UTF-8: {invalid}); last item {:?}",
        !no_break,
        items.last()
    );
}

/// Items end at the first error or `Done`: nothing follows either.
fn check_ending(items: &[Item]) {
    if let Some(i) = items
        .iter()
        .position(|it| matches!(it, Err(_) | Ok(ReplyDelta::Done | ReplyDelta::Error(_))))
    {
        assert_eq!(i + 1, items.len(), "items after the end: {items:?}");
    }
}

/// The deltas of one stream are well-formed, whatever the upstream sent:
///
/// - it ends at most once, last ([`check_ending`]);
/// - `Start` comes at most once, before any content;
/// - `Finish` at most once;
/// - `Usage` at most once, right before `Done`;
/// - with `dense_calls` (dialects that number calls themselves), a call's
///   first delta has the next index and its name, and every later delta
///   of it an index already opened, with no id or name;
/// - natively, each upstream chunk as it came ahead of the same deltas,
///   its usage with it rather than at the end.
fn check_deltas(items: &[Item], dense_calls: bool, native: bool) {
    check_ending(items);
    let deltas: Vec<&ReplyDelta> = items.iter().filter_map(|i| i.as_ref().ok()).collect();
    let mut started = false;
    let mut finished = false;
    let mut calls = BTreeSet::new();
    for (i, d) in deltas.iter().enumerate() {
        let content = matches!(
            d,
            ReplyDelta::Text(_) | ReplyDelta::Reasoning(_) | ReplyDelta::ToolCall(_)
        );
        match d {
            ReplyDelta::Start { .. } => {
                assert!(!started, "Start twice: {deltas:?}");
                started = true;
            }
            ReplyDelta::Finish(_) => {
                assert!(!finished, "Finish twice: {deltas:?}");
                finished = true;
            }
            ReplyDelta::Usage(_) if !native => assert!(
                matches!(deltas.get(i + 1), Some(ReplyDelta::Done)),
                "Usage not right before Done: {deltas:?}"
            ),
            ReplyDelta::ToolCall(c) if dense_calls => {
                if calls.contains(&c.index) {
                    assert!(
                        c.id.is_none() && c.name.is_none(),
                        "a later delta of call {} names it again: {deltas:?}",
                        c.index
                    );
                } else {
                    assert_eq!(c.index, calls.len(), "a call skipped an index: {deltas:?}");
                    // The id is the upstream's, which may leave it out
                    // (the surfaces then make one).
                    assert!(
                        c.name.is_some(),
                        "call {}'s first delta has no name: {deltas:?}",
                        c.index
                    );
                    calls.insert(c.index);
                }
            }
            ReplyDelta::Raw(_) if !native => panic!("a raw chunk, not asked for: {deltas:?}"),
            _ => {}
        }
        // Content may follow the finish: an upstream may send more after
        // it, and the mapper passes it on for the surfaces to render.
        if content {
            assert!(started, "content before Start: {deltas:?}");
        }
    }
}

/// One dialect's stream mapper over the events of fuzzed SSE bytes. The
/// first byte's low bit asks for native chunks (OpenAI) or JSON mode
/// through a forced tool (Anthropic); the rest is the stream.
fn stream_of(dialect: Dialect, data: &[u8]) {
    let [flags, body @ ..] = data else { return };
    let special = flags & 1 == 1;
    let mapper = StreamMapper::new(dialect);
    let (mapper, native) = match dialect {
        Dialect::Openai => (mapper.native(special), special),
        Dialect::Anthropic => (mapper.plan(ReplyPlan { json_tool: special }), false),
        Dialect::Gemini => (mapper, false),
    };
    let items = mapped(vec![body.to_vec()], mapper);
    check_deltas(&items, dialect != Dialect::Openai, native);
}

/// OpenAI's stream mapper: see [`check_deltas`]. OpenAI numbers tool calls
/// itself and the mapper passes its numbers on, so their order is not
/// checked here.
pub fn stream_openai(data: &[u8]) {
    stream_of(Dialect::Openai, data);
}

/// Anthropic's stream mapper: see [`check_deltas`].
pub fn stream_anthropic(data: &[u8]) {
    stream_of(Dialect::Anthropic, data);
}

/// Gemini's stream mapper: see [`check_deltas`].
pub fn stream_gemini(data: &[u8]) {
    stream_of(Dialect::Gemini, data);
}

/// A whole reply and an error body read in `dialect`: no panic, the two
/// readers of a success body agree, and undoing JSON mode on the reply
/// does not panic either.
fn decode(dialect: Dialect, data: &[u8]) {
    let reply = dialect::parse_reply(dialect, data);
    let success = dialect::parse_success(dialect, data);
    match (&reply, &success) {
        (Ok(a), Ok((b, _))) => assert_eq!(a, b, "parse_reply and parse_success disagree"),
        (Err(a), Err(b)) => assert_eq!(a, b, "parse_reply and parse_success disagree"),
        _ => panic!("parse_reply and parse_success disagree: {reply:?} {success:?}"),
    }
    if let Ok((mut reply, json)) = success {
        let _ = dialect::wire(dialect).reply_id(&json);
        ReplyPlan { json_tool: true }.apply(&mut reply);
    }
    if let Some(e) = dialect::parse_error(data) {
        let _ = e.message.len();
    }
}

/// Anthropic's (and OpenAI's) readers of whole replies, and the error
/// body reader.
pub fn decode_anthropic(data: &[u8]) {
    decode(Dialect::Anthropic, data);
    decode(Dialect::Openai, data);
}

/// Gemini's reader of whole replies, and the error body reader.
pub fn decode_gemini(data: &[u8]) {
    decode(Dialect::Gemini, data);
}

/// A rejected request is a 4xx with a message: bad input is never the
/// server's fault.
fn check_refusal(e: &ApiError) {
    assert!(
        e.status.is_client_error(),
        "bad input answered {}: {}",
        e.status,
        e.message
    );
    assert!(!e.message.trim().is_empty(), "a refusal without a message");
    let _ = serde_json::to_vec(&e.body());
}

/// What every accepted request holds, whichever surface read it: at least
/// one message, each with a role (one OpenAI does not know is accepted,
/// and the dialects that leave its message out report it), content left
/// out only by assistant
/// messages, content parts each with a string type (and text parts with a
/// string text). Then the OpenAI body it becomes reads back as the same
/// request (the system prompt as a first system message, and the usage
/// a stream asks for), and it translates to every dialect without a panic.
fn check_accepted(req: &ChatRequest) {
    assert!(!req.messages.is_empty(), "accepted without messages");
    for m in &req.messages {
        assert!(!m.role.is_empty(), "an empty role accepted");
        if !ROLES.contains(&m.role.as_str()) {
            let dropped = crate::upstream::dialect::fields::dropped(
                crate::upstream::dialect::Dialect::Anthropic,
                req,
            );
            let what = format!("role[{}]", m.role);
            assert!(dropped.contains(&what), "{what} not reported: {dropped:?}");
        }
        match &m.content {
            None => assert_eq!(m.role, "assistant", "content left out: {m:?}"),
            Some(Content::Parts(parts)) => {
                for p in parts {
                    let kind = p.get("type").and_then(Value::as_str);
                    assert!(kind.is_some(), "a part without a type: {p}");
                    if kind == Some("text") {
                        assert!(p.get("text").is_some_and(Value::is_string), "{p}");
                    }
                }
            }
            Some(Content::Text(_)) => {}
        }
    }
    let _ = req.estimated_tokens();
    let _ = req.wants_stream_usage();

    let body = dialect::wire(Dialect::Openai)
        .body(req)
        .expect("the OpenAI dialect carries every request");
    let again = ChatRequest::from_openai_value(body)
        .unwrap_or_else(|e| panic!("an accepted request's OpenAI body does not read back: {e}"));
    let mut expected = req.clone();
    if let Some(s) = expected.system.take() {
        expected.messages.insert(0, ChatMessage::new("system", s));
    }
    if expected.stream && !expected.extra.contains_key("stream_options") {
        expected
            .extra
            .insert("stream_options".into(), json!({"include_usage": true}));
    }
    assert_eq!(again, expected, "the OpenAI body reads back differently");

    translate(req);
}

/// One endpoint per dialect, and a client to build requests with (none is
/// sent).
fn endpoints() -> &'static (reqwest::Client, Vec<Endpoint>) {
    static EP: OnceLock<(reqwest::Client, Vec<Endpoint>)> = OnceLock::new();
    EP.get_or_init(|| {
        crate::upstream::http::install_tls_provider();
        let eps = [Dialect::Openai, Dialect::Anthropic, Dialect::Gemini]
            .into_iter()
            .map(|d| {
                Endpoint::new(
                    format!("fuzz-{}", d.as_str()),
                    d,
                    "http://127.0.0.1:9/v1".into(),
                    BTreeMap::new(),
                )
            })
            .collect();
        (reqwest::Client::new(), eps)
    })
}

/// Translate `req` to each dialect as `route` does before sending it
/// ([`dialect::build_request`]): a refusal is fine, a panic is not.
fn translate(req: &ChatRequest) {
    let (client, eps) = endpoints();
    for ep in eps {
        if let Ok(built) = dialect::build_request(client, ep, None, req) {
            let _ = built.builder.build();
        }
    }
}

/// The chat completions surface: the body as `ChatBody` reads it.
pub fn inbound_chat(data: &[u8]) {
    match ChatRequest::from_openai_json(data).map_err(error::invalid_request) {
        Ok(req) => check_accepted(&req),
        Err(e) => check_refusal(&e),
    }
}

/// The Messages surface, as `POST /v1/messages` and
/// `/v1/messages/count_tokens` read it: besides [`check_accepted`], a
/// request to create a message has a `max_tokens` of at least 1, and one
/// to count tokens none.
pub fn inbound_messages(data: &[u8]) {
    for purpose in [Purpose::Create, Purpose::Count] {
        match anthropic::read_messages(data, purpose) {
            Ok(mut m) => {
                match purpose {
                    Purpose::Create => assert!(m.req.max_tokens.is_some_and(|n| n >= 1)),
                    Purpose::Count => assert_eq!(m.req.max_tokens, None),
                }
                anthropic::metadata_to_user(&mut m.req);
                check_accepted(&m.req);
            }
            Err(e) => check_refusal(&e),
        }
    }
}

/// The Responses surface: besides [`check_accepted`], `max_output_tokens`,
/// when given, is at least 1. Read with nothing in the item store, and
/// again with every item it refers to held (an assistant message) and a
/// short history for its `previous_response_id`: what is kept is what
/// was sent, references resolved.
pub fn inbound_responses(data: &[u8]) {
    let check = |parsed: Result<responses::Parsed, ApiError>| match parsed {
        Ok(p) => {
            assert!(p.req.max_tokens.is_none_or(|n| n >= 1));
            check_accepted(&p.req);
            if let Some(k) = &p.keep {
                assert!(!k.input.iter().any(|i| i["type"] == "item_reference"));
            }
        }
        Err(e) => check_refusal(&e),
    };
    check(responses::parse(data));
    let Ok(r) = responses::Request::read(data) else {
        return;
    };
    let held = responses::Held {
        secs: 60,
        items: r
            .references()
            .iter()
            .map(|id| {
                let item = json!({"id": id, "type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": "4"}]});
                (id.clone(), item)
            })
            .collect(),
        history: r.previous_response_id().map(|_| {
            vec![
                json!({"role": "user", "content": "What is 2 + 2?"}),
                json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "f",
                       "arguments": "{}"}),
            ]
        }),
        unavailable: false,
    };
    check(r.translate(&held));
}

/// The legacy Completions surface: besides [`check_accepted`], the prompt
/// is one user message of text.
pub fn inbound_completions(data: &[u8]) {
    match completions::parse(data) {
        Ok(req) => {
            assert!(
                matches!(
                    req.messages.as_slice(),
                    [m] if m.role == "user" && matches!(m.content, Some(Content::Text(_)))
                ),
                "{:?}",
                req.messages
            );
            check_accepted(&req);
        }
        Err(e) => check_refusal(&e),
    }
}

#[cfg(test)]
mod tests {
    /// Every kept input of every target here passes (the fuzz run
    /// replays them too; this catches a broken invariant without nightly).
    #[test]
    fn the_kept_corpus_passes() {
        type Target = (&'static str, fn(&[u8]));
        let targets: [Target; 10] = [
            ("sse_stream", super::sse_stream),
            ("stream_openai", super::stream_openai),
            ("stream_anthropic", super::stream_anthropic),
            ("stream_gemini", super::stream_gemini),
            ("decode_anthropic", super::decode_anthropic),
            ("decode_gemini", super::decode_gemini),
            ("inbound_chat", super::inbound_chat),
            ("inbound_messages", super::inbound_messages),
            ("inbound_responses", super::inbound_responses),
            ("inbound_completions", super::inbound_completions),
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for (name, run) in targets {
            let mut seen = 0;
            for f in std::fs::read_dir(root.join(name)).unwrap() {
                let path = f.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let r = std::panic::catch_unwind(|| run(&data));
                assert!(r.is_ok(), "{name}: {} fails", path.display());
                seen += 1;
            }
            assert!(seen > 0, "{name} has no kept inputs");
        }
    }
}
