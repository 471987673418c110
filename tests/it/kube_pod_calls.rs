//! Calls to pods through the API server's pod proxy, which the API server never times out:
//! each has its own deadline, a scrape of a hung pod is missing data for that pod only
//! (the others are read at the same time), and a drain is never sent twice; a drain's query
//! (`?keep=answerable`) reaches the pod unchanged, through the proxy and to the pod's IP.

use crate::kube_platform::options;
use crate::support::kube::*;
use recover::metrics::scrape::ScrapeSource;
use recover::metrics::source::MetricSource;
use recover::platform::kube::proxy::Deadlines;
use recover::platform::kube::KubePlatform;
use recover::platform::PlatformFetch;
use recover::platform::{AdminOp, Platform, PlatformError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_pod_is_cut_at_its_deadline_and_missing_from_the_scrape_alone() {
    let c = FakeCluster::start(3, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    let page = Arc::new(Mutex::new(
        "# TYPE recover_demo_service_queue_depth gauge\nrecover_demo_service_queue_depth 4\n"
            .to_string(),
    ));
    let addr = serve_pod(page, Arc::default(), stop.clone()).await;
    let names: Vec<String> = c
        .target_pods()
        .await
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    c.set_backend(&names[0], addr);
    c.set_backend(&names[1], addr);
    c.set_backend_to(&names[2], Backend::Hang);
    let mut o = options("alice");
    o.clients_selector = None;
    o.pod_deadlines = Deadlines {
        get: Duration::from_millis(500),
        post: Duration::from_millis(500),
    };
    let p = Arc::new(KubePlatform::new(c.client.clone(), o));
    let eps = p.scrape_endpoints().await.unwrap();
    let hung = eps.iter().find(|e| e.instance == names[2]).unwrap().clone();
    match p.scrape(&hung).await {
        Err(PlatformError::Timeout { what, .. }) => assert!(what.contains(&names[2]), "{what}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // One snapshot over every target: the hung pod costs its deadline, not the sum.
    let source = ScrapeSource::new(Arc::new(PlatformFetch {
        platform: p.clone(),
    }));
    let signals: std::collections::BTreeMap<String, recover::metrics::signal::SignalSpec> =
        serde_yaml::from_str("queue: { scrape: 'sum(recover_demo_service_queue_depth@service)' }")
            .unwrap();
    let snap = tokio::time::timeout(Duration::from_secs(5), source.snapshot(&signals))
        .await
        .expect("a hung target does not hang the snapshot")
        .unwrap();
    println!("snapshot with a hung target: {snap:?}");
    // Missing data for that target (a sum over a role with a target down is not a
    // number), naming it and it alone; the snapshot itself came back.
    match snap.readings.get("queue") {
        Some(recover::metrics::signal::Reading::Missing { reason }) => {
            assert!(
                reason.contains(&names[2]) && reason.contains("timed out"),
                "{reason}"
            );
            assert!(
                !reason.contains(&names[0]) && !reason.contains(&names[1]),
                "{reason}"
            );
        }
        other => panic!("expected the reading to be missing for the hung pod, got {other:?}"),
    }
    // Once the pod answers again, the same source reads all three.
    c.set_backend(&names[2], addr);
    let snap = source.snapshot(&signals).await.unwrap();
    assert_eq!(snap.get("queue"), Some(12.0));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_is_sent_once_whatever_happens_to_it() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let names: Vec<String> = c
        .target_pods()
        .await
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    c.set_backend_to(&names[0], Backend::Hang);
    c.set_backend_to(&names[1], Backend::Refuse);
    let mut o = options("alice");
    o.pod_deadlines = Deadlines {
        get: Duration::from_millis(500),
        post: Duration::from_millis(500),
    };
    let p = KubePlatform::new(c.client.clone(), o);
    let started = Instant::now();
    assert!(matches!(
        p.admin(
            &names[0],
            AdminOp::Drain(recover::platform::DrainKeep::None)
        )
        .await,
        Err(PlatformError::Timeout { .. })
    ));
    let e = p
        .admin(
            &names[1],
            AdminOp::Drain(recover::platform::DrainKeep::None),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("connection refused"), "{e}");
    println!("two failed drains took {:?}", started.elapsed());
    for n in &names {
        let posts = c
            .recorded()
            .iter()
            .filter(|r| {
                r.method == "POST" && r.path.contains(n.as_str()) && r.path.contains("/proxy")
            })
            .count();
        assert_eq!(posts, 1, "{n}: POST /admin/drain sent {posts} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_cluster_pods_are_reached_by_ip_without_the_pod_proxy() {
    use kube::api::{Api, PostParams};
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    let drains = Arc::new(Mutex::new(0));
    let page = Arc::new(Mutex::new(
        "recover_demo_service_queue_depth 3\n".to_string(),
    ));
    let addr = serve_pod(page, drains.clone(), stop.clone()).await;
    // The pod's IP is this host's loopback, where its server listens.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.fake.clone(), NS);
    let mut p = c.target_pods().await.remove(0);
    let name = p.metadata.name.clone().unwrap();
    p.status.as_mut().unwrap().pod_ip = Some("127.0.0.1".into());
    pods.replace_status(&name, &PostParams::default(), &p)
        .await
        .unwrap();
    let mut o = options("in-cluster");
    o.reach = recover::platform::kube::Reach::PodIp;
    o.service_port = addr.port();
    o.clients_selector = None;
    let platform = KubePlatform::new(c.client.clone(), o);
    assert_eq!(
        platform
            .admin(&name, AdminOp::Drain(recover::platform::DrainKeep::None))
            .await
            .unwrap()
            .drained(),
        Some(7)
    );
    let ep = platform
        .scrape_endpoints()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.role == "service")
        .unwrap();
    assert_eq!(
        ep.locator,
        format!("http://127.0.0.1:{}/metrics", addr.port())
    );
    assert!(platform
        .scrape(&ep)
        .await
        .unwrap()
        .contains("queue_depth 3"));
    assert_eq!(*drains.lock().unwrap(), 1);
    assert!(
        !c.recorded().iter().any(|r| r.path.contains("/proxy")),
        "no pod proxy call: the Role's pods/proxy rule is not needed in the cluster"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_keeps_reaches_the_pod_with_its_query_through_the_proxy_and_direct() {
    use kube::api::{Api, PostParams};
    use recover::platform::admin::{DrainCounts, Known};
    use recover::platform::{AdminReply, DrainKeep};
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    // The real demo service behind the pod: only a drain that arrives with its query
    // answers what it kept (a service that saw a bare /admin/drain says nothing of it).
    let addr = crate::support::ports::loopback_addr();
    let args = ["demo", "config-service", "--listen", &addr.to_string()];
    let _svc = crate::support::demo::spawn("config-service", &args.map(String::from));
    crate::support::demo::wait_http_ok(&format!("http://{addr}/readyz"), Duration::from_secs(20))
        .await;
    let mut pod = c.target_pods().await.remove(0);
    let name = pod.metadata.name.clone().unwrap();
    c.set_backend(&name, addr);
    let keep = AdminOp::Drain(DrainKeep::Answerable);
    let answered = AdminReply::Drained(DrainCounts {
        dropped: Known::Value(0),
        kept: Known::Value(0),
    });
    let mut o = options("operator");
    o.clients_selector = None;
    o.service_port = addr.port();

    let proxied = KubePlatform::new(c.client.clone(), o.clone());
    assert_eq!(proxied.admin(&name, keep).await.unwrap(), answered);
    let posts: Vec<_> = c
        .recorded()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.contains("/proxy"))
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    let port = addr.port();
    assert_eq!(
        (posts[0].path.as_str(), posts[0].query.as_str()),
        (
            format!("/api/v1/namespaces/{NS}/pods/{name}:{port}/proxy/admin/drain").as_str(),
            "keep=answerable"
        )
    );
    // The same permission as any admin call: pods/proxy create.
    assert!(!posts[0].denied && !posts[0].rules.is_empty(), "{posts:?}");

    // In the cluster, straight to the pod's IP (this host's loopback).
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.fake.clone(), NS);
    pod.status.as_mut().unwrap().pod_ip = Some("127.0.0.1".into());
    pods.replace_status(&name, &PostParams::default(), &pod)
        .await
        .unwrap();
    o.reach = recover::platform::kube::Reach::PodIp;
    let direct = KubePlatform::new(c.client.clone(), o);
    assert_eq!(direct.admin(&name, keep).await.unwrap(), answered);
    assert_eq!(
        c.recorded()
            .iter()
            .filter(|r| r.path.contains("/proxy"))
            .count(),
        1,
        "the second drain went to the pod's IP"
    );
}
