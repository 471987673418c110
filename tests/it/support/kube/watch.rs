//! Watches, which kube-fake-client does not serve: the store is polled every 50 ms and the
//! differences streamed as watch events, newline-delimited JSON as the API server sends
//! them, until the request's `timeoutSeconds` runs out. A watch starts by announcing every
//! object newer than its resourceVersion (the fake's lists all carry version 1).

use super::{Shared, NS};
use axum::body::Body as AxumBody;
use axum::response::Response;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn list_uri(path: &str, query: &str) -> (String, u64, u64) {
    let mut keep = Vec::new();
    let mut since = 0;
    let mut timeout = 290;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "watch" | "allowWatchBookmarks" | "sendInitialEvents" | "resourceVersionMatch" => {}
            "resourceVersion" => since = v.parse().unwrap_or(0),
            "timeoutSeconds" => timeout = v.parse().unwrap_or(290),
            _ => keep.push(kv.to_string()),
        }
    }
    let q = if keep.is_empty() {
        String::new()
    } else {
        format!("?{}", keep.join("&"))
    };
    (format!("{path}{q}"), since, timeout)
}

async fn list(s: &Shared, uri: &str) -> Option<BTreeMap<String, serde_json::Value>> {
    let req = http::Request::get(uri).body(Vec::new()).ok()?;
    let bytes = s.fake.request_text(req).await.ok()?;
    let v: serde_json::Value = serde_json::from_str(&bytes).ok()?;
    Some(
        v["items"]
            .as_array()?
            .iter()
            .map(|o| {
                (
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    o.clone(),
                )
            })
            .collect(),
    )
}

fn rv(o: &serde_json::Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn line(kind: &str, o: &serde_json::Value) -> Result<bytes::Bytes, std::io::Error> {
    let mut s = serde_json::json!({"type": kind, "object": o}).to_string();
    s.push('\n');
    Ok(bytes::Bytes::from(s))
}

pub async fn watch(s: Arc<Shared>, path: &str, query: &str) -> Response {
    let (uri, since, timeout) = list_uri(path, query);
    let _ = NS;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(64);
    tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(timeout);
        let mut known: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        let mut first = true;
        while Instant::now() < deadline && !s.stop.is_cancelled() {
            if let Some(now) = list(&s, &uri).await {
                for (name, o) in &now {
                    let changed = match known.get(name) {
                        None => !first || rv(o) > since,
                        Some(old) => rv(old) != rv(o),
                    };
                    if changed {
                        let kind = if known.contains_key(name) {
                            "MODIFIED"
                        } else {
                            "ADDED"
                        };
                        if tx.send(line(kind, o)).await.is_err() {
                            return;
                        }
                    }
                }
                for (name, o) in &known {
                    if !now.contains_key(name) && tx.send(line("DELETED", o)).await.is_err() {
                        return;
                    }
                }
                known = now;
                first = false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(AxumBody::from_stream(stream))
        .expect("response")
}
