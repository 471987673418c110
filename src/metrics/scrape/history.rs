//! Recent scrapes of every target, kept so counters can be turned into rates.
//!
//! A `/metrics` page only holds running totals; a rate needs two pages and the time between
//! them. The history keeps each target's scrapes (when, and why one failed) for as long as
//! the longest rate window needs, and the values they read in a [`SeriesStore`], so "the
//! series of this counter over the last w" costs the samples in w. A [`View`] narrows it
//! (one replica, nothing before an instant) without copying anything.

use super::series::{Retained, SeriesStore};
use super::text::Sample;
use super::ScrapeEndpoint;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime};

/// One fetch of one target: its number (the key of the values it read), when, and why it
/// gave nothing when it did not.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub seq: u64,
    pub at: SystemTime,
    pub page: Result<(), String>,
}

/// One target's scrapes, oldest first, and the series they read.
#[derive(Debug, Clone)]
pub struct TargetHistory {
    pub endpoint: ScrapeEndpoint,
    pub scrapes: VecDeque<Scrape>,
    pub series: SeriesStore,
    next_seq: u64,
}

impl TargetHistory {
    /// "gate http://127.0.0.1:8080/metrics", for reasons shown to people.
    pub fn describe(&self) -> String {
        let e = &self.endpoint;
        if e.instance.is_empty() || e.instance == e.locator {
            format!("{} target {}", e.role, e.locator)
        } else {
            format!("{} target {} ({})", e.role, e.instance, e.locator)
        }
    }
}

/// Every target's recent scrapes.
#[derive(Debug, Clone)]
pub struct History {
    targets: BTreeMap<String, TargetHistory>,
    keep: Duration,
    key_bytes_cap: usize,
}

fn key(e: &ScrapeEndpoint) -> String {
    format!("{}\u{0}{}\u{0}{}", e.role, e.instance, e.locator)
}

impl History {
    /// Keep scrapes for at least `keep` (the longest rate window, plus a margin), and at
    /// most `key_bytes_cap` bytes of series names and labels a target.
    pub fn new(keep: Duration, key_bytes_cap: usize) -> Self {
        History {
            targets: BTreeMap::new(),
            keep,
            key_bytes_cap,
        }
    }

    /// Make sure the history spans at least `window` (grows, never shrinks).
    pub fn keep_at_least(&mut self, window: Duration) {
        // One extra scrape interval's worth of margin so a full window is always covered.
        self.keep = self.keep.max(window + window / 2);
    }

    /// Record one fetch result: the samples kept of the page, or why there are none.
    pub fn record(
        &mut self,
        endpoint: &ScrapeEndpoint,
        at: SystemTime,
        page: Result<Vec<Sample>, String>,
    ) {
        let t = self
            .targets
            .entry(key(endpoint))
            .or_insert_with(|| TargetHistory {
                endpoint: endpoint.clone(),
                scrapes: VecDeque::new(),
                series: SeriesStore::default(),
                next_seq: 0,
            });
        let seq = t.next_seq;
        t.next_seq += 1;
        let page = page.and_then(|samples| {
            t.series
                .record(seq, samples, self.key_bytes_cap)
                .map_err(|e| e.to_string())
        });
        t.scrapes.push_back(Scrape { seq, at, page });
        let keep = self.keep;
        while t.scrapes.len() > 2 {
            let oldest = t.scrapes[0].at;
            match at.duration_since(oldest) {
                Ok(age) if age > keep => {
                    t.scrapes.pop_front();
                }
                _ => break,
            }
        }
        if let Some(first) = t.scrapes.front() {
            t.series.prune(first.seq);
        }
    }

    /// Drop targets that are no longer listed (a replaced pod, a removed URL).
    pub fn retain_targets(&mut self, current: &[ScrapeEndpoint]) {
        let keys: std::collections::BTreeSet<String> = current.iter().map(key).collect();
        self.targets.retain(|k, _| keys.contains(k));
    }

    /// What every target's store holds, summed.
    pub fn retained(&self) -> Retained {
        self.targets
            .values()
            .map(|t| t.series.retained())
            .fold(Retained::default(), |a, b| Retained {
                series: a.series + b.series,
                points: a.points + b.points,
                key_bytes: a.key_bytes + b.key_bytes,
            })
    }

    /// The whole history, to evaluate against.
    pub fn view(&self) -> View<'_> {
        View {
            history: self,
            since: None,
            only: None,
        }
    }
}

/// A history as an evaluation sees it: perhaps one replica of a role, perhaps nothing
/// scraped before an instant. Borrowed, so narrowing costs nothing.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    history: &'a History,
    since: Option<SystemTime>,
    only: Option<(&'a str, &'a str)>,
}

impl<'a> View<'a> {
    /// Without the scrapes taken before `since`: the history a rate window cut at `since`
    /// sees.
    pub fn since(self, since: SystemTime) -> Self {
        View {
            since: Some(since),
            ..self
        }
    }

    /// `role` with only the targets of `instance` (other roles whole), so an expression
    /// over that role reads one replica.
    pub fn only_instance(self, role: &'a str, instance: &'a str) -> Self {
        View {
            only: Some((role, instance)),
            ..self
        }
    }

    /// The instances of the targets with this role, each once, in order.
    pub fn instances(&self, role: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .targets(Some(role))
            .map(|t| t.target.endpoint.instance.clone())
            .collect();
        v.dedup();
        v
    }

    /// Targets with this role (all targets if `role` is `None`).
    pub fn targets<'r>(
        &'r self,
        role: Option<&'r str>,
    ) -> impl Iterator<Item = TargetView<'a>> + 'r {
        let since = self.since;
        let only = self.only;
        self.history
            .targets
            .values()
            .filter(move |t| role.is_none_or(|r| t.endpoint.role == r))
            .filter(move |t| {
                only.is_none_or(|(r, i)| t.endpoint.role != r || t.endpoint.instance == i)
            })
            .map(move |target| TargetView { target, since })
    }
}

/// One target as a [`View`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct TargetView<'a> {
    pub target: &'a TargetHistory,
    since: Option<SystemTime>,
}

impl<'a> TargetView<'a> {
    /// The scrapes the view sees, oldest first.
    pub fn scrapes(&self) -> impl DoubleEndedIterator<Item = &'a Scrape> + 'a {
        let since = self.since;
        self.target
            .scrapes
            .iter()
            .filter(move |s| since.is_none_or(|t| s.at >= t))
    }

    pub fn latest(&self) -> Option<&'a Scrape> {
        self.scrapes().next_back()
    }

    pub fn describe(&self) -> String {
        self.target.describe()
    }
}
