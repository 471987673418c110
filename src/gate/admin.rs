//! The admin listener: `/metrics` and `/healthz` for anyone (scrapers, probes), and
//! `GET/PUT /admin/limit` for holders of the bearer token. It lives on its own listener
//! because the proxy listener forwards every path to the upstream.

use super::control::{ApplyError, LimitControl};
use super::telemetry::GateMetrics;
use super::validate;
use crate::util::http_body::{read_body, BodyCaps};
use crate::util::http_refusal::{refusal, shaped_and_counted, CountRefusal};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;

pub struct AdminState {
    pub control: Arc<LimitControl>,
    pub metrics: Arc<GateMetrics>,
    pub token: Option<String>,
}

pub fn router(state: Arc<AdminState>) -> Router {
    let counted = state.metrics.clone();
    let count: CountRefusal =
        Arc::new(move |route, status| counted.admin_refusal(route, status.as_u16()));
    let routes = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route("/admin/limit", get(get_limit).put(put_limit))
        .with_state(state);
    shaped_and_counted(routes, count)
}

async fn metrics(State(s): State<Arc<AdminState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.render(),
    )
        .into_response()
}

async fn get_limit(State(s): State<Arc<AdminState>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refuse_unauthorized(&s, &headers) {
        return refusal;
    }
    Json(s.control.current()).into_response()
}

/// A limit is a hundred bytes of JSON; the cap leaves room for a long note.
const LIMIT_BODY: BodyCaps = BodyCaps::small_json(64 * 1024);

async fn put_limit(State(s): State<Arc<AdminState>>, headers: HeaderMap, body: Body) -> Response {
    if let Some(refusal) = refuse_unauthorized(&s, &headers) {
        return refusal;
    }
    let body = match read_body(body, LIMIT_BODY).await {
        Ok(b) => b,
        Err(e) => return error(e.status(), &e.to_string(), Some("body")),
    };
    let limit = match validate::parse_json(&body) {
        Ok(l) => l,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string(), Some(&e.field)),
    };
    match s.control.apply(limit) {
        Ok(applied) => {
            tracing::info!(
                version = %applied.version,
                limit = %serde_json::to_string(&applied.limit).unwrap_or_default(),
                "limit changed through the admin API"
            );
            Json(applied).into_response()
        }
        Err(ApplyError::Invalid(e)) => {
            error(StatusCode::BAD_REQUEST, &e.to_string(), Some(&e.field))
        }
        Err(e @ ApplyError::Persist { .. }) => {
            tracing::error!("{e}");
            error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None)
        }
    }
}

fn error(status: StatusCode, message: &str, field: Option<&str>) -> Response {
    refusal(status, message, field)
}

/// The 401 to answer unless the request carries the right bearer token.
fn refuse_unauthorized(s: &AdminState, headers: &HeaderMap) -> Option<Response> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let ok = match (&s.token, presented) {
        (Some(expected), Some(given)) => constant_time_eq(expected.as_bytes(), given.as_bytes()),
        _ => false,
    };
    if ok {
        return None;
    }
    let message = if s.token.is_none() {
        "the admin API is disabled: start the gate with --admin-token-file"
    } else {
        "missing or wrong bearer token (Authorization: Bearer <token>)"
    };
    Some(error(StatusCode::UNAUTHORIZED, message, None))
}

/// Compare tokens without leaking, through timing, how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
    }
}
