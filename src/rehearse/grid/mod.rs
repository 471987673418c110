//! `recover simulate --grid`: the estimator and the prediction measured over the scenario
//! grid, hundreds of systems nobody tuned to, in seconds.
//!
//! What it measures: at each point ([`draw`]) the simulator plays the true system (its cold
//! factor, k, capacity, replicas, clients); the rehearsal's detector reads the simulated
//! series as a scrape would ([`observe`]) and its k is compared with the true one (the k
//! error); the plan and the prediction are made from those estimates as a rehearsal makes
//! them, and the prediction is compared with the simulator's own run of that plan on the
//! true parameters (the prediction error) ([`point`]). So the report measures the
//! estimator and predicting from estimates; `scripts/bench-rehearse.sh --sample` measures
//! the simulator itself against real processes, on points of the same generator.
//! [`report`] writes the table and the summary.

pub mod draw;
pub mod observe;
pub mod point;
pub mod report;

pub use draw::{draw, Point};
pub use point::{measure, Measured};
pub use report::GridReport;

use crate::runbook::Runbook;
use std::path::{Path, PathBuf};

/// Measure `n` points drawn from `seed` against the runbook `rb` (the rehearsal's default,
/// `stuck-overload`). The same seed gives the same report.
pub fn run(rb: &Runbook, n: usize, seed: u64) -> GridReport {
    let measured = draw(n, seed)
        .iter()
        .map(|p| measure(p, rb, seed.wrapping_add(p.n as u64)))
        .collect();
    GridReport::new(seed, &rb.name, measured)
}

/// Write `n` points drawn from `seed` as rehearsal scenario files `dir/grid-<i>.yaml`.
pub fn write(dir: &Path, n: usize, seed: u64) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    draw(n, seed)
        .into_iter()
        .map(|p| {
            let path = dir.join(format!("{}.yaml", p.name()));
            std::fs::write(&path, p.yaml())?;
            Ok(path)
        })
        .collect()
}
