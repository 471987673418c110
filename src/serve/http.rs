//! The receiver's HTTP surface (axum): the webhook, the read-only views of runs and
//! decisions, metrics, health, and the admin reset. Authentication happens before the
//! body is parsed, so an unauthenticated caller learns nothing about the payload format.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;

use super::alert;
use super::answer::Answer;
use super::auth::{self, Admitted, AuthError, Presented, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use super::receiver::Receiver;
use super::replay::Refusal;
use crate::util::http_body::{read_body, BodyCaps};
use crate::util::http_refusal::{refusal, shaped_and_counted, CountRefusal};
use crate::util::http_server::{self, Timeouts};

/// How long a request body may take to arrive whole (a webhook is a few KiB).
const BODY_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The receiver's routes.
pub fn router(rx: Arc<Receiver>) -> Router {
    let counted = rx.clone();
    let count: CountRefusal =
        Arc::new(move |route, status| counted.metrics.refusal(route, status.as_u16()));
    let routes = Router::new()
        .route("/alerts", post(alerts))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route("/decisions", get(decisions))
        .route("/targets", get(targets))
        .route("/admin/reset", post(reset))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(rx);
    shaped_and_counted(routes, count)
}

/// Serve until `shutdown` resolves, with the default header-read and write timeouts.
pub async fn serve(
    listener: tokio::net::TcpListener,
    rx: Arc<Receiver>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, rx, Timeouts::default(), shutdown).await
}

/// Serve until `shutdown` resolves: a connection that sends no complete request head
/// within `timeouts.header_read` (idle ones too), or stops reading its answer, is closed.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    rx: Arc<Receiver>,
    timeouts: Timeouts,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    http_server::serve(listener, router(rx), timeouts, shutdown).await
}

/// The request body within `max_body_bytes` and [`BODY_WITHIN`], or the answer refusing it.
async fn body_within(rx: &Receiver, body: Body) -> Result<Bytes, Response> {
    let caps = BodyCaps::new(rx.cfg.max_body_bytes, BODY_WITHIN);
    read_body(body, caps)
        .await
        .map_err(|e| refusal(e.status(), e.to_string(), Some("body")))
}

/// A valid token, or a valid signature used for the first time.
fn authenticate(rx: &Receiver, headers: &HeaderMap, body: &[u8]) -> Result<(), AuthError> {
    let presented = Presented {
        authorization: header_str(headers, header::AUTHORIZATION.as_str()),
        signature: header_str(headers, SIGNATURE_HEADER),
        timestamp: header_str(headers, TIMESTAMP_HEADER),
        body,
    };
    let now = unix_now();
    match auth::check(&rx.creds, &presented, now)? {
        Admitted::Token => Ok(()),
        Admitted::Signature { mac, timestamp } => rx
            .replays
            .first_use(mac, timestamp, now)
            .map_err(|refusal| match refusal {
                Refusal::Replayed => AuthError::Replayed,
                Refusal::Full => {
                    tracing::error!("too many signed webhooks within one signature window to tell replays apart; refusing new ones until older ones expire");
                    AuthError::Replayed
                }
            }),
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

async fn alerts(State(rx): State<Arc<Receiver>>, headers: HeaderMap, body: Body) -> Response {
    let body = match body_within(&rx, body).await {
        Ok(b) => b,
        Err(refusal) => {
            rx.metrics.webhook("bad_request");
            return refusal;
        }
    };
    if let Err(e) = authenticate(&rx, &headers, &body) {
        rx.metrics.webhook("unauthorized");
        tracing::warn!("webhook refused: {e}");
        return refusal(
            StatusCode::UNAUTHORIZED,
            "unauthorized: send Authorization: Bearer <token>, or X-Recover-Timestamp: <unix seconds> and X-Recover-Signature: sha256=<hmac of timestamp.body>",
            None,
        );
    }
    let checked = match alert::check(&body) {
        Ok(c) => c,
        Err(e) => {
            rx.metrics.webhook("bad_request");
            let text = e.to_string();
            tracing::warn!(
                "webhook payload refused: {}",
                super::log_lines::clean(&text)
            );
            return refusal(StatusCode::BAD_REQUEST, e.to_string(), Some(&e.field));
        }
    };
    rx.metrics.webhook("accepted");
    // A failed run's limit is judged on the gate as it is now, not as it was left.
    rx.refresh_standing().await;
    decide(&rx, &body, &checked)
}

/// Decide on each alert as it is read, writing its decision into the answer at once,
/// so neither the alerts nor the decisions are ever all held ([`Answer`]).
fn decide(rx: &Arc<Receiver>, body: &[u8], checked: &alert::Checked) -> Response {
    let written = (|| {
        let mut answer = Answer::new(rx.mode, &checked.group_key)?;
        let mut written = Ok(());
        let read = alert::each_alert(body, |a| {
            let d = rx.handle(a);
            if written.is_ok() {
                written = answer.push(&d);
            }
        });
        written?;
        if let Err(e) = read {
            // The body passed `check`: reading it again cannot fail.
            tracing::error!("webhook payload read twice differently: {e}");
        }
        answer.finish()
    })();
    match written {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("writing the answer: {e}"),
            None,
        ),
    }
}

async fn runs(State(rx): State<Arc<Receiver>>) -> Response {
    let st = rx.state();
    let list: Vec<_> = st.runs_newest_first().into_iter().cloned().collect();
    Json(json!({ "runs": list })).into_response()
}

async fn run(State(rx): State<Arc<Receiver>>, Path(id): Path<String>) -> Response {
    let rec = rx.state().runs.get(&id).cloned();
    let Some(rec) = rec else {
        return refusal(StatusCode::NOT_FOUND, format!("no run {id}"), None);
    };
    // The journal is JSONL; lines that do not parse (a torn last line) are kept as text.
    let journal: Option<Vec<serde_json::Value>> = match &rec.journal {
        Some(p) => tokio::fs::read_to_string(p).await.ok().map(|text| {
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!(l)))
                .collect()
        }),
        None => None,
    };
    Json(json!({ "run": rec, "journal": journal })).into_response()
}

async fn decisions(State(rx): State<Arc<Receiver>>) -> Response {
    let list: Vec<_> = rx.state().decisions.iter().cloned().collect();
    Json(json!({ "decisions": list })).into_response()
}

async fn targets(State(rx): State<Arc<Receiver>>) -> Response {
    Json(json!({ "mode": rx.mode, "targets": rx.targets() })).into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    target: String,
    #[serde(default)]
    budget: bool,
}

async fn reset(State(rx): State<Arc<Receiver>>, headers: HeaderMap, body: Body) -> Response {
    let Some(expected) = &rx.admin_token else {
        return refusal(
            StatusCode::FORBIDDEN,
            "the admin API is disabled: set auth.admin_token in serve.yaml",
            None,
        );
    };
    let body = match body_within(&rx, body).await {
        Ok(b) => b,
        Err(refusal) => return refusal,
    };
    let admin = auth::Credentials {
        bearer_token: Some(expected.clone()),
        hmac_secret: None,
    };
    let presented = Presented {
        authorization: header_str(&headers, header::AUTHORIZATION.as_str()),
        ..Presented::default()
    };
    if auth::check(&admin, &presented, unix_now()).is_err() {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "unauthorized: the admin API takes the admin token",
            None,
        );
    }
    let req: ResetBody = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                format!("body: {e}; expected {{\"target\": \"local:demo\", \"budget\": false}}"),
                Some("body"),
            )
        }
    };
    match rx.reset(&req.target, req.budget) {
        Some(status) => Json(json!({ "reset": status })).into_response(),
        None => refusal(
            StatusCode::NOT_FOUND,
            format!("unknown target {}", req.target),
            Some("target"),
        ),
    }
}

async fn metrics(State(rx): State<Arc<Receiver>>, headers: HeaderMap) -> Response {
    crate::util::text_format::respond(&headers, &rx.encode_metrics())
}
