//! `recover rehearse`: the whole failure and its recovery on one machine, with real
//! processes, and a report.
//!
//! Layout, in the order a rehearsal uses it: [`scenario`] (the numbers), [`orchestrate`]
//! (real processes on loopback, no orphans), [`recorder`] (every `/metrics` page into a
//! time series: [`series`], parsed by [`expo`]), [`stage`] (system up, steady, then the
//! [`trigger`]), [`detection`] (until Stuck), [`recovery`] (the runbook through the
//! engine), [`verify`] (steady state, lower bound), [`baselines`], then [`assemble`] (with
//! counts over the runbook's window from [`window_increase`]) into the stable [`report`],
//! the human [`summary`], the [`timeline`] SVG, written by [`output`].
//! [`rehearsal::rehearse`] runs the sequence; [`slow_replica`] is the slow-replica
//! rehearsal, on the same stage and the same report.

pub mod assemble;
pub mod baselines;
pub mod bound;
mod bound_busy;
pub mod bound_grid;
mod bound_retry;
pub mod client_phases;
pub mod detection;
pub mod expo;
pub mod grid;
pub mod harsher;
mod ladder;
pub mod orchestrate;
pub mod output;
pub mod predict;
pub mod recorder;
pub mod recovery;
pub mod rehearsal;
pub mod report;
pub mod scenario;
pub mod series;
pub mod service_busy;
pub mod slow_replica;
pub mod stage;
pub mod summary;
pub mod timeline;
pub mod trigger;
pub mod verify;
pub mod window_increase;

pub use rehearsal::{rehearse, Options, Rehearsed};
