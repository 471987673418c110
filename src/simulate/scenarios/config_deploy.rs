//! `config-deploy`: the worked example. 500 workers poll a config service every 30 s;
//! it does 200 req/s without shedding; clients time out after 2 s and retry after 1 s,
//! forever, without jitter; a deploy takes it down for 20 s. With overload factor 4 it stays
//! stuck; with shedding, or with overload factor 1, it recovers by itself.

use crate::simulate::params::SystemParams;

pub const NAME: &str = "config-deploy";

/// The worked example's parameters (all overridable with `--set`).
pub fn params() -> SystemParams {
    SystemParams::default()
}
