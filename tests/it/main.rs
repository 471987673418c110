//! The integration tests, as one test crate: each module is one area seen from outside the
//! library (real sockets, real processes, the real binary), and `support` holds what they
//! share. One crate links the library once instead of once per test file.
//!
//! Select an area with nextest by module path, e.g.
//! `cargo nextest run -E 'test(/^gate_proxy::/)'`.

mod support;

mod demo_cli;
mod demo_e2e;
mod detect_cli;
mod detect_demo;
mod detect_exposition;
mod detect_history;
mod detect_windows;
mod engine_abort_e2e;
mod engine_exit_codes;
mod engine_local_e2e;
mod engine_preflight;
mod gate_admin;
mod gate_admission;
mod gate_attempts;
mod gate_cli;
mod gate_http1_wire;
mod gate_proxy;
mod gate_sources;
mod gate_upstream_links;
mod kind_e2e;
mod kube_gate_limit;
mod kube_manifest_args;
mod kube_manifests;
mod kube_platform;
mod kube_rbac;
mod plan_cli;
mod promql_prometheus;
mod readme_blocks;
mod rehearse_e2e;
mod runbook_validate;
mod serve_cli;
mod serve_e2e;
mod serve_http;
mod simulate_cli;
mod simulate_model;
mod simulate_storm;
