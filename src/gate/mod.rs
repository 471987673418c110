//! The admission gate: a reverse proxy at the edge that admits at most a set rate (GCRA,
//! via governor) and a set number of requests in flight, and answers the rest 429 at once,
//! so that what it admits finishes inside the client's timeout. The limit changes at
//! runtime through a [`limit_source::LimitSource`] (admin API, state file, ConfigMap).
//!
//! The proxy path, outermost first, each concern in its own module: [`workers`] (a
//! single-threaded runtime per core; with one per CPU each is bound to its CPU by
//! [`placement`] and serves the connections whose packets arrive there, else each
//! accepted connection goes to the least loaded)
//! -> [`connection`] (one client connection's loop, over the [`http1`] codec) -> [`proxy`]
//! (the per-request policy: [`admission`], rate AND in-flight cap, reject fast;
//! [`balance`], least outstanding requests or power of two choices, with latency outlier ejection;
//! [`deadline`], `x-deadline-ms`; [`attempts`], first attempt or retry) -> [`exchange`]
//! (forward under the deadline, relay the response; [`resend`], never a second copy the
//! upstream may act on) -> [`upstream`] (each client connection's own upstream
//! connections), with [`telemetry`] counting every outcome. [`control`] owns the current
//! limit and its version; [`admin`] and any extra [`limit_source::LimitSource`] feed it;
//! [`state`] persists it ([`durable`] syncs it to disk off the request's path) so a
//! restarted gate comes back with the last limit, not wide open. [`limits`] and
//! [`conn_table`] (with [`presence`]) keep slow or many clients from locking the others out. The limit is a total for every replica behind one Service:
//! [`share`] divides it by the replicas a [`limit_source::PeerSource`] reports.

pub mod admin;
pub mod admission;
pub mod attempts;
pub mod balance;
pub mod config;
pub mod conn_table;
pub mod connection;
pub mod control;
pub mod deadline;
pub mod durable;
pub mod error;
pub mod exchange;
pub mod http1;
pub mod latency;
pub mod limit;
pub mod limit_source;
pub mod limits;
pub mod placement;
pub mod presence;
pub mod proxy;
pub mod refusal;
pub mod resend;
pub mod server;
mod session;
pub mod share;
pub mod snapshot;
pub mod state;
pub mod telemetry;
pub mod upstream;
pub mod validate;
pub mod workers;

pub use config::GateConfig;
pub use control::AppliedLimit;
pub use error::GateError;
pub use server::{serve, BoundGate};
