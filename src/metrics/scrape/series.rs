//! One target's series over its recent scrapes, each name and label set stored once.
//!
//! Keeping every scrape's parsed page made memory grow with the window (a page's labels
//! again on every scrape) and made a rate look each series up in every page by a linear
//! search: quadratic in the number of series. Here a series is interned when first seen
//! and each scrape adds one (scrape number, value) point to it, so a rate reads only its
//! own points (work in proportion to the samples in its window), and memory is the
//! series' names and labels once plus [`POINT_BYTES`] per kept sample.

use super::text::Sample;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A series' identity: the metric name and the label set (sorted by label name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    pub name: String,
    pub labels: Arc<[(String, String)]>,
}

impl SeriesKey {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Bytes of text the key holds: what a hostile target controls.
    pub fn text_bytes(&self) -> usize {
        self.name.len()
            + self
                .labels
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }
}

impl From<Sample> for SeriesKey {
    fn from(s: Sample) -> Self {
        SeriesKey {
            name: s.name,
            labels: s.labels.into(),
        }
    }
}

/// The memory one kept sample takes: its scrape number and its value.
pub const POINT_BYTES: usize = std::mem::size_of::<(u64, f64)>();

/// A series and its values, oldest first, keyed by the number of the scrape that read it.
#[derive(Debug, Clone)]
pub struct Series {
    pub key: Arc<SeriesKey>,
    points: VecDeque<(u64, f64)>,
}

impl Series {
    /// The value read by scrape `seq`, if that scrape had the series.
    pub fn value_at(&self, seq: u64) -> Option<f64> {
        let i = self.points.partition_point(|p| p.0 < seq);
        self.points.get(i).filter(|p| p.0 == seq).map(|p| p.1)
    }

    /// The points read by scrapes `from..=to`, oldest first.
    pub fn points_between(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, f64)> + '_ {
        let start = self.points.partition_point(|p| p.0 < from);
        self.points
            .range(start..)
            .take_while(move |p| p.0 <= to)
            .copied()
    }
}

/// Why a page's series were not kept.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    #[error("the series kept over the window would hold {bytes} bytes of names and labels, over the cap of {cap} (labels that change on every scrape?)")]
    TooManyKeyBytes { bytes: usize, cap: usize },
}

/// What a target's store holds, for bounds and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retained {
    pub series: usize,
    pub points: usize,
    pub key_bytes: usize,
}

/// Every kept series of one target.
#[derive(Debug, Clone, Default)]
pub struct SeriesStore {
    slots: Vec<Option<Series>>,
    free: Vec<usize>,
    index: HashMap<Arc<SeriesKey>, usize>,
    /// Metric name -> slots, in the order the series were first seen.
    by_name: HashMap<String, Vec<usize>>,
    key_bytes: usize,
    points: usize,
}

impl SeriesStore {
    /// Add scrape `seq`'s samples (it must be newer than every scrape recorded so far).
    /// A series twice on one page keeps its first value. Refused whole, keeping nothing,
    /// when the new series' names and labels would take the store past `key_bytes_cap`.
    pub fn record(
        &mut self,
        seq: u64,
        samples: Vec<Sample>,
        key_bytes_cap: usize,
    ) -> Result<(), StoreError> {
        let keys: Vec<(SeriesKey, f64)> = samples
            .into_iter()
            .map(|s| {
                let v = s.value;
                (SeriesKey::from(s), v)
            })
            .collect();
        let new_bytes: usize = keys
            .iter()
            .filter(|(k, _)| !self.index.contains_key(k))
            .map(|(k, _)| k.text_bytes())
            .sum();
        let bytes = self.key_bytes + new_bytes;
        if bytes > key_bytes_cap {
            return Err(StoreError::TooManyKeyBytes {
                bytes,
                cap: key_bytes_cap,
            });
        }
        for (key, value) in keys {
            let slot = match self.index.get(&key) {
                Some(&slot) => slot,
                None => self.insert(key),
            };
            let Some(series) = self.slots[slot].as_mut() else {
                continue;
            };
            if series.points.back().is_some_and(|p| p.0 >= seq) {
                continue;
            }
            series.points.push_back((seq, value));
            self.points += 1;
        }
        Ok(())
    }

    fn insert(&mut self, key: SeriesKey) -> usize {
        self.key_bytes += key.text_bytes();
        let key = Arc::new(key);
        let series = Series {
            key: key.clone(),
            points: VecDeque::new(),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(series);
                slot
            }
            None => {
                self.slots.push(Some(series));
                self.slots.len() - 1
            }
        };
        self.by_name.entry(key.name.clone()).or_default().push(slot);
        self.index.insert(key, slot);
        slot
    }

    /// Forget the points of scrapes before `oldest`, and the series left without any.
    pub fn prune(&mut self, oldest: u64) {
        let mut emptied = Vec::new();
        for (slot, s) in self.slots.iter_mut().enumerate() {
            let Some(series) = s else { continue };
            while series.points.front().is_some_and(|p| p.0 < oldest) {
                series.points.pop_front();
                self.points -= 1;
            }
            if series.points.is_empty() {
                emptied.push(slot);
            }
        }
        let mut names = Vec::new();
        for slot in emptied {
            if let Some(series) = self.slots[slot].take() {
                self.key_bytes -= series.key.text_bytes();
                self.index.remove(&*series.key);
                names.push(series.key.name.clone());
                self.free.push(slot);
            }
        }
        names.dedup();
        for name in names {
            if let Some(list) = self.by_name.get_mut(&name) {
                let slots = &self.slots;
                list.retain(|&i| slots[i].as_ref().is_some_and(|s| s.key.name == name));
                if list.is_empty() {
                    self.by_name.remove(&name);
                }
            }
        }
    }

    /// The series of metric `name`, in the order first seen.
    pub fn named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Series> + 'a {
        self.by_name
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|&i| self.slots[i].as_ref())
    }

    pub fn retained(&self) -> Retained {
        Retained {
            series: self.index.len(),
            points: self.points,
            key_bytes: self.key_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, label: &str, value: f64) -> Sample {
        Sample {
            name: name.into(),
            labels: vec![("l".into(), label.into())],
            value,
        }
    }

    #[test]
    fn series_are_stored_once_and_pruned_with_their_last_point() {
        let mut s = SeriesStore::default();
        s.record(0, vec![sample("a", "x", 1.0), sample("a", "y", 2.0)], 1000)
            .unwrap();
        s.record(1, vec![sample("a", "x", 3.0), sample("a", "x", 9.0)], 1000)
            .unwrap();
        assert_eq!(s.retained().series, 2);
        assert_eq!(s.retained().points, 3, "a duplicate keeps its first value");
        let x = s.named("a").next().unwrap();
        assert_eq!(x.value_at(1), Some(3.0));
        assert_eq!(x.points_between(0, 1).count(), 2);
        s.prune(1);
        assert_eq!(s.retained().series, 1, "y had no point since scrape 1");
        assert_eq!(s.retained().key_bytes, "a".len() + "l".len() + "x".len());
        assert_eq!(s.named("a").count(), 1);
    }

    #[test]
    fn new_keys_past_the_byte_cap_refuse_the_page_whole() {
        let mut s = SeriesStore::default();
        s.record(0, vec![sample("a", "x", 1.0)], 3).unwrap();
        let e = s.record(1, vec![sample("a", "x", 1.0), sample("a", "y", 1.0)], 3);
        assert_eq!(e, Err(StoreError::TooManyKeyBytes { bytes: 6, cap: 3 }));
        assert_eq!(s.retained().points, 1);
    }
}
