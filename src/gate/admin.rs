//! The admin listener: `/metrics`, `/healthz` (alive) and `/readyz` (ready to take
//! traffic: the gate knows its limit and, sharing it, how many replicas share it) for anyone
//! (scrapers, probes), and `GET/PUT /admin/limit` for holders of the bearer token (a PUT
//! may ask the new limit's bucket to start full: `"fill": true`). It lives on its own listener
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
    /// Whether PUT may change the limit.
    pub writes: bool,
    /// Whether the gate shares its limit with peers: then it is ready only once it knows
    /// how many (before that it would enforce the whole limit).
    pub needs_peers: bool,
}

pub fn router(state: Arc<AdminState>) -> Router {
    let counted = state.metrics.clone();
    let count: CountRefusal =
        Arc::new(move |route, status| counted.admin_refusal(route, status.as_u16()));
    let routes = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/admin/limit", get(get_limit).put(put_limit))
        .with_state(state);
    shaped_and_counted(routes, count)
}

/// Ready only when the gate knows both its limit and (sharing it) its peers: a gate that
/// knows neither refuses everything and must not be sent traffic.
async fn readyz(State(s): State<Arc<AdminState>>) -> Response {
    match s.control.readiness(s.needs_peers) {
        Ok(()) => "ok\n".into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

async fn metrics(State(s): State<Arc<AdminState>>, headers: HeaderMap) -> Response {
    let (limit, peers) = s.control.ages();
    // Without a peer source there is no count to grow old.
    let peers = if s.needs_peers {
        peers
    } else {
        Some(std::time::Duration::ZERO)
    };
    s.metrics.set_ages(limit, peers);
    crate::util::text_format::respond(&headers, &s.metrics.render())
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
    if !s.writes {
        return error(
            StatusCode::FORBIDDEN,
            "this gate takes its limit from its ConfigMap (--admin-read-only): set the limit there, e.g. with recover's runbook",
            None,
        );
    }
    let body = match read_body(body, LIMIT_BODY).await {
        Ok(b) => b,
        Err(e) => return error(e.status(), &e.to_string(), Some("body")),
    };
    let change = match validate::parse_change(&body) {
        Ok(c) => c,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string(), Some(&e.field)),
    };
    match s.control.apply(change) {
        Ok(applied) => {
            tracing::info!(
                version = %applied.version,
                filled = applied.filled,
                tokens = ?applied.tokens,
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
        .and_then(bearer);
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

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 9110 §11.1), as `recover serve` reads it.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
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
    use super::{bearer, constant_time_eq};

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer("Bearer t0k"), Some("t0k"));
        assert_eq!(bearer("bearer t0k"), Some("t0k"));
        assert_eq!(bearer("BEARER  t0k "), Some("t0k"));
        assert_eq!(bearer("Basic t0k"), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
    }
}
