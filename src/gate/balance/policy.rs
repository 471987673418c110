//! Which replica gets the next request: the three balancing policies as one pure
//! function, so the gate and the simulator (`recover simulate --scenario slow-replica`)
//! decide exactly alike.
//!
//! - Round robin gives every replica the same share, so a slow replica's queue grows
//!   without bound once its share exceeds what it can finish: the baseline to compare with.
//! - Least outstanding requests looks at every replica and takes the one with the fewest
//!   requests in flight; a slow replica holds its requests longer and so gets fewer.
//! - Power of two choices looks at two replicas drawn at random and takes the less busy:
//!   nearly as good as looking at all of them, and no herd of balancers all picking the
//!   same "least busy" replica at once when each sees the loads a little late.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BalancePolicy {
    RoundRobin,
    #[default]
    LeastOutstanding,
    /// Power of two choices.
    P2c,
}

impl BalancePolicy {
    pub const ALL: [BalancePolicy; 3] = [
        BalancePolicy::RoundRobin,
        BalancePolicy::LeastOutstanding,
        BalancePolicy::P2c,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BalancePolicy::RoundRobin => "round-robin",
            BalancePolicy::LeastOutstanding => "least-outstanding",
            BalancePolicy::P2c => "p2c",
        }
    }
}

impl fmt::Display for BalancePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BalancePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        BalancePolicy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("{s:?} is not one of round-robin, least-outstanding, p2c"))
    }
}

/// One replica as the balancer sees it at the moment of choosing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Candidate {
    /// Requests sent to it and not yet answered.
    pub outstanding: usize,
    /// False while it is ejected, or held back by its readmission weight for this pick.
    pub available: bool,
}

/// The index of the chosen replica, or `None` for an empty slice.
///
/// `start` rotates between calls (round robin's position; where least outstanding starts
/// its scan, so that ties do not all land on the first replica); `random` is a fresh
/// random number (power of two choices draws its pair from it). When no replica is
/// available, every replica is considered: answering from a replica believed bad beats
/// refusing the request outright.
pub fn choose(
    policy: BalancePolicy,
    candidates: &[Candidate],
    start: usize,
    random: u64,
) -> Option<usize> {
    let n = candidates.len();
    if n == 0 {
        return None;
    }
    let any = candidates.iter().any(|c| c.available);
    let ok = |i: usize| !any || candidates[i].available;
    let mut scan = (0..n).map(|k| (start + k) % n).filter(|&i| ok(i));
    match policy {
        BalancePolicy::RoundRobin => scan.next(),
        BalancePolicy::LeastOutstanding => scan.min_by_key(|&i| candidates[i].outstanding),
        BalancePolicy::P2c => {
            let m = if any {
                candidates.iter().filter(|c| c.available).count()
            } else {
                n
            };
            // The a-th and b-th eligible replicas, a != b, from one random number.
            let a = (random % m as u64) as usize;
            let mut b = if m > 1 {
                ((random / m as u64) % (m as u64 - 1)) as usize
            } else {
                a
            };
            if m > 1 && b >= a {
                b += 1;
            }
            let nth = |k: usize| (0..n).filter(|&i| ok(i)).nth(k);
            let (ia, ib) = (nth(a)?, nth(b)?);
            if candidates[ib].outstanding < candidates[ia].outstanding {
                Some(ib)
            } else {
                Some(ia)
            }
        }
    }
}

/// Whether a replica readmitted with `weight` (0..=1) takes part in this pick: it does
/// with probability `weight`, so it gets about that share of what it would otherwise.
pub fn admitted_by_weight(weight: f64, random: u64) -> bool {
    if weight >= 1.0 {
        return true;
    }
    ((random >> 11) as f64 / (1u64 << 53) as f64) < weight
}

/// SplitMix64's output function: turns a counter into a well-mixed random number, so the
/// gate needs no shared generator state beyond the counter it already keeps.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(outstanding: usize, available: bool) -> Candidate {
        Candidate {
            outstanding,
            available,
        }
    }

    #[test]
    fn names_round_trip() {
        for p in BalancePolicy::ALL {
            assert_eq!(p.name().parse::<BalancePolicy>(), Ok(p));
        }
        assert!("random"
            .parse::<BalancePolicy>()
            .unwrap_err()
            .contains("p2c"));
    }

    #[test]
    fn round_robin_rotates_and_skips_the_unavailable() {
        let cs = [c(9, true), c(0, false), c(5, true), c(0, true)];
        let got: Vec<_> = (0..4)
            .map(|s| choose(BalancePolicy::RoundRobin, &cs, s, 0).unwrap())
            .collect();
        // Load plays no part; replica 1 is passed over for the next available one.
        assert_eq!(got, vec![0, 2, 2, 3]);
    }

    #[test]
    fn least_outstanding_takes_the_least_busy_available_and_rotates_ties() {
        let cs = [c(3, true), c(1, true), c(0, false)];
        assert_eq!(choose(BalancePolicy::LeastOutstanding, &cs, 0, 0), Some(1));
        let tie = [c(0, true), c(0, true)];
        assert_eq!(choose(BalancePolicy::LeastOutstanding, &tie, 1, 0), Some(1));
        assert_eq!(choose(BalancePolicy::LeastOutstanding, &tie, 2, 0), Some(0));
    }

    #[test]
    fn with_nothing_available_every_replica_is_considered() {
        let cs = [c(3, false), c(1, false)];
        assert_eq!(choose(BalancePolicy::LeastOutstanding, &cs, 0, 0), Some(1));
        assert_eq!(choose(BalancePolicy::RoundRobin, &cs, 1, 0), Some(1));
        assert!(choose(BalancePolicy::P2c, &cs, 0, 7).is_some());
        assert_eq!(choose(BalancePolicy::P2c, &[], 0, 7), None);
    }

    #[test]
    fn p2c_takes_the_less_busy_of_two_distinct_available_replicas() {
        let cs = [c(4, true), c(0, false), c(1, true), c(7, true)];
        let mut chosen = [0u32; 4];
        for r in 0..600u64 {
            let i = choose(BalancePolicy::P2c, &cs, 0, mix(r)).unwrap();
            chosen[i] += 1;
        }
        // Never the unavailable one; the busiest (7) only wins a pair with itself, which
        // cannot happen: it is never chosen. Replica 2 (1 outstanding) wins every pair it
        // is in (two of the three pairs), replica 0 the remaining one.
        assert_eq!(chosen[1], 0);
        assert_eq!(chosen[3], 0);
        assert!(chosen[2] > chosen[0] && chosen[0] > 100, "{chosen:?}");
    }

    #[test]
    fn weight_admits_about_that_share() {
        let n = (0..10_000u64)
            .filter(|&r| admitted_by_weight(0.25, mix(r)))
            .count();
        assert!((2300..2700).contains(&n), "{n}");
        assert!(admitted_by_weight(1.0, u64::MAX));
        assert!(!admitted_by_weight(0.0, 0));
    }
}
