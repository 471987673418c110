//! A recorded stuck incident, as a Prometheus scraping every 15-60 s would have stored it,
//! written as an OpenMetrics exposition with timestamps for `promtool tsdb
//! create-blocks-from openmetrics`. It follows the demo system's arithmetic
//! (`recover::demo::defaults`), second by second, with `REPLICAS` config-service replicas
//! and as many times the default workers:
//!
//! ```text
//! healthy   every worker polls every 8 s: D = N / 8 s first attempts/s, all answered
//!           in one service time; no retries, queue empty
//! outage    a deploy (strategy Recreate) replaces every replica: the old pods are gone,
//!           the new ones are scraped but not up (up = 0) until the outage ends. A worker
//!           whose poll fails enters the retry loop (fixed 1 s delay, fast errors): after
//!           t seconds min(N, D t) workers retry once a second; every attempt fails
//! stuck     the new replicas are up and ready, but all N workers retry every
//!           timeout + delay = 2 s: R = N / 2 s arrive against an overloaded capacity of
//!           REPLICAS x C_warm / k; the FIFO queue grows by the difference, every request
//!           waits past the client timeout, the service works only for clients that have
//!           left (abandoned), nobody is answered in time, and no trigger is left
//! ```
//!
//! Each target carries the labels Kubernetes service discovery gives a pod (`job`,
//! `namespace`, `pod`, `instance`, `app_kubernetes_io_name`) and an `up` series, as
//! Prometheus records them. The replaced replicas are new pods: new series, counters from
//! zero. Prometheus would also write staleness markers for the old pods; a backfill cannot,
//! so their last samples stay visible for the 5-minute lookback, as values of healthy
//! replicas (which is what they last were).

use recover::demo::defaults;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Config-service replicas.
pub const REPLICAS: usize = 2;
pub const NAMESPACE: &str = "shop";

/// The incident's timeline and the resolution it was scraped at.
#[derive(Debug, Clone, Copy)]
pub struct Incident {
    /// Unix seconds of the first scrape.
    pub start: u64,
    pub healthy: Duration,
    pub outage: Duration,
    pub stuck: Duration,
    pub scrape: Duration,
}

impl Incident {
    /// 20 minutes healthy, a 2-minute deploy outage, 20 minutes stuck; starting 4 hours
    /// ago (well before the head block of the Prometheus the blocks are loaded into).
    pub fn recorded(scrape: Duration) -> Incident {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        Incident {
            start: (now - 4 * 3600) / 60 * 60,
            healthy: Duration::from_secs(20 * 60),
            outage: Duration::from_secs(120),
            stuck: Duration::from_secs(20 * 60),
            scrape,
        }
    }

    pub fn outage_start(&self) -> u64 {
        self.start + self.healthy.as_secs()
    }

    pub fn outage_end(&self) -> u64 {
        self.outage_start() + self.outage.as_secs()
    }

    pub fn end(&self) -> u64 {
        self.outage_end() + self.stuck.as_secs()
    }

    /// The whole incident as an OpenMetrics exposition.
    pub fn openmetrics(&self) -> String {
        let mut rec = Recorder::default();
        let mut sys = System::new();
        let step = self.scrape.as_secs().max(1);
        for t in self.start..=self.end() {
            sys.tick(self, t);
            if (t - self.start).is_multiple_of(step) {
                sys.record(self, t, &mut rec);
            }
        }
        rec.render()
    }
}

const WORKERS: f64 = (defaults::WORKERS * REPLICAS) as f64;

fn demand() -> f64 {
    WORKERS / defaults::POLL_INTERVAL.as_secs_f64()
}

/// Cumulative counters and current gauges of the whole system.
#[derive(Default)]
struct System {
    gate: BTreeMap<&'static str, f64>,
    first: f64,
    retry: f64,
    gate_latency: Hist,
    /// Per replica generation (old, new): completions by kind, service seconds.
    useful: [f64; 2],
    abandoned: [f64; 2],
    arrived: [f64; 2],
    service: [Hist; 2],
    queue: f64,
    in_loop: f64,
    attempts: BTreeMap<&'static str, f64>,
    polls_ok: f64,
    retries: f64,
    worker_latency: Hist,
}

/// A histogram with a handful of buckets (the names matter, not the layout).
#[derive(Default, Clone)]
struct Hist {
    buckets: [f64; 6],
    sum: f64,
    count: f64,
}

const LE: [&str; 6] = ["0.005", "0.05", "0.5", "1", "2.5", "+Inf"];
const LE_F: [f64; 6] = [0.005, 0.05, 0.5, 1.0, 2.5, f64::INFINITY];

impl Hist {
    fn observe(&mut self, v: f64, n: f64) {
        for (b, le) in self.buckets.iter_mut().zip(LE_F) {
            if v <= le {
                *b += n;
            }
        }
        self.sum += v * n;
        self.count += n;
    }
}

#[derive(PartialEq)]
enum Phase {
    Healthy,
    Outage,
    Stuck,
}

impl System {
    fn new() -> Self {
        System::default()
    }

    fn phase(i: &Incident, t: u64) -> Phase {
        if t < i.outage_start() {
            Phase::Healthy
        } else if t < i.outage_end() {
            Phase::Outage
        } else {
            Phase::Stuck
        }
    }

    /// One second of the demo system.
    fn tick(&mut self, i: &Incident, t: u64) {
        let d = demand();
        let svc_time = defaults::SERVICE_TIME.as_secs_f64();
        let timeout = defaults::CLIENT_TIMEOUT.as_secs_f64();
        let delay = defaults::RETRY_DELAY.as_secs_f64();
        match Self::phase(i, t) {
            Phase::Healthy => {
                self.count_gate("admitted", d);
                self.first += d;
                self.gate_latency.observe(svc_time, d);
                self.useful[0] += d;
                self.arrived[0] += d;
                self.service[0].observe(svc_time, d);
                self.count_attempts("ok", d);
                self.polls_ok += d;
                self.worker_latency.observe(svc_time, d);
            }
            Phase::Outage => {
                let since = (t - i.outage_start()) as f64;
                self.in_loop = (d * since).min(WORKERS);
                let first = d * (WORKERS - self.in_loop) / WORKERS;
                let retries = self.in_loop / delay;
                self.count_gate("upstream_error", first + retries);
                self.first += first;
                self.retry += retries;
                self.retries += retries;
                self.count_attempts("error", first + retries);
                self.worker_latency.observe(0.001, first + retries);
            }
            Phase::Stuck => {
                self.in_loop = WORKERS;
                let offered = WORKERS / (timeout + delay);
                let overloaded = defaults::OVERLOAD_FACTOR;
                let capacity = REPLICAS as f64 * defaults::capacity_warm() / overloaded;
                self.queue += offered - capacity;
                self.count_gate("client_gone", offered);
                self.retry += offered;
                self.retries += offered;
                self.arrived[1] += offered;
                self.abandoned[1] += capacity;
                self.service[1].observe(svc_time * overloaded, capacity);
                self.count_attempts("timeout", offered);
                self.worker_latency.observe(timeout, offered);
            }
        }
    }

    fn count_gate(&mut self, outcome: &'static str, n: f64) {
        *self.gate.entry(outcome).or_default() += n;
    }

    fn count_attempts(&mut self, outcome: &'static str, n: f64) {
        *self.attempts.entry(outcome).or_default() += n;
    }

    /// What one scrape of every target at `t` records.
    fn record(&self, i: &Incident, t: u64, rec: &mut Recorder) {
        let phase = Self::phase(i, t);
        let gate = target("recover-gate", "recover-gate-6c8f9-x2k4q", "10.0.3.7:8081");
        rec.gauge("up", &gate, &[], t, 1.0);
        for o in [
            "admitted",
            "rejected_rate",
            "rejected_in_flight",
            "upstream_error",
            "upstream_timeout",
            "client_gone",
        ] {
            let v = self.gate.get(o).copied().unwrap_or(0.0);
            rec.counter("recover_gate_requests", &gate, &[("outcome", o)], t, v);
        }
        // The gate's decisions: every request not rejected was admitted, whatever its
        // outcome (this model counts a request's decision and outcome in the same second).
        let rejected = |d: &str| self.gate.get(d).copied().unwrap_or(0.0);
        let admitted = self.gate.values().sum::<f64>()
            - rejected("rejected_rate")
            - rejected("rejected_in_flight");
        for (d, v) in [
            ("admitted", admitted),
            ("rejected_rate", rejected("rejected_rate")),
            ("rejected_in_flight", rejected("rejected_in_flight")),
        ] {
            rec.counter("recover_gate_admissions", &gate, &[("decision", d)], t, v);
        }
        rec.counter(
            "recover_gate_attempts",
            &gate,
            &[("kind", "first")],
            t,
            self.first,
        );
        rec.counter(
            "recover_gate_attempts",
            &gate,
            &[("kind", "retry")],
            t,
            self.retry,
        );
        rec.gauge(
            "recover_gate_limit_rate_per_second",
            &gate,
            &[],
            t,
            f64::INFINITY,
        );
        // Enforced, not in shadow: the shadow series stand at 0, as the gate exports them.
        rec.gauge("recover_gate_shadow", &gate, &[], t, 0.0);
        rec.gauge("recover_gate_shadow_in_flight", &gate, &[], t, 0.0);
        for reason in ["rate", "in_flight"] {
            rec.counter(
                "recover_gate_shadow_refusals",
                &gate,
                &[("reason", reason)],
                t,
                0.0,
            );
        }
        rec.histogram(
            "recover_gate_upstream_latency_seconds",
            &gate,
            t,
            &self.gate_latency,
        );

        let clients = target("workers", "workers-5d7b8-q9zzt", "10.0.4.2:9100");
        rec.gauge("up", &clients, &[], t, 1.0);
        for o in ["ok", "error", "timeout"] {
            let v = self.attempts.get(o).copied().unwrap_or(0.0);
            rec.counter(
                "recover_demo_workers_attempts",
                &clients,
                &[("outcome", o)],
                t,
                v,
            );
        }
        rec.counter(
            "recover_demo_workers_polls",
            &clients,
            &[("outcome", "ok")],
            t,
            self.polls_ok,
        );
        rec.counter(
            "recover_demo_workers_retries",
            &clients,
            &[],
            t,
            self.retries,
        );
        rec.gauge(
            "recover_demo_workers_in_retry_loop",
            &clients,
            &[],
            t,
            self.in_loop.round(),
        );
        rec.gauge("recover_demo_workers_running", &clients, &[], t, WORKERS);
        rec.histogram(
            "recover_demo_workers_latency_seconds",
            &clients,
            t,
            &self.worker_latency,
        );

        // Old replicas until the deploy; new ones (down, then stuck) after.
        let generation = usize::from(phase != Phase::Healthy);
        for r in 0..REPLICAS {
            let (pod, ip) = if generation == 0 {
                (
                    format!("config-service-7d9f6-old{r}"),
                    format!("10.0.1.{}:9001", 10 + r),
                )
            } else {
                (
                    format!("config-service-84b2c-new{r}"),
                    format!("10.0.2.{}:9001", 20 + r),
                )
            };
            let svc = target("config-service", &pod, &ip);
            if phase == Phase::Outage {
                rec.gauge("up", &svc, &[], t, 0.0);
                continue;
            }
            rec.gauge("up", &svc, &[], t, 1.0);
            let share = 1.0 / REPLICAS as f64;
            let g = generation;
            rec.counter(
                "recover_demo_service_requests",
                &svc,
                &[],
                t,
                self.arrived[g] * share,
            );
            rec.counter(
                "recover_demo_service_completions",
                &svc,
                &[("kind", "useful")],
                t,
                self.useful[g] * share,
            );
            rec.counter(
                "recover_demo_service_completions",
                &svc,
                &[("kind", "abandoned")],
                t,
                self.abandoned[g] * share,
            );
            let queue = if g == 1 { self.queue * share } else { 0.0 };
            rec.gauge(
                "recover_demo_service_queue_depth",
                &svc,
                &[],
                t,
                queue.round(),
            );
            rec.gauge("recover_demo_service_ready", &svc, &[], t, 1.0);
            rec.gauge("recover_demo_service_warm_fraction", &svc, &[], t, 1.0);
            rec.gauge("recover_demo_service_overloaded", &svc, &[], t, g as f64);
            let mut h = self.service[g].clone();
            h.buckets.iter_mut().for_each(|b| *b *= share);
            h.sum *= share;
            h.count *= share;
            rec.histogram("recover_demo_service_service_seconds", &svc, t, &h);
        }
    }
}

type Labels = Vec<(&'static str, String)>;

fn target(app: &str, pod: &str, instance: &str) -> Labels {
    vec![
        ("app_kubernetes_io_name", app.to_string()),
        ("instance", instance.to_string()),
        ("job", "kubernetes-pods".to_string()),
        ("namespace", NAMESPACE.to_string()),
        ("pod", pod.to_string()),
    ]
}

/// Samples grouped as OpenMetrics wants them: by family, then by series, in time order.
#[derive(Default)]
struct Recorder {
    /// family -> (type, series key -> lines)
    families: BTreeMap<String, (&'static str, BTreeMap<String, Vec<String>>)>,
}

fn num(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{v}")
    }
}

fn labels(target: &Labels, extra: &[(&str, &str)]) -> String {
    let mut all: Vec<(String, String)> = target
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    all.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let inner: Vec<String> = all.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", inner.join(","))
}

impl Recorder {
    fn push(&mut self, family: &str, kind: &'static str, key: String, line: String) {
        let f = self
            .families
            .entry(family.to_string())
            .or_insert((kind, BTreeMap::new()));
        f.1.entry(key).or_default().push(line);
    }

    fn gauge(&mut self, name: &str, t: &Labels, extra: &[(&str, &str)], at: u64, v: f64) {
        let l = labels(t, extra);
        self.push(
            name,
            "gauge",
            l.clone(),
            format!("{name}{l} {} {at}", num(v)),
        );
    }

    fn counter(&mut self, name: &str, t: &Labels, extra: &[(&str, &str)], at: u64, v: f64) {
        let l = labels(t, extra);
        self.push(
            name,
            "counter",
            l.clone(),
            format!("{name}_total{l} {} {at}", num(v)),
        );
    }

    fn histogram(&mut self, name: &str, t: &Labels, at: u64, h: &Hist) {
        let key = labels(t, &[]);
        let mut point = String::new();
        for (le, b) in LE.iter().zip(h.buckets) {
            let _ = writeln!(
                point,
                "{name}_bucket{} {} {at}",
                labels(t, &[("le", le)]),
                num(b)
            );
        }
        let _ = writeln!(point, "{name}_count{key} {} {at}", num(h.count));
        let _ = write!(point, "{name}_sum{key} {} {at}", num(h.sum));
        self.push(name, "histogram", key, point);
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (name, (kind, series)) in &self.families {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for lines in series.values() {
                for l in lines {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out.push_str("# EOF\n");
        out
    }
}
