//! Real gates in the fake cluster: each runs in this process as `recover gate` would in a
//! pod (the ConfigMap limit source and the EndpointSlice peer source, with the gate's own
//! service account, so its Role is enforced), its admin port standing behind its pod for
//! the pod proxy.

use super::{FakeCluster, GATE, GATE_SA, NS};
use crate::support::gate::TOKEN;
use recover::gate::limit_source::LimitSource;
use recover::gate::{BoundGate, GateConfig};
use recover::platform::kube::peers::EndpointSlicePeers;
use recover::platform::kube::ConfigMapLimitSource;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub struct RealGate {
    pub pod: String,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    pub stop: CancellationToken,
}

impl Drop for RealGate {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Start a gate for pod `pod` in front of `upstream` (`http://host:port`).
pub async fn real_gate(c: &FakeCluster, pod: &str, upstream: &str) -> RealGate {
    real_gate_with(c, pod, upstream, None).await
}

/// The same, keeping its last limit in `state` (the pod's emptyDir in the manifests).
pub async fn real_gate_with(
    c: &FakeCluster,
    pod: &str,
    upstream: &str,
    state: Option<&std::path::Path>,
) -> RealGate {
    let mut cfg = GateConfig::loopback(vec![upstream.to_string()]);
    cfg.admin_token = Some(TOKEN.to_string());
    cfg.admin_writes = false;
    cfg.state_file = state.map(std::path::Path::to_path_buf);
    let client = c.client_as(GATE_SA);
    let bound = BoundGate::bind(cfg)
        .await
        .expect("gate binds")
        .with_peer_source(Box::new(
            EndpointSlicePeers::new(client.clone(), NS, GATE, pod)
                .with_backstop(Duration::from_secs(5)),
        ));
    let (proxy, admin) = (bound.proxy_addr(), bound.admin_addr());
    let source: Box<dyn LimitSource> = Box::new(
        ConfigMapLimitSource::new(client, NS, "recover-gate-limit")
            .with_backstop(Duration::from_secs(5)),
    );
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move { bound.run(vec![source], s).await });
    c.set_backend(pod, admin);
    RealGate {
        pod: pod.to_string(),
        proxy,
        admin,
        stop,
    }
}
