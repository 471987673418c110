//! The HTTP client the metric sources and platforms share. It exists for one reason
//! beyond a builder call: in test builds reqwest gets rustls without a crypto provider (a dev-dependency
//! turns it on) and panics when a client is built, so the ring provider is installed
//! first. Installing twice is harmless (the second attempt is refused and ignored).

use std::time::Duration;

/// Install the process-wide rustls crypto provider if none is. Call before building any
/// reqwest client in code that test builds run (e.g. before `reqwest::Client::new`).
pub fn ensure_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A reqwest client with a per-request timeout.
pub fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    ensure_tls_provider();
    reqwest::Client::builder().timeout(timeout).build()
}
