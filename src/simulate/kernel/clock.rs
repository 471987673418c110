//! The one clock of every scenario: a timing wheel of events. Time is a whole number of the
//! scenario's own unit (a 10 ms tick, a 100 ms tick, a microsecond); events due at the same
//! time come out in the order they were scheduled, so a run is the same for a seed on
//! every machine.
//!
//! Why a wheel: the continuous model schedules a million client wake-ups per wall second,
//! and a wheel does that in O(1) without allocating once its buckets have grown (a binary
//! heap costs a log and a cache miss each). Events further ahead than the wheel wait in a
//! heap and move onto the wheel before they could tie with anything scheduled there, so
//! the order stays (time, scheduling order) exactly. Empty buckets are skipped by a bitmap,
//! so sparse microsecond models pay nothing for the time between their events.
//!
//! Two ways to drive it, fixed by the clock's type: a [`Stepped`] clock hands out one time's
//! events at once ([`Clock::take`], a model that steps tick by tick), a [`Jumping`] one one
//! event at a time ([`Clock::pop`]), jumping to the next one due. Only jumping looks for
//! the next bucket holding events, so only it keeps the bitmap and the count: a stepped
//! model visits every bucket anyway and pays nothing per event for them.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::marker::PhantomData;

/// How a model drives its clock.
pub trait Drive {
    /// It jumps over empty time, so it must find the next bucket holding events.
    const JUMPS: bool;
}

/// Handed out one unit of time at a time ([`Clock::take`]).
#[derive(Debug)]
pub enum Stepped {}

/// Handed out one event at a time, jumping to the next one due ([`Clock::pop`]).
#[derive(Debug)]
pub enum Jumping {}

impl Drive for Stepped {
    const JUMPS: bool = false;
}

impl Drive for Jumping {
    const JUMPS: bool = true;
}

/// The most buckets a wheel gets; later events wait in the heap.
const MAX_BUCKETS: u64 = 1 << 18;

/// An event beyond the wheel, ordered by (time, scheduling order) only.
#[derive(Debug)]
struct Far<E> {
    at: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Far<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Far<E> {}
impl<E> PartialOrd for Far<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Far<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Debug)]
pub struct Clock<E, D: Drive = Jumping> {
    /// Times before this are over: nothing can be scheduled there any more.
    now: u64,
    buckets: Vec<Vec<E>>,
    size: u64,
    mask: u64,
    /// Jumping only: one bit per bucket, set while it holds events, and how many the
    /// wheel holds.
    occupied: Vec<u64>,
    on_wheel: usize,
    far: BinaryHeap<Reverse<Far<E>>>,
    seq: u64,
    /// The bucket [`Clock::pop`] is handing out, and how far it got.
    current: Vec<E>,
    pos: usize,
    spare: Vec<E>,
    drive: PhantomData<D>,
}

impl<E: Copy, D: Drive> Clock<E, D> {
    /// A clock at time 0 whose wheel covers `horizon` units ahead (the longest delay the
    /// model usually schedules); anything later waits in a heap.
    pub fn new(horizon: u64) -> Self {
        let size = horizon
            .saturating_add(2)
            .next_power_of_two()
            .clamp(64, MAX_BUCKETS);
        Clock {
            now: 0,
            buckets: (0..size).map(|_| Vec::new()).collect(),
            size,
            mask: size - 1,
            occupied: vec![0; if D::JUMPS { (size / 64) as usize } else { 0 }],
            on_wheel: 0,
            far: BinaryHeap::new(),
            seq: 0,
            current: Vec::new(),
            pos: 0,
            spare: Vec::new(),
            drive: PhantomData,
        }
    }

    /// The time of the events last handed out.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// `event` is due at `at` (a time already over counts as the earliest one still open).
    // Inlined into every model's event loop with the rare heap push kept out of line: a
    // call per event cost the continuous model a fifth of its instructions.
    #[inline]
    pub fn schedule(&mut self, at: u64, event: E) {
        // One comparison for the usual case: a time already over wraps round to a huge
        // distance and takes the slow path with the far ones.
        if at.wrapping_sub(self.now) < self.size {
            self.put(at, event);
        } else {
            self.schedule_slow(at, event);
        }
    }

    #[cold]
    #[inline(never)]
    fn schedule_slow(&mut self, at: u64, event: E) {
        let at = at.max(self.now);
        if at - self.now < self.size {
            return self.put(at, event);
        }
        self.seq += 1;
        self.far.push(Reverse(Far {
            at,
            seq: self.seq,
            event,
        }));
    }

    #[inline]
    fn put(&mut self, at: u64, event: E) {
        let i = (at & self.mask) as usize;
        self.buckets[i].push(event);
        if D::JUMPS {
            self.occupied[i / 64] |= 1 << (i % 64);
            self.on_wheel += 1;
        }
    }

    /// Move onto the wheel what has come within its reach of `now`: before anything else
    /// is scheduled at those times, so ties keep their order.
    fn advance_to(&mut self, now: u64) {
        self.now = now;
        while let Some(Reverse(f)) = self.far.peek() {
            if f.at - now >= self.size {
                break;
            }
            if let Some(Reverse(f)) = self.far.pop() {
                self.put(f.at, f.event);
            }
        }
    }

    fn take_bucket(&mut self, i: usize) -> Vec<E> {
        let spare = std::mem::take(&mut self.spare);
        let v = std::mem::replace(&mut self.buckets[i], spare);
        if D::JUMPS {
            self.occupied[i / 64] &= !(1 << (i % 64));
            self.on_wheel -= v.len();
        }
        v
    }

    fn recycle(&mut self, mut v: Vec<E>) {
        v.clear();
        self.spare = v;
    }
}

impl<E: Copy> Clock<E, Stepped> {
    /// The events due at `now`, in the order they were scheduled; for a model that steps
    /// one unit at a time (`now` one more than the last call's). From here on, anything
    /// scheduled at `now` or before goes to `now + 1`. Give the vector back with
    /// [`Clock::give_back`] so its capacity is reused.
    pub fn take(&mut self, now: u64) -> Vec<E> {
        self.advance_to(now);
        let v = self.take_bucket((now & self.mask) as usize);
        self.now = now + 1;
        v
    }

    pub fn give_back(&mut self, v: Vec<E>) {
        self.recycle(v);
    }
}

impl<E: Copy> Clock<E, Jumping> {
    /// Nothing is scheduled any more.
    pub fn is_empty(&self) -> bool {
        self.on_wheel == 0 && self.far.is_empty() && self.pos >= self.current.len()
    }

    /// The next event and its time, or none when nothing is scheduled.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        loop {
            if let Some(&e) = self.current.get(self.pos) {
                self.pos += 1;
                return Some((self.now, e));
            }
            let done = std::mem::take(&mut self.current);
            self.recycle(done);
            self.pos = 0;
            let at = if self.on_wheel > 0 {
                self.now + self.next_occupied()
            } else {
                self.far.peek()?.0.at
            };
            self.advance_to(at);
            self.current = self.take_bucket((at & self.mask) as usize);
        }
    }

    /// How far after `now` the first bucket holding events is (the wheel is not empty).
    fn next_occupied(&self) -> u64 {
        let start = (self.now & self.mask) as usize;
        let words = self.occupied.len();
        let (w0, b0) = (start / 64, start % 64);
        // The first word from `start`'s bit on, then the whole words after it, wrapping
        // round to the bits of the first word before `start`.
        let first = self.occupied[w0] >> b0;
        if first != 0 {
            return u64::from(first.trailing_zeros());
        }
        for k in 1..=words {
            let w = (w0 + k) % words;
            let bits = if w == w0 {
                self.occupied[w] & ((1u64 << b0) - 1)
            } else {
                self.occupied[w]
            };
            if bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                return (i as u64).wrapping_sub(start as u64) & self.mask;
            }
        }
        unreachable!("on_wheel counts events that no bucket holds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_scheduling_order() {
        let mut c = Clock::new(100);
        c.schedule(5, 'a');
        c.schedule(3, 'b');
        c.schedule(5, 'c');
        c.schedule(1_000_000, 'd'); // far beyond the wheel
        c.schedule(3, 'e');
        let mut got = Vec::new();
        while let Some((t, e)) = c.pop() {
            got.push((t, e));
            if e == 'b' {
                c.schedule(3, 'f'); // same time, scheduled while it is handed out
                c.schedule(1_000_000, 'g');
            }
        }
        assert_eq!(
            got,
            vec![
                (3, 'b'),
                (3, 'e'),
                (3, 'f'),
                (5, 'a'),
                (5, 'c'),
                (1_000_000, 'd'),
                (1_000_000, 'g')
            ]
        );
        assert!(c.is_empty());
    }

    /// An event waiting in the heap reaches the wheel before a later-scheduled one at the
    /// same time lands there directly, so ties keep their order across the two.
    #[test]
    fn far_events_keep_their_order_against_near_ones() {
        let mut c = Clock::new(10);
        c.schedule(200, 1u32);
        c.schedule(150, 0);
        let (t, e) = c.pop().unwrap();
        assert_eq!((t, e), (150, 0));
        c.schedule(200, 2);
        assert_eq!(c.pop(), Some((200, 1)));
        assert_eq!(c.pop(), Some((200, 2)));
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn take_hands_out_one_time_at_a_time_and_pushes_the_past_forward() {
        let mut c: Clock<u32, Stepped> = Clock::new(8);
        c.schedule(1, 10u32);
        c.schedule(1, 11);
        c.schedule(2, 12);
        c.schedule(500, 13);
        assert!(c.take(0).is_empty());
        let v = c.take(1);
        assert_eq!(v, vec![10, 11]);
        c.give_back(v);
        c.schedule(1, 14); // tick 1 is over: it lands in tick 2
        assert_eq!(c.take(2), vec![12, 14]);
        for t in 3..500 {
            assert!(c.take(t).is_empty(), "{t}");
        }
        assert_eq!(c.take(500), vec![13]);
    }

    #[test]
    fn a_sparse_wheel_skips_to_the_next_event_across_the_wrap() {
        let mut c = Clock::new(1000);
        let size = c.size;
        for t in [size - 3, size + 5, 3 * size + 1] {
            c.schedule(t, t);
        }
        assert_eq!(c.pop(), Some((size - 3, size - 3)));
        assert_eq!(c.pop(), Some((size + 5, size + 5)));
        assert_eq!(c.pop(), Some((3 * size + 1, 3 * size + 1)));
    }
}
