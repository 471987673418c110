//! The API server's 429 from API Priority and Fairness (or the max-in-flight filter) is not
//! a Status: it is plain text, "Too many requests, please try again later.", with the wait
//! in a `Retry-After` header (k8s.io/apiserver, server/filters, `tooManyRequests`). kube-rs
//! turns a body that is not a Status into one without details, so the wait would be lost
//! and every such 429 retried on our own backoff. [`keep_retry_after`] wraps a client so
//! such an answer reaches kube-rs as the Status the server meant: code 429, reason
//! `TooManyRequests`, `details.retryAfterSeconds` from the header. Nothing else changes.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube::client::Body;

/// The Status a plain-text 429 stands for. Pure.
pub fn as_status(text: &str, retry_after: Option<u32>) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": text.trim(),
        "reason": "TooManyRequests",
        "code": 429,
        "details": { "retryAfterSeconds": retry_after.unwrap_or(0) },
    })
}

async fn rewrite(res: Response<Body>) -> Result<Response<Body>, kube::Error> {
    if res.status() != StatusCode::TOO_MANY_REQUESTS {
        return Ok(res);
    }
    let retry_after = res
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok());
    let (mut parts, body) = res.into_parts();
    let bytes: Bytes = body.collect().await?.to_bytes();
    let is_status = serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"));
    let bytes = if is_status {
        bytes.to_vec()
    } else {
        let text = String::from_utf8_lossy(&bytes);
        parts.headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        parts.headers.remove(http::header::CONTENT_LENGTH);
        as_status(&text, retry_after).to_string().into_bytes()
    };
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

/// `client`, answering a plain-text 429 as the Status it stands for.
pub fn keep_retry_after(client: kube::Client) -> kube::Client {
    let ns = client.default_namespace().to_string();
    let service = tower::service_fn(move |req: Request<Body>| {
        let client = client.clone();
        async move { rewrite(client.send(req).await?).await }
    });
    kube::Client::new(service, ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_text_429_becomes_a_status_with_its_wait() {
        let s: kube::core::Status = serde_json::from_value(as_status(
            "Too many requests, please try again later.\n",
            Some(3),
        ))
        .unwrap();
        assert_eq!(s.code, 429);
        assert_eq!(s.details.unwrap().retry_after_seconds, 3);
    }
}
