//! Inbound surfaces: the API shapes clients speak to `route --serve`. A
//! surface parses its requests into a [`ChatRequest`](crate::upstream::dialect::ChatRequest),
//! and renders the engine's answers (replies, stream events, and
//! [`RouteError`](crate::route::domain::RouteError)s) in its own shape. The
//! engine never learns which surface a request came from; the server only
//! mounts each surface's handlers.
//!
//! [`openai`] is OpenAI chat completions; siblings for other APIs sit
//! beside it and share [`BodyLimit`]. A new surface implements:
//!
//! - a body extractor that parses its request into a `ChatRequest`, with
//!   rejections in its own error shape;
//! - its error shape for a [`RouteError`](crate::route::domain::RouteError)
//!   (status, type, code, retry time);
//! - a reply renderer from [`Completion`](crate::route::send::Completion)'s
//!   `ChatReply` (passing `body` on as it came when the upstream speaks the
//!   surface's dialect);
//! - a stream writer from [`StreamEvent`](crate::route::domain::StreamEvent)s:
//!   the deltas (start, text, reasoning, finish), the usage event (shown
//!   only if its client asks), a failure, the end; and `Native` events
//!   when the upstream speaks its dialect. Usage correction and failure
//!   accounting are the engine's, for every surface
//!   (`Engine::watch_stream`).

pub mod openai;

/// What every surface's body extractor needs from the server's state: the
/// body size limit, to say it in the rejection.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);
