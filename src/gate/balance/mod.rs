//! Spreading requests over the upstream replicas: a balancing [`policy`] (least
//! outstanding requests by default, power of two choices, or round robin as the
//! baseline), latency [`outlier`] ejection over a per-replica [`window`], and a short
//! pass-over for a replica that refused a connection.
//!
//! The decisions are pure functions in the submodules; this module holds the shared state
//! (atomics read on every request) and applies them. The outlier evaluation runs on the
//! request path, by whichever request first finds the interval over, so the gate needs no
//! timer task: with no traffic nothing changes anyway.

pub mod outlier;
pub mod policy;
pub mod window;

use super::telemetry::{GateMetrics, ReplicaMetrics};
use outlier::{Event, Health, OutlierConfig};
use policy::{admitted_by_weight, choose, mix, BalancePolicy, Candidate};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use window::LatencyWindow;

/// How long a replica that refused a connection is passed over (if another is available).
const REFUSED_FOR: Duration = Duration::from_secs(1);

/// Replicas up to this many are chosen among without a heap allocation.
const STACK_REPLICAS: usize = 32;

/// How the gate balances: the policy, and outlier ejection (`None`: off).
#[derive(Debug, Clone, PartialEq)]
pub struct BalanceConfig {
    pub policy: BalancePolicy,
    pub outlier: Option<OutlierConfig>,
}

impl Default for BalanceConfig {
    fn default() -> Self {
        BalanceConfig {
            policy: BalancePolicy::LeastOutstanding,
            outlier: Some(OutlierConfig::default()),
        }
    }
}

/// One upstream replica: where it is, how busy, and whether it is out.
pub struct Replica {
    pub authority: http::uri::Authority,
    outstanding: AtomicUsize,
    /// Milliseconds since `Replicas::epoch` before which a refusing replica is skipped.
    refused_until_ms: AtomicU64,
    /// Outlier ejection: out until this moment, then ramping back (0: never ejected).
    ejected_until_ms: AtomicU64,
    window: LatencyWindow,
    metrics: ReplicaMetrics,
}

struct Ejection {
    cfg: OutlierConfig,
    /// Judge replicas, or only measure their windows for the metrics.
    enabled: bool,
    next_eval_ms: AtomicU64,
    health: Mutex<Vec<Health>>,
}

pub struct Replicas {
    replicas: Vec<Replica>,
    /// Round robin's position, least outstanding's scan start, and the random source.
    next: AtomicUsize,
    epoch: Instant,
    policy: BalancePolicy,
    ejection: Ejection,
}

/// A request's claim on a replica; released when it drops.
pub struct Pick<'a> {
    pub replica: &'a Replica,
    pub index: usize,
    set: &'a Replicas,
    /// Taken when the request's latency is recorded, so it is recorded once.
    started: Option<Instant>,
}

impl Pick<'_> {
    /// The request ended with an answer (or a timeout): its latency counts toward the
    /// replica's window.
    pub fn observe(&mut self) {
        if let Some(t) = self.started.take() {
            self.set.observe(self.index, t);
        }
    }
}

impl Drop for Pick<'_> {
    fn drop(&mut self) {
        self.replica.outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Replicas {
    /// `upstreams` must be non-empty (the config checks).
    pub fn new(
        upstreams: &[http::uri::Authority],
        cfg: &BalanceConfig,
        metrics: &GateMetrics,
    ) -> Self {
        let ejection = cfg.outlier.clone();
        metrics.balancer(cfg.policy, ejection.is_some());
        let ocfg = ejection.clone().unwrap_or_default();
        Replicas {
            replicas: upstreams
                .iter()
                .map(|a| Replica {
                    authority: a.clone(),
                    outstanding: AtomicUsize::new(0),
                    refused_until_ms: AtomicU64::new(0),
                    ejected_until_ms: AtomicU64::new(0),
                    window: LatencyWindow::default(),
                    metrics: metrics.replica(a.as_str()),
                })
                .collect(),
            next: AtomicUsize::new(0),
            epoch: Instant::now(),
            policy: cfg.policy,
            ejection: Ejection {
                next_eval_ms: AtomicU64::new(ocfg.interval.as_millis() as u64),
                enabled: ejection.is_some(),
                health: Mutex::new(vec![Health::default(); upstreams.len()]),
                cfg: ocfg,
            },
        }
    }

    /// Choose a replica for one request, by the policy, among those not ejected (a
    /// readmitted one by its weight).
    pub fn pick(&self) -> Pick<'_> {
        let n = self.replicas.len();
        let started = Instant::now();
        let index = if n == 1 {
            0
        } else {
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            let random = mix(start as u64);
            let now = self.ms_at(started);
            let ramp = self.ejection.cfg.ramp.as_millis() as u64;
            let candidate = |i: usize| {
                let r = &self.replicas[i];
                let refused = r.refused_until_ms.load(Ordering::Relaxed) > now;
                let until = r.ejected_until_ms.load(Ordering::Relaxed);
                let health = Health {
                    ejected_until_ms: (until > 0).then_some(until),
                    ..Health::default()
                };
                let w = outlier::weight(&health, now, ramp);
                Candidate {
                    outstanding: r.outstanding.load(Ordering::Relaxed),
                    available: !refused && w > 0.0 && admitted_by_weight(w, mix(random ^ i as u64)),
                }
            };
            let chosen = if n <= STACK_REPLICAS {
                let mut buf = [Candidate::default(); STACK_REPLICAS];
                for (i, c) in buf.iter_mut().take(n).enumerate() {
                    *c = candidate(i);
                }
                choose(self.policy, &buf[..n], start, random)
            } else {
                let v: Vec<_> = (0..n).map(candidate).collect();
                choose(self.policy, &v, start, random)
            };
            chosen.unwrap_or(0)
        };
        let replica = &self.replicas[index];
        replica.outstanding.fetch_add(1, Ordering::Relaxed);
        Pick {
            replica,
            index,
            set: self,
            // One replica: nobody to compare it with, so no window to keep.
            started: (n > 1).then_some(started),
        }
    }

    /// The replica refused or dropped the connection: pass over it for a moment.
    pub fn eject(&self, pick: &Pick<'_>) {
        if self.replicas.len() > 1 {
            let until = self.now_ms() + REFUSED_FOR.as_millis() as u64;
            pick.replica
                .refused_until_ms
                .store(until, Ordering::Relaxed);
        }
    }

    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }

    pub fn outstanding(&self, index: usize) -> usize {
        self.replicas
            .get(index)
            .map_or(0, |r| r.outstanding.load(Ordering::Relaxed))
    }

    fn now_ms(&self) -> u64 {
        self.ms_at(Instant::now())
    }

    fn ms_at(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_millis() as u64
    }

    fn observe(&self, index: usize, started: Instant) {
        let at = Instant::now();
        if let Some(r) = self.replicas.get(index) {
            let latency = at.saturating_duration_since(started);
            r.window.record(latency.as_micros() as u64);
        }
        let now = self.ms_at(at);
        let e = &self.ejection;
        let due = e.next_eval_ms.load(Ordering::Relaxed);
        if now < due {
            return;
        }
        let next = now + e.cfg.interval.as_millis() as u64;
        // One request runs the evaluation; the others carry on.
        if e.next_eval_ms
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.evaluate(now);
        }
    }

    /// Close every replica's window, judge them, and apply and report the verdicts.
    fn evaluate(&self, now: u64) {
        let e = &self.ejection;
        let windows: Vec<_> = self
            .replicas
            .iter()
            .map(|r| r.window.take(e.cfg.stat))
            .collect();
        let mut health = e.health.lock().unwrap_or_else(|p| p.into_inner());
        let events = if e.enabled {
            outlier::evaluate(&e.cfg, now, &windows, &mut health)
        } else {
            Vec::new()
        };
        let ramp = e.cfg.ramp.as_millis() as u64;
        for ((r, h), w) in self.replicas.iter().zip(health.iter()).zip(&windows) {
            r.ejected_until_ms
                .store(h.ejected_until_ms.unwrap_or(0), Ordering::Relaxed);
            r.metrics.ejected.set(i64::from(h.out));
            r.metrics.weight.set(outlier::weight(h, now, ramp));
            if w.requests > 0 {
                r.metrics.window_latency.set(w.latency_ms / 1000.0);
            }
        }
        for ev in events {
            match ev {
                Event::Ejected {
                    replica,
                    for_ms,
                    latency_ms,
                    peers_median_ms,
                } => {
                    let r = &self.replicas[replica];
                    r.metrics.ejections.inc();
                    tracing::warn!(
                        upstream = %r.authority,
                        latency_ms = format!("{latency_ms:.1}"),
                        peers_median_ms = format!("{peers_median_ms:.1}"),
                        for_s = for_ms as f64 / 1000.0,
                        "upstream ejected: latency far above its peers'"
                    );
                }
                Event::Readmitted { replica } => {
                    tracing::info!(
                        upstream = %self.replicas[replica].authority,
                        "upstream readmitted; its weight ramps back"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replicas(policy: BalancePolicy, outlier: Option<OutlierConfig>) -> Replicas {
        let ups: Vec<_> = ["127.0.0.1:1", "127.0.0.1:2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let cfg = BalanceConfig { policy, outlier };
        Replicas::new(&ups, &cfg, &GateMetrics::new())
    }

    #[test]
    fn a_busy_replica_is_avoided_until_it_frees_up() {
        for policy in [BalancePolicy::LeastOutstanding, BalancePolicy::P2c] {
            let r = replicas(policy, None);
            let held = r.pick();
            for _ in 0..10 {
                let p = r.pick();
                assert_ne!(p.index, held.index, "{policy}");
            }
            drop(held);
            assert_eq!(r.outstanding(0) + r.outstanding(1), 0);
        }
    }

    #[test]
    fn round_robin_alternates_whatever_the_load() {
        let r = replicas(BalancePolicy::RoundRobin, None);
        let held = r.pick();
        let next: Vec<_> = (0..4).map(|_| r.pick().index).collect();
        assert_eq!(
            next,
            vec![1 - held.index, held.index, 1 - held.index, held.index]
        );
    }

    #[test]
    fn an_ejected_replica_gets_nothing_until_its_time_is_up() {
        let r = replicas(BalancePolicy::RoundRobin, Some(OutlierConfig::default()));
        r.replicas[0]
            .ejected_until_ms
            .store(r.now_ms() + 60_000, Ordering::Relaxed);
        assert!((0..20).all(|_| r.pick().index == 1));
    }

    #[test]
    fn the_evaluation_ejects_and_shows_it_in_the_metrics() {
        let ups: Vec<_> = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let m = GateMetrics::new();
        let r = Replicas::new(&ups, &BalanceConfig::default(), &m);
        for (i, ms) in [(0, 10), (1, 10), (2, 80)] {
            for _ in 0..10 {
                r.replicas[i].window.record(ms * 1000);
            }
        }
        r.evaluate(5_000);
        let text = m.render();
        for needle in [
            "recover_gate_upstream_ejected{replica=\"127.0.0.1:3\"} 1",
            "recover_gate_upstream_ejected{replica=\"127.0.0.1:1\"} 0",
            "recover_gate_upstream_ejections_total{replica=\"127.0.0.1:3\"} 1",
            "recover_gate_upstream_weight{replica=\"127.0.0.1:3\"} 0",
            "recover_gate_balancer_info{balancer=\"least-outstanding\",outlier_ejection=\"on\"} 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
        assert!((0..20).all(|_| r.pick().index != 2));
    }
}
