//! `GET /status`: the status page `rollup --format html` writes, built
//! from route's live state and cached for a few seconds.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::App;

/// Not built yet (issue 20's status-page work fills this in).
pub async fn page(State(_app): State<Arc<App>>) -> Response {
    (
        StatusCode::NOT_IMPLEMENTED,
        "the status page is not built yet\n",
    )
        .into_response()
}
