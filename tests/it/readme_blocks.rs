//! The README's blocks that claim to work, checked: what it tells a user runs or
//! validates as written. Blocks are picked by their info string, so untagged blocks
//! (prose, sketches) and other people's edits are left alone:
//! - `sh 3am`: the 3 am path, run in order in an empty directory with `recover` on the
//!   PATH, each command (a `\` continues a line) expected to exit 0, or N when its comment
//!   says `exit N`; no placeholders and no paths under /run or /etc;
//! - `yaml runbook`, `yaml inventory`, `yaml serve`, `yaml scenario`: validated by the
//!   runbook validator, the inventory parser, the receiver's config parser and the
//!   rehearsal's scenario parser.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Block {
    tag: String,
    /// README line of the opening fence.
    line: usize,
    text: String,
}

fn readme() -> String {
    let p = format!("{}/README.md", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Fenced blocks with their info string (`sh 3am`, `yaml runbook`, ...).
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                open = Some(Block {
                    tag: line.trim_start().trim_start_matches('`').trim().to_string(),
                    line: i + 1,
                    text: String::new(),
                })
            }
            (Some(_), true) => out.extend(open.take()),
            (Some(b), false) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, false) => {}
        }
    }
    out
}

fn tagged<'a>(all: &'a [Block], tag: &str) -> Vec<&'a Block> {
    all.iter().filter(|b| b.tag == tag).collect()
}

/// A shell command and the exit code its comment expects (`# ... exit 10 ...`).
#[derive(Debug)]
struct Step {
    line: usize,
    command: String,
    expect: i32,
}

fn steps(block: &Block) -> Vec<Step> {
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut start = block.line + 1;
    for (i, raw) in block.text.lines().enumerate() {
        if pending.is_empty() {
            start = block.line + 1 + i;
        }
        if let Some(cont) = raw.trim_end().strip_suffix('\\') {
            pending.push_str(cont);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        let whole = std::mem::take(&mut pending);
        let (command, comment) = match whole.split_once(" #") {
            Some((c, note)) => (c.trim().to_string(), note.to_string()),
            None => (whole.trim().to_string(), String::new()),
        };
        if command.is_empty() || command.starts_with('#') {
            continue;
        }
        let expect = comment
            .split_once("exit ")
            .and_then(|(_, rest)| {
                rest.split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        out.push(Step {
            line: start,
            command,
            expect,
        });
    }
    out
}

#[test]
fn readme_blocks_that_claim_to_work_are_valid() {
    let all = blocks(&readme());
    let path_3am: Vec<Step> = tagged(&all, "sh 3am").into_iter().flat_map(steps).collect();
    assert!(
        path_3am.len() >= 5,
        "the README's 3 am path (`sh 3am` blocks) is missing: {path_3am:?}"
    );
    for s in &path_3am {
        for bad in ["...", "/run/", "/etc/", "<", ">"] {
            assert!(
                !s.command.contains(bad),
                "README.md:{}: `{}` cannot run as written ({bad:?})",
                s.line,
                s.command
            );
        }
    }
    let runbooks = tagged(&all, "yaml runbook");
    assert!(
        !runbooks.is_empty(),
        "no `yaml runbook` block in the README"
    );
    for b in runbooks {
        if let Err(e) = recover::runbook::parse_str(&format!("README.md:{}", b.line), &b.text) {
            panic!("README.md:{}: the runbook example is invalid:\n{e}", b.line);
        }
    }
    for b in tagged(&all, "yaml inventory") {
        recover::platform::local::inventory::Inventory::parse(
            &format!("README.md:{}", b.line),
            &b.text,
        )
        .unwrap_or_else(|e| panic!("README.md:{}: {e}", b.line));
    }
    for b in tagged(&all, "yaml serve") {
        recover::serve::config::parse(&b.text, &format!("README.md:{}", b.line))
            .unwrap_or_else(|e| panic!("README.md:{}: {e}", b.line));
    }
    for b in tagged(&all, "yaml scenario") {
        recover::rehearse::scenario::Scenario::parse(&b.text, &format!("README.md:{}", b.line))
            .unwrap_or_else(|e| panic!("README.md:{}: {e}", b.line));
    }
}

/// Stops whatever the 3 am path started, also when a step fails.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_recover"))
            .args(["demo", "down", "--dir"])
            .arg(&self.0)
            .output();
    }
}

fn run(step: &Step, dir: &Path, path: &str) -> (i32, String) {
    let mut child = Command::new("bash")
        .args(["-c", &step.command])
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let limit = Duration::from_secs(240);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code().unwrap_or(-1);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break -1;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    eprintln!(
        "README.md:{}: {:.1} s, exit {code}: {}",
        step.line,
        start.elapsed().as_secs_f64(),
        step.command
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (code, text)
}

/// The README's 3 am path, as written: the demo system started by hand, triggered, left
/// stuck for a minute, then detected (exit 10), dry-run, recovered with the shipped
/// runbook (exit 0), and stopped.
#[test]
fn e2e_readme_3am_path_runs_as_written() {
    let all = blocks(&readme());
    let path: Vec<Step> = tagged(&all, "sh 3am").into_iter().flat_map(steps).collect();
    let tmp = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_recover")).parent().unwrap();
    let search = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _down = Down(tmp.path().join("recover-demo"));
    let mut said = String::new();
    for step in &path {
        let (code, text) = run(step, tmp.path(), &search);
        assert_eq!(
            code, step.expect,
            "README.md:{}: `{}` exited {code}, the README says {}:\n{text}",
            step.line, step.command, step.expect
        );
        said.push_str(&text);
    }
    // The run recovered with the shipped runbook's declarations, not a guess.
    assert!(said.contains("outcome: Succeeded"), "{said}");
    assert!(
        said.contains("capacity_cold = 50.00 req/s: declared"),
        "{said}"
    );
}
