//! `GET /badge/{provider}.svg` and `GET /badge/{provider}/{model}.svg`:
//! the badges `rollup --format badge` writes, with a `window` query.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::App;

/// Not built yet (issue 20's badge work fills this in).
pub async fn badge(State(_app): State<Arc<App>>) -> Response {
    (StatusCode::NOT_IMPLEMENTED, "badges are not built yet\n").into_response()
}
