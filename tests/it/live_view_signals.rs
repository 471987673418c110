//! What the live view shows of the gate (offered, admitted, rejected) read through the
//! shipped runbooks' signals from a real gate's metrics, in the case where they used to
//! disagree: admitted requests whose clients hung up before the answer. Offered − admitted
//! must be exactly what the gate rejected, and admissions count when they are decided.

use crate::support::gate::{config, limit, metrics, sample, start, upstream};
use recover::engine::progress::Readings;
use recover::metrics::scrape::{compile, Scraper};
use recover::metrics::signal::SignalSpec;
use recover::platform::ScrapeEndpoint;
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};
use tokio::io::AsyncWriteExt;

fn gate_endpoint() -> ScrapeEndpoint {
    ScrapeEndpoint {
        role: "gate".into(),
        instance: "gate".into(),
        locator: "http://127.0.0.1/gate/metrics".into(),
    }
}

/// The readings `signals` give from two pages of the gate scraped 4 s apart.
fn readings(signals: &BTreeMap<String, SignalSpec>, before: &str, after: &str) -> Readings {
    let compiled = compile(signals).expect("the signals compile");
    let mut scraper = Scraper::for_signals(&compiled);
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let t1 = t0 + Duration::from_secs(4);
    scraper.record(&gate_endpoint(), t0, Ok(before));
    scraper.record(&gate_endpoint(), t1, Ok(after));
    let snap = scraper.snapshot(&compiled, t1);
    Readings::read(&|name| snap.get(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offered_minus_admitted_is_what_the_gate_rejected_when_clients_leave() {
    // An upstream slower than every client's patience, behind a limit of burst 3.
    let up = upstream(Duration::from_secs(3)).await;
    let gate = start(config(&[&up], limit(Some(0.5), 3, None))).await;
    let before = metrics(gate.admin).await;

    // 12 clients at once: 3 admitted, the rest rejected; every one hangs up after 300 ms,
    // so the admitted ones leave before the upstream answers.
    let clients: Vec<_> = (0..12)
        .map(|_| {
            let proxy = gate.proxy;
            tokio::spawn(async move {
                let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
                s.write_all(b"GET /config HTTP/1.1\r\nhost: gate\r\n\r\n")
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let admitted = r#"recover_gate_admissions_total{decision="admitted"}"#;
    let gone = r#"recover_gate_requests_total{outcome="client_gone"}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let m = metrics(gate.admin).await;
        let (a, g) = (sample(&m, admitted), sample(&m, gone));
        if a.is_some_and(|a| a > 0.0) && a == g {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the admitted clients' departures were never counted: {m}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let rejected = sample(
        &after,
        r#"recover_gate_requests_total{outcome="rejected_rate"}"#,
    )
    .expect("rejections counted");
    assert!(rejected > 0.0, "{after}");

    let shipped = ["stuck-overload", "retry-storm"].map(|name| {
        let rb = recover::runbook::find(name, &[]).expect("a shipped runbook");
        (name.to_string(), rb.runbook.signals)
    });
    let detector = (
        "the detector's signals".to_string(),
        recover::detect::default_signals::demo_signals(),
    );
    for (name, signals) in shipped.into_iter().chain([detector]) {
        let r = readings(&signals, &before, &after);
        let (Some(offered), Some(admitted), Some(rejected_rate)) =
            (r.offered_rate, r.admitted_rate, r.rejected_rate)
        else {
            panic!("{name}: a reading is missing: {r:?}");
        };
        assert!(
            (offered - admitted - rejected_rate).abs() < 1e-9,
            "{name}: offered {offered} − admitted {admitted} must be the rejected {rejected_rate}, not include the clients that left"
        );
        assert!(
            admitted > 0.0 && rejected_rate > 0.0,
            "{name}: admissions count when decided, answered or not: {r:?}"
        );
    }
}
