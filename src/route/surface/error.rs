//! The error every surface renders, in no surface's shape: an
//! [`ApiError`] carries a status, an [`ErrorKind`], a code, a message and
//! when a retry could succeed; each surface writes it in its own API's
//! shape (the OpenAI-shaped body is [`ApiError::body`], the one most
//! clients read, and [`stream_error`] its event in a `data:`-only stream;
//! Anthropic's and Responses' renderers are theirs).
//! [`route_error`] says why the engine served nothing, and the functions
//! below name the server's own refusals (an unknown path, a slow body).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::route::domain::{Exhausted, RouteError};
use crate::upstream::classify::ErrorClass;
use crate::upstream::dialect::RequestError;

/// What kind of error, as OpenAI's `type` names it; Anthropic's shape
/// maps these to its own types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::Display)]
#[strum(serialize_all = "snake_case")]
pub enum ErrorKind {
    #[strum(serialize = "invalid_request_error")]
    InvalidRequest,
    #[strum(serialize = "authentication_error")]
    Authentication,
    #[strum(serialize = "rate_limit_error")]
    RateLimit,
    #[strum(serialize = "api_error")]
    Api,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`,
    /// `rate_limit_error`, `api_error`, …
    pub kind: ErrorKind,
    pub code: &'static str,
    /// When a retry could succeed.
    pub retry_at: Option<DateTime<Utc>>,
    /// A machine-readable cause a client branches on, rendered as
    /// `error.details.error_code` in Anthropic's shape
    /// (`thread_unsupported_request`); OpenAI's shape has no such field.
    pub error_code: Option<&'static str>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: ErrorKind,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            code,
            retry_at: None,
            error_code: None,
        }
    }

    /// A 400 about the request itself.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::InvalidRequest,
            code,
            message,
        )
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorKind::Authentication,
            "invalid_api_key",
            "missing or wrong token: send the token in the variable named by auth_token_env, as Authorization: Bearer <token> or as x-api-key: <token> (which the Anthropic SDKs send)",
        )
    }

    pub fn with_retry_at(mut self, at: Option<DateTime<Utc>>) -> ApiError {
        self.retry_at = at;
        self
    }

    /// The same error with `error.details.error_code` for clients that
    /// branch on it.
    pub fn with_error_code(mut self, code: &'static str) -> ApiError {
        self.error_code = Some(code);
        self
    }

    /// The OpenAI-shaped JSON body,
    /// `{"error":{"message","type","code","param","retryAtMs"?}}`.
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: ErrorObject {
                message: &self.message,
                kind: self.kind.as_str(),
                code: self.code,
                param: (),
                retry_at_ms: self.retry_at.map(|at| at.timestamp_millis()),
            },
        }
    }

    /// Seconds until `retry_at`, rounded up, at least 1.
    pub fn retry_after_secs(&self, now: DateTime<Utc>) -> Option<i64> {
        self.retry_at
            .map(|at| ((at - now).num_milliseconds().max(0) + 999) / 1000)
            .map(|s| s.max(1))
    }

    pub fn into_response_at(self, now: DateTime<Utc>) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after_secs(now)
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_response_at(Utc::now())
    }
}

/// An error in OpenAI's shape, which every OpenAI client reads as it reads
/// OpenAI's own: [`ApiError::body`], and a stream's error event.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    pub error: ErrorObject<'a>,
}

/// The `error` object of an [`ErrorBody`], in the order OpenAI writes it.
#[derive(Debug, Serialize)]
pub struct ErrorObject<'a> {
    pub message: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub code: &'static str,
    /// Always `null`: no error here is about one parameter.
    pub param: (),
    /// When a retry could succeed, in milliseconds since the epoch.
    #[serde(rename = "retryAtMs", skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<i64>,
}

/// A stream that failed after its first chunk, in OpenAI's shape: an
/// error event (`upstream_stream_failed`), then the end of the stream.
pub fn stream_error(message: &str) -> String {
    let ev = ErrorBody {
        error: ErrorObject {
            message,
            kind: ErrorKind::Api.as_str(),
            code: "upstream_stream_failed",
            param: (),
            retry_at_ms: None,
        },
    };
    let mut out = super::sse_event(None, &ev);
    out.push_str(super::SSE_DONE);
    out
}

/// Why a request was not served, as OpenAI would say it.
pub fn route_error(x: &Exhausted) -> ApiError {
    let (status, kind, code) = match &x.error {
        RouteError::UnknownModel { .. } => (
            StatusCode::NOT_FOUND,
            ErrorKind::InvalidRequest,
            "model_not_found",
        ),
        RouteError::NoneActive { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Api,
            "no_active_models",
        ),
        RouteError::NoRecord => (StatusCode::SERVICE_UNAVAILABLE, ErrorKind::Api, "no_record"),
        RouteError::AllCoolingDown { .. } => (
            StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::RateLimit,
            "all_cooling_down",
        ),
        RouteError::AllFailed { .. } => (
            StatusCode::BAD_GATEWAY,
            ErrorKind::Api,
            "all_candidates_failed",
        ),
        RouteError::Incapable { .. } => (
            StatusCode::BAD_REQUEST,
            ErrorKind::InvalidRequest,
            "no_capable_model",
        ),
        // OpenAI's own code: clients that cut their context on it do.
        RouteError::ContextTooSmall { .. } => (
            StatusCode::BAD_REQUEST,
            ErrorKind::InvalidRequest,
            "context_length_exceeded",
        ),
        RouteError::ClientFault { class, status, .. } => (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            ErrorKind::InvalidRequest,
            match class {
                ErrorClass::ContextLength => "context_length_exceeded",
                ErrorClass::Unsupported => "unsupported",
                _ => "bad_request",
            },
        ),
    };
    ApiError::new(status, kind, code, x.message()).with_retry_at(x.error.retry_at())
}

/// A request whose body did not arrive whole within `within`: 408, and
/// the connection closes.
pub fn body_timeout(within: std::time::Duration) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        ErrorKind::InvalidRequest,
        "request_timeout",
        format!(
            "the request body did not arrive within {}",
            crate::upstream::http::human_duration(within)
        ),
    )
}

/// A chat request the dialect layer refused, as the 400 the chat surface
/// answers (`invalid_request`, OpenAI's words naming the field).
pub fn invalid_request(e: RequestError) -> ApiError {
    ApiError::invalid("invalid_request", e.to_string())
}

/// A request whose head exceeds `max` bytes.
pub fn headers_too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        ErrorKind::InvalidRequest,
        "headers_too_large",
        format!("request headers exceed {max} bytes"),
    )
}

/// Every path this server serves, for the 404s that say so.
pub const SERVED: &str = "POST /v1/chat/completions, /v1/completions, /v1/messages, \
     /v1/messages/count_tokens and /v1/responses; GET /v1/models, /v1/models/{id}, \
     /v1/providers, /status, /badge/{provider}.svg, /badge/{provider}/{model}.svg, \
     /metrics, /livez and /readyz";

/// A path this server does not serve, named, with a hint for the usual
/// mistake: a base URL ending in `/v1` given to a client that adds `/v1`
/// itself (the Anthropic SDKs do), which asks for `/v1/v1/messages`.
pub fn unknown_url(path: &str) -> ApiError {
    let hint = if path.starts_with("/v1/v1/") {
        " (is the client's base URL one with /v1 at the end, for a client that adds /v1 itself? The Anthropic SDKs take the server's root, http://HOST:PORT)"
    } else {
        ""
    };
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorKind::InvalidRequest,
        "unknown_url",
        format!("unknown path {path}{hint}: this server serves {SERVED}"),
    )
}

/// An API clients call that this server does not serve yet
/// (`embeddings`): a 404 that says so, and what it serves.
pub fn not_served(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorKind::InvalidRequest,
        "unknown_url",
        format!("{what} are not served yet: this server serves {SERVED}"),
    )
}

/// A path this server serves, asked with a method it does not take
/// (`GET /v1/chat/completions`): a JSON error rather than axum's empty 405.
pub fn method_not_allowed(method: &str, path: &str) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::InvalidRequest,
        "method_not_allowed",
        format!("{method} is not allowed on {path}"),
    )
}

/// No answer within the request timeout.
pub fn request_timeout(timeout: std::time::Duration) -> ApiError {
    ApiError::new(
        StatusCode::GATEWAY_TIMEOUT,
        ErrorKind::Api,
        "request_timeout",
        format!(
            "no answer within {}",
            crate::upstream::http::human_duration(timeout)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::domain::{Attempt, AttemptClass};

    fn exhausted(error: RouteError) -> Exhausted {
        Exhausted {
            error,
            attempts: vec![Attempt {
                model: "p::m".into(),
                key: None,
                class: AttemptClass::Failed(ErrorClass::ServerError),
                status: Some(500),
                message: None,
                retry_at: None,
            }],
        }
    }

    #[test]
    fn route_errors_take_openai_statuses_types_and_codes() {
        let at = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let cases = [
            (
                RouteError::UnknownModel {
                    model: "x".into(),
                    unset: Vec::new(),
                },
                404,
                "invalid_request_error",
                "model_not_found",
            ),
            (
                RouteError::NoneActive { model: "x".into() },
                503,
                "api_error",
                "no_active_models",
            ),
            (
                RouteError::AllCoolingDown { retry_at: at },
                429,
                "rate_limit_error",
                "all_cooling_down",
            ),
            (
                RouteError::AllFailed {
                    attempts: 1,
                    retry_at: None,
                },
                502,
                "api_error",
                "all_candidates_failed",
            ),
            (
                RouteError::client_fault(ErrorClass::ContextLength, Some(413), "long".into()),
                413,
                "invalid_request_error",
                "context_length_exceeded",
            ),
            (
                RouteError::client_fault(ErrorClass::BadRequest, None, "bad".into()),
                400,
                "invalid_request_error",
                "bad_request",
            ),
            (
                RouteError::Incapable {
                    needs: vec![crate::upstream::dialect::Need::Tools],
                    active: 1,
                    reasons: vec!["a::m: cannot carry tools".into()],
                },
                400,
                "invalid_request_error",
                "no_capable_model",
            ),
        ];
        for (error, status, kind, code) in cases {
            let e = route_error(&exhausted(error));
            assert_eq!(
                (e.status.as_u16(), e.kind.as_str(), e.code),
                (status, kind, code)
            );
        }
    }

    #[test]
    fn a_cooling_error_says_when_to_retry() {
        let at = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let e = route_error(&exhausted(RouteError::AllCoolingDown { retry_at: at }));
        assert_eq!(e.retry_at, Some(at));
        let body = serde_json::to_value(e.body()).unwrap();
        assert_eq!(body["error"]["retryAtMs"], at.timestamp_millis());
        let failed = route_error(&exhausted(RouteError::AllFailed {
            attempts: 1,
            retry_at: None,
        }));
        assert_eq!(
            failed.message,
            "every candidate failed (1 attempt): p::m=server_error"
        );
    }

    #[test]
    fn a_stream_error_is_an_event_then_done() {
        let text = stream_error("boom");
        assert!(text.starts_with("data: {\"error\":"), "{text}");
        assert!(text.contains("upstream_stream_failed"), "{text}");
        assert!(text.ends_with("\n\ndata: [DONE]\n\n"), "{text}");
    }
}
