//! The report's arithmetic from recordings built by hand: the state the runbook found
//! (the probe at its decision, the clients' phases).

use super::*;

fn at(t_s: f64) -> RawScrape {
    RawScrape {
        t_s,
        read_s: t_s + 0.01,
        service_pages_first: false,
        targets: vec![],
    }
}

/// The grid's last scrape came 0.4 s before the runbook; the probe at the decision,
/// 5 ms before it, is the state the runbook found. One after it is not.
#[test]
fn the_runbooks_state_is_the_probe_at_its_decision_not_the_grids_last_scrape() {
    let rec = Recording {
        raws: vec![at(9.0), at(9.5), at(10.0), at(10.5)],
        samples: vec![],
        probes: vec![at(9.895), at(10.2)],
    };
    let ticks: Vec<f64> = scrapes_before(&rec, 9.9).iter().map(|r| r.t_s).collect();
    assert_eq!(ticks, [9.0, 9.5, 9.895]);
    let without = Recording {
        probes: vec![],
        ..rec
    };
    let last = scrapes_before(&without, 9.9).last().map(|r| r.t_s);
    assert_eq!(last, Some(9.5));
}

fn clients_at(t_s: f64, page: &str) -> RawScrape {
    RawScrape {
        targets: vec![crate::rehearse::series::TargetScrape {
            role: Role::Clients,
            instance: "workers".into(),
            points: Some(crate::rehearse::expo::parse(page)),
        }],
        ..at(t_s)
    }
}

/// The retry loop the bound reads is the probe's: its split, and where each client
/// stood on the workers' ladders (cumulative, edges in seconds, `+Inf` the total); a
/// page from clients that do not export the ladders leaves the phases unknown.
#[test]
fn the_retry_loop_at_the_decision_carries_the_clients_phases() {
    let page = "recover_demo_workers_retrying_in_flight 2\n\
        recover_demo_workers_next_attempt_within{le_s=\"0.025\"} 1\n\
        recover_demo_workers_next_attempt_within{le_s=\"0.5\"} 3\n\
        recover_demo_workers_next_attempt_within{le_s=\"+Inf\"} 3\n\
        recover_demo_workers_attempt_left_within{le_s=\"0.025\"} 0\n\
        recover_demo_workers_attempt_left_within{le_s=\"0.5\"} 1\n\
        recover_demo_workers_attempt_left_within{le_s=\"+Inf\"} 2\n";
    let older = "recover_demo_workers_retrying_in_flight 5\n";
    let rec = Recording {
        raws: vec![clients_at(9.5, older)],
        samples: vec![],
        probes: vec![clients_at(9.895, page)],
    };
    let sc = Scenario::default();
    let before = scrapes_before(&rec, 9.9);
    let l = retry_loop_at(&sc, before.last().unwrap(), 9.9).expect("a fixed delay");
    assert!((l.scraped_before_s - 0.005).abs() < 1e-9);
    assert_eq!(l.in_flight, 2.0);
    let p = l.phases.expect("the workers export the ladders");
    assert_eq!(p.waiting_next.edges, [(0.025, 1.0), (0.5, 3.0)]);
    assert_eq!(p.waiting_next.total, 3.0);
    assert_eq!(p.in_flight_left.edges, [(0.025, 0.0), (0.5, 1.0)]);
    assert_eq!(p.in_flight_left.total, 2.0);
    let grid = retry_loop_at(&sc, before[0], 9.9).expect("a fixed delay");
    assert_eq!((grid.in_flight, grid.phases), (5.0, None));
}

fn gate_and_service(t_s: f64, rejected: u32, drained: Option<u32>) -> RawScrape {
    let page = |text: String| Some(crate::rehearse::expo::parse(&text));
    let mut targets = vec![crate::rehearse::series::TargetScrape {
        role: Role::Gate,
        instance: "gate".into(),
        points: page(format!(
            "recover_gate_requests_total{{outcome=\"rejected_rate\"}} {rejected}\n\
             recover_gate_requests_total{{outcome=\"rejected_in_flight\"}} 0\n"
        )),
    }];
    if let Some(d) = drained {
        targets.push(crate::rehearse::series::TargetScrape {
            role: Role::Service,
            instance: "replica-0".into(),
            points: page(format!("recover_demo_service_drained_total {d}\n")),
        });
    }
    RawScrape { targets, ..at(t_s) }
}

/// The runbook starts at 10 s, between the grid's scrapes at 9.5 s and 10.5 s, and its
/// block and drain act before 10.5 s: 40 rejected at the gate, 12 drained. Counted from
/// the scrape before the start, both are there (the scrapes inside the window alone read
/// 0 and 0).
#[test]
fn dropped_work_counts_from_the_scrape_before_the_runbooks_start() {
    let rec = Recording {
        raws: vec![
            gate_and_service(9.0, 0, Some(0)),
            gate_and_service(9.5, 0, Some(0)),
            gate_and_service(10.5, 40, Some(12)),
            gate_and_service(11.0, 40, Some(12)),
        ],
        samples: vec![],
        probes: vec![],
    };
    let d = dropped(&rec, &RunbookOutcome::default(), 10.0, 11.0);
    assert_eq!((d.rejected_at_gate, d.drained), (40, 12));
    assert!(d.unknown.is_empty(), "{:?}", d.unknown);
}

/// No service page was scraped: the drain's own count stands where it gave one, and
/// where it gave none the count is unknown with why, not a 0 that reads as measured.
#[test]
fn dropped_work_not_measured_is_unknown_with_its_reason() {
    let rec = Recording {
        raws: vec![
            gate_and_service(9.5, 0, None),
            gate_and_service(11.0, 3, None),
        ],
        samples: vec![],
        probes: vec![],
    };
    let d = dropped(&rec, &RunbookOutcome::default(), 10.0, 11.0);
    assert_eq!((d.rejected_at_gate, d.drained), (3, 0));
    let why = d.unknown.get("drained").expect("drained unknown");
    assert!(why.contains("no service page was scraped"), "{why}");
    let reported = RunbookOutcome {
        drained: Some(5),
        ..RunbookOutcome::default()
    };
    let d = dropped(&rec, &reported, 10.0, 11.0);
    assert_eq!(d.drained, 5);
    assert!(d.unknown.is_empty(), "{:?}", d.unknown);
    let late = dropped(&rec, &reported, 9.0, 11.0);
    assert!(late.unknown["rejected_at_gate"].contains("at or before the window's start"));
}

/// A relapse spans two of the monitoring's scrapes whatever the recorder's step: 2 samples
/// when the recorder scrapes as often as the monitoring, 6 at the default 0.1 s against
/// 0.5 s (five steps apart), so a 0.2 s blip the finer recorder sees is not one.
#[test]
fn a_relapse_spans_two_of_the_monitorings_scrapes() {
    let at = |scrape_ms, record_ms| {
        relapse_samples(&Scenario {
            scrape_interval: std::time::Duration::from_millis(scrape_ms),
            record_interval: std::time::Duration::from_millis(record_ms),
            ..Scenario::default()
        })
    };
    assert_eq!(at(500, 100), 6);
    assert_eq!(at(500, 500), 2);
    assert_eq!(at(1000, 300), 4);
    assert_eq!(relapse_samples(&Scenario::default()), 6);
}
