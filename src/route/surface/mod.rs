//! Inbound surfaces: the API shapes clients speak to `route --serve`. A
//! surface parses its requests into a [`ChatRequest`](crate::upstream::dialect::ChatRequest),
//! and renders the engine's answers (replies, stream events, and
//! [`RouteError`](crate::route::domain::RouteError)s) in its own shape. The
//! engine never learns which surface a request came from; the server only
//! mounts each surface's handlers.
//!
//! [`openai`] is OpenAI chat completions; siblings for other APIs sit
//! beside it and share [`BodyLimit`].

pub mod openai;

/// What every surface's body extractor needs from the server's state: the
/// body size limit, to say it in the rejection.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);
