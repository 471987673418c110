//! Small pieces every component needs: durations, atomic file writes, logging setup,
//! loopback helpers, the open-file limit, guarded child processes and registering metrics for export.

pub mod atomic_file;
pub mod child;
pub mod duration;
pub mod exposition;
pub mod http;
pub mod http_body;
pub mod http_refusal;
pub mod http_server;
pub mod logging;
pub mod net;
pub mod rlimit;
pub mod table;
pub mod time;
pub mod yaml;
