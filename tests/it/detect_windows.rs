//! Detector tests on recorded windows: pages in the shape prometheus-client emits for the
//! gate, the demo service and the workers, one per second, fed through the scrape
//! evaluation (the built-in signal set) into the detector. Covers healthy, a spike still
//! on, stuck, stuck before anyone looked, flapping, data missing, stale data and a counter
//! reset.

use recover::detect::{
    default_signals::demo_signals, detect, detect_at, DetectorConfig, Source, VerdictKind,
};
use recover::metrics::scrape::{compile, Scraper};
use recover::metrics::signal::{names, Reading, Snapshot};
use recover::plan::{Overrides, PlanInputs};
use recover::platform::ScrapeEndpoint;
use std::time::{Duration, SystemTime};

/// Per-second behaviour of the demo system during one recorded second.
#[derive(Clone, Copy)]
struct Second {
    arrival: f64,
    first: f64,
    useful: f64,
    abandoned: f64,
    service_time: f64,
    queue: f64,
    error_frac: f64,
    service_up: bool,
}

const HEALTHY: Second = Second {
    arrival: 17.0,
    first: 17.0,
    useful: 17.0,
    abandoned: 0.0,
    service_time: 0.005,
    queue: 0.0,
    error_frac: 0.0,
    service_up: true,
};

const STUCK: Second = Second {
    arrival: 500.0,
    first: 5.0,
    useful: 5.0,
    abandoned: 45.0,
    service_time: 0.020,
    queue: 800.0,
    error_frac: 0.99,
    service_up: true,
};

const SPIKE: Second = Second {
    arrival: 260.0,
    first: 250.0,
    useful: 60.0,
    abandoned: 140.0,
    service_time: 0.006,
    queue: 300.0,
    error_frac: 0.7,
    service_up: true,
};

const RESTARTING: Second = Second {
    service_up: false,
    arrival: 300.0,
    first: 10.0,
    useful: 0.0,
    abandoned: 0.0,
    error_frac: 1.0,
    ..HEALTHY
};

#[derive(Default)]
struct Counters {
    gate: f64,
    first: f64,
    useful: f64,
    abandoned: f64,
    st_sum: f64,
    st_count: f64,
    ok: f64,
    err: f64,
}

fn ep(role: &str) -> ScrapeEndpoint {
    ScrapeEndpoint {
        role: role.into(),
        instance: role.into(),
        locator: format!("http://127.0.0.1/{role}/metrics"),
    }
}

fn gate_page(c: &Counters) -> String {
    format!(
        "# HELP recover_gate_requests Requests by outcome.\n# TYPE recover_gate_requests counter\n\
         recover_gate_requests_total{{outcome=\"admitted\"}} {}\n\
         recover_gate_requests_total{{outcome=\"upstream_timeout\"}} {}\n\
         # TYPE recover_gate_admissions counter\n\
         recover_gate_admissions_total{{decision=\"admitted\"}} {}\n\
         recover_gate_admissions_total{{decision=\"rejected_rate\"}} 0\n\
         recover_gate_admissions_total{{decision=\"rejected_in_flight\"}} 0\n\
         # TYPE recover_gate_attempts counter\n\
         recover_gate_attempts_total{{kind=\"first\"}} {}\n\
         recover_gate_attempts_total{{kind=\"retry\"}} {}\n\
         # TYPE recover_gate_in_flight gauge\nrecover_gate_in_flight 3\n\
         # TYPE recover_gate_limit_rate_per_second gauge\nrecover_gate_limit_rate_per_second +Inf\n# EOF\n",
        c.useful,
        c.gate - c.useful,
        c.gate,
        c.first,
        c.gate - c.first
    )
}

fn service_page(c: &Counters, s: &Second) -> String {
    format!(
        "# TYPE recover_demo_service_requests counter\nrecover_demo_service_requests_total {}\n\
         # TYPE recover_demo_service_completions counter\n\
         recover_demo_service_completions_total{{kind=\"useful\"}} {}\n\
         recover_demo_service_completions_total{{kind=\"abandoned\"}} {}\n\
         # TYPE recover_demo_service_queue_depth gauge\nrecover_demo_service_queue_depth {}\n\
         # TYPE recover_demo_service_service_seconds histogram\n\
         recover_demo_service_service_seconds_sum {}\nrecover_demo_service_service_seconds_count {}\n\
         recover_demo_service_service_seconds_bucket{{le=\"0.01\"}} {}\n\
         recover_demo_service_service_seconds_bucket{{le=\"+Inf\"}} {}\n\
         # TYPE recover_demo_service_ready gauge\nrecover_demo_service_ready 1\n\
         # TYPE recover_demo_service_concurrency_limit gauge\nrecover_demo_service_concurrency_limit 1\n# EOF\n",
        c.gate, c.useful, c.abandoned, s.queue, c.st_sum, c.st_count, c.st_count, c.st_count
    )
}

fn clients_page(c: &Counters) -> String {
    format!(
        "# TYPE recover_demo_workers_attempts counter\n\
         recover_demo_workers_attempts_total{{outcome=\"ok\"}} {}\n\
         recover_demo_workers_attempts_total{{outcome=\"timeout\"}} {}\n# EOF\n",
        c.ok, c.err
    )
}

/// Play `seconds` through the scrape source's pure core; one snapshot per second.
struct Recording {
    scraper: Scraper,
    counters: Counters,
    t0: SystemTime,
    secs: u64,
    with_clients: bool,
    with_service_metrics: bool,
}

impl Recording {
    fn new() -> Self {
        Recording {
            scraper: Scraper::default(),
            counters: Counters::default(),
            t0: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            secs: 0,
            with_clients: true,
            with_service_metrics: true,
        }
    }

    fn play(&mut self, s: Second, n: u64) -> Vec<Snapshot> {
        let compiled = compile(&demo_signals()).expect("default signals compile");
        let mut out = Vec::new();
        for _ in 0..n {
            let c = &mut self.counters;
            c.gate += s.arrival;
            c.first += s.first;
            c.useful += s.useful;
            c.abandoned += s.abandoned;
            c.st_sum += (s.useful + s.abandoned) * s.service_time;
            c.st_count += s.useful + s.abandoned;
            c.ok += s.arrival * (1.0 - s.error_frac);
            c.err += s.arrival * s.error_frac;
            self.secs += 1;
            let at = self.t0 + Duration::from_secs(self.secs);
            let gate = gate_page(c);
            self.scraper.record(&ep("gate"), at, Ok(&gate));
            let service = if !s.service_up {
                Err("connection refused".to_string())
            } else if self.with_service_metrics {
                Ok(service_page(c, &s))
            } else {
                Ok("# EOF\n".to_string())
            };
            self.scraper
                .record(&ep("service"), at, service.as_deref().map_err(Clone::clone));
            if self.with_clients {
                self.scraper
                    .record(&ep("clients"), at, Ok(&clients_page(c)));
            }
            out.push(self.scraper.snapshot(&compiled, at));
        }
        out
    }
}

fn cfg() -> DetectorConfig {
    DetectorConfig {
        capacity_per_s: Some(200.0),
        cold_factor: Some(1.25),
        ..DetectorConfig::default()
    }
}

#[test]
fn healthy_window_is_healthy() {
    let mut r = Recording::new();
    let w = r.play(HEALTHY, 30);
    let v = detect(&w, &cfg());
    assert_eq!(v.verdict, VerdictKind::Healthy, "{v:#?}");
    let last = w.last().unwrap();
    assert!((last.get(names::OFFERED_RATE).unwrap() - 17.0).abs() < 0.01);
    assert_eq!(last.get(names::ERROR_RATIO), Some(0.0));
    assert_eq!(last.get(names::REPLICAS_NOT_READY), Some(0.0));
}

#[test]
fn spike_still_on_is_triggered_not_stuck() {
    let mut r = Recording::new();
    let mut w = r.play(HEALTHY, 15);
    w.extend(r.play(SPIKE, 30));
    let v = detect(&w, &cfg());
    assert_eq!(v.verdict, VerdictKind::Triggered, "{v:#?}");
    assert!(v.summary.contains("spike"), "{}", v.summary);
}

#[test]
fn stuck_after_restart_is_stuck_with_k_and_capacities() {
    let mut r = Recording::new();
    let mut w = r.play(HEALTHY, 15);
    w.extend(r.play(RESTARTING, 5));
    let during = detect(&w, &cfg());
    assert_eq!(during.verdict, VerdictKind::Triggered, "{during:#?}");
    w.extend(r.play(STUCK, 30));
    let v = detect(&w, &cfg());
    assert_eq!(v.verdict, VerdictKind::Stuck, "{v:#?}");
    // Service time 20 ms now vs 5 ms healthy.
    let k = v.k.unwrap();
    assert!((k - 4.0).abs() < 0.01, "k = {k} from {:?}", v.k_from);
    assert!(v.k_from.as_deref().unwrap().contains("service time"));
    assert!((v.arrival_rate.unwrap() - 500.0).abs() < 1.0);
    // One slot at 5 ms: the service's own numbers (Little's law) agree with the declaration,
    // and, measured, win over it.
    assert!(
        (v.capacity.unwrap() - 200.0).abs() < 1e-9,
        "{:?}",
        v.capacity
    );
    assert_eq!(v.sources.capacity, Some(Source::Measured));
    assert!(v
        .capacity_from
        .as_deref()
        .unwrap()
        .contains("declared, not used"));
    assert!((v.capacity_cold.unwrap() - 160.0).abs() < 1e-9);
    assert!(v
        .evidence
        .iter()
        .any(|e| e.signal == "failure" && e.for_s.unwrap() >= 10.0));
}

/// Watching starts when the service has long been stuck: no healthy moment, no restart in
/// the window. The detector still says Stuck; the plan's inputs come from what the runbook
/// declares, or Little's law, and without either the refusal names the field and flag.
#[test]
fn stuck_before_anyone_looked_plans_from_declarations_or_names_what_is_missing() {
    let mut r = Recording::new();
    let w = r.play(STUCK, 20);
    let declared = DetectorConfig {
        capacity_per_replica: Some(200.0),
        cold_factor: Some(1.25),
        ..DetectorConfig::default()
    };
    let v = detect(&w, &declared);
    assert_eq!(v.verdict, VerdictKind::Stuck, "{v:#?}");
    assert_eq!(v.capacity, Some(200.0));
    assert_eq!(v.sources.capacity, Some(Source::Declared));
    assert!(v
        .capacity_from
        .as_deref()
        .unwrap()
        .contains("1 replica(s) ready"));
    // Declared capacity over the completions while queued: 200 / 50.
    assert!((v.k.unwrap() - 4.0).abs() < 0.05, "{:?}", v.k_from);
    let inputs = PlanInputs::from_verdict(&v, &declared, &Overrides::default()).unwrap();
    assert_eq!(inputs.capacity_cold.value, 160.0);

    // Nothing declared: the window has no healthy period to measure capacity in.
    let v = detect(&w, &DetectorConfig::default());
    assert_eq!(v.verdict, VerdictKind::Stuck, "{v:#?}");
    assert_eq!(v.capacity, None);
    let missing = PlanInputs::from_verdict(&v, &DetectorConfig::default(), &Overrides::default())
        .unwrap_err();
    let text = missing.to_string();
    assert!(
        text.contains("spec.detect.capacity_per_replica")
            && text.contains("--assume-capacity-cold"),
        "{text}"
    );

    // A declared healthy service time and the exported concurrency limit: Little's law.
    let little = DetectorConfig {
        healthy_service_time: Some(Duration::from_millis(5)),
        ..DetectorConfig::default()
    };
    let v = detect(&w, &little);
    assert!(
        (v.capacity.unwrap() - 200.0).abs() < 1e-6,
        "{:?}",
        v.capacity_from
    );
    assert!(v
        .capacity_from
        .as_deref()
        .unwrap()
        .starts_with("Little's law"));
    assert_eq!(v.sources.capacity_cold, Some(Source::Assumed));
}

#[test]
fn stuck_needs_persist_and_grace() {
    let mut r = Recording::new();
    let mut w = r.play(HEALTHY, 15);
    w.extend(r.play(RESTARTING, 5));
    w.extend(r.play(STUCK, 4));
    let v = detect(&w, &cfg());
    assert_eq!(v.verdict, VerdictKind::Triggered, "not stuck yet: {v:#?}");
    assert!(v.summary.contains("not stuck yet"));
}

#[test]
fn flapping_is_never_stuck() {
    let mut r = Recording::new();
    let mut w = r.play(HEALTHY, 15);
    // Failures of 3 s separated by 5 s of health: with the 5 s rate window each one is
    // seen as failing for about 7 s, under `persist`, and the clock restarts every time.
    for _ in 0..8 {
        w.extend(r.play(STUCK, 3));
        w.extend(r.play(HEALTHY, 5));
        // Judge at every instant, as a controller polling the detector would.
        for end in 1..=w.len() {
            let v = detect(&w[..end], &cfg());
            assert_ne!(
                v.verdict,
                VerdictKind::Stuck,
                "flapping judged stuck at {end}: {v:#?}"
            );
        }
    }
    // The same recording does turn Stuck once the failure holds.
    w.extend(r.play(STUCK, 15));
    assert_eq!(detect(&w, &cfg()).verdict, VerdictKind::Stuck);
}

#[test]
fn missing_data_is_unknown_never_zero() {
    let mut r = Recording::new();
    r.with_clients = false;
    r.with_service_metrics = false;
    let w = r.play(STUCK, 30);
    let last = w.last().unwrap();
    assert_eq!(
        last.get(names::GOODPUT),
        Some(0.0),
        "service answered with no useful series: no useful completions"
    );
    // The clients target is not there at all: the error ratio is missing, not zero.
    assert_eq!(last.get(names::ERROR_RATIO), None);
    match &last.readings[names::ERROR_RATIO] {
        Reading::Missing { reason } => {
            assert!(
                reason.contains("no target has role \"clients\""),
                "{reason}"
            )
        }
        other => panic!("error ratio without a clients target: {other:?}"),
    }

    // A window where the service's page lacks everything the detector needs.
    let mut r = Recording::new();
    r.with_clients = false;
    let mut w = r.play(HEALTHY, 12);
    for s in w.iter_mut() {
        s.readings
            .retain(|k, _| k == names::OFFERED_RATE || k == names::REPLICAS_NOT_READY);
    }
    let v = detect(&w, &cfg());
    assert_eq!(v.verdict, VerdictKind::Unknown, "{v:#?}");
    assert!(v.summary.contains("cannot judge"), "{}", v.summary);
}

#[test]
fn stale_window_is_unknown() {
    let mut r = Recording::new();
    let mut w = r.play(HEALTHY, 15);
    w.extend(r.play(RESTARTING, 5));
    w.extend(r.play(STUCK, 30));
    let now = w.last().unwrap().at + Duration::from_secs(120);
    let v = detect_at(&w, &cfg(), now);
    assert_eq!(v.verdict, VerdictKind::Unknown);
    assert!(v.summary.contains("old"), "{}", v.summary);
    assert_eq!(detect(&[], &cfg()).verdict, VerdictKind::Unknown);
}

#[test]
fn too_short_a_window_is_unknown_not_stuck() {
    let mut r = Recording::new();
    let w = r.play(STUCK, 5);
    let v = detect(&w, &cfg());
    assert_eq!(v.verdict, VerdictKind::Unknown, "{v:#?}");
}

#[test]
fn counter_reset_keeps_rates_right_and_stays_stuck() {
    let mut r = Recording::new();
    let mut w = r.play(HEALTHY, 15);
    w.extend(r.play(RESTARTING, 5));
    w.extend(r.play(STUCK, 15));
    // The service process restarts between two scrapes: its counters start from zero.
    r.counters.useful = 0.0;
    r.counters.abandoned = 0.0;
    r.counters.st_sum = 0.0;
    r.counters.st_count = 0.0;
    r.counters.gate = 0.0; // the gate restarts too (arrival counter reset)
    w.extend(r.play(STUCK, 15));
    for s in &w[w.len() - 15..] {
        let good = s.get(names::GOODPUT).unwrap();
        assert!((good - 5.0).abs() < 0.5, "goodput {good} across a reset");
        let arrival = s.get(names::OFFERED_RATE).unwrap();
        assert!(
            arrival > 400.0 && arrival < 600.0,
            "offered {arrival} across a reset"
        );
    }
    let v = detect(&w, &cfg());
    assert_eq!(v.verdict, VerdictKind::Stuck, "{v:#?}");
}
