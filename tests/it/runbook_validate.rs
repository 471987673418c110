//! `recover runbooks validate` on broken runbooks: every error names file:line:column and
//! the field path, and the command exits 2. Also checks the shipped runbooks load.

use crate::support::engine::assert_exit_ok;
use crate::support::fixture_path;
use std::path::Path;
use std::process::Command;

fn recover() -> Command {
    crate::support::bin()
}

/// (file, line:column, field path, words in the message)
const CASES: &[(&str, &str, &str, &str)] = &[
    (
        "unknown-field.yaml",
        "16:7",
        "spec.steps[0].retries",
        "unknown field `retries`",
    ),
    (
        "unknown-action.yaml",
        "15:15",
        "spec.steps[0].action",
        "unknown variant `wait.forever`",
    ),
    (
        "undefined-check.yaml",
        "17:9",
        "spec.steps[0].with.check",
        "check \"relaxed\" is not defined",
    ),
    (
        "undefined-signal.yaml",
        "12:7",
        "spec.checks.calm.success",
        "signal `queue_length` is not defined",
    ),
    (
        "bad-duration.yaml",
        "12:7",
        "spec.checks.calm.interval",
        "with a unit",
    ),
    (
        "bad-percentage.yaml",
        "14:9",
        "spec.steps[0].with.batch",
        "at most 100%",
    ),
    (
        "undefined-step.yaml",
        "15:7",
        "spec.steps[0].on_failure[0]",
        "\"page-someone\" is not defined in spec.on_failure",
    ),
    (
        "block-without-deadline.yaml",
        "14:9",
        "spec.steps[0].with.rate",
        "needs a `deadline` and a `note`",
    ),
    (
        "shadow-unlimited.yaml",
        "15:9",
        "spec.steps[0].with.shadow",
        "needs a rate to decide by",
    ),
    (
        "fill-unlimited.yaml",
        "15:9",
        "spec.steps[0].with.fill",
        "`unlimited` has no bucket to fill",
    ),
    (
        "bad-fill.yaml",
        "16:9",
        "spec.steps[0].with.fill",
        "expected `full` or true",
    ),
    (
        "bad-quantity.yaml",
        "14:9",
        "spec.steps[0].with.rate",
        "unknown plan value `plan.admit_rat`",
    ),
    (
        "undefined-role.yaml",
        "11:7",
        "spec.signals.queue_depth.promql",
        "`$servce` names no declared role (declared: service)",
    ),
    (
        "bad-role-matchers.yaml",
        "8:5",
        "spec.roles.service",
        "write the matchers without braces",
    ),
    (
        "syntax.yaml",
        "10:1",
        "spec.steps[0].name",
        "unexpected end of stream",
    ),
    (
        "bad-drain-keep.yaml",
        "14:9",
        "spec.steps[0].with.keep",
        "unknown variant `everything`, expected `none` or `answerable`",
    ),
    (
        "bad-scrape-expr.yaml",
        "9:7",
        "spec.signals.queue_depth.scrape",
        "expected ']' after the range",
    ),
];

#[test]
fn each_broken_runbook_is_reported_with_location_and_field() {
    for (file, at, path, words) in CASES {
        let f = fixture_path(&format!("runbooks/broken/{file}"));
        let out = recover()
            .args(["runbooks", "validate", &f])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        let want = format!("{f}:{at}: {path}: ");
        let line = err
            .lines()
            .find(|l| l.starts_with(&want))
            .unwrap_or_else(|| panic!("{file}: no line starting {want:?} in:\n{err}"));
        assert!(line.contains(words), "{file}: {line:?} lacks {words:?}");
    }
}

#[test]
fn validate_prints_all_errors_and_passes_good_files() {
    let good = fixture_path("runbooks/minimal.yaml");
    let bad1 = fixture_path("runbooks/broken/bad-percentage.yaml");
    let bad2 = fixture_path("runbooks/broken/undefined-check.yaml");
    let out = recover()
        .args(["runbooks", "validate", &good, &bad1, &bad2])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad-percentage.yaml:14:9"), "{err}");
    assert!(err.contains("undefined-check.yaml:17:9"), "{err}");
    assert!(err.contains("2 of 3 runbook(s) invalid"), "{err}");
    let ok = recover()
        .args(["runbooks", "validate", &good])
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0));
}

#[test]
fn shipped_runbooks_are_valid_and_found_from_anywhere() {
    let root = env!("CARGO_MANIFEST_DIR");
    for name in ["stuck-overload", "retry-storm", "slow-replica"] {
        let p = format!("{root}/runbooks/{name}.yaml");
        let out = recover()
            .args(["runbooks", "validate", &p])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Built in: `show` works from a directory without runbooks/.
        let tmp = tempfile::tempdir().unwrap();
        let out = recover()
            .args(["runbooks", "show", name])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stdout).contains("(built in)"));
    }
}

#[test]
fn runbook_dir_overrides_the_built_in_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture_path("runbooks/minimal.yaml"))
        .unwrap()
        .replace("name: minimal", "name: stuck-overload");
    std::fs::write(tmp.path().join("stuck-overload.yaml"), text).unwrap();
    let l = recover::runbook::find("stuck-overload", &[tmp.path().to_path_buf()]).unwrap();
    assert_eq!(l.runbook.steps.len(), 1);
    assert!(matches!(l.origin, recover::runbook::Origin::File(ref p) if p.starts_with(tmp.path())));
    let err = recover::runbook::find("no-such-runbook", &[tmp.path().to_path_buf()]).unwrap_err();
    assert!(err.to_string().contains("built-in"), "{err}");
    let listed = recover::runbook::list(&[tmp.path().to_path_buf()]);
    assert!(listed
        .iter()
        .any(|r| r.name == "stuck-overload" && !r.active));
    assert!(Path::new(root_runbooks()).exists());
}

fn root_runbooks() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/runbooks")
}

#[test]
fn restarting_the_slow_replica_needs_a_slow_replica_verdict() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/runbooks/slow-replica.yaml")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("slow-stuck.yaml");
    std::fs::write(&f, text.replace("when: [slow_replica]", "when: [stuck]")).unwrap();
    let out = recover()
        .args(["runbooks", "validate", f.to_str().unwrap()])
        .output()
        .unwrap();
    let err =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("restart-slow-replica") || err.contains("replicas"),
        "{err}"
    );
    assert!(err.contains("slow_replica"), "{err}");
}

/// A runbook that validates as YAML but whose runs the detector would always refuse
/// ("the detector says unknown": no signal tells whether a trigger is active) is refused
/// by `runbooks validate`, naming the file, the line of `spec.signals` and the signal.
#[test]
fn a_runbook_missing_a_detector_signal_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.yaml");
    let src = std::fs::read_to_string(fixture_path("runbooks/e2e-local.yaml")).unwrap();
    let start = src.find("    replicas_not_ready:\n").unwrap();
    let end = start + src[start..].find("    gate_admitted_rate:\n").unwrap();
    let without = format!("{}{}", &src[..start], &src[end..]);
    std::fs::write(&file, &without).unwrap();
    let out = recover()
        .args(["runbooks", "validate"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = without.lines().position(|l| l == "  signals:").unwrap() + 1;
    assert!(err.contains(&format!("mine.yaml:{line}:")), "{err}");
    assert!(err.contains("spec.signals"), "{err}");
    assert!(
        err.contains("cannot tell whether a trigger is active")
            && err.contains("replicas_not_ready"),
        "{err}"
    );
    // With the signal back, the same runbook validates.
    std::fs::write(&file, &src).unwrap();
    let out = recover()
        .args(["runbooks", "validate"])
        .arg(&file)
        .output()
        .unwrap();
    assert_exit_ok(&out);
}
