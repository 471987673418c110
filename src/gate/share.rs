//! One limit, several gate replicas: the limit a controller sets is the total the service
//! may receive, and each replica enforces its share of it. Without this, N replicas behind
//! a load balancer admit N times the plan and a service that needs its load cut to
//! capacity_cold / k stays stuck.
//!
//! The division is exact where it can be: the rate is divided evenly; the burst and the
//! in-flight cap are whole numbers, so the remainder goes one each to the lowest ranks and
//! the shares add up to the total. The only overshoot is a burst smaller than the number
//! of replicas: a replica with a rate needs a burst of at least 1.

use super::limit::{Fill, Limit};

/// The gate replicas sharing one limit, as this replica sees them: how many (itself
/// included) and where it stands among them (its place in the sorted list of names), which
/// decides who takes the remainder of a whole-number cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    pub count: usize,
    pub rank: usize,
}

impl Peers {
    /// A gate on its own: its share is the whole limit.
    pub const ALONE: Peers = Peers { count: 1, rank: 0 };

    /// `count` replicas (at least 1: this one) with this one at `rank` (clamped inside).
    pub fn new(count: usize, rank: usize) -> Peers {
        let count = count.max(1);
        Peers {
            count,
            rank: rank.min(count - 1),
        }
    }

    /// This replica's place among `names` (its own name included or not: it always
    /// counts itself, because a replica about to become ready takes traffic before the
    /// others see it).
    pub fn among<'a>(names: impl IntoIterator<Item = &'a str>, me: &str) -> Peers {
        let mut all: Vec<&str> = names.into_iter().collect();
        all.push(me);
        all.sort_unstable();
        all.dedup();
        let rank = all.iter().position(|n| *n == me).unwrap_or(0);
        Peers::new(all.len(), rank)
    }
}

/// `total` split `peers.count` ways: `total / count`, the remainder one each to the lowest
/// ranks.
fn split(total: u32, peers: Peers) -> u32 {
    let n = peers.count as u32;
    total / n + u32::from((peers.rank as u32) < total % n)
}

/// This replica's part of `total`. Pure; `Peers::ALONE` gives `total` back unchanged.
pub fn share(total: &Limit, peers: Peers) -> Limit {
    let n = peers.count.max(1);
    let rate_per_s = total.rate_per_s.map(|r| r / n as f64);
    let mut burst = split(total.burst, peers);
    if rate_per_s.is_some_and(|r| r > 0.0) {
        burst = burst.max(1);
    }
    Limit {
        rate_per_s,
        burst: burst.max(1),
        max_in_flight: total.max_in_flight.map(|m| split(m, peers)),
        note: total.note.clone(),
        shadow: total.shadow,
    }
}

/// This replica's part of a change's `fill`: a count of tokens splits as the burst does
/// (so the parts add back up to it); full stays full at each share's burst.
pub fn share_fill(fill: Fill, peers: Peers) -> Fill {
    match fill {
        Fill::Tokens(n) => Fill::Tokens(split(n, peers)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(rate: Option<f64>, burst: u32, mif: Option<u32>) -> Limit {
        Limit {
            rate_per_s: rate,
            burst,
            max_in_flight: mif,
            note: None,
            shadow: false,
        }
    }

    #[test]
    fn a_fill_of_tokens_splits_as_the_burst_does() {
        let parts: Vec<Fill> = (0..3)
            .map(|r| share_fill(Fill::Tokens(10), Peers::new(3, r)))
            .collect();
        assert_eq!(parts, [Fill::Tokens(4), Fill::Tokens(3), Fill::Tokens(3)]);
        assert_eq!(share_fill(Fill::Full, Peers::new(3, 1)), Fill::Full);
        assert_eq!(share_fill(Fill::Carried, Peers::ALONE), Fill::Carried);
    }

    #[test]
    fn shares_add_up_to_the_total() {
        let total = limit(Some(90.0), 10, Some(40));
        for n in 1..=7 {
            let shares: Vec<Limit> = (0..n).map(|r| share(&total, Peers::new(n, r))).collect();
            let rate: f64 = shares.iter().map(|s| s.rate_per_s.unwrap()).sum();
            assert!((rate - 90.0).abs() < 1e-9, "{n}: {rate}");
            let mif: u32 = shares.iter().map(|s| s.max_in_flight.unwrap()).sum();
            assert_eq!(mif, 40, "{n} replicas");
            let burst: u32 = shares.iter().map(|s| s.burst).sum();
            assert_eq!(burst, 10, "{n} replicas");
        }
        assert_eq!(share(&total, Peers::ALONE), total);
    }

    #[test]
    fn the_remainder_goes_to_the_lowest_ranks_and_a_rate_keeps_a_burst() {
        let total = limit(Some(3.0), 2, Some(5));
        let s: Vec<Limit> = (0..3).map(|r| share(&total, Peers::new(3, r))).collect();
        assert_eq!(
            s.iter()
                .map(|l| l.max_in_flight.unwrap())
                .collect::<Vec<_>>(),
            [2, 2, 1]
        );
        // A burst of 2 over 3 replicas: each still needs 1 to admit anything.
        assert_eq!(s.iter().map(|l| l.burst).collect::<Vec<_>>(), [1, 1, 1]);
        // Unlimited and block-all stay what they are.
        assert_eq!(
            share(&Limit::unlimited(), Peers::new(3, 2)),
            Limit::unlimited()
        );
        let blocked = share(&limit(Some(0.0), 1, Some(0)), Peers::new(2, 1));
        assert!(blocked.blocks_all());
    }

    #[test]
    fn a_replica_counts_itself_and_ranks_by_name() {
        assert_eq!(Peers::among(["b", "c"], "a"), Peers::new(3, 0));
        assert_eq!(Peers::among(["a", "b", "c"], "c"), Peers::new(3, 2));
        assert_eq!(Peers::among([], "x"), Peers::ALONE);
        assert_eq!(Peers::new(0, 5), Peers::ALONE);
    }
}
