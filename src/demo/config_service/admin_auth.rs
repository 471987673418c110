//! The admin API's token. `/admin/*` drops the queue, warms and slows the service; the
//! gate in front of it forwards every path, so without a token any client of the demo
//! could drain it through the gate. With `--admin-token-file` the admin routes answer 401
//! unless the request carries `Authorization: Bearer <token>`; the platform holds the
//! token through its inventory (`admin_token_file`), `recover demo up` and the rehearsal
//! write it next to their other files.

use super::ServiceError;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::path::Path;
use std::sync::Arc;

/// The shortest token accepted (the gate's admin token has the same floor).
const MIN_TOKEN_BYTES: usize = 12;

/// Read and check the token file (trailing newline trimmed).
pub fn read_token(path: &Path) -> Result<Arc<str>, ServiceError> {
    let bad = |why: String| {
        ServiceError::Invalid(format!("--admin-token-file {}: {why}", path.display()))
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let token = text.trim_end_matches(['\r', '\n']);
    crate::util::secret::check(token, MIN_TOKEN_BYTES).map_err(|e| bad(e.to_string()))?;
    Ok(Arc::from(token))
}

/// Let a request with the right bearer token through; answer 401 to any other.
pub async fn require(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::serve::auth::bearer);
    match given {
        Some(g) if crate::serve::auth::ct_eq(g.as_bytes(), token.as_bytes()) => {
            next.run(request).await
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({
                "error": "the admin API needs Authorization: Bearer <token> (the service's --admin-token-file)",
                "field": null,
            })),
        )
            .into_response(),
    }
}
