//! The scenario grid's one generator (`recover simulate --grid --write`, which
//! `scripts/bench-rehearse.sh --sample` rehearses) draws only systems that get stuck on
//! paper: every point, judged by the same arithmetic the rehearsal uses to say a trigger
//! left the system healthy (`rehearse::harsher::not_stuck`), needs no harsher number. A
//! point that cannot get stuck measures nothing (and a late-attach one is not "stuck
//! before anyone looked"). The generator derives its numbers from the model and does not
//! filter by `not_stuck`, so this checks the derivation.
//!
//! And what it writes is what a rehearsal reads: the files load through the rehearsal's
//! own scenario loader, as the same scenarios the generator drew.

use recover::rehearse::grid::draw;
use recover::rehearse::harsher::not_stuck;
use recover::rehearse::scenario::Scenario;
use std::process::Command;

#[test]
fn every_drawn_point_gets_stuck_on_paper() {
    let n = 300;
    for seed in [30, 7] {
        let mut bad = Vec::new();
        let points = draw(n, seed);
        let late = points.iter().filter(|p| p.late).count();
        for p in &points {
            let verdict = not_stuck(&p.scenario());
            if !verdict.suggestions[0].starts_with("the numbers get stuck on paper") {
                bad.push(format!("{}: {:?}", p.describe(), verdict.suggestions));
            }
        }
        assert!(
            late > n / 4,
            "seed {seed}: {late} late-attach points of {n}"
        );
        assert!(
            bad.is_empty(),
            "seed {seed}: {} of {n} points not stuck on paper:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }
}

#[test]
fn the_written_files_are_what_the_rehearsal_loads() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_recover"))
        .args([
            "simulate", "--grid", "--points", "12", "--seed", "5", "--write",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("seed 5: 12 scenario file(s)"));
    for p in draw(12, 5) {
        let path = dir.path().join(format!("{}.yaml", p.name()));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, p.yaml(), "{}", path.display());
        let sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(sc, p.scenario());
        assert_eq!(sc.service.overload_factor, p.k);
        assert_eq!(sc.workers.count, p.workers);
    }
}
