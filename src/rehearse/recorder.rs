//! The recorder: scrapes every component's `/metrics` on a fixed interval for the whole
//! rehearsal and keeps the raw pages plus the derived [`Sample`]s.
//!
//! Why it exists: the report and the timeline must show what really happened, measured
//! from outside the way an operator would, independent of what the engine believes.
//!
//! A [`Prober`] takes one more scrape at an instant the rehearsal marks (the engine's
//! decision, just before its first action), kept apart from the series so the fixed grid
//! and its rates stay as they are: the lower bound counts from the state the runbook
//! found, not from the grid's last scrape up to an interval before it.

use super::expo;
use super::series::{derive, RawScrape, Role, Sample, TargetScrape};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The rehearsal's clock: seconds since its origin. Everything the rehearsal records (scrapes,
/// steps, phases) uses one clock so the timeline lines up; the report rebases it so that
/// 0 is the moment the trigger fired.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    origin_wall: std::time::SystemTime,
}

impl Clock {
    pub fn start() -> Self {
        Clock {
            origin: Instant::now(),
            origin_wall: std::time::SystemTime::now(),
        }
    }

    /// A wall-clock time (the engine's step timestamps) on this clock.
    pub fn wall_s(&self, at: std::time::SystemTime) -> f64 {
        match at.duration_since(self.origin_wall) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        }
    }

    pub fn now_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    pub fn at_s(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.origin).as_secs_f64()
    }
}

/// One `/metrics` page to scrape.
#[derive(Debug, Clone)]
pub struct Target {
    pub role: Role,
    pub instance: String,
    pub url: String,
}

#[derive(Default)]
struct State {
    raws: Vec<RawScrape>,
    samples: Vec<Sample>,
    probes: Vec<RawScrape>,
}

/// A running recorder. Stop it with [`Recorder::stop`] to get the series.
pub struct Recorder {
    state: Arc<Mutex<State>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    prober: Option<Prober>,
}

/// What a stopped recorder hands back.
pub struct Recording {
    pub raws: Vec<RawScrape>,
    pub samples: Vec<Sample>,
    /// The scrapes a [`Prober`] took, off the grid (oldest first).
    pub probes: Vec<RawScrape>,
}

/// Takes one scrape of the recorder's targets now, off its grid, into its probes.
#[derive(Clone)]
pub struct Prober {
    targets: Arc<Vec<Target>>,
    clock: Clock,
    client: reqwest::Client,
    timeout: Duration,
    state: Arc<Mutex<State>>,
}

impl Prober {
    /// Scrape every target once, in a task of its own (the caller may not wait: an
    /// engine's progress event). Its tick is when it starts.
    pub fn probe_now(&self) {
        let p = self.clone();
        tokio::spawn(async move {
            let raw = scrape(&p.client, &p.targets, p.clock, p.timeout).await;
            p.state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .probes
                .push(raw);
        });
    }
}

/// How long the recorder waits for one page when it scrapes every `interval`: most of a
/// step, and never under 0.2 s (a page on a loaded machine). A scrape reads the service's
/// pages, then the others, so it can last two of these.
pub fn page_timeout(interval: Duration) -> Duration {
    interval.mul_f64(0.8).max(Duration::from_millis(200))
}

impl Recorder {
    /// Start scraping `targets` every `interval`; rates are computed over `window`.
    pub fn start(targets: Vec<Target>, clock: Clock, interval: Duration, window: Duration) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let cancel = CancellationToken::new();
        let timeout = page_timeout(interval);
        let client = reqwest::Client::builder().timeout(timeout).build();
        if let Err(e) = &client {
            tracing::error!("recorder: cannot build HTTP client: {e}");
        }
        let targets = Arc::new(targets);
        let prober = client.ok().map(|client| Prober {
            targets,
            clock,
            client,
            timeout,
            state: state.clone(),
        });
        let task = tokio::spawn(run(prober.clone(), interval, window, cancel.clone()));
        Recorder {
            state,
            cancel,
            task,
            prober,
        }
    }

    /// A handle for scrapes off the grid (None: the recorder could not build its client,
    /// and records nothing).
    pub fn prober(&self) -> Option<Prober> {
        self.prober.clone()
    }

    /// The samples so far (oldest first).
    pub fn samples(&self) -> Vec<Sample> {
        self.lock().samples.clone()
    }

    /// The samples taken at or after `from_s`.
    pub fn samples_since(&self, from_s: f64) -> Vec<Sample> {
        self.lock()
            .samples
            .iter()
            .filter(|s| s.t_s >= from_s)
            .cloned()
            .collect()
    }

    /// Number of samples so far; lets callers wait for the next one.
    pub fn len(&self) -> usize {
        self.lock().samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The last raw scrape, if any (for one-off readings such as a queue depth).
    pub fn last_raw(&self) -> Option<RawScrape> {
        self.lock().raws.last().cloned()
    }

    pub async fn stop(mut self) -> Recording {
        self.cancel.cancel();
        let _ = (&mut self.task).await;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Recording {
            raws: std::mem::take(&mut st.raws),
            samples: std::mem::take(&mut st.samples),
            probes: std::mem::take(&mut st.probes),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the vectors half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // A rehearsal aborted by Ctrl-C or a panic must not leave the scrape loop running.
        self.cancel.cancel();
    }
}

async fn run(
    prober: Option<Prober>,
    interval: Duration,
    window: Duration,
    cancel: CancellationToken,
) {
    let Some(p) = prober else {
        return;
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let raw = scrape(&p.client, &p.targets, p.clock, p.timeout).await;
        let t_s = raw.t_s;
        let mut st = p.state.lock().unwrap_or_else(|e| e.into_inner());
        let want = t_s - window.as_secs_f64();
        let base = st
            .raws
            .iter()
            .rev()
            .find(|r| r.t_s <= want)
            .or(st.raws.first());
        if let Some(base) = base {
            let prev = st.raws.last().unwrap_or(base);
            let sample = derive(base, prev, &raw);
            st.samples.push(sample);
        }
        st.raws.push(raw);
    }
}

/// Every target's page once: the service's pages first, read concurrently, then the
/// others, read concurrently; the tick is when the reads start. The order tells the lower
/// bound which way the service's servers and the clients' attempts were read apart (a
/// server read busy cannot have answered once more before the clients were read).
async fn scrape(
    client: &reqwest::Client,
    targets: &[Target],
    clock: Clock,
    timeout: Duration,
) -> RawScrape {
    let t_s = clock.now_s();
    let read = |first: bool| {
        futures::future::join_all(
            targets
                .iter()
                .filter(move |t| (t.role == Role::Service) == first)
                .map(|t| async move {
                    TargetScrape {
                        role: t.role,
                        instance: t.instance.clone(),
                        points: fetch(client, t, timeout).await,
                    }
                }),
        )
    };
    let mut pages = read(true).await;
    pages.extend(read(false).await);
    RawScrape {
        t_s,
        read_s: clock.now_s(),
        service_pages_first: true,
        targets: pages,
    }
}

async fn fetch(
    client: &reqwest::Client,
    target: &Target,
    timeout: Duration,
) -> Option<Vec<expo::Point>> {
    let resp = client.get(&target.url).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let caps = crate::util::http_body::BodyCaps::metrics_page(timeout);
    let text = crate::util::http_body::read_response_text(resp, caps)
        .await
        .ok()?;
    Some(expo::parse(&text))
}
