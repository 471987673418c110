//! Why the gate could not start or stopped. Each variant says which input was wrong so
//! the CLI can name the flag or file and exit 2, as every `recover` command does.

use super::validate::InvalidLimit;
use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("--upstream {url}: {reason}")]
    Upstream { url: String, reason: String },
    #[error("--upstream: at least one upstream URL is needed")]
    NoUpstream,
    #[error("invalid limit from the flags: --{0}")]
    Limit(InvalidLimit),
    #[error("{flag} {addr}: cannot listen: {source}")]
    Bind {
        flag: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
}

impl GateError {
    /// True when the user can fix it by changing a flag or a file (exit 2).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, GateError::Io { .. })
    }
}
