//! Where the replicas' servers stood at a scrape, read from the demo service's ladder
//! (`recover_demo_service_busy_for_within{le_s}`, docs/reference/metrics.md) into the
//! bound's [`ServersAt`].
//!
//! Why it exists: the one place the rehearsal turns that series into the lower bound's
//! input, and says "not known" (an older or other service that does not export it, a page
//! without its `+Inf` rung) instead of a partial count: without it the bound takes every
//! server as free right after the scrape, as before.

use super::bound::{BusyServer, HoldOver, Ladder, ServersAt};
use super::client_phases::rungs;
use super::series::{RawScrape, Role};
use crate::demo::workers::EDGE_LABEL;

/// Servers busy with a job that ends within `le_s` of the scrape.
pub const BUSY_FOR: &str = "recover_demo_service_busy_for_within";
/// Of those, the servers whose job ends before its client stops waiting.
const BUSY_LIVE_FOR: &str = "recover_demo_service_busy_live_for_within";
/// Servers per replica, idle ones included.
const CONCURRENCY: &str = "recover_demo_service_concurrency_limit";
/// A job's mean hold of its server beyond its cost, its standard deviation, and the jobs
/// they are over.
const OVERRUN_MEAN: &str = "recover_demo_service_overrun_mean_seconds";
const OVERRUN_SD: &str = "recover_demo_service_overrun_sd_seconds";
const OVERRUN_JOBS: &str = "recover_demo_service_overrun_jobs";
/// Fewer jobs than this tell too little of the spread for the bound to lean on.
const OVERRUN_JOBS_MIN: f64 = 30.0;

/// The servers at scrape `r` over every service page that answered; `None` unless each
/// exports the ladder with its `+Inf` rung. Each busy server is placed at its bucket's
/// lower edge (its job ends no sooner); the idle ones are the pages' pools less the busy
/// (none where the pool size is not exported: those servers count as free at the
/// scrape). The pages are read between the probe's tick and its end, so they may stand
/// that far apart from the clients'.
pub fn servers_at(r: &RawScrape) -> Option<ServersAt> {
    let pages = r.by_label(Role::Service, BUSY_FOR, EDGE_LABEL);
    if pages.is_empty() {
        return None;
    }
    let live_pages = r.by_label(Role::Service, BUSY_LIVE_FOR, EDGE_LABEL);
    let mut by_replica = vec![];
    let mut busy = 0.0;
    for (i, page) in pages.iter().enumerate() {
        let (edges, total) = rungs(page)?;
        busy += total;
        let all = Ladder { edges, total }.lower_edges();
        // Only where every page exports the live ladder: a page without it (an older
        // service) leaves every busy server possibly live.
        let live = (live_pages.len() == pages.len())
            .then(|| rungs(&live_pages[i]))
            .flatten()
            .map(|(edges, total)| Ladder { edges, total }.lower_edges());
        by_replica.push(mark_live(&all, live.as_deref()));
    }
    let pool = r.sum(Role::Service, CONCURRENCY, &[]).unwrap_or(0.0);
    Some(ServersAt {
        by_replica,
        idle: (pool - busy).max(0.0).floor() as u32,
        read_apart_s: (r.read_s - r.t_s).max(0.0),
        read_first: r.service_pages_first,
        hold_over: hold_over(r, pages.len()),
    })
}

/// The jobs' overrun the bound may count, over every service page that answered: only
/// where each exports it over enough jobs, and then the least mean and the widest spread
/// (one figure for all replicas that no replica's jobs come in under).
fn hold_over(r: &RawScrape, pages: usize) -> Option<HoldOver> {
    let (mean, sd, jobs) = (
        r.each(Role::Service, OVERRUN_MEAN),
        r.each(Role::Service, OVERRUN_SD),
        r.each(Role::Service, OVERRUN_JOBS),
    );
    if [mean.len(), sd.len(), jobs.len()] != [pages; 3]
        || jobs.iter().any(|&n| n < OVERRUN_JOBS_MIN)
    {
        return None;
    }
    Some(HoldOver {
        mean_s: mean.into_iter().fold(f64::INFINITY, f64::min).max(0.0),
        sd_s: sd.into_iter().fold(0.0, f64::max),
    })
}

/// Each busy server (`all`, lower edges ascending) marked live where the live ladder
/// (`live`, ascending, at most `all` at each edge) counts it: at each edge, the first of
/// the servers there as many as the live ladder has. Every one live where `live` is None.
fn mark_live(all: &[f64], live: Option<&[f64]>) -> Vec<BusyServer> {
    let mut next = live.map(|l| l.iter().peekable());
    all.iter()
        .map(|&free_s| {
            let live = match next.as_mut() {
                None => true,
                Some(l) => l.next_if(|&&e| e == free_s).is_some(),
            };
            BusyServer { free_s, live }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::expo::parse;
    use crate::rehearse::series::TargetScrape;

    fn page(rungs: &[(&str, f64)], pool: Option<f64>) -> String {
        let mut text: String = rungs
            .iter()
            .map(|(le, n)| format!("{BUSY_FOR}{{le_s=\"{le}\"}} {n}\n"))
            .collect();
        if let Some(p) = pool {
            text.push_str(&format!("{CONCURRENCY} {p}\n"));
        }
        text
    }

    fn scrape(pages: &[Option<String>]) -> RawScrape {
        RawScrape {
            t_s: 1.0,
            read_s: 1.01,
            service_pages_first: false,
            targets: pages
                .iter()
                .enumerate()
                .map(|(i, text)| TargetScrape {
                    role: Role::Service,
                    instance: format!("service-{i}"),
                    points: text.as_deref().map(parse),
                })
                .collect(),
        }
    }

    /// Two replicas: each busy server at its bucket's lower edge (past the last edge, at
    /// it), the idle ones the pools less the busy, the pages read up to the probe's span
    /// apart; a replica that did not answer is not read.
    #[test]
    fn each_busy_server_is_placed_at_its_buckets_lower_edge() {
        let a = page(
            &[("0.025", 1.0), ("0.1", 1.0), ("0.25", 3.0), ("+Inf", 4.0)],
            Some(4.0),
        );
        let b = page(&[("0.025", 0.0), ("0.25", 1.0), ("+Inf", 1.0)], Some(4.0));
        let s = servers_at(&scrape(&[Some(a), Some(b), None])).expect("servers");
        let free: Vec<Vec<f64>> = s
            .by_replica
            .iter()
            .map(|r| r.iter().map(|b| b.free_s).collect())
            .collect();
        assert_eq!(free, [vec![0.0, 0.1, 0.1, 0.25], vec![0.025]]);
        // No live ladder on these pages: every busy server may answer a client.
        assert!(s.by_replica.iter().flatten().all(|b| b.live));
        assert_eq!(s.idle, 3);
        assert!((s.read_apart_s - 0.01).abs() < 1e-9);
    }

    /// With the live ladder on every page, each edge's first servers as many as it counts
    /// are live, the rest finish work nobody waits for.
    #[test]
    fn the_live_ladder_marks_the_servers_whose_client_still_waits() {
        let a = format!(
            "{}{}",
            page(&[("0.1", 1.0), ("0.25", 3.0), ("+Inf", 3.0)], Some(4.0)),
            "recover_demo_service_busy_live_for_within{le_s=\"0.1\"} 0\nrecover_demo_service_busy_live_for_within{le_s=\"0.25\"} 1\nrecover_demo_service_busy_live_for_within{le_s=\"+Inf\"} 1\n"
        );
        let s = servers_at(&scrape(&[Some(a)])).expect("servers");
        let marks: Vec<(f64, bool)> = s.by_replica[0].iter().map(|b| (b.free_s, b.live)).collect();
        assert_eq!(marks, [(0.0, false), (0.1, true), (0.1, false)]);
    }

    /// The jobs' overrun is read where every page exports it over enough jobs: the least
    /// mean and the widest spread; a page without it, or over too few jobs, leaves it
    /// unknown.
    #[test]
    fn the_overrun_is_the_pages_least_mean_and_widest_spread() {
        let with = |mean: f64, sd: f64, jobs: f64| {
            format!(
                "{}{OVERRUN_MEAN} {mean}\n{OVERRUN_SD} {sd}\n{OVERRUN_JOBS} {jobs}\n",
                page(&[("0.1", 1.0), ("+Inf", 1.0)], Some(2.0))
            )
        };
        let read = |pages: &[String]| {
            let pages: Vec<Option<String>> = pages.iter().cloned().map(Some).collect();
            servers_at(&scrape(&pages)).expect("servers").hold_over
        };
        let both = read(&[with(0.001, 0.0005, 400.0), with(0.002, 0.0003, 300.0)]);
        assert_eq!(
            both,
            Some(HoldOver {
                mean_s: 0.001,
                sd_s: 0.0005
            })
        );
        let bare = page(&[("0.1", 1.0), ("+Inf", 1.0)], Some(2.0));
        assert_eq!(read(&[with(0.001, 0.0005, 400.0), bare]), None);
        assert_eq!(read(&[with(0.001, 0.0005, 29.0)]), None);
    }

    /// A service page without the ladder (an older or other service), or without its
    /// `+Inf` rung, leaves the servers unknown rather than counting part of them.
    #[test]
    fn a_page_without_the_ladder_leaves_the_servers_unknown() {
        let full = page(&[("0.1", 1.0), ("+Inf", 1.0)], Some(2.0));
        let older = page(&[], Some(2.0));
        let no_inf = page(&[("0.1", 1.0)], Some(2.0));
        assert!(servers_at(&scrape(&[Some(full.clone())])).is_some());
        assert_eq!(
            servers_at(&scrape(&[Some(full.clone()), Some(older)])),
            None
        );
        assert_eq!(servers_at(&scrape(&[Some(full), Some(no_inf)])), None);
        assert_eq!(servers_at(&scrape(&[None])), None);
    }
}
