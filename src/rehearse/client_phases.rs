//! Where each client of the retry loop stood at a scrape, read from the demo workers'
//! two ladders (`recover_demo_workers_next_attempt_within{le_s}` and
//! `recover_demo_workers_attempt_left_within{le_s}`, docs/reference/metrics.md) into the
//! bound's [`ClientPhases`].
//!
//! Why it exists: the one place the rehearsal turns those series into the lower bound's
//! input, summed over the workers' processes, and says "not known" (an older or other
//! client that does not export them, a page without every rung) instead of a partial count
//! that would read as a measurement.

use super::bound::{ClientPhases, Ladder};
use super::series::{RawScrape, Role};
use crate::demo::workers::EDGE_LABEL;

/// Clients waiting out a retry delay, by the time to their next attempt.
pub const NEXT_ATTEMPT: &str = "recover_demo_workers_next_attempt_within";
/// Clients with an attempt out, by the time left before they give up on it.
pub const ATTEMPT_LEFT: &str = "recover_demo_workers_attempt_left_within";

/// The clients' phases at scrape `r`, summed over every clients' page by edge; `None`
/// unless every clients' page that answered exports both ladders with their `+Inf` rung.
pub fn client_phases(r: &RawScrape) -> Option<ClientPhases> {
    Some(ClientPhases {
        waiting_next: ladder(r, NEXT_ATTEMPT)?,
        in_flight_left: ladder(r, ATTEMPT_LEFT)?,
    })
}

/// One ladder summed over the pages. A sum is cumulative only at an edge every page has,
/// so an edge missing from any page is left out (the bound reads the coarser ladder).
fn ladder(r: &RawScrape, name: &str) -> Option<Ladder> {
    let pages: Vec<(Vec<(f64, f64)>, f64)> = r
        .by_label(Role::Clients, name, EDGE_LABEL)
        .iter()
        .map(|page| rungs(page))
        .collect::<Option<_>>()?;
    let (first, _) = pages.first()?;
    let at = |rungs: &[(f64, f64)], le: f64| rungs.iter().find(|(e, _)| *e == le).map(|r| r.1);
    let edges = first
        .iter()
        .filter_map(|&(le, _)| {
            let counts: Option<Vec<f64>> = pages.iter().map(|(rungs, _)| at(rungs, le)).collect();
            Some((le, counts?.iter().sum()))
        })
        .collect();
    Some(Ladder {
        edges,
        total: pages.iter().map(|(_, total)| total).sum(),
    })
}

/// One page's finite rungs, edges increasing, and its `+Inf` count; `None` for a page
/// without the `+Inf` rung (it does not export the ladder, or not all of it).
pub(super) fn rungs(page: &[(&str, f64)]) -> Option<(Vec<(f64, f64)>, f64)> {
    let total = page.iter().find(|(le, _)| *le == "+Inf")?.1;
    let mut finite: Vec<(f64, f64)> = page
        .iter()
        .filter_map(|(le, n)| le.parse::<f64>().ok().map(|e| (e, *n)))
        .filter(|(e, _)| e.is_finite())
        .collect();
    finite.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some((finite, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::expo::parse;
    use crate::rehearse::series::TargetScrape;

    fn page(next: &[(&str, f64)], left: &[(&str, f64)]) -> String {
        let mut text = String::new();
        for (name, rungs) in [(NEXT_ATTEMPT, next), (ATTEMPT_LEFT, left)] {
            for (le, n) in rungs {
                text.push_str(&format!("{name}{{le_s=\"{le}\"}} {n}\n"));
            }
        }
        text
    }

    fn scrape(pages: &[Option<String>]) -> RawScrape {
        let mut targets: Vec<TargetScrape> = pages
            .iter()
            .enumerate()
            .map(|(i, text)| TargetScrape {
                role: Role::Clients,
                instance: format!("workers-{i}"),
                points: text.as_deref().map(parse),
            })
            .collect();
        targets.push(TargetScrape {
            role: Role::Service,
            instance: "s0".into(),
            points: Some(parse(&page(&[("+Inf", 99.0)], &[("+Inf", 99.0)]))),
        });
        RawScrape {
            t_s: 1.0,
            read_s: 1.01,
            service_pages_first: false,
            targets,
        }
    }

    /// Two workers' processes: the ladders are summed by edge, an edge one of them lacks is
    /// left out, the totals are the `+Inf` rungs; a process that did not answer is not read.
    #[test]
    fn the_ladders_are_summed_over_the_workers_by_edge() {
        let a = page(
            &[("0.025", 1.0), ("0.05", 2.0), ("1", 5.0), ("+Inf", 6.0)],
            &[("0.5", 0.0), ("1.5", 3.0), ("+Inf", 3.0)],
        );
        let b = page(
            &[("0.025", 0.0), ("1", 4.0), ("+Inf", 4.0)],
            &[("0.5", 1.0), ("1.5", 2.0), ("+Inf", 2.0)],
        );
        let p = client_phases(&scrape(&[Some(a), Some(b), None])).expect("phases");
        assert_eq!(
            p.waiting_next,
            Ladder {
                edges: vec![(0.025, 1.0), (1.0, 9.0)],
                total: 10.0
            }
        );
        assert_eq!(
            p.in_flight_left,
            Ladder {
                edges: vec![(0.5, 1.0), (1.5, 5.0)],
                total: 5.0
            }
        );
    }

    /// A clients' page without the ladders (an older or other client), or without a
    /// ladder's `+Inf` rung, leaves the phases unknown rather than counting part of them.
    #[test]
    fn a_page_without_the_ladders_leaves_the_phases_unknown() {
        let full = page(&[("1", 1.0), ("+Inf", 1.0)], &[("1", 0.0), ("+Inf", 0.0)]);
        let older = "recover_demo_workers_in_retry_loop 3\n".to_string();
        assert!(client_phases(&scrape(&[Some(full.clone())])).is_some());
        assert_eq!(
            client_phases(&scrape(&[Some(full.clone()), Some(older)])),
            None
        );
        let no_inf = page(&[("1", 1.0), ("+Inf", 1.0)], &[("1", 0.0)]);
        assert_eq!(client_phases(&scrape(&[Some(full), Some(no_inf)])), None);
        assert_eq!(client_phases(&scrape(&[None])), None);
    }
}
