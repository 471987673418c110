//! Metric sources: where the controller's eyes are. A runbook names its signals; a
//! [`source::MetricSource`] turns each into a [`signal::Reading`] by scraping `/metrics`
//! endpoints directly (no Prometheus needed) or by querying a Prometheus server.

pub mod promql;
pub mod scrape;
pub mod signal;
pub mod source;
