//! Shadow through the limit ConfigMap, like the limit itself: the controller writes a
//! limit in shadow, every real gate following the ConfigMap puts its share in shadow,
//! admits everything and counts what its share would refuse.

use crate::support::gate::{client, metrics, sample, upstream};
use crate::support::kube::gates::real_gate;
use crate::support::kube::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use recover::gate::limit::Limit;
use recover::platform::kube::{KubeOptions, KubePlatform, Reach, Workload};
use recover::platform::Platform;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_in_shadow_in_the_configmap_puts_every_gates_share_in_shadow() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let up = upstream(Duration::ZERO).await;
    let [g0, g1] = [0, 1].map(|i| format!("{GATE}-{GATE_HASH}-g{i}"));
    let a = real_gate(&c, &g0, &up.url()).await;
    let b = real_gate(&c, &g1, &up.url()).await;
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.reach = Reach::ApiProxy;
    o.gate_apply_timeout = Duration::from_secs(10);
    let gate = KubePlatform::new(c.client.clone(), o).gate();
    let watched = Limit {
        rate_per_s: Some(0.0),
        burst: 1,
        max_in_flight: None,
        note: Some("what would blocking do".into()),
        shadow: true,
    };
    gate.set_limit(&watched).await.expect("applied everywhere");
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let text = cms.get("recover-gate-limit").await.unwrap().data.unwrap()["limit.json"].clone();
    assert!(text.contains(r#""shadow":true"#), "{text}");
    assert_eq!(gate.get_limit().await.unwrap(), watched);
    for g in [&a, &b] {
        for _ in 0..2 {
            let r = client().get(&format!("http://{}/", g.proxy)).await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
        let m = metrics(g.admin).await;
        assert_eq!(sample(&m, "recover_gate_shadow"), Some(1.0), "{}", g.pod);
        assert_eq!(
            sample(&m, r#"recover_gate_shadow_refusals_total{reason="rate"}"#),
            Some(2.0),
            "{m}"
        );
    }

    // Enforced again through the same ConfigMap: the shares refuse.
    gate.set_limit(&Limit {
        shadow: false,
        note: Some("blocking".into()),
        ..watched
    })
    .await
    .expect("applied everywhere");
    let r = client().get(&format!("http://{}/", a.proxy)).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(
        sample(&metrics(b.admin).await, "recover_gate_shadow"),
        Some(0.0)
    );
}
