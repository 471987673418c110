//! A value every request reads and that changes seldom (the limit's enforcement policy),
//! shared by every worker thread without a lock on the read.
//!
//! A lock, even a read lock, writes to a cache line all readers share, on every read; with
//! a worker per CPU that line moves between CPUs on every request. Here each thread keeps
//! the copy it last used with its version and takes the current one (under a mutex) only
//! when the shared version has moved: a read is one load of a line nobody writes between
//! changes. A read that loaded the version just before a change sees the old value, as if
//! it had come a moment earlier: at most one read per thread, at the moment of the change.

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Copies a thread keeps, one per [`Snapshot`] it read (several gates in one process).
pub const KEPT: usize = 4;

type Kept = (u64, u64, Arc<dyn Any + Send + Sync>);

thread_local! {
    /// This thread's copies: (snapshot id, version, value).
    static SEEN: RefCell<Vec<Kept>> = const { RefCell::new(Vec::new()) };
}

/// Tells apart the snapshots of one process in [`SEEN`].
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The current value of a `T`, read lock-free by any thread.
pub struct Snapshot<T> {
    /// The value and its version; each change puts a new one here.
    current: Mutex<(u64, Arc<T>)>,
    /// The version in `current`, read without its lock on every read.
    version: AtomicU64,
    id: u64,
}

impl<T: Send + Sync + 'static> Snapshot<T> {
    pub fn new(value: T) -> Self {
        Snapshot {
            current: Mutex::new((0, Arc::new(value))),
            version: AtomicU64::new(0),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (u64, Arc<T>)> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fresh(&self) -> Kept {
        let (version, value) = self.lock().clone();
        (self.id, version, value)
    }

    /// Run `f` on the current value: this thread's copy unless the version moved.
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let version = self.version.load(Ordering::Acquire);
        SEEN.with_borrow_mut(|seen| {
            let i = match seen.iter().position(|(id, _, _)| *id == self.id) {
                Some(i) if seen[i].1 == version => i,
                Some(i) => {
                    seen[i] = self.fresh();
                    i
                }
                None => {
                    if seen.len() >= KEPT {
                        seen.remove(0);
                    }
                    seen.push(self.fresh());
                    seen.len() - 1
                }
            };
            match seen[i].2.downcast_ref::<T>() {
                Some(value) => f(value),
                None => f(&self.lock().1), // cannot happen: one id, one type
            }
        })
    }

    /// Replace the value with what `change` makes of the current one, for every read
    /// that starts after this returns. Changes are serialised.
    pub fn replace(&self, change: impl FnOnce(&T) -> T) {
        let mut current = self.lock();
        let next = (current.0 + 1, Arc::new(change(&current.1)));
        let version = next.0;
        *current = next;
        self.version.store(version, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_seen_by_the_next_read_of_a_thread_that_kept_the_old_value() {
        let s = Arc::new(Snapshot::new(1u32));
        let (read, read_rx) = std::sync::mpsc::channel();
        let (changed, changed_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn({
            let s = s.clone();
            move || {
                let before = s.read(|v| *v);
                read.send(()).unwrap();
                changed_rx.recv().unwrap();
                (before, s.read(|v| *v))
            }
        });
        read_rx.recv().unwrap();
        s.replace(|v| v + 1);
        changed.send(()).unwrap();
        assert_eq!(other.join().unwrap(), (1, 2));
    }

    #[test]
    fn more_snapshots_than_a_thread_keeps_each_read_their_own_value() {
        let many: Vec<Snapshot<usize>> = (0..KEPT + 3).map(Snapshot::new).collect();
        let other = Snapshot::new("other");
        for _ in 0..3 {
            for (i, s) in many.iter().enumerate() {
                assert_eq!(s.read(|v| *v), i);
                assert_eq!(other.read(|v| *v), "other");
            }
        }
    }
}
