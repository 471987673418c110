//! A step that fails halfway still reports what it did: a readmission ramp that relapses
//! out keeps, in the run report, the rate it had reached, its relapses and the limits it
//! set, against real processes.

use crate::support::engine::*;

#[test]
fn a_ramp_that_fails_reports_the_rate_it_reached_and_its_relapses() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sys = System::start(1, "0s", 0).await;
        let out = sys
            .run_cmd("e2e-relapse.yaml", &["--yes", "--output", "json"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let readmit = report["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "readmit")
            .unwrap()
            .clone();
        assert_eq!(readmit["outcome"], "failed", "{readmit}");
        let admit = report["plan"]["admit_rate"].as_f64().unwrap();
        assert_eq!(readmit["figures"]["relapses"], 1.0, "{readmit}");
        assert_eq!(readmit["figures"]["final_rate"].as_f64(), Some(admit));
        assert_eq!(readmit["figures"]["lifted"], 0.0, "{readmit}");
        assert_eq!(
            readmit["actions"][0],
            format!("admit {admit:.1} req/s"),
            "{readmit}"
        );
        assert!(
            readmit["message"]
                .as_str()
                .unwrap()
                .contains("relapses (limit 0)"),
            "{readmit}"
        );
    });
}
