//! Failure paths against real processes: a check that cannot pass fails the run (exit 1)
//! and runs on_failure; a cancelled run (what Ctrl-C does) aborts cleanly, runs on_failure
//! and leaves the gate at the safe rate with a note saying who must act.

use crate::support::engine::fixed_inputs;
use crate::support::engine::*;
use crate::support::fixture_path;
use recover::engine::{self, Outcome, RunRequest, StepOutcome};
use recover::metrics::scrape::ScrapeSource;
use recover::platform::{local::LocalPlatform, Platform, PlatformFetch};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[test]
fn e2e_failed_check_and_cancel_run_on_failure_and_leave_a_noted_safe_limit() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sys = System::start(1, "0s", 0).await;
        // The check cannot pass: the run fails, exit 1, on_failure ran.
        let out = sys
            .run_cmd("e2e-never.yaml", &["--yes", "--output", "json"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["outcome"], "failed");
        let last = report["steps"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["name"], "hold-at-safe-rate");
        assert_eq!(last["outcome"], "succeeded");
        assert!(
            report["message"]
                .as_str()
                .unwrap()
                .contains("did not pass within 5"),
            "{report}"
        );

        // In-process, cancelled while waiting: aborted, on_failure ran.
        let platform: Arc<dyn Platform> =
            Arc::new(LocalPlatform::from_file(&sys.inventory).unwrap());
        let metrics = Arc::new(ScrapeSource::new(Arc::new(PlatformFetch {
            platform: platform.clone(),
        })));
        // The same runbook with a check that runs far longer than the 2 s before the cancel.
        let mut runbook =
            recover::runbook::find(&fixture_path("runbooks/e2e-never.yaml"), &[]).unwrap();
        runbook.source = runbook.source.replace("count: 5", "count: 500");
        runbook.runbook = recover::runbook::parse_str("e2e-never (long)", &runbook.source).unwrap();
        let options = fixed_inputs(&sys.journal_dir());
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            c.cancel();
        });
        let report = engine::run(
            RunRequest {
                runbook,
                platform,
                metrics,
                options,
            },
            cancel,
        )
        .await
        .unwrap();
        assert_eq!(
            report.outcome,
            Outcome::Aborted,
            "{}",
            report.summary_table()
        );
        let outcomes: Vec<(&str, StepOutcome)> = report
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.outcome))
            .collect();
        assert_eq!(
            outcomes,
            [
                ("block-at-edge", StepOutcome::Succeeded),
                ("wait-forever", StepOutcome::Aborted),
                ("hold-at-safe-rate", StepOutcome::Succeeded)
            ]
        );
        let admit = report.plan.as_ref().unwrap().admit_rate;
        let limit = sys.gate_limit().await;
        let rate = limit["limit"]["rate_per_s"].as_f64().unwrap();
        assert!(
            (rate - admit * 0.5).abs() < 1e-6,
            "gate at {rate}, want {}",
            admit * 0.5
        );
        let note = limit["limit"]["note"].as_str().unwrap();
        assert!(
            note.contains(&report.run_id)
                && note.contains("the engine tests must")
                && note.contains("review by"),
            "{note}"
        );
        // The lock was released: another run could start.
        assert!(!sys.platform.state_dir().join("lock").exists());
    });
}
