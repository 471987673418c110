//! The engine on the Kubernetes platform, against the fake API server: a controller killed
//! in the middle of a batched restart (its whole runtime dropped, as a SIGKILL would, its
//! local journal lost with its pod) is resumed from the journal ConfigMap alone: finished
//! steps are skipped and no pod is evicted twice. And a run whose lease is taken stops at
//! once, its on_failure steps included (another controller may be acting).

use crate::kube_platform::options;
use crate::support::engine::fixed_inputs;
use crate::support::fixture_path;
use crate::support::kube::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use recover::engine::{self, Outcome, RunRequest, StepOutcome};
use recover::metrics::scrape::ScrapeSource;
use recover::platform::kube::KubePlatform;
use recover::platform::Platform;
use recover::platform::PlatformFetch;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A run of the kube-restart runbook. The lease is long enough that a loaded machine's
/// late renewal does not count as a loss (the run would stop, as it should).
fn request(
    c: &FakeCluster,
    journal_dir: &std::path::Path,
    lease: Duration,
) -> (Arc<dyn Platform>, RunRequest) {
    let mut o = options("controller");
    o.lease_duration = lease;
    let platform: Arc<dyn Platform> = Arc::new(KubePlatform::new(c.client.clone(), o));
    let metrics = Arc::new(ScrapeSource::new(Arc::new(PlatformFetch {
        platform: platform.clone(),
    })));
    let runbook = recover::runbook::find(&fixture_path("runbooks/kube-restart.yaml"), &[]).unwrap();
    let options = fixed_inputs(journal_dir);
    (
        platform.clone(),
        RunRequest {
            runbook,
            platform,
            metrics,
            options,
        },
    )
}

/// Pods answering /metrics and /admin/drain, counting drains.
pub async fn pods_answer(c: &FakeCluster, stop: &CancellationToken) -> Arc<Mutex<u32>> {
    let drains = Arc::new(Mutex::new(0));
    let page = Arc::new(Mutex::new(
        "recover_demo_service_queue_depth 0\n".to_string(),
    ));
    let addr = serve_pod(page, drains.clone(), stop.clone()).await;
    c.set_default_backend(Backend::Serve(addr));
    drains
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_restart_resumes_from_the_configmap_alone() {
    let c = FakeCluster::start(3, Duration::from_millis(600)).await;
    let stop = CancellationToken::new();
    let drains = pods_answer(&c, &stop).await;
    let originals: BTreeSet<String> = c
        .target_pods()
        .await
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();

    // The first controller, on a runtime of its own, killed after its second eviction.
    let first_dir = tempfile::tempdir().unwrap();
    let (_, req) = request(&c, first_dir.path(), Duration::from_secs(10));
    let engine_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    engine_rt.spawn(async move {
        let _ = engine::run(req, CancellationToken::new()).await;
    });
    let killed_mid_restart = crate::support::eventually(Duration::from_secs(60), || async {
        c.evictions().len() >= 2
    })
    .await;
    assert!(
        killed_mid_restart,
        "the run never got to its second eviction"
    );
    engine_rt.shutdown_background(); // SIGKILL: no release, no last words
    drop(first_dir); // the pod's disk is gone with it
    assert_eq!(
        *drains.lock().unwrap(),
        3,
        "the drain step finished before the kill"
    );
    let evicted_before = c.evictions().len();

    // A new controller finds the run in the ConfigMap and resumes it from there.
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let data = cms
        .get("recover-journal")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    let run_id = data
        .keys()
        .find_map(|k| k.strip_suffix(".jsonl"))
        .expect("the journal is mirrored")
        .to_string();
    let second_dir = tempfile::tempdir().unwrap();
    let (platform, req) = request(&c, second_dir.path(), Duration::from_secs(10));
    let path = engine::mirror::fetch_to(platform.as_ref(), &run_id, second_dir.path())
        .await
        .unwrap()
        .expect("fetched from the ConfigMap");
    let report = engine::resume(
        &path,
        req.platform,
        req.metrics,
        req.options,
        CancellationToken::new(),
    )
    .await
    .expect("resumed");
    assert_eq!(
        report.outcome,
        Outcome::Succeeded,
        "{}",
        report.summary_table()
    );
    let outcomes: Vec<(&str, StepOutcome)> = report
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("drain-backlog", StepOutcome::AlreadyDone),
            ("batched-restart", StepOutcome::Succeeded),
            ("handback", StepOutcome::Succeeded)
        ]
    );
    assert_eq!(
        *drains.lock().unwrap(),
        3,
        "the finished drain was not sent again"
    );
    let uids = c.evicted_uids();
    let unique: BTreeSet<&String> = uids.iter().collect();
    assert_eq!(
        (uids.len(), unique.len()),
        (3, 3),
        "no pod evicted twice: {:?}",
        c.evictions()
    );
    let evicted: BTreeSet<String> = c.evictions().into_iter().collect();
    assert_eq!(evicted, originals, "every original pod, and only those");
    println!(
        "evicted before the kill: {evicted_before}, after the resume: {}",
        3 - evicted_before
    );
    // The mirror has the finished run and its summary.
    let data = cms.get("recover-journal").await.unwrap().data.unwrap();
    assert!(
        data[&format!("{run_id}.jsonl")].contains("run_finished"),
        "{:?}",
        data.keys()
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lease_is_taken_stops_without_running_its_abort_path() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.set_replacements(Replacement::StaysPending); // the restart waits, holding the lease
    let stop = CancellationToken::new();
    pods_answer(&c, &stop).await;
    let dir = tempfile::tempdir().unwrap();
    let (_, req) = request(&c, dir.path(), Duration::from_secs(3));
    let run = tokio::spawn(engine::run(req, CancellationToken::new()));
    let waiting = crate::support::eventually(Duration::from_secs(30), || async {
        !c.evictions().is_empty()
    })
    .await;
    assert!(waiting, "the run never started its restart");
    // Someone else takes the target's lease.
    let leases: Api<Lease> = Api::namespaced(c.fake.clone(), NS);
    let mut l = leases
        .get("recover-recover-demo-config-service")
        .await
        .unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some("another-controller".into());
    leases
        .replace(
            "recover-recover-demo-config-service",
            &PostParams::default(),
            &l,
        )
        .await
        .unwrap();
    let report = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the run stopped")
        .unwrap()
        .unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Aborted,
        "{}",
        report.summary_table()
    );
    let outcomes: Vec<(&str, StepOutcome)> = report
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("drain-backlog", StepOutcome::Succeeded),
            ("batched-restart", StepOutcome::Aborted),
            ("say-so", StepOutcome::Aborted)
        ]
    );
    assert!(
        report.steps[2]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("not run")),
        "{:?}",
        report.steps[2].message
    );
    assert_eq!(
        c.evictions().len(),
        1,
        "nothing evicted after the lease was lost"
    );
    stop.cancel();
}

/// `recover resume RUN_ID --target kube ...` as a process, pointed at the fake cluster.
fn resume_cmd(
    kubeconfig: &std::path::Path,
    journal_dir: &std::path::Path,
    run: &str,
) -> std::process::Output {
    crate::support::bin()
        .args([
            "resume",
            run,
            "--target",
            "kube",
            "--namespace",
            NS,
            "--deployment",
            DEPLOY,
        ])
        .arg("--journal-dir")
        .arg(journal_dir)
        .args(["--yes", "--output", "json"])
        .env("KUBECONFIG", kubeconfig)
        .env("RECOVER_KUBE_REACH", "proxy")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run recover resume")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_resume_fetches_a_journal_it_has_no_local_copy_of() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = c.kubeconfig_as(CONTROLLER, dir.path()).await;
    // A finished run, mirrored by a controller that is gone.
    let journal = [
        r#"{"seq":0,"ts":"2026-01-01T00:00:00Z","run_id":"20260101T000000Z-abcd","event":"run_started","format":2,"runbook":"kube-restart","runbook_source":"","origin":"x","target":"kube:recover-demo/config-service","target_spec":{"platform":"kube","namespace":"recover-demo","deployment":"config-service"},"pid":1}"#,
        r#"{"seq":1,"ts":"2026-01-01T00:00:01Z","run_id":"20260101T000000Z-abcd","event":"run_finished","outcome":"succeeded"}"#,
    ]
    .join("\n");
    let p = KubePlatform::new(c.client.clone(), options("gone"));
    p.mirror_journal("20260101T000000Z-abcd", &format!("{journal}\n"))
        .await
        .unwrap();
    let local = dir.path().join("runs");
    let out = tokio::task::spawn_blocking({
        let (k, l) = (kubeconfig.clone(), local.clone());
        move || resume_cmd(&k, &l, "20260101T000000Z-abcd")
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fetched the journal of run 20260101T000000Z-abcd"),
        "{err}"
    );
    assert!(
        local.join("20260101T000000Z-abcd.jsonl").is_file(),
        "written to --journal-dir"
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "already finished: refused, {err}"
    );
    assert!(err.contains("already finished"), "{err}");
    // A run that is nowhere: bad input, saying where it looked.
    let out = tokio::task::spawn_blocking(move || resume_cmd(&kubeconfig, &local, "no-such-run"))
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("nor in the journal mirror of kube:recover-demo/config-service"),
        "{err}"
    );
}
