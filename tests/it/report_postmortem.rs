//! `recover report RUN_ID` on real runs: the shipped runbook run for real on the demo
//! (local platform, real processes), and a run on the fake cluster read back from its
//! mirrored journal alone. Each time the Markdown draft names every step with its time and
//! outcome, its numbers agree with the journal (both parsed), report.json agrees too, and
//! the timeline parses as XML with the series drawn. A run id that is nowhere is bad
//! input (exit 2) naming the directory looked in.

use crate::kube_platform::options;
use crate::support::demo_up::Demo;
use crate::support::engine::fixed_inputs;
use crate::support::fixture_path;
use crate::support::kube::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use recover::engine::{self, Outcome, RunRequest};
use recover::metrics::scrape::ScrapeSource;
use recover::platform::kube::KubePlatform;
use recover::platform::{Platform, PlatformFetch};
use serde_json::Value;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Well-formed XML: every element closed in order, one root. Returns the element names.
fn parse_xml(text: &str) -> Vec<String> {
    let mut stack: Vec<String> = Vec::new();
    let mut names = Vec::new();
    let mut rest = text;
    let mut roots = 0;
    while let Some(open) = rest.find('<') {
        rest = &rest[open..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = &after[after.find("-->").expect("unclosed comment") + 3..];
            continue;
        }
        let close = rest.find('>').expect("unclosed tag");
        let tag = &rest[1..close];
        rest = &rest[close + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
            continue;
        }
        let name = tag
            .split(|c: char| c.is_whitespace() || c == '/')
            .next()
            .unwrap()
            .to_string();
        assert!(!name.is_empty(), "empty tag");
        if stack.is_empty() {
            roots += 1;
        }
        names.push(name.clone());
        if !tag.ends_with('/') {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(roots, 1, "one root element");
    names
}

/// The draft, report.json and timeline of `out` against the journal `journal`.
fn check_report(out: &Path, journal: &[Value], series: &[&str]) {
    let md = std::fs::read_to_string(out.join("postmortem.md")).unwrap();
    // Every step, with its time and outcome, in the timeline table.
    let finished: Vec<&Value> = journal
        .iter()
        .filter(|l| l["event"] == "step_finished")
        .collect();
    assert!(!finished.is_empty(), "{journal:?}");
    for s in &finished {
        let (ts, step, outcome) = (
            s["ts"].as_str().unwrap(),
            s["step"].as_str().unwrap(),
            s["outcome"].as_str().unwrap(),
        );
        let row = md
            .lines()
            .find(|l| {
                l.starts_with(&format!("| {ts} |")) && l.contains(&format!("**{step}** finished"))
            })
            .unwrap_or_else(|| panic!("no row for {step} at {ts}:\n{md}"));
        assert!(row.contains(&format!("| {outcome}")), "{row}");
    }
    // The numbers agree with the journal.
    let drained: f64 = finished
        .iter()
        .filter_map(|s| s["figures"]["drained"].as_f64())
        .sum();
    let row = md
        .lines()
        .find(|l| l.starts_with("| requests drained from queues"))
        .expect("drained row");
    let cell: f64 = row.split('|').nth(2).unwrap().trim().parse().unwrap();
    assert_eq!(cell, drained, "{row}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["dropped"]["drained"].as_f64().unwrap(), drained);
    let steps = report["steps"].as_array().unwrap();
    let started: Vec<&str> = journal
        .iter()
        .filter(|l| l["event"] == "step_started")
        .map(|l| l["step"].as_str().unwrap())
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, started);
    let end = journal.last().unwrap();
    assert_eq!(end["event"], "run_finished");
    assert_eq!(report["run"]["outcome"], end["outcome"]);
    assert_eq!(report["recovered"], end["outcome"] == "succeeded");
    let t0 = journal[0]["ts"].as_str().unwrap();
    assert_eq!(report["run"]["started_at"], t0);
    // The timeline: XML, with each expected series drawn as a line.
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    let elements = parse_xml(&svg);
    assert_eq!(elements[0], "svg");
    assert!(elements.iter().any(|e| e == "polyline"), "no line drawn");
    for color in series {
        assert!(
            svg.contains(&format!(
                "<polyline fill=\"none\" opacity=\"1\" stroke=\"{color}\""
            )),
            "no line in {color}"
        );
    }
}

/// Offered, admitted, goodput: the line colours of the rates panel.
const RATES: [&str; 3] = ["#D62728", "#1F77B4", "#2CA02C"];

#[test]
fn e2e_report_of_the_shipped_runbook_run_on_the_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let runbook = Path::new(env!("CARGO_MANIFEST_DIR")).join("runbooks/stuck-overload.yaml");
    let demo = Demo::up(tmp.path());
    demo.trigger_until_stuck(&runbook, Duration::from_secs(120));
    let runs = tmp.path().join("runs");
    let run = crate::support::bin()
        .args([
            "--runbook",
            "stuck-overload",
            "--target",
            "local",
            "--inventory",
        ])
        .arg(demo.inventory())
        .arg("--journal-dir")
        .arg(&runs)
        .args(["--yes", "--output", "json"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", said(&run));
    let ran: Value = serde_json::from_slice(&run.stdout).unwrap();
    let id = ran["run_id"].as_str().unwrap();
    assert!(ran["observed"]
        .as_str()
        .unwrap()
        .ends_with(".observed.json"));
    let out = tmp.path().join("pm");
    let rep = crate::support::bin()
        .args(["report", id, "--journal-dir"])
        .arg(&runs)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(rep.status.code(), Some(0), "{}", said(&rep));
    let journal = lines(&std::fs::read_to_string(runs.join(format!("{id}.jsonl"))).unwrap());
    check_report(&out, &journal, &RATES);
    // The gate was handed back; the draft says so with the command to change it.
    let md = std::fs::read_to_string(out.join("postmortem.md")).unwrap();
    assert!(md.contains("recover gate limit"), "{md}");

    // A run id that is nowhere: bad input, naming where it looked.
    let bad = crate::support::bin()
        .args(["report", "no-such-run", "--journal-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", said(&bad));
    assert!(
        said(&bad).contains(&runs.display().to_string()),
        "{}",
        said(&bad)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_reads_a_fake_cluster_run_back_from_its_mirrored_journal() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    let _drains = crate::kube_engine::pods_answer(&c, &stop).await;
    let dir = tempfile::tempdir().unwrap();
    let platform: Arc<dyn Platform> =
        Arc::new(KubePlatform::new(c.client.clone(), options("controller")));
    let metrics = Arc::new(ScrapeSource::new(Arc::new(PlatformFetch {
        platform: platform.clone(),
    })));
    let runbook = recover::runbook::find(&fixture_path("runbooks/kube-restart.yaml"), &[]).unwrap();
    let req = RunRequest {
        runbook,
        platform,
        metrics,
        options: fixed_inputs(&dir.path().join("controller")),
    };
    let ran = engine::run(req, CancellationToken::new()).await.unwrap();
    assert_eq!(ran.outcome, Outcome::Succeeded, "{}", ran.summary_table());
    // The controller's disk is gone; only the ConfigMap has the run.
    std::fs::remove_dir_all(dir.path().join("controller")).unwrap();
    let data = Api::<ConfigMap>::namespaced(c.fake.clone(), NS)
        .get("recover-journal")
        .await
        .unwrap()
        .data
        .unwrap();
    let journal = lines(&data[&format!("{}.jsonl", ran.run_id)]);
    assert!(
        data.contains_key(&format!("{}.observed.json", ran.run_id)),
        "{:?}",
        data.keys()
    );
    let kubeconfig = c.kubeconfig_as(CONTROLLER, dir.path()).await;
    let (runs, out) = (dir.path().join("elsewhere"), dir.path().join("pm"));
    let id = ran.run_id.clone();
    let rep = tokio::task::spawn_blocking({
        let (runs, out) = (runs.clone(), out.clone());
        move || {
            crate::support::bin()
                .args(["report", &id, "--target", "kube", "--namespace", NS])
                .args(["--deployment", DEPLOY, "--journal-dir"])
                .arg(&runs)
                .arg("--out")
                .arg(&out)
                .env("KUBECONFIG", kubeconfig)
                .env("RECOVER_KUBE_REACH", "proxy")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(rep.status.code(), Some(0), "{}", said(&rep));
    check_report(&out, &journal, &[]);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert!(
        report["run"]["sources"][1]
            .as_str()
            .unwrap()
            .starts_with("observed series"),
        "{report:#}"
    );
    stop.cancel();
}

/// With `--prometheus`, the series from before the run come out of a real Prometheus
/// (history backfilled with promtool: 10 minutes healthy, then 5 minutes stuck up to the
/// run's start) and the onset is where the stuck state began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_with_prometheus_starts_the_timeline_at_the_onset() {
    recover::util::http::ensure_tls_provider();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let start = now - 60;
    let prom = crate::support::prometheus::Prometheus::backfilled(&crate::detect_history::history(
        start, 600, 300,
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let id = "20260101T000000Z-pppp";
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("runbooks/stuck-overload.yaml"),
    )
    .unwrap();
    let ts = |s: u64| {
        humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_secs(s)).to_string()
    };
    let journal = [
        serde_json::json!({"seq":1,"ts":ts(start),"run_id":id,"event":"run_started","format":2,"runbook":"stuck-overload","runbook_source":source,"origin":"built-in","target":"local:demo","pid":1}),
        serde_json::json!({"seq":2,"ts":ts(start + 1),"run_id":id,"event":"step_started","phase":"main","index":0,"step":"announce","action":"notify"}),
        serde_json::json!({"seq":3,"ts":ts(start + 2),"run_id":id,"event":"step_finished","phase":"main","step":"announce","outcome":"succeeded","figures":{}}),
        serde_json::json!({"seq":4,"ts":ts(start + 3),"run_id":id,"event":"run_finished","outcome":"succeeded"}),
    ];
    let text: String = journal.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join(format!("{id}.jsonl")), text).unwrap();
    let out = dir.path().join("pm");
    let rep = tokio::task::spawn_blocking({
        let (d, o, base) = (dir.path().to_path_buf(), out.clone(), prom.base.clone());
        move || {
            crate::support::bin()
                .args(["report", id, "--before", "10m", "--prometheus", &base])
                .arg("--journal-dir")
                .arg(&d)
                .arg("--out")
                .arg(&o)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(rep.status.code(), Some(0), "{}", said(&rep));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let run = &report["run"];
    println!("{}", run["sources"]);
    let onset = run["onset_s"].as_f64().unwrap_or_else(|| panic!("{run:#}"));
    // The stuck state began 300 s before the run; the rates lag it by their window.
    assert!((-300.0..=-270.0).contains(&onset), "onset {onset}: {run:#}");
    assert_eq!(report["phases"][0]["start_s"].as_f64(), Some(onset));
    let csv = std::fs::read_to_string(out.join("series.csv")).unwrap();
    let before = csv.lines().skip(1).filter(|l| l.starts_with('-')).count();
    assert!(before >= 10, "{csv}");
    let md = std::fs::read_to_string(out.join("postmortem.md")).unwrap();
    assert!(md.contains("trouble started (onset)"), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| time stuck before the run acted"))
        .unwrap();
    assert!(row.contains(&format!("| {:.1} s |", 1.0 - onset)), "{row}");
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    parse_xml(&svg);
}
