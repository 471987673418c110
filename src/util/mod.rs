//! Small pieces every component needs: durations, atomic file writes, logging setup,
//! loopback helpers and reserved ports, the open-file limit, guarded child processes, what `/proc` says of
//! this host's processes, registering metrics for export, refusing weak tokens and
//! answering `/metrics` in the format the scraper asked for.

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
pub mod pipe;
pub mod ports;
pub mod procfs;
pub mod rlimit;
pub mod secret;
pub mod shell;
pub mod table;
pub mod text_format;
pub mod time;
pub mod yaml;
