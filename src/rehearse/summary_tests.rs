//! The summary's lines on work dropped on purpose and on the retry loop in the bound, from
//! the timeline's synthetic incident.

use super::*;
use crate::rehearse::report::{Dropped, ReleaseStep};
use crate::rehearse::timeline::tests::synthetic;

fn line<'a>(text: &'a str, starts: &str) -> &'a str {
    text.lines()
        .find(|l| l.trim_start().starts_with(starts))
        .unwrap_or_else(|| panic!("no line {starts:?} in:\n{text}"))
}

/// Both counts measured: the total and each part. One not measured: it says unknown and
/// why, and the total is only a floor.
#[test]
fn a_dropped_count_not_measured_says_unknown_with_why() {
    let (mut r, _) = synthetic();
    assert_eq!(
        line(&render(&r), "dropped on purpose"),
        "  dropped on purpose: 1200 requests (400 drained from queues, 800 rejected at the gate)"
    );
    r.dropped = Dropped {
        drained: 400,
        rejected_at_gate: 0,
        unknown: [(
            "rejected_at_gate".into(),
            "not measured: no gate page was scraped".into(),
        )]
        .into(),
    };
    r.dropped_requests = 400;
    assert_eq!(
        line(&render(&r), "dropped on purpose"),
        "  dropped on purpose: at least 400 requests (400 drained from queues, rejected at the gate unknown (not measured: no gate page was scraped))"
    );
}

/// Under the bound's line: whether it read the clients' phases (else why not) and its
/// release steps.
#[test]
fn the_bound_says_whether_it_read_the_clients_phases() {
    let (mut r, _) = synthetic();
    let sc = crate::rehearse::scenario::Scenario::default();
    let crit = crate::rehearse::verify::SteadyCriteria::default();
    let mut lb =
        crate::rehearse::bound::true_lower_bound(&sc, 160.0, 0.0, None, &[1.0], &crit, None)
            .expect("a bound");
    r.lower_bound = Some(lb.clone());
    let text = render(&r);
    let said = line(&text, "retry loop in the bound");
    assert!(
        said.contains("clients' phases not read (no retry loop was read"),
        "{said}"
    );
    assert!(said.ends_with("; no release step binds"), "{said}");

    lb.client_phases_read = true;
    lb.client_phases_unknown = None;
    lb.releases = vec![
        ReleaseStep {
            at_s: -0.08,
            answerable: 62.0,
            released: 25.0,
            answered_from_s: -0.035,
        },
        ReleaseStep {
            at_s: 0.9,
            answerable: 87.0,
            released: 88.0,
            answered_from_s: 0.9,
        },
    ];
    r.lower_bound = Some(lb.clone());
    assert_eq!(
        line(&render(&r), "retry loop in the bound"),
        "    retry loop in the bound: clients' phases read; 2 release step(s) after the scrape at (answerable before, released) -0.08 s (62, +25), 0.90 s (87, +88)"
    );
    // Many steps (one per rung of the ladder): the first two and the last on the line.
    lb.releases = (0..10)
        .map(|i| ReleaseStep {
            at_s: 0.1 * i as f64,
            answerable: 100.0 + i as f64,
            released: 1.0,
            answered_from_s: 0.1 * i as f64 + 0.04,
        })
        .collect();
    r.lower_bound = Some(lb);
    assert_eq!(
        line(&render(&r), "retry loop in the bound"),
        "    retry loop in the bound: clients' phases read; 10 release step(s) after the scrape at (answerable before, released) 0.00 s (100, +1), 0.10 s (101, +1), ... 7 more, 0.90 s (109, +1)"
    );
}
