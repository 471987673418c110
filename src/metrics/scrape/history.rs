//! Recent scrapes of every target, kept so counters can be turned into rates.
//!
//! A `/metrics` page only holds running totals; a rate needs two pages and the time between
//! them. The history keeps each target's pages (or why the fetch failed) for as long as
//! the longest rate window needs, and answers "the series of this counter over the last w".

use super::text::Exposition;
use super::ScrapeEndpoint;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// One fetch of one target: the parsed page, or why there is none.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub at: SystemTime,
    pub page: Result<Arc<Exposition>, String>,
}

/// One target's scrapes, oldest first.
#[derive(Debug, Clone)]
pub struct TargetHistory {
    pub endpoint: ScrapeEndpoint,
    pub scrapes: VecDeque<Scrape>,
}

impl TargetHistory {
    pub fn latest(&self) -> Option<&Scrape> {
        self.scrapes.back()
    }

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
}

fn key(e: &ScrapeEndpoint) -> String {
    format!("{}\u{0}{}\u{0}{}", e.role, e.instance, e.locator)
}

impl History {
    /// Keep scrapes for at least `keep` (the longest rate window, plus a margin).
    pub fn new(keep: Duration) -> Self {
        History {
            targets: BTreeMap::new(),
            keep,
        }
    }

    /// Make sure the history spans at least `window` (grows, never shrinks).
    pub fn keep_at_least(&mut self, window: Duration) {
        // One extra scrape interval's worth of margin so a full window is always covered.
        self.keep = self.keep.max(window + window / 2);
    }

    /// Record one fetch result.
    pub fn record(
        &mut self,
        endpoint: &ScrapeEndpoint,
        at: SystemTime,
        page: Result<Exposition, String>,
    ) {
        let t = self
            .targets
            .entry(key(endpoint))
            .or_insert_with(|| TargetHistory {
                endpoint: endpoint.clone(),
                scrapes: VecDeque::new(),
            });
        t.scrapes.push_back(Scrape {
            at,
            page: page.map(Arc::new),
        });
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
    }

    /// Drop targets that are no longer listed (a replaced pod, a removed URL).
    pub fn retain_targets(&mut self, current: &[ScrapeEndpoint]) {
        let keys: std::collections::BTreeSet<String> = current.iter().map(key).collect();
        self.targets.retain(|k, _| keys.contains(k));
    }

    /// The instances of the targets with this role, each once, in order.
    pub fn instances(&self, role: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .targets(Some(role))
            .map(|t| t.endpoint.instance.clone())
            .collect();
        v.dedup();
        v
    }

    /// A copy in which `role` has only the targets of `instance` (other roles kept whole),
    /// so an expression over that role reads one replica. Pages are shared, not copied.
    pub fn only_instance(&self, role: &str, instance: &str) -> History {
        History {
            targets: self
                .targets
                .iter()
                .filter(|(_, t)| t.endpoint.role != role || t.endpoint.instance == instance)
                .map(|(k, t)| (k.clone(), t.clone()))
                .collect(),
            keep: self.keep,
        }
    }

    /// A copy without the scrapes taken before `since` (pages are shared, not copied): the
    /// history a rate window cut at `since` sees.
    pub fn since(&self, since: SystemTime) -> History {
        History {
            targets: self
                .targets
                .iter()
                .map(|(k, t)| {
                    let scrapes = t
                        .scrapes
                        .iter()
                        .filter(|s| s.at >= since)
                        .cloned()
                        .collect();
                    let t = TargetHistory {
                        endpoint: t.endpoint.clone(),
                        scrapes,
                    };
                    (k.clone(), t)
                })
                .collect(),
            keep: self.keep,
        }
    }

    /// Targets with this role (all targets if `role` is `None`).
    pub fn targets<'a>(
        &'a self,
        role: Option<&'a str>,
    ) -> impl Iterator<Item = &'a TargetHistory> + 'a {
        self.targets
            .values()
            .filter(move |t| role.is_none_or(|r| t.endpoint.role == r))
    }
}
