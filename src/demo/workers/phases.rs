//! Where each worker in the retry loop stands, exported as two cumulative gauges over one
//! ladder of durations, computed at each scrape:
//! `recover_demo_workers_next_attempt_within{le_s}` (waiting out a retry delay, next
//! attempt due within `le_s` s) and `recover_demo_workers_attempt_left_within{le_s}` (a
//! retry attempt out, given up on within `le_s` s). The label is not Prometheus's `le`,
//! which is reserved for histograms' buckets (`promtool check metrics` rejects it on a
//! gauge): these are counts at an instant, not observations since the start.
//!
//! Why it exists: `in_retry_loop` and `retrying_in_flight` say how many clients are in the
//! loop, not when each can next be answered, and a lower bound on recovery needs that
//! (a waiting client cannot be answered before its next attempt; an attempt out cannot be
//! answered after its client gave up). Those times only exist relative to the scrape's
//! instant, so the poll loop keeps each client's own state (one slot per worker, cheap to
//! write) and a collector turns the slots into the ladders when `/metrics` is read.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One worker's place in its poll, as the ladders read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Not in the retry loop (between polls, or on a poll's first attempt).
    #[default]
    Idle,
    /// In the loop, sleeping out a retry delay until `next_at`.
    Waiting { next_at: Instant },
    /// In the loop with a retry attempt out, given up on at `gives_up_at`.
    Out { gives_up_at: Instant },
}

/// Every worker's phase, one slot each, written by its poll loop and read at each scrape.
#[derive(Debug)]
pub struct Board {
    slots: Box<[Mutex<Phase>]>,
}

impl Board {
    pub fn new(workers: usize) -> Self {
        Board {
            slots: (0..workers).map(|_| Mutex::new(Phase::Idle)).collect(),
        }
    }

    /// Worker `index`'s phase is now `phase` (an index past the board is ignored: a worker
    /// the board was not sized for is not exported rather than a panic in the poll loop).
    pub fn set(&self, index: usize, phase: Phase) {
        if let Some(slot) = self.slots.get(index) {
            *lock(slot) = phase;
        }
    }

    /// Worker `index`'s phase (idle for an index past the board).
    pub fn phase(&self, index: usize) -> Phase {
        self.slots.get(index).map(|s| *lock(s)).unwrap_or_default()
    }

    /// Time from `now` to each waiting worker's next attempt, and to each attempt out's
    /// deadline (0 for one already due).
    pub fn remaining(&self, now: Instant) -> (Vec<Duration>, Vec<Duration>) {
        let (mut waiting, mut out) = (Vec::new(), Vec::new());
        for slot in self.slots.iter() {
            match *lock(slot) {
                Phase::Idle => {}
                Phase::Waiting { next_at } => waiting.push(next_at.saturating_duration_since(now)),
                Phase::Out { gives_up_at } => out.push(gives_up_at.saturating_duration_since(now)),
            }
        }
        (waiting, out)
    }
}

fn lock(slot: &Mutex<Phase>) -> MutexGuard<'_, Phase> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// The ladder's finite edges, milliseconds: every 25 ms to 2.5 s (a healthy service time's
/// resolution where retry delays and timeouts usually sit), then every 250 ms to 10 s.
pub fn edges_ms() -> impl Iterator<Item = u64> {
    (1..=100)
        .map(|i| 25 * i)
        .chain((1..=30).map(|j| 2500 + 250 * j))
}

/// For each edge, how many of `remaining` are at most it; and how many there are in all
/// (the `+Inf` edge).
pub fn ladder(remaining: &[Duration]) -> (Vec<(u64, u64)>, u64) {
    let mut sorted: Vec<Duration> = remaining.to_vec();
    sorted.sort();
    let edges = edges_ms()
        .map(|edge| {
            let le = Duration::from_millis(edge);
            (edge, sorted.partition_point(|d| *d <= le) as u64)
        })
        .collect();
    (edges, sorted.len() as u64)
}

/// The label naming a rung's edge.
pub const EDGE_LABEL: &str = "le_s";

/// The edge label's value: seconds, as Prometheus writes bucket bounds.
fn le_label(edge_ms: u64) -> String {
    (edge_ms as f64 / 1000.0).to_string()
}

/// Computes both ladders from the board at each scrape.
#[derive(Debug)]
pub struct PhasesCollector(pub Arc<Board>);

impl Collector for PhasesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (waiting, out) = self.0.remaining(Instant::now());
        let gauges = [
            (
                "next_attempt_within",
                "Workers in the retry loop waiting out a retry delay whose next attempt is due within le seconds of the scrape",
                waiting,
            ),
            (
                "attempt_left_within",
                "Workers in the retry loop with an attempt out that they give up on within le seconds of the scrape",
                out,
            ),
        ];
        for (name, help, remaining) in gauges {
            encode_ladder(&mut encoder, name, help, &remaining)?;
        }
        Ok(())
    }
}

/// One cumulative gauge `name{le_s}` over the ladder of `remaining`, with its `+Inf` rung
/// (the count of all): the one way a demo process writes a ladder, so that the workers'
/// and the service's read alike.
pub fn encode_ladder(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    remaining: &[Duration],
) -> Result<(), std::fmt::Error> {
    let (edges, total) = ladder(remaining);
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    let rungs = edges
        .into_iter()
        .map(|(edge, n)| (le_label(edge), n))
        .chain([("+Inf".to_string(), total)]);
    for (le, n) in rungs {
        let labels = [(EDGE_LABEL, le)];
        ConstGauge::new(n as i64).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_has_its_edges_every_25_ms_then_every_250_ms() {
        let e: Vec<u64> = edges_ms().collect();
        assert_eq!(e.len(), 130);
        assert_eq!(&e[..3], [25, 50, 75]);
        assert_eq!(&e[99..102], [2500, 2750, 3000]);
        assert_eq!(e.last(), Some(&10_000));
        assert_eq!(le_label(75), "0.075");
        assert_eq!(le_label(2750), "2.75");
        assert_eq!(le_label(10_000), "10");
    }

    /// Counts are cumulative, an edge includes what ends on it, and what lies past the last
    /// edge counts in the total only.
    #[test]
    fn the_ladder_counts_what_ends_at_or_before_each_edge() {
        let ms = |m: u64| Duration::from_millis(m);
        let (edges, total) = ladder(&[ms(0), ms(25), ms(26), ms(990), ms(2600), ms(12_000)]);
        let at = |le: u64| edges.iter().find(|(e, _)| *e == le).map(|(_, n)| *n);
        assert_eq!(total, 6);
        assert_eq!(at(25), Some(2));
        assert_eq!(at(50), Some(3));
        assert_eq!(at(975), Some(3));
        assert_eq!(at(1000), Some(4));
        assert_eq!(at(2500), Some(4));
        assert_eq!(at(2750), Some(5));
        assert_eq!(at(10_000), Some(5));
    }

    /// Each worker counts in the ladder of its phase, by the time left from the instant the
    /// scrape reads the board; an idle worker counts in neither.
    #[test]
    fn the_board_reads_time_left_from_the_scrape() {
        let now = Instant::now();
        let b = Board::new(4);
        b.set(
            0,
            Phase::Waiting {
                next_at: now + Duration::from_millis(300),
            },
        );
        b.set(
            1,
            Phase::Out {
                gives_up_at: now + Duration::from_millis(800),
            },
        );
        b.set(2, Phase::Waiting { next_at: now });
        b.set(9, Phase::Out { gives_up_at: now });
        let (waiting, out) = b.remaining(now + Duration::from_millis(100));
        assert_eq!(waiting, [Duration::from_millis(200), Duration::ZERO]);
        assert_eq!(out, [Duration::from_millis(700)]);
        b.set(1, Phase::Idle);
        assert!(b.remaining(now).1.is_empty());
    }
}
