//! A timing wheel: one reusable bucket of client ids per tick, modulo a power of two larger
//! than the longest delay. Scheduling and popping are O(1) and, once buckets have grown to
//! their working size, allocate nothing; that is what lets the model do a million
//! client-seconds per wall second.

#[derive(Debug)]
pub struct Wheel {
    buckets: Vec<Vec<u32>>,
    mask: usize,
    spare: Vec<u32>,
}

impl Wheel {
    /// `horizon`: the longest delay (in ticks) anything will be scheduled ahead.
    pub fn new(horizon: u64) -> Self {
        let size = (horizon.saturating_add(2)).next_power_of_two() as usize;
        Wheel {
            buckets: (0..size).map(|_| Vec::new()).collect(),
            mask: size - 1,
            spare: Vec::new(),
        }
    }

    pub fn schedule(&mut self, id: u32, at: u32) {
        self.buckets[at as usize & self.mask].push(id);
    }

    /// Take the ids due at `now` (possibly stale: the caller checks each client's wake).
    /// Give the vector back with [`Wheel::give_back`] so its capacity is reused.
    pub fn take(&mut self, now: u32) -> Vec<u32> {
        let spare = std::mem::take(&mut self.spare);
        std::mem::replace(&mut self.buckets[now as usize & self.mask], spare)
    }

    pub fn give_back(&mut self, mut v: Vec<u32>) {
        v.clear();
        self.spare = v;
    }
}
