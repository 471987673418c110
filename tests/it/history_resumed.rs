//! `recover history` counts steps, not step events: a run killed inside its fourth step
//! and resumed starts that step twice, and a seven-step run must still read 7/7.

use recover::engine::journal::{Event, Journal};
use recover::engine::{Figures, Outcome, Phase, StepOutcome};

const STEPS: [&str; 7] = [
    "block", "drain", "restart", "warm", "ramp", "verify", "lift",
];

fn step_started(i: usize) -> Event {
    Event::StepStarted {
        phase: Phase::Main,
        index: i,
        step: STEPS[i].into(),
        action: "wait".into(),
    }
}

fn step_done(i: usize) -> Event {
    Event::StepFinished {
        phase: Phase::Main,
        step: STEPS[i].into(),
        outcome: StepOutcome::Succeeded,
        message: None,
        figures: Figures::new(),
    }
}

#[test]
fn a_resumed_seven_step_run_shows_seven_of_seven_steps() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::create(dir.path(), "run-resumed").unwrap();
    j.append(Event::RunStarted {
        format: recover::engine::journal::FORMAT,
        runbook: "stuck-overload".into(),
        runbook_source: String::new(),
        origin: "test".into(),
        target: "local:demo".into(),
        target_spec: None,
        started_by: None,
        pid: 1,
    })
    .unwrap();
    for i in 0..3 {
        j.append(step_started(i)).unwrap();
        j.append(step_done(i)).unwrap();
    }
    // Killed inside the fourth step, then resumed: it starts again.
    j.append(step_started(3)).unwrap();
    j.append(Event::Resumed { pid: 2 }).unwrap();
    for i in 3..7 {
        j.append(step_started(i)).unwrap();
        j.append(step_done(i)).unwrap();
    }
    j.append(Event::RunFinished {
        gate: None,
        outcome: Outcome::Succeeded,
        message: None,
    })
    .unwrap();

    let out = crate::support::bin()
        .args(["history", "--output", "json", "--journal-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &runs[0];
    assert_eq!(run["run_id"], "run-resumed", "{runs}");
    assert_eq!(run["steps_started"], 7, "{run}");
    assert_eq!(run["steps_done"], 7, "{run}");
    assert_eq!(run["status"], "succeeded", "{run}");

    let out = crate::support::bin()
        .args(["history", "--journal-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" 7/7 "), "{text}");
}
