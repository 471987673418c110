//! Where the service's servers stand, exported at each scrape as cumulative gauges over
//! the workers' ladder: `recover_demo_service_busy_for_within{le_s}`, the servers (members
//! of the worker pool) whose job in service ends within `le_s` seconds of the scrape, and
//! `recover_demo_service_busy_live_for_within{le_s}`, those of them whose job ends before
//! its client stops waiting. An idle server is not counted: the `+Inf` rung is the busy
//! servers, and `recover_demo_service_concurrency_limit` all of them.
//!
//! Why it exists: a job's cost is fixed when it starts (overloaded or cold, it may hold its
//! server well past a healthy service time), so right after a stuck spell no server may be
//! free for a while, and a lower bound on recovery that counts every server free at the
//! scrape overcounts the answers that can come soon; a job whose client will have given up
//! by its end answers nobody, so its server's first useful answer comes a service time
//! later. The times only exist relative to the scrape's instant, so the pool's free times
//! are copied when `/metrics` is read and a collector turns them into the ladders (as the
//! workers' phases are, `demo::workers::phases`).

use crate::demo::workers::encode_ladder;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The pool's free times as last copied: per server, when its job in service ends and
/// whether that is before its client stops waiting (`None` while idle).
#[derive(Debug, Default)]
pub struct BusyBoard(Mutex<Vec<Option<(Instant, bool)>>>);

impl BusyBoard {
    /// The pool now stands as `busy_until` and `live` say, member by member.
    pub fn set(&self, busy_until: &[Option<Instant>], live: &[bool]) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        slot.clear();
        slot.extend(
            busy_until
                .iter()
                .enumerate()
                .map(|(i, b)| b.map(|until| (until, live.get(i).copied().unwrap_or(false)))),
        );
    }

    /// Time from `now` to each busy server's end of job (0 for one past it: its job
    /// overran its cost and ends any moment); with `live_only`, only the servers whose
    /// job ends before its client stops waiting.
    pub fn remaining(&self, now: Instant, live_only: bool) -> Vec<std::time::Duration> {
        let slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        slot.iter()
            .flatten()
            .filter(|(_, live)| *live || !live_only)
            .map(|(until, _)| until.saturating_duration_since(now))
            .collect()
    }
}

/// Computes the ladder from the board at each scrape.
#[derive(Debug)]
pub struct BusyCollector(pub Arc<BusyBoard>);

impl Collector for BusyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        encode_ladder(
            &mut encoder,
            "busy_for_within",
            "Servers busy with a job that ends within le_s seconds of the scrape (idle servers are not counted)",
            &self.0.remaining(now, false),
        )?;
        encode_ladder(
            &mut encoder,
            "busy_live_for_within",
            "Servers busy with a job that ends within le_s seconds of the scrape and before its client stops waiting",
            &self.0.remaining(now, true),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Each busy server counts by the time left on its job from the scrape; an idle one
    /// counts nowhere, one past its end counts as ending now.
    #[test]
    fn the_board_reads_each_busy_servers_time_left_from_the_scrape() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let b = BusyBoard::default();
        b.set(
            &[Some(now + ms(250)), None, Some(now + ms(40)), Some(now)],
            &[true, false, false, true],
        );
        let left = b.remaining(now + ms(10), false);
        assert_eq!(left, [ms(240), ms(30), ms(0)]);
        // Only the jobs that end before their clients stop waiting.
        assert_eq!(b.remaining(now + ms(10), true), [ms(240), ms(0)]);
        b.set(&[None, None], &[false, false]);
        assert!(b.remaining(now, false).is_empty());
    }

    /// The page: the ladder with its `+Inf` rung, the label `le_s` (a gauge may not use
    /// `le`), a server counted in every rung at or past its time left.
    #[test]
    fn the_page_has_the_cumulative_ladder_under_le_s() {
        let board = Arc::new(BusyBoard::default());
        let mut r = prometheus_client::registry::Registry::with_prefix("recover_demo_service");
        r.register_collector(Box::new(BusyCollector(board.clone())));
        let far = Instant::now() + Duration::from_secs(60);
        board.set(&[Some(far), None, Some(far)], &[false, false, true]);
        let page = crate::util::exposition::encode_text(&r);
        let name = "recover_demo_service_busy_for_within";
        assert!(
            page.contains(&format!("{name}{{le_s=\"0.025\"}} 0\n")),
            "{page}"
        );
        assert!(
            page.contains(&format!("{name}{{le_s=\"10\"}} 0\n")),
            "{page}"
        );
        assert!(
            page.contains(&format!("{name}{{le_s=\"+Inf\"}} 2\n")),
            "{page}"
        );
        assert!(page.contains(&format!("# TYPE {name} gauge")), "{page}");
        let live = "recover_demo_service_busy_live_for_within";
        assert!(
            page.contains(&format!("{live}{{le_s=\"+Inf\"}} 1\n")),
            "{page}"
        );
    }
}
