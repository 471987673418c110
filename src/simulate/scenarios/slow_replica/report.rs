//! What a `slow-replica` run shows: latency before and after the slowdown, the slow
//! replica's share of requests and its queue, second by second, and the summary lines.

use super::model::Run;
use super::params::SlowReplicaParams;
use crate::simulate::kernel::record::Latency;
use crate::simulate::model::{Figure, Outcome, Unit};
use crate::simulate::plot::{Chart, Series};
use crate::simulate::text::{self, fmt_ms, pct};
use plotters::style::RGBColor;
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecondRow {
    pub t: u32,
    /// Calls that arrived in this second, and their latency.
    pub calls: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub failed: u64,
    /// The slow replica's share of the attempts sent in this second.
    pub slow_share: f64,
    /// Requests at the slow replica at the end of the second (waiting or worked on).
    pub slow_backlog: u64,
    pub slow_max_backlog: u64,
    pub slow_ejected: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicaTotals {
    pub name: String,
    pub attempts: u64,
    pub share: f64,
    pub max_backlog: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EjectionRow {
    pub at_s: f64,
    pub replica: String,
    pub for_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowReplicaReport {
    /// What it ran with.
    pub params: SlowReplicaParams,
    pub slow_replica: String,
    pub capacity_per_replica: f64,
    pub slow_capacity: f64,
    /// Calls that arrived before the slowdown.
    pub healthy: Latency,
    /// Calls that arrived after it.
    pub slowed: Latency,
    /// Calls that arrived in the last 10 s of arrivals: still climbing, or steady?
    pub last_10s: Latency,
    /// The slow replica's share of the attempts sent after the slowdown.
    pub slow_share: f64,
    pub slow_max_backlog: u64,
    /// Its backlog when the arrivals stopped.
    pub slow_backlog_at_end: u64,
    pub hedges: u64,
    pub hedged_share: f64,
    pub retries: u64,
    pub replicas: Vec<ReplicaTotals>,
    pub ejections: Vec<EjectionRow>,
    pub series: Vec<SecondRow>,
}

pub fn replica_name(i: u32) -> String {
    char::from(b'A' + (i % 26) as u8).to_string()
}

pub fn build(p: &SlowReplicaParams, o: &Run) -> SlowReplicaReport {
    let slow_at = p.slow_at.as_micros() as u64;
    let end = p.duration.as_micros() as u64;
    let lat = |from: u64, to: u64| {
        Latency::of(
            o.calls
                .iter()
                .filter(|c| c.arrival_us >= from && c.arrival_us < to)
                .map(|c| (c.end_us.unwrap_or(c.arrival_us) - c.arrival_us, !c.ok))
                .collect(),
        )
    };
    let s = p.slow_replica as usize;
    let first_slow_s = (slow_at / 1_000_000) as usize;
    let after: Vec<&Vec<u64>> = o.sent.iter().skip(first_slow_s).collect();
    let sent_after: u64 = after.iter().map(|r| r.iter().sum::<u64>()).sum();
    let slow_after: u64 = after.iter().map(|r| r[s]).sum();
    let total: Vec<u64> = (0..p.replicas as usize)
        .map(|i| o.sent.iter().map(|r| r[i]).sum())
        .collect();
    let all: u64 = total.iter().sum();
    let share = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let series = o
        .sent
        .iter()
        .enumerate()
        .map(|(t, sent)| {
            let l = lat(t as u64 * 1_000_000, (t as u64 + 1) * 1_000_000);
            let sample = o.samples.get(t).copied().unwrap_or_default();
            SecondRow {
                t: t as u32,
                calls: l.calls,
                p50_ms: l.p50_ms,
                p99_ms: l.p99_ms,
                failed: l.failed,
                slow_share: share(sent[s], sent.iter().sum()),
                slow_backlog: sample.slow_backlog,
                slow_max_backlog: sample.slow_max_backlog,
                slow_ejected: sample.slow_ejected,
            }
        })
        .collect();
    SlowReplicaReport {
        params: p.clone(),
        slow_replica: replica_name(p.slow_replica),
        capacity_per_replica: p.capacity_per_replica(),
        slow_capacity: p.capacity_per_replica() / p.slow_factor,
        healthy: lat(0, slow_at),
        slowed: lat(slow_at, end),
        last_10s: lat(end.saturating_sub(10_000_000).max(slow_at), end),
        slow_share: share(slow_after, sent_after),
        slow_max_backlog: o.max_backlog[s],
        slow_backlog_at_end: o.samples.last().map_or(0, |x| x.slow_backlog),
        hedges: o.hedges,
        hedged_share: share(o.hedges, o.calls.len() as u64),
        retries: o.calls.iter().map(|c| u64::from(c.retries)).sum(),
        replicas: total
            .iter()
            .enumerate()
            .map(|(i, &n)| ReplicaTotals {
                name: replica_name(i as u32),
                attempts: n,
                share: share(n, all),
                max_backlog: o.max_backlog[i],
            })
            .collect(),
        ejections: o
            .ejections
            .iter()
            .map(|e| EjectionRow {
                at_s: e.at_us as f64 / 1e6,
                replica: replica_name(e.replica),
                for_s: e.for_us as f64 / 1e6,
            })
            .collect(),
        series,
    }
}

pub fn describe_setup(p: &SlowReplicaParams) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let mut s = p.balancer.name().to_string();
    if p.outlier_ejection {
        s.push_str(" + outlier ejection");
    }
    if let Some(t) = p.timeout.map(ms) {
        let _ = write!(s, ", timeout {t:.0} ms");
        if p.timeout_retries > 0 {
            let _ = write!(s, " + {} retry", p.timeout_retries);
        }
    }
    if let Some(h) = p.hedge_after.map(ms) {
        let _ = write!(s, ", hedge at {h:.0} ms");
    }
    s
}

/// Latency before and after the slowdown, the slow replica's share and queue, second by
/// second; the chart of the same.
impl Outcome for SlowReplicaReport {
    fn what(&self) -> String {
        format!(
            "{} replicas, {} calls/s; replica {} {}x slower from {} s; balancer: {}",
            self.replicas.len(),
            self.params.rate_per_s,
            self.slow_replica,
            self.params.slow_factor,
            self.params.slow_at.as_secs_f64(),
            describe_setup(&self.params),
        )
    }

    fn text(&self) -> String {
        let b = &self.slow_replica;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "each replica finishes {:.1} req/s when healthy; {b} slowed finishes {:.1} req/s",
            self.capacity_per_replica, self.slow_capacity
        );
        let line = |o: &mut String, what: &str, l: &Latency| {
            let _ = writeln!(
                o,
                "{what}: p50 {}, p99 {}, max {} ({} calls, {} failed)",
                fmt_ms(l.p50_ms),
                fmt_ms(l.p99_ms),
                fmt_ms(l.max_ms),
                l.calls,
                l.failed
            );
        };
        line(&mut o, "healthy (calls before the slowdown)", &self.healthy);
        line(&mut o, &format!("after {b} slowed"), &self.slowed);
        line(&mut o, "  of which the last 10 s", &self.last_10s);
        let _ = writeln!(
        o,
        "{b}'s share of requests after the slowdown: {} (a fair share is {}); {b}'s queue: max {}, {} when arrivals stopped",
        pct(self.slow_share),
        pct(1.0 / self.replicas.len().max(1) as f64),
        self.slow_max_backlog,
        self.slow_backlog_at_end
    );
        if self.params.hedge_after.is_some() {
            let _ = writeln!(
                o,
                "hedged calls: {} ({})",
                self.hedges,
                pct(self.hedged_share)
            );
        }
        if self.params.timeout_retries > 0 {
            let _ = writeln!(o, "retries after a timeout: {}", self.retries);
        }
        if self.params.outlier_ejection {
            let list: Vec<String> = self
                .ejections
                .iter()
                .map(|e| format!("{} at {:.0} s for {:.0} s", e.replica, e.at_s, e.for_s))
                .collect();
            let _ = writeln!(
                o,
                "ejections: {}",
                if list.is_empty() {
                    "none".into()
                } else {
                    list.join(", ")
                }
            );
        }
        let headers = [
            "t(s)", "calls", "p50", "p99", "failed", "B share", "B queue", "B out",
        ];
        let headers: Vec<String> = headers
            .iter()
            .map(|h| h.replace('B', b))
            .collect::<Vec<_>>();
        let row = |chunk: &[SecondRow]| {
            let calls: u64 = chunk.iter().map(|x| x.calls).sum();
            let worst = chunk.iter().map(|x| x.p99_ms).fold(0.0, f64::max);
            let p50 = chunk.iter().map(|x| x.p50_ms).fold(0.0, f64::max);
            vec![
                chunk[0].t.to_string(),
                calls.to_string(),
                fmt_ms(p50),
                fmt_ms(worst),
                chunk.iter().map(|x| x.failed).sum::<u64>().to_string(),
                pct(chunk.iter().map(|x| x.slow_share).sum::<f64>() / chunk.len() as f64),
                chunk
                    .iter()
                    .map(|x| x.slow_max_backlog)
                    .max()
                    .unwrap_or(0)
                    .to_string(),
                if chunk.iter().any(|x| x.slow_ejected) {
                    "ejected".into()
                } else {
                    "-".into()
                },
            ]
        };
        let hs: Vec<&str> = headers.iter().map(String::as_str).collect();
        o.push_str(&text::windowed_table(&self.series, &hs, row, |w| {
            format!("rows of {w} s by arrival time: the worst p50 and p99 of the calls that arrived then; {b} queue: the most waiting or in work at {b}")
        }));
        o
    }

    fn chart(&self) -> Chart {
        let pts = |f: fn(&SecondRow) -> f64| -> Vec<(f64, f64)> {
            self.series.iter().map(|s| (f64::from(s.t), f(s))).collect()
        };
        let b = &self.slow_replica;
        let left = vec![
            Series::new(
                "p99 (ms) of the calls arriving that second",
                RGBColor(200, 30, 30),
                pts(|s| s.p99_ms),
            ),
            Series::new("p50 (ms)", RGBColor(30, 140, 30), pts(|s| s.p50_ms)),
        ];
        Chart::new(
            format!(
                "slow-replica: {b} {}x slower from {} s, {}",
                self.params.slow_factor,
                self.params.slow_at.as_secs_f64(),
                describe_setup(&self.params)
            ),
            "arrival time (s)",
            "latency (ms)",
            left,
        )
        .with_right_line(
            "requests at B",
            &format!("{b}'s queue"),
            pts(|s| s.slow_max_backlog as f64),
        )
    }

    fn figures(&self) -> Vec<Figure> {
        let b = &self.slow_replica;
        let ms = |key, header: &str, v| Figure::new(key, header, Unit::Millis, Some(v));
        vec![
            ms("p50_ms", "p50", self.slowed.p50_ms),
            ms("p99_ms", "p99", self.slowed.p99_ms),
            ms("last_10s_p99_ms", "p99 last 10 s", self.last_10s.p99_ms),
            Figure::share(
                "failed_share",
                "failed",
                self.slowed.failed as f64 / self.slowed.calls.max(1) as f64,
            ),
            Figure::share("slow_share", &format!("{b} share"), self.slow_share),
            Figure::count(
                "slow_max_backlog",
                &format!("{b} queue max"),
                self.slow_max_backlog,
            ),
            Figure::share("hedged_share", "hedged", self.hedged_share),
        ]
    }
}
