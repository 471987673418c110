//! Small pieces every component needs: durations, atomic file writes, logging setup,
//! loopback helpers and guarded child processes.

pub mod atomic_file;
pub mod child;
pub mod duration;
pub mod logging;
pub mod net;
