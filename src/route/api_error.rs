//! Errors in the OpenAI API's shape, so that every OpenAI client (the SDKs,
//! LangChain, coding agents) reports them as it reports OpenAI's own:
//! `{"error":{"message","type","code","param","retryAtMs"?}}`, with
//! `Retry-After` whenever a retry time is known.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::json;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`,
    /// `rate_limit_error`, `api_error`, …
    pub kind: &'static str,
    pub code: &'static str,
    /// When a retry could succeed.
    pub retry_at: Option<DateTime<Utc>>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            code,
            retry_at: None,
        }
    }

    /// A 400 about the request itself.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        )
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "missing or wrong bearer token: send Authorization: Bearer <the token in the variable named by auth_token_env>",
        )
    }

    pub fn with_retry_at(mut self, at: Option<DateTime<Utc>>) -> ApiError {
        self.retry_at = at;
        self
    }

    /// The JSON body.
    pub fn body(&self, now: DateTime<Utc>) -> serde_json::Value {
        let mut err = json!({
            "message": self.message,
            "type": self.kind,
            "code": self.code,
            "param": null,
        });
        if let Some(at) = self.retry_at {
            err["retryAtMs"] = json!(at.timestamp_millis());
            let _ = now;
        }
        json!({ "error": err })
    }

    /// Seconds until `retry_at`, rounded up, at least 1.
    pub fn retry_after_secs(&self, now: DateTime<Utc>) -> Option<i64> {
        self.retry_at
            .map(|at| ((at - now).num_milliseconds().max(0) + 999) / 1000)
            .map(|s| s.max(1))
    }

    pub fn into_response_at(self, now: DateTime<Utc>) -> Response {
        let body = self.body(now);
        let mut resp = (self.status, axum::Json(body)).into_response();
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
