//! Detection over real history: a stuck incident recorded at 15 s and at 30 s resolution
//! (`support::incident`, the demo system's arithmetic) is backfilled into a real
//! Prometheus with promtool, and `recover detect --prometheus URL --at T` with the shipped
//! `stuck-overload` runbook, unchanged, judges it at several instants: healthy before the
//! deploy, triggered during its outage, stuck after. No waiting for real scrapes.
//!
//! Also here, against the same history: the windows the detector reports (the scrape
//! interval read from the samples' spacing, the rate window four of them, grace stretched
//! to that window and persist to 5 scrapes: one rate window and one scrape), and the refusals: a persist or a range that the
//! data cannot measure, and a role whose matchers select nothing.

use crate::support::incident::Incident;
use crate::support::prometheus::Prometheus;
use std::time::Duration;

/// `recover detect --prometheus BASE --at AT ARGS... --output json`: exit code, the
/// parsed JSON (when it printed some) and stderr.
fn detect(base: &str, at: u64, args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = crate::support::bin()
        .args(["detect", "--prometheus", base, "--at", &at.to_string()])
        .args(args)
        .args(["--output", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_runbook_judges_a_backfilled_incident_at_15s_and_30s() {
    for secs in [15u64, 30] {
        let inc = Incident::recorded(Duration::from_secs(secs));
        let prom = Prometheus::backfilled(&inc.openmetrics()).await;
        let cases = [
            (
                "two minutes before the deploy",
                inc.outage_start() - 120,
                0,
                "healthy",
            ),
            (
                "a minute into the outage",
                inc.outage_start() + 60,
                11,
                "triggered",
            ),
            (
                "ten minutes after the outage",
                inc.outage_end() + 600,
                10,
                "stuck",
            ),
        ];
        for (when, at, exit, verdict) in cases {
            let (code, v, err) = detect(&prom.base, at, &["--runbook", "stuck-overload"]);
            let ctx = format!("{secs}s data, {when}: exit {code}\n{v:#}\n{err}");
            eprintln!("{secs}s data, {when}: exit {code}: {}", v["summary"]);
            assert_eq!(v["verdict"], verdict, "{ctx}");
            assert_eq!(code, exit, "{ctx}");
            let w = &v["windows"];
            assert_eq!(w["scrape_interval_s"], secs as f64, "{ctx}");
            assert!(
                w["scrape_interval_from"]
                    .as_str()
                    .unwrap()
                    .starts_with("spacing of the samples of up{"),
                "{ctx}"
            );
            assert_eq!(w["rate_window_s"], (4 * secs) as f64, "{ctx}");
            assert_eq!(w["step_s"], secs as f64, "{ctx}");
            assert_eq!(w["persist"]["s"], (5 * secs) as f64, "{ctx}");
            assert_eq!(w["grace"]["s"], (4 * secs) as f64, "{ctx}");
        }
        // What stuck rests on: the service's own replicas are up and ready (the trigger
        // is gone), and it answers nobody in time.
        let (_, v, _) = detect(
            &prom.base,
            inc.outage_end() + 600,
            &["--runbook", "stuck-overload"],
        );
        let ev = v["evidence"].as_array().unwrap();
        let now = |s: &str| {
            ev.iter()
                .find(|e| e["signal"] == s && e["note"] == "now")
                .and_then(|e| e["value"].as_f64())
        };
        let offered = now("offered_rate").expect("offered_rate");
        assert!(
            (offered - 160.0).abs() < 8.0,
            "offered {offered} at {secs}s"
        );
        assert_eq!(now("goodput"), Some(0.0), "{v:#}");
        let summary = v["summary"].as_str().unwrap();
        assert!(summary.starts_with("stuck: failing for"), "{summary}");
        // The text a person reads, windows line included (shown with --no-capture).
        let at = (inc.outage_end() + 600).to_string();
        let out = crate::support::bin()
            .args(["detect", "--prometheus", &prom.base, "--at", &at])
            .args(["--runbook", "stuck-overload"])
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        eprintln!("{secs}s data, text output:\n{shown}");
        let mut lines = shown.lines();
        assert!(lines.next().unwrap().starts_with("stuck: "), "{shown}");
        let windows = lines.next().unwrap();
        assert!(windows.starts_with("windows at "), "{shown}");
        assert!(
            windows.contains(&format!("scrape interval {secs}s (spacing of the samples")),
            "{windows}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_the_data_cannot_measure_and_missing_roles_are_refused_by_name() {
    let inc = Incident::recorded(Duration::from_secs(30));
    let prom = Prometheus::backfilled(&inc.openmetrics()).await;
    let at = inc.outage_end() + 600;
    let refused = |args: &[&str], says: &str| {
        let (code, _, err) = detect(&prom.base, at, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: expected {says:?} in\n{err}");
    };

    // A flag replaces the runbook's time and its scrape count alike.
    refused(
        &["--runbook", "stuck-overload", "--persist", "10s"],
        "--persist = 10s cannot be measured on data scraped every 30s",
    );

    // A runbook that states its windows in time only.
    let dir = tempfile::tempdir().unwrap();
    let shipped = std::fs::read_to_string("runbooks/stuck-overload.yaml").unwrap();
    let time_only: String = shipped
        .lines()
        .filter(|l| !l.trim_start().starts_with("persist_scrapes:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = dir.path().join("time-only.yaml");
    std::fs::write(&path, time_only).unwrap();
    refused(
        &["--runbook", path.to_str().unwrap()],
        "spec.detect.persist = 10s cannot be measured on data scraped every 30s",
    );

    // A fixed range too short for the data.
    let fixed = shipped.replacen(
        "recover_demo_service_queue_depth{$service})",
        "max_over_time(recover_demo_service_queue_depth{$service}[10s]))",
        1,
    );
    assert_ne!(fixed, shipped);
    let path = dir.path().join("fixed-range.yaml");
    std::fs::write(&path, fixed).unwrap();
    refused(
        &["--runbook", path.to_str().unwrap()],
        "spec.signals.queue_depth.promql: the range [10s] spans fewer than two scrape intervals",
    );

    // A role that selects nothing is an error naming it, not zero replicas not ready.
    refused(
        &[
            "--runbook",
            "stuck-overload",
            "--role",
            r#"service=app_kubernetes_io_name="config-svc""#,
        ],
        r#"role service: no series match up{app_kubernetes_io_name="config-svc"}"#,
    );

    // The same roles, written as a site would (namespace plus name), judge the same.
    let (code, v, err) = detect(
        &prom.base,
        at,
        &[
            "--runbook",
            "stuck-overload",
            "--role",
            r#"service=namespace="shop",app_kubernetes_io_name="config-service""#,
            "--scrape-interval",
            "30s",
        ],
    );
    assert_eq!(
        (code, v["verdict"].as_str()),
        (10, Some("stuck")),
        "{v:#}\n{err}"
    );
    assert_eq!(v["windows"]["scrape_interval_from"], "--scrape-interval");
}

/// The engine and serve judge Prometheus data as `recover detect` does: the shipped
/// runbook's windows stretch to the scrape interval (grace 4 scrapes, persist 5, one
/// observation per scrape) and the window ending now comes out of the history at once,
/// so the run decides on a service stuck for ten minutes without waiting minutes of
/// scrapes. A persist the data cannot measure is refused, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_judges_15s_data_with_windows_that_follow_the_scrape_interval() {
    use recover::detect::windows::Fields;
    use recover::detect::{watch, VerdictKind, Watch};
    use recover::engine::planning::plan_run;
    use recover::metrics::promql::PromqlSource;
    use recover::metrics::source::MetricSource;
    use recover::plan::Overrides;
    use std::time::{SystemTime, UNIX_EPOCH};

    let scrape = Duration::from_secs(15);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Stuck since ten minutes ago; the record runs ten minutes past now, so "now" has data
    // whenever the test reads it.
    let mut inc = Incident::recorded(scrape);
    inc.start = (now - inc.healthy.as_secs() - inc.outage.as_secs() - 600) / 60 * 60;
    let prom = Prometheus::backfilled(&inc.openmetrics()).await;

    let rb = recover::runbook::find("stuck-overload", &[])
        .unwrap()
        .runbook;
    let src = PromqlSource::new(&prom.base, Duration::from_secs(10))
        .unwrap()
        .with_roles(rb.roles.clone());
    let resolution = src.resolution().await.unwrap();
    assert_eq!(resolution, Some(scrape));
    let at = rb.at_resolution(resolution).unwrap();
    assert_eq!(at.detect.grace, 4 * scrape);
    assert_eq!(at.detect.persist, 5 * scrape);
    assert_eq!(at.observe.interval, scrape);
    // Three passes on one scrape's data are one piece of evidence; and a readmission
    // cannot cut Prometheus' windows at its start, so it settles for one of them.
    assert!(
        at.checks.values().all(|c| c.interval >= scrape),
        "{:?}",
        at.checks
    );
    let ramp = at
        .steps
        .iter()
        .find_map(|s| match &s.action {
            recover::runbook::action::Action::GateRamp(r) => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!(ramp.settle(), 4 * scrape);
    let span = at.observe_span();
    assert!(span >= 5 * scrape + 5 * scrape, "span {span:?}");

    let asked = SystemTime::now();
    let fields = Fields::runbook();
    let w = Watch {
        signals: &at.signals,
        config: &at.detect,
        fields: &fields,
        interval: at.observe.interval,
        span: Some(span),
        at: None,
        scrape: None,
        look_back: true,
    };
    let watched = watch(&src, &w, |_| {}).await.unwrap();
    assert_eq!(watched.windows.scrape_interval_s, scrape.as_secs_f64());
    assert_eq!(watched.config.persist, 5 * scrape);
    // Out of the history: its first snapshot is a span before the call (a live
    // observation would start at the call and wait the span out).
    let first = watched.window.first().unwrap().at;
    assert!(
        first + span <= asked + at.observe.interval,
        "the window starts at {first:?}, not {span:?} before {asked:?}"
    );
    let planned = plan_run(&at, &watched.verdict, &Overrides::default(), None)
        .unwrap_or_else(|e| panic!("the engine refused 15 s data: {e}"));
    assert_eq!(planned.verdict.verdict, VerdictKind::Stuck, "{planned:#?}");

    let mut strict = rb.clone();
    strict.detect.persist_scrapes = None;
    let e = strict.at_resolution(resolution).unwrap_err().to_string();
    assert!(
        e.contains("spec.detect.persist = 10s cannot be measured on data scraped every 15s"),
        "{e}"
    );
}
