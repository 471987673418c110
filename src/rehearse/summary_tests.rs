//! The summary's line on work dropped on purpose, from the timeline's synthetic incident.

use super::*;
use crate::rehearse::report::Dropped;
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
