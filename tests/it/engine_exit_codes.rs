//! A run that cannot start changes nothing and says so with exit 3, so a hook can tell a
//! metrics outage (or a cancel before the first action) from a recovery that failed
//! (exit 1). Real HTTP on 127.0.0.1: a Prometheus URL nothing listens on.

use recover::engine::{self, EngineError, RunOptions, RunRequest};
use recover::exit::Exit;
use recover::metrics::promql::PromqlSource;
use recover::metrics::scrape::ScrapeSource;
use recover::platform::local::inventory::{GateSpec, Inventory};
use recover::platform::local::LocalPlatform;
use recover::platform::{Platform, PlatformFetch};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn platform(dir: &Path, gate: &str) -> Arc<dyn Platform> {
    Arc::new(LocalPlatform::new(Inventory {
        name: "outage".into(),
        state_dir: Some(dir.join("state")),
        replicas: vec![],
        gates: vec![GateSpec {
            admin_url: format!("http://{gate}"),
            token_file: dir.join("gate.token"),
            metrics_url: None,
        }],
        clients: vec![],
        stop_grace: Duration::from_secs(1),
    }))
}

fn options(dir: &Path) -> RunOptions {
    RunOptions {
        journal_dir: dir.join("journal"),
        ..RunOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prometheus_outage_exits_3_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let down = crate::support::ports::loopback_addr();
    let platform = platform(dir.path(), &down.to_string());
    let metrics =
        Arc::new(PromqlSource::new(&format!("http://{down}"), Duration::from_secs(1)).unwrap());
    let runbook = recover::runbook::find("stuck-overload", &[]).unwrap();
    let err = engine::run(
        RunRequest {
            runbook,
            platform,
            metrics,
            options: options(dir.path()),
        },
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, EngineError::Metrics(_)), "{err}");
    assert_eq!(err.exit(), Exit::Refused, "{err}");
    assert!(
        !dir.path().join("journal").exists(),
        "nothing was recorded: the run never started"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_before_the_first_action_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let down = crate::support::ports::loopback_addr();
    let platform = platform(dir.path(), &down.to_string());
    let metrics = Arc::new(ScrapeSource::new(Arc::new(PlatformFetch {
        platform: platform.clone(),
    })));
    let runbook = recover::runbook::find("stuck-overload", &[]).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = engine::run(
        RunRequest {
            runbook,
            platform,
            metrics,
            options: options(dir.path()),
        },
        cancel,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, EngineError::Cancelled), "{err}");
    assert_eq!(err.exit(), Exit::Refused, "{err}");
}
