//! The rehearsal's time series: raw scrapes of every `/metrics` page, and the rates and
//! quantiles derived from them (counter deltas, histogram bucket deltas).
//!
//! Why it exists: the timeline, the steady-state check and the report all read the same
//! numbers, so they are derived once, here, by pure functions that tests can feed.

use super::expo::Point;
use serde::Serialize;

/// Whose page a scrape is. Matches `platform::ScrapeEndpoint::role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Gate,
    Service,
    Clients,
}

/// One target's page at one instant; `None` when the target did not answer.
#[derive(Debug, Clone)]
pub struct TargetScrape {
    pub role: Role,
    pub instance: String,
    pub points: Option<Vec<Point>>,
}

/// Every target scraped at (about) the same instant.
#[derive(Debug, Clone)]
pub struct RawScrape {
    /// Seconds on the rehearsal clock (0 = the trigger fired; negative before): the tick,
    /// taken before any page is fetched.
    pub t_s: f64,
    /// When every page had been read (or given up on), same clock: each page's values
    /// are of some instant between `t_s` and this.
    pub read_s: f64,
    /// The service's pages were all read before any other page was asked for: each
    /// service page's values are of an instant no later than the clients' page's.
    pub service_pages_first: bool,
    pub targets: Vec<TargetScrape>,
}

/// Derived figures at one instant, over the window since an earlier scrape. `None` means
/// no data (target down, no observations), never zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sample {
    pub t_s: f64,
    /// Requests per second arriving at the gate (first attempts and retries).
    pub offered_per_s: Option<f64>,
    /// Requests per second the gate passed to the service.
    pub admitted_per_s: Option<f64>,
    /// Requests per second the gate answered 429, over the last scrape interval only.
    pub rejected_per_s: Option<f64>,
    /// Successful client attempts per second (useful responses).
    pub goodput_per_s: Option<f64>,
    /// First attempts per second at the gate (demand from clients not in a retry loop).
    pub first_attempt_per_s: Option<f64>,
    /// p99 of client attempt latency over the window, seconds.
    pub p99_latency_s: Option<f64>,
    /// The gate's rate limit; +inf when unlimited.
    pub gate_limit_per_s: Option<f64>,
    /// Requests queued at the service, summed over replicas.
    pub queue_depth: Option<f64>,
    /// Clients currently in a retry loop.
    pub workers_retrying: Option<f64>,
    /// Service completions per second, useful plus abandoned.
    pub work_per_s: Option<f64>,
    /// Service replicas that answered their `/metrics`.
    pub services_up: u32,
}

impl RawScrape {
    fn pages(&self, role: Role) -> impl Iterator<Item = (&str, &[Point])> {
        self.targets
            .iter()
            .filter(move |t| t.role == role)
            .filter_map(|t| t.points.as_deref().map(|p| (t.instance.as_str(), p)))
    }

    /// Sum of matching points over every answering target of `role`.
    pub fn sum(&self, role: Role, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        sum_matching(self.pages(role).flat_map(|(_, pts)| pts), name, labels)
    }

    /// Mean of a gauge over the answering targets of `role` that expose it.
    pub fn mean(&self, role: Role, name: &str) -> Option<f64> {
        let vals: Vec<f64> = self
            .pages(role)
            .filter_map(|(_, pts)| sum_matching(pts, name, &[]))
            .collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    }

    /// A gauge's value at each answering target of `role` that exposes it.
    pub fn each(&self, role: Role, name: &str) -> Vec<f64> {
        self.pages(role)
            .filter_map(|(_, pts)| sum_matching(pts, name, &[]))
            .collect()
    }

    /// At each answering target of `role`, the points named `name` as `(value of their
    /// label `label`, value)` (points without the label left out); an empty list for a
    /// page without any, so a caller can tell a page that lacks the series.
    pub fn by_label(&self, role: Role, name: &str, label: &str) -> Vec<Vec<(&str, f64)>> {
        self.pages(role)
            .map(|(_, pts)| {
                pts.iter()
                    .filter(|p| p.name == name)
                    .filter_map(|p| p.labels.get(label).map(|v| (v.as_str(), p.value)))
                    .collect()
            })
            .collect()
    }

    fn instance_sum(
        &self,
        role: Role,
        instance: &str,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<f64> {
        let (_, pts) = self.pages(role).find(|(i, _)| *i == instance)?;
        sum_matching(pts, name, labels)
    }
}

/// Sum of the points named `name` that carry `labels`; `None` when there is none, so a
/// series that is absent reads as no data, never as zero.
fn sum_matching<'p>(
    points: impl IntoIterator<Item = &'p Point>,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    points
        .into_iter()
        .filter(|p| p.name == name && p.matches(labels))
        .fold(None, |total, p| Some(total.unwrap_or(0.0) + p.value))
}

/// Counter increase from `base` to `now`, summed over instances present in both. A counter
/// that went down was reset (process restarted): its increase is its new value.
pub fn increase(
    base: &RawScrape,
    now: &RawScrape,
    role: Role,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    let mut found = false;
    let mut total = 0.0;
    for (instance, _) in now.pages(role) {
        let (Some(b), Some(n)) = (
            base.instance_sum(role, instance, name, labels),
            now.instance_sum(role, instance, name, labels),
        ) else {
            continue;
        };
        found = true;
        total += if n >= b { n - b } else { n };
    }
    found.then_some(total)
}

fn rate(
    base: &RawScrape,
    now: &RawScrape,
    role: Role,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    let dt = now.t_s - base.t_s;
    if dt <= 0.0 {
        return None;
    }
    increase(base, now, role, name, labels).map(|d| d / dt)
}

/// Quantile `q` of a histogram's observations between `base` and `now` (bucket deltas
/// summed over instances, linear interpolation inside the bucket, as PromQL's
/// `histogram_quantile`). `None` when nothing was observed.
pub fn quantile(
    base: &RawScrape,
    now: &RawScrape,
    role: Role,
    histogram: &str,
    q: f64,
) -> Option<f64> {
    let bucket = format!("{histogram}_bucket");
    let mut les: Vec<(f64, String)> = Vec::new();
    for (_, pts) in now.pages(role) {
        for p in pts.iter().filter(|p| p.name == bucket) {
            if let Some(le) = p.labels.get("le") {
                let v = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap_or(f64::NAN)
                };
                if !v.is_nan() && !les.iter().any(|(_, s)| s == le) {
                    les.push((v, le.clone()));
                }
            }
        }
    }
    les.sort_by(|a, b| a.0.total_cmp(&b.0));
    let counts: Vec<(f64, f64)> = les
        .iter()
        .filter_map(|(v, le)| increase(base, now, role, &bucket, &[("le", le)]).map(|c| (*v, c)))
        .collect();
    quantile_from_buckets(&counts, q)
}

/// `buckets`: (upper bound, cumulative count), ascending, the last one +inf.
pub fn quantile_from_buckets(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev_le = 0.0;
    let mut prev_count = 0.0;
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                // Above the highest finite bucket: its bound is the best honest answer.
                return Some(prev_le);
            }
            let in_bucket = count - prev_count;
            let frac = if in_bucket > 0.0 {
                (rank - prev_count) / in_bucket
            } else {
                1.0
            };
            return Some(prev_le + (le - prev_le) * frac);
        }
        prev_le = le;
        prev_count = count;
    }
    Some(prev_le)
}

/// Derive the figures at `now` over the window since `base`, except the rejections, over
/// the last scrape interval (since `prev`): recovery waits for the instant the gate stops
/// turning clients away, and a window would report it a window late. What arrives and what
/// is admitted are the gate's decisions, counted when made (`recover_gate_admissions_total`),
/// over the same window: offered is admitted plus rejected, never under admitted, and
/// work that queued before the gate closed is not counted as admitted when it completes.
/// Metric names are the contracts in docs/reference/metrics.md.
pub fn derive(base: &RawScrape, prev: &RawScrape, now: &RawScrape) -> Sample {
    use Role::*;
    const DECIDED: &str = "recover_gate_admissions_total";
    const REJECTED: [&str; 2] = ["rejected_rate", "rejected_in_flight"];
    let decided = |since: &RawScrape, names: &[&str]| {
        names
            .iter()
            .filter_map(|d| rate(since, now, Gate, DECIDED, &[("decision", d)]))
            .reduce(|a, b| a + b)
    };
    let admitted = decided(base, &["admitted"]);
    let offered = match (admitted, decided(base, &REJECTED)) {
        (Some(a), Some(r)) => Some(a + r),
        (a, r) => a.or(r),
    };
    Sample {
        t_s: now.t_s,
        offered_per_s: offered,
        admitted_per_s: admitted,
        rejected_per_s: decided(prev, &REJECTED),
        goodput_per_s: rate(
            base,
            now,
            Clients,
            "recover_demo_workers_attempts_total",
            &[("outcome", "ok")],
        ),
        first_attempt_per_s: rate(
            base,
            now,
            Gate,
            "recover_gate_attempts_total",
            &[("kind", "first")],
        ),
        p99_latency_s: quantile(
            base,
            now,
            Clients,
            "recover_demo_workers_latency_seconds",
            0.99,
        ),
        gate_limit_per_s: now.sum(Gate, "recover_gate_limit_rate_per_second", &[]),
        queue_depth: now.sum(Service, "recover_demo_service_queue_depth", &[]),
        workers_retrying: now.sum(Clients, "recover_demo_workers_in_retry_loop", &[]),
        work_per_s: rate(
            base,
            now,
            Service,
            "recover_demo_service_completions_total",
            &[],
        ),
        services_up: now.pages(Service).count() as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::expo::parse;

    fn scrape(t_s: f64, gate: &str, clients: &str) -> RawScrape {
        RawScrape {
            t_s,
            read_s: t_s,
            service_pages_first: false,
            targets: vec![
                TargetScrape {
                    role: Role::Gate,
                    instance: "gate".into(),
                    points: Some(parse(gate)),
                },
                TargetScrape {
                    role: Role::Clients,
                    instance: "workers".into(),
                    points: Some(parse(clients)),
                },
                TargetScrape {
                    role: Role::Service,
                    instance: "s0".into(),
                    points: None,
                },
            ],
        }
    }

    #[test]
    fn rates_from_counter_deltas_and_resets() {
        // Outcomes count requests as they end, decisions as they are made: the figures
        // are the decisions (here 90 queued requests ended as the gate closed).
        let a = scrape(0.0, "recover_gate_admissions_total{decision=\"admitted\"} 100\nrecover_gate_admissions_total{decision=\"rejected_rate\"} 10\nrecover_gate_requests_total{outcome=\"client_gone\"} 0\nrecover_gate_limit_rate_per_second +Inf", "");
        let b = scrape(2.0, "recover_gate_admissions_total{decision=\"admitted\"} 140\nrecover_gate_admissions_total{decision=\"rejected_rate\"} 30\nrecover_gate_requests_total{outcome=\"client_gone\"} 180\nrecover_gate_limit_rate_per_second 50", "");
        let s = derive(&a, &a, &b);
        assert_eq!(s.offered_per_s, Some(30.0));
        assert_eq!(s.admitted_per_s, Some(20.0));
        assert_eq!(s.rejected_per_s, Some(10.0));
        assert_eq!(s.gate_limit_per_s, Some(50.0));
        assert_eq!(s.queue_depth, None, "a down service is no data, not zero");
        assert_eq!(s.services_up, 0);
        // Restarted gate: counters start over.
        let c = scrape(
            4.0,
            "recover_gate_admissions_total{decision=\"admitted\"} 8",
            "",
        );
        assert_eq!(derive(&b, &b, &c).admitted_per_s, Some(4.0));
    }

    #[test]
    fn p99_from_bucket_deltas() {
        let h = |n1: u32, n2: u32, n3: u32| {
            format!("recover_demo_workers_latency_seconds_bucket{{le=\"0.1\"}} {n1}\nrecover_demo_workers_latency_seconds_bucket{{le=\"1\"}} {n2}\nrecover_demo_workers_latency_seconds_bucket{{le=\"+Inf\"}} {n3}\n")
        };
        let a = scrape(0.0, "", &h(1000, 1000, 1000));
        let b = scrape(1.0, "", &h(1000, 1100, 1100));
        let p = derive(&a, &a, &b).p99_latency_s.unwrap();
        assert!((p - 0.991).abs() < 1e-9, "{p}");
        assert_eq!(derive(&a, &a, &a).p99_latency_s, None);
    }
}
