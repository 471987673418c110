//! Small pieces every component needs: durations, atomic file writes, logging setup,
//! loopback helpers, guarded child processes, registering metrics for export and answering
//! `/metrics` in the format the scraper asked for.

pub mod atomic_file;
pub mod child;
pub mod duration;
pub mod exposition;
pub mod logging;
pub mod net;
pub mod text_format;
