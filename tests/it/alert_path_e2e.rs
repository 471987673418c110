//! The automated path with the real things, end to end: the demo system, a real
//! Prometheus scraping it every 5 s with the shipped rules, a real Alertmanager with the
//! shipped route, and `recover serve --mode act` with the demo's serve.yaml, wired and
//! driven by `scripts/bench-automated.sh` (the same orchestration the benchmark figure
//! comes from). On two systems side by side: a 5 s outage that heals by itself pages
//! nobody; the demo's stuck overload fires the shipped alert, Alertmanager posts it, serve
//! runs stuck-overload and the workers leave the retry loop. The script's timings are
//! printed, never asserted here, and it stops once the run is done (`--no-tail`: the
//! failing flag's tail is a benchmark figure, not something this test checks).

use crate::support::prometheus::require;
use std::process::Command;

/// A base port whose demo, serve, Prometheus and Alertmanager ports (base..base+17, and
/// the same 100 above for the second system) are reserved for this test process
/// (`util::ports::reserved_block`): free now, and handed to no other test or rehearsal
/// before the script's processes bind them.
fn free_base() -> u16 {
    let offsets: Vec<u16> = (0..=17).chain(100..=117).collect();
    recover::util::ports::reserved_block(&offsets).unwrap_or_else(|e| panic!("{e}"))
}

/// The value printed after `name` at the start of a line of the script's table.
fn figure<'a>(out: &'a str, name: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(name).filter(|r| r.starts_with(' ')))
        .map(str::trim)
}

#[test]
fn e2e_alert_path_fires_on_stuck_recovers_and_ignores_a_self_healing_outage() {
    require("prometheus", "prometheus");
    require("prometheus-alertmanager", "prometheus-alertmanager");
    let base = free_base().to_string();
    let out = Command::new("bash")
        .args([
            "scripts/bench-automated.sh",
            "--scrape",
            "5s",
            "--bin",
            crate::support::BIN,
            "--base-port",
            &base,
            "--self-heal",
            "--no-tail",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let all = format!(
        "{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{all}");
    assert!(out.status.success(), "{all}");
    // The outage healed by itself (the workers left the retry loop unaided), and no alert
    // followed it.
    let heal = stdout
        .lines()
        .find(|l| l.starts_with("self-healing 5 s outage"))
        .unwrap_or_else(|| panic!("no self-healing line:\n{all}"));
    assert!(heal.contains("alert none"), "{all}");
    assert!(heal.contains("retry loop at the end: 0"), "{all}");
    // The stuck overload: each step of the path happened, in order.
    let at = |name: &str| -> u64 {
        figure(&stdout, name)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} did not happen:\n{all}"))
    };
    let (failing, firing, posted, run, recovered) = (
        at("failing"),
        at("firing"),
        at("posted"),
        at("run"),
        at("recovered"),
    );
    assert!(
        failing <= firing && firing <= posted && posted <= run && run <= recovered,
        "{all}"
    );
    assert_eq!(
        figure(&stdout, "done").and_then(|v| v.split_whitespace().nth(1)),
        Some("succeeded"),
        "{all}"
    );
}
