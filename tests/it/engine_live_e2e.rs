//! Following a readmission from the terminal alone, against real local processes: on a
//! TTY (a pty from `script`) the live line shows the figures and the next move, and each
//! decision line the engine prints is the journal's `ramp_decided` entry in words; with
//! stderr in a file there is no live line and no escape byte; with `--log-format json`
//! every stderr line is JSON carrying the run id, step, action and figures as keys.

use crate::support::engine::*;
use recover::engine::ramp::RampDecision;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The ramp decisions of the only journal in `dir`, in order.
fn decisions(dir: &Path) -> (Vec<Value>, Vec<RampDecision>) {
    let journal = only_journal(dir).expect("one journal");
    let lines = journal_lines(&journal);
    let decided = lines
        .iter()
        .filter(|l| l["event"] == "ramp_decided")
        .map(|l| serde_json::from_value(l.clone()).unwrap())
        .collect();
    (lines, decided)
}

/// Each decision, in words, appears in `text` in the journal's order.
fn assert_decisions_shown(text: &str, decided: &[RampDecision]) {
    assert!(!decided.is_empty(), "the ramp decided nothing");
    let mut from = 0;
    for d in decided {
        let line = format!("{}: decision {}", d.step, d.describe());
        match text[from..].find(&line) {
            Some(i) => from += i + line.len(),
            None => panic!("decision not shown (in order): {line}\nin:\n{text}"),
        }
    }
}

/// Shell-quote `arg` for `script -c`.
fn quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// Drop terminal control sequences (CSI) and carriage returns.
fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if n.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        if c != '\r' {
            out.push(c);
        }
    }
    out
}

/// Whether `s` holds a colour (SGR) sequence: `ESC [ digits/; m`.
fn has_colour(s: &str) -> bool {
    s.match_indices("\x1b[").any(|(i, _)| {
        let rest = &s[i + 2..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(rest.len());
        rest[end..].starts_with('m')
    })
}

#[test]
fn e2e_on_a_tty_the_live_line_shows_figures_and_each_decision_as_journalled() {
    rt().block_on(async {
        let sys = System::start(2, "0s", 10).await;
        let run = sys.run_cmd("e2e-local.yaml", &["--yes"]);
        // A pty has no size of its own under `script` without a terminal: give it one.
        let mut line: Vec<String> = vec!["stty cols 200 rows 50; exec".into(), quote(BIN)];
        line.extend(run.get_args().map(|a| quote(&a.to_string_lossy())));
        // The platform's step records are debug lines: they must come without colour too.
        let out = Command::new("script")
            .args(["-q", "-e", "-f", "-c", &line.join(" "), "/dev/null"])
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "recover=debug")
            .stdin(Stdio::null())
            .output()
            .expect("script (util-linux)");
        let raw = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{raw}");
        assert!(raw.contains('\x1b'), "not drawn on a terminal: {raw}");
        assert!(!has_colour(&raw), "colour despite NO_COLOR: {raw:?}");
        let text = strip_ansi(&raw);
        // The live line: what the checks see, then where the ramp stands and what is next.
        for part in [
            "offered ",
            "admitted ",
            "useful ",
            "limit ",
            "queue ",
            "holding ",
        ] {
            assert!(text.contains(part), "no {part:?} in:\n{text}");
        }
        assert!(text.contains("next: "), "{text}");
        let (_, decided) = decisions(&sys.journal_dir());
        assert_decisions_shown(&text, &decided);
    });
}

#[test]
fn e2e_without_a_tty_no_live_line_no_escape_and_json_logs_carry_the_facts() {
    rt().block_on(async {
        let sys = System::start(2, "0s", 10).await;
        let dir = tempfile::tempdir().unwrap();
        let err_path = dir.path().join("stderr.log");
        // Debug lines too, so the file holds log lines that a terminal would colour.
        let out = sys
            .run_cmd("e2e-local.yaml", &["--yes"])
            .env("RUST_LOG", "recover=debug")
            .stderr(std::fs::File::create(&err_path).unwrap())
            .output()
            .unwrap();
        assert_exit_ok(&out);
        let bytes = std::fs::read(&err_path).unwrap();
        assert!(!bytes.contains(&0x1b), "an escape byte in a log file");
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains(" DEBUG "), "no log line to judge:\n{text}");
        assert!(
            !text.contains("offered "),
            "a live line in a log file:\n{text}"
        );
        assert!(!text.contains("StepStarted {"), "a Debug struct:\n{text}");
        let (_, decided) = decisions(&sys.journal_dir());
        assert_decisions_shown(&text, &decided);

        // The same run again, for machines.
        std::fs::remove_dir_all(sys.journal_dir()).unwrap();
        let out = sys
            .run_cmd("e2e-local.yaml", &["--yes", "--output", "json"])
            .arg("--log-format")
            .arg("json")
            .stderr(std::fs::File::create(&err_path).unwrap())
            .output()
            .unwrap();
        assert_exit_ok(&out);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let run_id = report["run_id"].as_str().unwrap();
        let text = std::fs::read_to_string(&err_path).unwrap();
        let logs: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let events = |kind: &str| -> Vec<&Value> {
            logs.iter()
                .filter(|l| l["fields"]["event"] == kind)
                .map(|l| &l["fields"])
                .collect()
        };
        let started = events("step_started");
        assert_eq!(started.len(), 6, "five steps and the hand-back: {text}");
        for s in &started {
            assert_eq!(s["run_id"], run_id);
            assert!(s["step"].is_string() && s["action"].is_string(), "{s}");
            assert!(s["message"]
                .as_str()
                .unwrap()
                .contains(s["step"].as_str().unwrap()));
        }
        let restart = events("step_finished")
            .into_iter()
            .find(|s| s["step"] == "batched-restart")
            .expect("batched-restart finished");
        assert_eq!(restart["figures"]["restarted"], 2.0, "{restart}");
        let (journal, decided) = decisions(&sys.journal_dir());
        let logged: Vec<RampDecision> = events("ramp_decided")
            .into_iter()
            .map(|f| serde_json::from_value((*f).clone()).unwrap())
            .collect();
        assert_eq!(logged, decided, "the log's decisions are the journal's");
        assert_eq!(journal[0]["run_id"], run_id);
    });
}
