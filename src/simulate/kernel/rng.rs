//! The one seeded PRNG of every scenario (SplitMix64), owned by this crate so that a
//! simulation's output is byte for byte the same across machines and dependency upgrades
//! (`rand`'s generators may change); with the draws the scenarios share.

/// SplitMix64: one u64 of state, good statistical quality for what-if jitter and phases.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when n is 0); Lemire's multiply-shift, bias negligible here.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// Exponentially distributed with mean `mean` (the gap between Poisson arrivals).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// A uniform random order (Fisher-Yates, from the back).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_first_outputs_pin_the_sequence() {
        // Reference values of SplitMix64 seeded with 0 (published test vector).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn between_stays_in_range_and_hits_both_ends() {
        let mut r = SplitMix64::new(7);
        let (mut lo, mut hi) = (false, false);
        for _ in 0..1000 {
            let v = r.between(1, 4);
            assert!((1..=4).contains(&v));
            lo |= v == 1;
            hi |= v == 4;
        }
        assert!(lo && hi);
    }

    #[test]
    fn shuffle_keeps_every_element_and_depends_on_the_seed() {
        let order = |seed| {
            let mut v: Vec<u32> = (0..20).collect();
            SplitMix64::new(seed).shuffle(&mut v);
            v
        };
        let mut sorted = order(1);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..20).collect::<Vec<_>>());
        assert_eq!(order(1), order(1));
        assert_ne!(order(1), order(2));
    }
}
