//! One shape for every refusal an HTTP server of `recover` answers (`recover serve`, the
//! gate's admin listener): `{"error": "what was wrong", "field": "which field" | null}`,
//! and every one of them counted. A client (or a person with curl at 3 am) then reads
//! every 4xx and 5xx the same way, whether a handler refused the request, a body cap did,
//! or no route matched; and an alert can be raised on refusals.
//!
//! Handlers answer with [`refusal`]; [`shaped_and_counted`] wraps the whole router, so the
//! answers axum makes by itself (no such route, wrong method, a path it cannot parse)
//! get the same shape, and every refusal goes to the caller's counter, labelled by the
//! route template (never the raw path, which a client chooses).

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use std::sync::Arc;

/// The route label of a request that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// A refusal: `status` with `{"error": message, "field": field}`.
pub fn refusal(status: StatusCode, message: impl Into<String>, field: Option<&str>) -> Response {
    let body = serde_json::json!({ "error": message.into(), "field": field });
    let mut r = (status, Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// Counts one refusal: the route template (or [`UNMATCHED`]) and the status.
pub type CountRefusal = Arc<dyn Fn(&str, StatusCode) + Send + Sync>;

/// `router` with every 4xx/5xx answer counted through `count` and, when a handler did not
/// already answer in the shape, rewritten into it.
pub fn shaped_and_counted(router: Router, count: CountRefusal) -> Router {
    router.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let count = count.clone();
            async move {
                let route = req
                    .extensions()
                    .get::<MatchedPath>()
                    .map(|m| m.as_str().to_string());
                let what = format!("{} {}", req.method(), req.uri().path());
                let resp = next.run(req).await;
                let status = resp.status();
                if !(status.is_client_error() || status.is_server_error()) {
                    return resp;
                }
                count(route.as_deref().unwrap_or(UNMATCHED), status);
                if is_json(&resp) {
                    return resp;
                }
                reshape(resp, route.is_none(), &what).await
            }
        },
    ))
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// A refusal axum made by itself, in the shape: its text kept as the message when it
/// has one (a path it could not parse says why).
async fn reshape(resp: Response, unmatched: bool, what: &str) -> Response {
    let status = resp.status();
    let text = match axum::body::to_bytes(resp.into_body(), 64 * 1024).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let message = if status == StatusCode::NOT_FOUND && unmatched {
        format!("no such route: {what}")
    } else if status == StatusCode::METHOD_NOT_ALLOWED {
        format!("method not allowed: {what}")
    } else if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("refused")
            .to_lowercase()
    } else {
        text
    };
    refusal(status, message, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use std::sync::Mutex;

    /// `method path` against `app` served on loopback: the status and the JSON body.
    async fn call(app: Router, method: &str, path: &str) -> (StatusCode, serde_json::Value) {
        crate::util::http::ensure_tls_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(crate::util::http_server::serve(
            listener,
            app,
            Default::default(),
            stop.clone().cancelled_owned(),
        ));
        let resp = reqwest::Client::new()
            .request(method.parse().unwrap(), format!("http://{addr}{path}"))
            .send()
            .await
            .unwrap();
        let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
        let body = resp.json().await.unwrap_or_default();
        stop.cancel();
        let _ = server.await;
        (status, body)
    }

    #[tokio::test]
    async fn every_refusal_has_the_shape_and_is_counted() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let count: CountRefusal = Arc::new(move |route, status| {
            s.lock().unwrap().push((route.to_string(), status.as_u16()))
        });
        let app = Router::new().route("/ok", get(|| async { "ok" })).route(
            "/refuse",
            get(|| async { refusal(StatusCode::BAD_REQUEST, "bad x", Some("x")) }),
        );
        let app = shaped_and_counted(app, count);
        assert_eq!(call(app.clone(), "GET", "/ok").await.0, StatusCode::OK);
        let (st, body) = call(app.clone(), "GET", "/refuse").await;
        assert_eq!(st, StatusCode::BAD_REQUEST);
        assert_eq!(body, serde_json::json!({"error": "bad x", "field": "x"}));
        let (st, body) = call(app.clone(), "GET", "/nowhere").await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        assert_eq!(body["error"], "no such route: GET /nowhere");
        assert!(body["field"].is_null());
        let (st, body) = call(app.clone(), "POST", "/ok").await;
        assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(body["error"], "method not allowed: POST /ok");
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("/refuse".to_string(), 400),
                (UNMATCHED.to_string(), 404),
                ("/ok".to_string(), 405)
            ]
        );
    }
}
