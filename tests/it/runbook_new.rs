//! `recover runbooks new`: the starter runbook a user writes their own from validates and
//! recovers the demo system as written (real processes), `runbooks validate` refuses it
//! once a signal the detector needs is taken out, and the reference page's example
//! dry-runs on the demo, read from the page so the test fails when the page drifts.

use crate::support::demo_up::Demo;
use crate::support::docs;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

fn recover_in(dir: &Path, args: &[&str]) -> Output {
    crate::support::bin()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn new_mine(dir: &Path) -> std::path::PathBuf {
    let out = recover_in(dir, &["runbooks", "new", "mine"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    dir.join("runbooks/mine.yaml")
}

#[test]
fn e2e_runbooks_new_validates_and_recovers_the_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let file = new_mine(tmp.path());
    let out = recover_in(tmp.path(), &["runbooks", "validate", "runbooks/mine.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // A second `new` does not overwrite what the user has edited.
    let again = recover_in(tmp.path(), &["runbooks", "new", "mine"]);
    assert_eq!(again.status.code(), Some(2), "{}", said(&again));

    let demo = Demo::up(tmp.path());
    demo.trigger_until_stuck(&file, Duration::from_secs(120));
    let inventory = demo.inventory().display().to_string();
    let run = recover_in(
        tmp.path(),
        &[
            "--runbook",
            "mine",
            "--target",
            "local",
            "--inventory",
            &inventory,
            "--yes",
        ],
    );
    let text = said(&run);
    assert_eq!(run.status.code(), Some(0), "{text}");
    assert!(text.contains("runbook mine"), "{text}");
    assert!(text.contains("outcome: Succeeded"), "{text}");
}

/// The starter with one signal the detector needs taken out is refused, naming the
/// file, the line of `spec.signals` and the signal.
#[test]
fn validate_refuses_the_starter_without_goodput() {
    let tmp = tempfile::tempdir().unwrap();
    let file = new_mine(tmp.path());
    let src = std::fs::read_to_string(&file).unwrap();
    let start = src.find("    goodput:").unwrap();
    let end = start + src[start..].find("    replicas_not_ready:").unwrap();
    let without = format!("{}{}", &src[..start], &src[end..]);
    std::fs::write(&file, &without).unwrap();
    let out = recover_in(tmp.path(), &["runbooks", "validate", "runbooks/mine.yaml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = without.lines().position(|l| l == "  signals:").unwrap() + 1;
    assert!(
        err.contains(&format!("runbooks/mine.yaml:{line}:")),
        "{err}"
    );
    assert!(
        err.contains("cannot judge the service") && err.contains("goodput"),
        "{err}"
    );
}

#[test]
fn e2e_the_reference_runbook_example_dry_runs_on_the_demo() {
    let page = "docs/reference/runbook.md";
    let example = docs::blocks(page, &docs::read(page))
        .into_iter()
        .find(|b| b.tag == "yaml runbook")
        .unwrap_or_else(|| panic!("{page}: no `yaml runbook` block"));
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("example.yaml");
    std::fs::write(&file, &example.text).unwrap();
    let demo = Demo::up(tmp.path());
    demo.trigger_until_stuck(&file, Duration::from_secs(120));
    let inventory = demo.inventory().display().to_string();
    let out = recover_in(
        tmp.path(),
        &[
            "--runbook",
            "example.yaml",
            "--target",
            "local",
            "--inventory",
            &inventory,
            "--dry-run",
        ],
    );
    let text = said(&out);
    assert_eq!(out.status.code(), Some(0), "{}: {text}", example.at());
    assert!(text.contains("outcome: Planned"), "{text}");
}
