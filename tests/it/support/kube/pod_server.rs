//! A local HTTP server standing in for a pod behind the fake pod proxy.

use axum::Router;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// A local HTTP server standing in for a pod: `/metrics` returns `metrics()`, POST
/// `/admin/drain` counts calls.
pub async fn serve_pod(
    metrics: Arc<Mutex<String>>,
    drains: Arc<Mutex<u32>>,
    stop: CancellationToken,
) -> SocketAddr {
    use axum::routing::{get, post};
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move { m.lock().unwrap().clone() }
            }),
        )
        .route(
            "/admin/drain",
            post(move || {
                let d = drains.clone();
                async move {
                    let mut n = d.lock().unwrap();
                    *n += 1;
                    axum::Json(serde_json::json!({"drained": 7 * *n}))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    addr
}
