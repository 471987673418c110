//! Every component that serves `/metrics`, started for real from the binary: the demo
//! config service, the gate (its admin port), the demo workers polling through the gate,
//! and `recover serve`. The exposition and dashboard tests read what they export.

use super::demo::{free_addr, start_workers, wait_http_ok, Gate, Service};
use super::serve::Serve;
use recover::util::child::ChildGuard;
use std::time::Duration;

/// The `Accept` header Prometheus 2.42 sends when it scrapes.
pub const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The four components, running.
pub struct Components {
    /// (job name, /metrics URL)
    pub endpoints: Vec<(&'static str, String)>,
    _service: Service,
    _gate: Gate,
    _workers: ChildGuard,
    _serve: Serve,
    _dir: tempfile::TempDir,
}

async fn start_serve(dir: &std::path::Path) -> Serve {
    std::fs::write(dir.join("token"), "exposition-test-token").unwrap();
    let cfg = format!(
        "apiVersion: recover/v1\nkind: ServeConfig\nauth:\n  bearer_token: {{ file: {d}/token }}\n\
         state_file: {d}/state.json\njournal_dir: {d}/journal\nroutes:\n  - name: demo\n    \
         match: {{ alertname: RecoverStuckOverload }}\n    runbook: stuck-overload\n    \
         target: {{ platform: local, name: demo, inventory: {d}/inventory.yaml }}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("serve.yaml"), cfg).unwrap();
    super::serve::start(&dir.join("serve.yaml"), None).await
}

pub async fn start_components() -> Components {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(free_addr(), "0s");
    service.wait_ready(Duration::from_secs(20)).await;
    let gate = Gate::start(service.addr).await;
    let workers_addr = free_addr();
    let workers = start_workers(&format!("http://{}", gate.addr), workers_addr);
    wait_http_ok(
        &format!("http://{workers_addr}/metrics"),
        Duration::from_secs(20),
    )
    .await;
    let serve = start_serve(dir.path()).await;
    let serve_url = format!("{}/metrics", serve.base);
    Components {
        endpoints: vec![
            ("service", format!("http://{}/metrics", service.addr)),
            ("gate", format!("http://{}/metrics", gate.admin)),
            ("workers", format!("http://{workers_addr}/metrics")),
            ("serve", serve_url),
        ],
        _service: service,
        _gate: gate,
        _workers: workers,
        _serve: serve,
        _dir: dir,
    }
}

impl Components {
    /// Every metric name the components export (sample names of their text 0.0.4 pages:
    /// `_total`, `_bucket`, `_sum`, `_count` included).
    pub async fn exported_names(&self) -> std::collections::BTreeSet<String> {
        let http = super::serve::Http::default();
        let mut names = std::collections::BTreeSet::new();
        for (_, url) in &self.endpoints {
            let page = http.send("GET", url, &[], "").await.unwrap().body;
            for line in page
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
            {
                let end = line.find(['{', ' ']).unwrap_or(line.len());
                names.insert(line[..end].to_string());
            }
        }
        names
    }
}
