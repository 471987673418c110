//! A window's counter increase from scrapes built by hand: the rise before the window's
//! first scrape, across a page that did not answer, from a series that appears, through
//! a reset, and the windows the scrapes cannot cover.

use super::*;
use crate::rehearse::expo::parse;
use crate::rehearse::series::TargetScrape;

const REJECTED: &str = "recover_gate_requests_total";

/// A scrape of the gate ticked at `t_s` (its page read 10 ms later): `None` a page that
/// did not answer, `Some(n)` one with `n` rate rejections.
fn gate(t_s: f64, rejected: Option<u32>) -> RawScrape {
    let page = rejected.map(|n| {
        parse(&format!(
            "{REJECTED}{{outcome=\"admitted\"}} 500\n{REJECTED}{{outcome=\"rejected_rate\"}} {n}\n"
        ))
    });
    with_page(t_s, page)
}

fn with_page(t_s: f64, points: Option<Vec<crate::rehearse::expo::Point>>) -> RawScrape {
    RawScrape {
        t_s,
        read_s: t_s + 0.01,
        service_pages_first: false,
        targets: vec![TargetScrape {
            role: Role::Gate,
            instance: "gate".into(),
            points,
        }],
    }
}

fn rejected(scrapes: &[RawScrape], from_s: f64, to_s: f64) -> Result<f64, Unmeasured> {
    let refs: Vec<&RawScrape> = scrapes.iter().collect();
    window_increase(
        &refs,
        Role::Gate,
        REJECTED,
        &[("outcome", "rejected_rate")],
        from_s,
        to_s,
    )
}

/// The window starts at 10 s between scrapes at 9.5 s and 10.5 s; the gate's block
/// rejects 40 in between, and 5 more after the window's last scrape inside it (11 s) and
/// before its end (11.2 s). Both count: from the scrape before the start to the one after
/// the end.
#[test]
fn the_rise_before_the_windows_first_scrape_and_after_its_last_counts() {
    let s = [
        gate(9.0, Some(0)),
        gate(9.5, Some(0)),
        gate(10.5, Some(40)),
        gate(11.0, Some(40)),
        gate(11.5, Some(45)),
        gate(12.0, Some(90)),
    ];
    assert_eq!(rejected(&s, 10.0, 11.2), Ok(45.0));
    // A scrape ticked before the start but read after it may have read the window's
    // first rejections: the base is the one before it.
    assert_eq!(rejected(&s, 9.505, 11.2), Ok(45.0));
}

/// The gate did not answer at 10.5 s: the rise from 10 to 30 across it still counts (the
/// deltas between consecutive scrapes lose it), and a page with no points at all (an
/// unparsable one) is no answer rather than a counter at 0.
#[test]
fn a_page_that_did_not_answer_loses_nothing() {
    let s = [
        gate(9.5, Some(0)),
        gate(10.2, Some(10)),
        gate(10.5, None),
        with_page(10.7, Some(vec![])),
        gate(11.2, Some(30)),
    ];
    assert_eq!(rejected(&s, 10.0, 11.0), Ok(30.0));
}

/// A labelled counter that appears on its first increment counts from 0; a gate restarted
/// mid-window counts its new value.
#[test]
fn a_series_that_appears_counts_from_zero_and_a_reset_from_its_new_value() {
    let admitted_only = parse(&format!("{REJECTED}{{outcome=\"admitted\"}} 500\n"));
    let s = [
        with_page(9.5, Some(admitted_only)),
        gate(10.5, Some(7)),
        gate(11.0, Some(20)),
        gate(11.5, Some(3)),
        gate(12.0, Some(4)),
    ];
    assert_eq!(rejected(&s, 10.0, 12.0), Ok(24.0));
}

/// The recording stops before the window's end (the rehearsal's end is taken just before
/// the recorder stops): its last scrape is the end, if the gate answered it.
#[test]
fn a_recording_that_stops_before_the_end_counts_to_its_last_scrape() {
    let s = [gate(9.5, Some(0)), gate(10.5, Some(8)), gate(11.0, Some(9))];
    assert_eq!(rejected(&s, 10.0, 11.3), Ok(9.0));
}

/// No scrape answered before the start, the gate silent at the recording's end, or no
/// gate at all: unknown, with the reason.
#[test]
fn a_window_the_scrapes_do_not_cover_is_unknown() {
    let late = [gate(10.5, Some(8)), gate(11.5, Some(9))];
    let e = rejected(&late, 10.0, 11.0).unwrap_err();
    assert!(matches!(e, Unmeasured::NoStart { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("no scrape of gate answered at or before the window's start"));

    let silent = [gate(9.5, Some(0)), gate(10.5, Some(8)), gate(11.5, None)];
    let e = rejected(&silent, 10.0, 11.0).unwrap_err();
    assert!(matches!(e, Unmeasured::NoEnd { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("nor the recording's last (its last answer 0.50 s before the end)"),
        "{e}"
    );

    let only_start = [gate(9.5, Some(0))];
    assert!(matches!(
        rejected(&only_start, 10.0, 11.0),
        Err(Unmeasured::NoEnd { .. })
    ));

    let none = [RawScrape {
        t_s: 9.5,
        read_s: 9.51,
        service_pages_first: false,
        targets: vec![],
    }];
    assert_eq!(
        rejected(&none, 10.0, 11.0),
        Err(Unmeasured::NoTarget { role: "gate" })
    );
}
