//! The simulation kernel every scenario runs on, knowing none of them: one clock
//! ([`clock::Clock`], a timing wheel of events), arrivals ([`arrivals`], paced or
//! Poisson), one seeded PRNG ([`rng::SplitMix64`]), and one recorder ([`record`]: series
//! by time, latency percentiles, a figure's median and range across seeds). The retry
//! policy and budget the clients follow are the crate's own ([`crate::retry`]), shared
//! with the demo workers.

pub mod arrivals;
pub mod clock;
pub mod record;
pub mod rng;
