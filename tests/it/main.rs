//! The integration tests, as one test crate: each module is one area seen from outside the
//! library (real sockets, real processes, the real binary), and `support` holds what they
//! share. One crate links the library once instead of once per test file.
//!
//! Select an area with nextest by module path, e.g.
//! `cargo nextest run -E 'test(/^gate_proxy::/)'`.

mod support;

mod admin_body_caps;
mod arch_layering;
mod cli_surface;
mod demo_cli;
mod demo_e2e;
mod demo_slow_replica;
mod detect_cli;
mod detect_demo;
mod detect_exposition;
mod detect_history;
mod detect_windows;
mod docs_links;
mod engine_abort_e2e;
mod engine_exit_codes;
mod engine_live_e2e;
mod engine_local_e2e;
mod engine_preflight;
mod engine_step_figures;
mod fuzz_parsers;
mod gate_admin;
mod gate_admission;
mod gate_attempts;
mod gate_cli;
mod gate_connection_fairness;
mod gate_connection_limits;
mod gate_framing_edges;
mod gate_http1_wire;
mod gate_input_hardening;
mod gate_limit_range;
mod gate_no_resend;
mod gate_outlier;
mod gate_peers;
mod gate_proxy;
mod gate_sources;
mod gate_upstream_links;
mod history_resumed;
mod http_refusals;
mod kind_e2e;
mod kube_api_semantics;
mod kube_engine;
mod kube_fencing;
mod kube_gate_fail_static;
mod kube_gate_limit;
mod kube_gate_share;
mod kube_lease;
mod kube_manifest_args;
mod kube_manifest_policies;
mod kube_manifests;
mod kube_platform;
mod kube_pod_calls;
mod kube_rbac;
mod kube_serve_state;
mod listener_timeouts;
mod local_gate_share;
mod metrics_body_caps;
mod metrics_eval_props;
mod metrics_series_scale;
mod plan_cli;
mod prometheus_dashboard;
mod prometheus_exposition;
mod prometheus_history;
mod prometheus_rules;
mod promql_prometheus;
mod readme_blocks;
mod rehearse_e2e;
mod rehearse_slow_replica;
mod runbook_limits;
mod runbook_validate;
mod serve_alert_flood;
mod serve_cli;
mod serve_config_errors;
mod serve_e2e;
mod serve_http;
mod serve_webhook_signature;
mod simulate_cli;
mod simulate_drills;
mod simulate_model;
mod simulate_storm;
