//! The Anthropic Messages surface: `POST /v1/messages`, what is
//! Anthropic-shaped about `route --serve`.
//!
//! - errors as Anthropic writes them,
//!   `{"type":"error","error":{"type","message"}}`, with its types
//!   (`invalid_request_error`, `authentication_error`,
//!   `permission_error`, `not_found_error`, `request_too_large`,
//!   `rate_limit_error`, `api_error`, `overloaded_error`) and
//!   `Retry-After` whenever a retry time is known ([`error_response`]).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::openai::ApiError;

/// Anthropic's error type for a status, as its API documents them.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// `e` as Anthropic's error body.
pub fn error_body(e: &ApiError) -> Value {
    json!({
        "type": "error",
        "error": {"type": error_type(e.status), "message": e.message},
    })
}

/// `e` as an Anthropic error response, with `Retry-After` when a retry
/// time is known.
pub fn error_response(e: ApiError, now: DateTime<Utc>) -> Response {
    let mut resp = (e.status, axum::Json(error_body(&e))).into_response();
    if let Some(secs) = e.retry_after_secs(now)
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_take_anthropics_error_types() {
        for (status, kind) in [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (404, "not_found_error"),
            (413, "request_too_large"),
            (415, "invalid_request_error"),
            (429, "rate_limit_error"),
            (502, "api_error"),
            (503, "overloaded_error"),
            (504, "api_error"),
        ] {
            assert_eq!(error_type(StatusCode::from_u16(status).unwrap()), kind);
        }
        let e = ApiError::invalid("x", "bad");
        assert_eq!(
            error_body(&e),
            json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})
        );
    }
}
