//! The scenario grid's generator (`scripts/lib/grid_scenarios.py`) draws only systems
//! that get stuck on paper: every point, judged by the same arithmetic the rehearsal uses
//! to say a trigger left the system healthy (`rehearse::harsher::not_stuck`), needs no
//! harsher number. A point that cannot get stuck measures nothing (and a late-attach one
//! is not "stuck before anyone looked").

use recover::rehearse::harsher::not_stuck;
use recover::rehearse::scenario::Scenario;
use std::process::Command;

#[test]
fn every_drawn_point_gets_stuck_on_paper() {
    let dir = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let n = 300;
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/lib/grid_scenarios.py"))
        .arg(dir.path())
        .arg(n.to_string())
        .arg("30")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut bad = Vec::new();
    let mut late = 0;
    for i in 1..=n {
        let path = dir.path().join(format!("grid-{i}.yaml"));
        let sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        late += usize::from(sc.attach_after.is_some());
        let verdict = not_stuck(&sc);
        if !verdict.suggestions[0].starts_with("the numbers get stuck on paper") {
            bad.push(format!("{}: {:?}", path.display(), verdict.suggestions));
        }
    }
    assert!(late > n / 4, "{late} late-attach points of {n}");
    assert!(
        bad.is_empty(),
        "{} of {n} points not stuck on paper:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
