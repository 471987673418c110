//! The demo config service's `/admin/*` behind its token: the gate forwards every path,
//! so before, any client of the demo could drain the service's queue through the gate.
//! With `--admin-token-file` a request without the token is refused (through the gate and
//! directly), the local platform sends the token its inventory names, and a service
//! started with a weak token refuses to start.

use crate::support::demo::spawn;
use crate::support::gate;
use crate::support::loopback_http::Http;
use recover::gate::config::GateConfig;
use recover::platform::local::inventory::Inventory;
use recover::platform::local::LocalPlatform;
use recover::platform::{AdminOp, Platform};
use recover::util::net::wait_http_ok;
use std::time::Duration;

const SERVICE_TOKEN: &str = "service-admin-token-0123456789";

fn inventory(dir: &std::path::Path, service: std::net::SocketAddr, token: bool) -> Inventory {
    let token_line = if token {
        "    admin_token_file: service.token\n"
    } else {
        ""
    };
    let text = format!(
        "name: auth\nreplicas:\n  - name: replica-0\n    command: [\"true\"]\n    admin_url: http://{service}\n{token_line}    metrics_url: http://{service}/metrics\n    readiness_url: http://{service}/readyz\ngate:\n  admin_url: http://127.0.0.1:1\n  token_file: gate.token\n"
    );
    let path = dir.join(if token { "with.yaml" } else { "without.yaml" });
    std::fs::write(&path, text).unwrap();
    Inventory::load(&path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_needs_the_token_through_the_gate_and_the_platform_sends_it() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("service.token");
    std::fs::write(&token_file, format!("{SERVICE_TOKEN}\n")).unwrap();
    let service = crate::support::ports::loopback_addr();
    let _svc = spawn(
        "config-service",
        &[
            "demo".into(),
            "config-service".into(),
            "--listen".into(),
            service.to_string(),
            "--admin-token-file".into(),
            token_file.display().to_string(),
        ],
    );
    wait_http_ok(&format!("http://{service}/readyz"), Duration::from_secs(20))
        .await
        .unwrap();
    let mut cfg = GateConfig::loopback(vec![format!("http://{service}")]);
    cfg.admin_token = Some("gate-admin-token-0123".into());
    let g = gate::start(cfg).await;
    let http = Http::default();

    // A client of the gate: /config passes, /admin/* is refused, whatever it claims.
    let r = http.send("GET", &g.url("/config"), &[], "").await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    for op in ["drain", "warm", "slow"] {
        let url = g.url(&format!("/admin/{op}"));
        let r = http
            .send("POST", &url, &[], r#"{"factor": 5}"#)
            .await
            .unwrap();
        assert_eq!(r.status, 401, "{op} through the gate: {}", r.body);
        let wrong = [("authorization", "Bearer not-the-token-at-all")];
        let r = http.send("POST", &url, &wrong, "{}").await.unwrap();
        assert_eq!(r.status, 401, "{op} with a wrong token: {}", r.body);
    }

    // The platform, with the token its inventory names.
    let with = LocalPlatform::new(inventory(dir.path(), service, true));
    let drained = with
        .admin(
            "replica-0",
            AdminOp::Drain(recover::platform::DrainKeep::None),
        )
        .await
        .unwrap();
    assert_eq!((drained.drained(), drained.kept()), (Some(0), Some(0)));
    let without = LocalPlatform::new(inventory(dir.path(), service, false));
    let e = without
        .admin(
            "replica-0",
            AdminOp::Drain(recover::platform::DrainKeep::None),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
}

#[test]
fn a_weak_admin_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("short.token");
    std::fs::write(&token_file, "short").unwrap();
    let service = crate::support::ports::loopback_addr();
    let out = crate::support::bin()
        .args(["demo", "config-service", "--listen", &service.to_string()])
        .arg("--admin-token-file")
        .arg(&token_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--admin-token-file") && err.contains("use at least 12"),
        "{err}"
    );
}
