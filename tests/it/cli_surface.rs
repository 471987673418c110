//! The command-line surface a person meets first: shell completions that a shell accepts,
//! man pages that render, `--output json` on the listing commands, tables that stay
//! aligned whatever the names, and required flags shown as required.

use crate::support::fixture_path;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

use crate::support::BIN;

fn recover(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}\nstdout:\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(out: &Output) -> Value {
    let text = ok(out);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn completions_generate_for_every_shell_and_bash_parses_them() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let text = ok(&recover(&["completions", shell]));
        assert!(
            text.contains("rehearse") && text.contains("runbook"),
            "{shell}: {text}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("recover.bash");
    std::fs::write(&file, ok(&recover(&["completions", "bash"]))).unwrap();
    let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    // Sourced, it completes the subcommands (bash calls it with the command, the word
    // being completed and the one before).
    let script = format!(
        "source {}; COMP_WORDS=(recover reh); COMP_CWORD=1; _recover recover reh recover; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_eq!(ok(&out).trim(), "rehearse");
}

/// `groff` renders a page and says nothing on stderr (no warnings about the markup).
fn render(page: &Path) -> String {
    let out = Command::new("groff")
        // -P-cbou: plain text, no overstruck bold or underline, so words can be found.
        .args(["-man", "-Tutf8", "-ww", "-P-cbou"])
        .arg(page)
        .output()
        .expect("groff (Debian package groff-base; scripts/test.sh installs it)");
    assert!(out.status.success(), "{}", page.display());
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(warnings.trim().is_empty(), "{}: {warnings}", page.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn man_pages_are_written_per_command_and_render() {
    let dir = tempfile::tempdir().unwrap();
    let out = recover(&["man", "--dir", dir.path().to_str().unwrap()]);
    ok(&out);
    for page in [
        "recover.1",
        "recover-serve.1",
        "recover-serve-reset.1",
        "recover-runbooks-list.1",
        "recover-demo-workers.1",
        "recover-completions.1",
        "recover-man.1",
    ] {
        assert!(dir.path().join(page).is_file(), "no {page}");
    }
    let serve = render(&dir.path().join("recover-serve.1"));
    assert!(
        serve.contains("--listen") && serve.contains("Alertmanager"),
        "{serve}"
    );
    // Without --dir, recover(1) goes to stdout and renders the same.
    let top = dir.path().join("top.1");
    std::fs::write(&top, ok(&recover(&["man"]))).unwrap();
    let text = render(&top);
    assert!(
        text.contains("rehearse") && text.contains("--runbook"),
        "{text}"
    );
}

#[test]
fn listing_commands_answer_in_json() {
    let dir = fixture_path("runbooks");
    let list = json(&recover(&[
        "runbooks",
        "list",
        "--runbook-dir",
        &dir,
        "--output",
        "json",
    ]));
    let names: Vec<&str> = list["runbooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"stuck-overload"), "{list}");
    assert!(names.contains(&"e2e-local"), "{list}");
    let shown = json(&recover(&[
        "runbooks",
        "show",
        "stuck-overload",
        "--output",
        "json",
    ]));
    assert_eq!(shown["name"], "stuck-overload");
    assert!(shown["source"].as_str().unwrap().contains("kind: Runbook"));
    let file = fixture_path("runbooks/e2e-local.yaml");
    let checked = json(&recover(&[
        "runbooks", "validate", &file, "--output", "json",
    ]));
    assert_eq!(checked["runbooks"][0]["ok"], true, "{checked}");
    let empty = tempfile::tempdir().unwrap();
    let history = json(&recover(&[
        "history",
        "--journal-dir",
        empty.path().to_str().unwrap(),
        "--output",
        "json",
    ]));
    assert_eq!(history, serde_json::json!([]));
}

/// A journal of a run of `runbook` on `target`, finished or not.
fn journal(dir: &Path, run_id: &str, runbook: &str, target: &str, finished: bool) {
    let mut lines = vec![serde_json::json!({
        "seq": 1, "ts": "2026-01-01T00:00:00.000Z", "run_id": run_id,
        "event": "run_started", "format": recover::engine::journal::FORMAT, "runbook": runbook, "runbook_source": "", "origin": "test",
        "target": target, "pid": u32::MAX,
    })];
    if finished {
        lines.push(serde_json::json!({
            "seq": 2, "ts": "2026-01-01T00:01:00.000Z", "run_id": run_id,
            "event": "run_finished", "outcome": "succeeded",
        }));
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join(format!("{run_id}.jsonl")), text).unwrap();
}

#[test]
fn history_columns_align_with_a_sixty_character_runbook_name() {
    let dir = tempfile::tempdir().unwrap();
    let long = "a-runbook-whose-name-is-exactly-sixty-characters-long-xxxxxx";
    assert_eq!(long.len(), 60);
    journal(
        dir.path(),
        "20260101T000000Z-0001",
        long,
        "local:demo",
        true,
    );
    journal(
        dir.path(),
        "20260101T000000Z-0002",
        "short",
        "kube:shop/config-service",
        false,
    );
    let text = ok(&recover(&[
        "history",
        "--journal-dir",
        dir.path().to_str().unwrap(),
    ]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for column in ["runbook", "target", "started", "steps", "status"] {
        let at = lines[0].find(column).unwrap();
        for row in &lines[1..] {
            let before = &row[..at];
            assert!(
                before.ends_with("  ") && !row[at..].starts_with(' '),
                "column {column} does not start at {at} in:\n{text}"
            );
        }
    }
    assert!(
        text.contains(long) && text.contains("interrupted"),
        "{text}"
    );
}

#[test]
fn serve_usage_shows_listen_and_config_as_required() {
    let out = recover(&["serve", "--help"]);
    let help = ok(&out);
    assert!(
        help.contains("Usage: recover serve [OPTIONS] --listen <ADDR> --config <FILE>"),
        "{help}"
    );
    let out = recover(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--config <FILE>"), "{err}");
}

/// `recover ... | head`: a reader that goes away early ends the printing commands quietly,
/// as it ends any Unix tool (by SIGPIPE), never with a panic and a backtrace on stderr.
/// The pipe is shrunk to one page so that the output does not fit in it.
#[test]
fn a_closed_pipe_ends_the_printing_commands_without_a_panic() {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"][..],
        &["man"][..],
    ] {
        let mut fds = [0; 2];
        // SAFETY: pipe2() fills the two descriptors, which are then owned below. Close on
        // exec: the child must not hold the read end open itself.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor we own.
        assert!(unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 4096) } >= 4096);
        let mut child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::from(write_end))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte, then hang up: the rest is written into a closed pipe.
        let mut reader = std::fs::File::from(read_end);
        let mut first = [0u8; 1];
        reader.read_exact(&mut first).unwrap();
        drop(reader);
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            status.success() || status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {status:?}: {err}"
        );
    }
}

/// `--prometheus` on a local target is refused (exit 2, saying why and what to do), not
/// silently dropped: the local platform always scrapes its inventory's processes, so a
/// run that seemed to read Prometheus would have read something else. The inventory is
/// valid and nothing listens on its URLs: the refusal comes before any of it is read.
#[test]
fn a_prometheus_url_on_a_local_target_is_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inventory.yaml");
    std::fs::write(
        &inv,
        "name: demo\nreplicas:\n  - name: r0\n    command: [/bin/true]\n    admin_url: http://127.0.0.1:9\n    metrics_url: http://127.0.0.1:9/metrics\n    readiness_url: http://127.0.0.1:9/readyz\ngates: []\nclients: []\n",
    )
    .unwrap();
    let out = recover(&[
        "--runbook",
        "stuck-overload",
        "--target",
        "local",
        "--inventory",
        inv.to_str().unwrap(),
        "--prometheus",
        "http://127.0.0.1:9090",
        "--dry-run",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--prometheus applies to --target kube only")
            && err.contains("drop --prometheus"),
        "{err}"
    );
}
