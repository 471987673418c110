//! The admission gate: a reverse proxy at the edge that admits at most a set rate (GCRA,
//! via governor) and a set number of requests in flight, and answers the rest 429 at once,
//! so that what it admits finishes inside the client's timeout. The limit changes at
//! runtime through a [`limit_source::LimitSource`] (admin API, state file, ConfigMap).

pub mod limit;
pub mod limit_source;
