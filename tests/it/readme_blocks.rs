//! The documentation's blocks that claim to work, checked: what it tells a user runs or
//! validates as written. Blocks are picked by their info string, so untagged blocks
//! (prose, sketches) and other people's edits are left alone:
//! - `sh 3am` (in the README, where a newcomer finds it): the 3 am path, run in order in an
//!   empty directory with `recover` on the PATH, each command (a `\` continues a line)
//!   expected to exit 0, or N when its comment says `exit N`; no placeholders and no paths
//!   under /run or /etc;
//! - `yaml runbook`, `yaml inventory`, `yaml serve`, `yaml scenario`, in any documentation
//!   file (README.md, ARCHITECTURE.md, docs/): validated by the runbook validator, the
//!   inventory parser, the receiver's config parser and the rehearsal's scenario parser;
//! - every command block of the guide (`docs/guide/`): `sh` runs as written in a fresh
//!   directory with a fresh HOME; `sh repo` the same from the repository checkout (its
//!   commands read the repository's files); `sh long` (builds, whole suites, rehearsals:
//!   minutes) and `sh cluster` (a Kubernetes cluster, Prometheus, a running receiver, a
//!   running demo or a system in an incident) are skipped, and counted and printed, never silently.

use crate::support::demo_up::Down;
use crate::support::docs::{self, Block};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The README's blocks.
fn readme() -> Vec<Block> {
    docs::blocks("README.md", &docs::read("README.md"))
}

/// Every documentation file's blocks.
fn all_docs() -> Vec<Block> {
    docs::files()
        .iter()
        .flat_map(|f| docs::blocks(f, &docs::read(f)))
        .collect()
}

fn tagged<'a>(all: &'a [Block], tag: &str) -> Vec<&'a Block> {
    all.iter().filter(|b| b.tag == tag).collect()
}

/// A shell command and the exit code its comment expects (`# ... exit 10 ...`).
#[derive(Debug)]
struct Step {
    file: String,
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
            file: block.file.clone(),
            line: start,
            command,
            expect,
        });
    }
    out
}

#[test]
fn readme_blocks_that_claim_to_work_are_valid() {
    let readme = readme();
    let path_3am: Vec<Step> = tagged(&readme, "sh 3am")
        .into_iter()
        .flat_map(steps)
        .collect();
    assert!(
        path_3am.len() >= 5,
        "the README's 3 am path (`sh 3am` blocks) is missing: {path_3am:?}"
    );
    for s in &path_3am {
        for bad in ["...", "/run/", "/etc/", "<", ">"] {
            assert!(
                !s.command.contains(bad),
                "{}:{}: `{}` cannot run as written ({bad:?})",
                s.file,
                s.line,
                s.command
            );
        }
    }
    let all = all_docs();
    let elsewhere: Vec<String> = tagged(&all, "sh 3am")
        .iter()
        .filter(|b| b.file != "README.md")
        .map(|b| b.at())
        .collect();
    assert!(
        elsewhere.is_empty(),
        "`sh 3am` blocks belong in the README, which the e2e test runs: {elsewhere:?}"
    );
    for tag in [
        "yaml runbook",
        "yaml inventory",
        "yaml serve",
        "yaml scenario",
    ] {
        assert!(
            !tagged(&all, tag).is_empty(),
            "no `{tag}` block in the documentation"
        );
    }
    for b in tagged(&all, "yaml runbook") {
        if let Err(e) = recover::runbook::parse_str(&b.at(), &b.text) {
            panic!("{}: the runbook example is invalid:\n{e}", b.at());
        }
    }
    for b in tagged(&all, "yaml inventory") {
        recover::platform::local::inventory::Inventory::parse(&b.at(), &b.text)
            .unwrap_or_else(|e| panic!("{}: {e}", b.at()));
    }
    for b in tagged(&all, "yaml serve") {
        recover::serve::config::parse(&b.text, &b.at())
            .unwrap_or_else(|e| panic!("{}: {e}", b.at()));
    }
    for b in tagged(&all, "yaml scenario") {
        recover::rehearse::scenario::Scenario::parse(&b.text, &b.at())
            .unwrap_or_else(|e| panic!("{}: {e}", b.at()));
    }
}

fn run(step: &Step, dir: &Path, path: &str, home: Option<&Path>) -> (i32, String) {
    let mut cmd = Command::new("bash");
    if let Some(home) = home {
        cmd.env("HOME", home);
    }
    let mut child = cmd
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
        "{}:{}: {:.1} s, exit {code}: {}",
        step.file,
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

/// `PATH` with the binary under test first.
fn search_path() -> String {
    let bin = Path::new(crate::support::BIN).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The guide's command blocks, as the module doc says. Named `e2e_` to run one at a time
/// with the other users of the demo's default ports (`sh` blocks start it).
#[test]
fn e2e_guide_command_blocks_run_as_written() {
    let blocks: Vec<Block> = docs::files()
        .iter()
        .filter(|f| f.starts_with("docs/guide/"))
        .flat_map(|f| docs::blocks(f, &docs::read(f)))
        .filter(|b| b.tag == "sh" || b.tag.starts_with("sh "))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let (home, work) = (tmp.path().join("home"), tmp.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let _down = Down(work.join("recover-demo"));
    let search = search_path();
    let root = docs::root();
    let mut ran = 0;
    let mut skipped: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for b in &blocks {
        let dir = match b.tag.as_str() {
            "sh" => &work,
            "sh repo" => &root,
            "sh long" | "sh cluster" => {
                skipped.entry(b.tag.clone()).or_default().push(b.at());
                continue;
            }
            other => panic!(
                "{}: command block tagged {other:?}: use sh, sh repo, sh long or sh cluster",
                b.at()
            ),
        };
        for step in steps(b) {
            let (code, text) = run(&step, dir, &search, Some(&home));
            assert_eq!(
                code, step.expect,
                "{}:{}: `{}` exited {code}, the guide says {}:\n{text}",
                step.file, step.line, step.command, step.expect
            );
            ran += 1;
        }
    }
    for (tag, at) in &skipped {
        eprintln!("skipped {} `{tag}` block(s): {}", at.len(), at.join(", "));
    }
    eprintln!("ran {ran} command(s) of the guide as written");
    assert!(ran >= 5, "the guide's runnable blocks are missing");
    assert!(
        home.join(".local/share/man/man1/recover-rehearse.1")
            .exists(),
        "the man pages were not installed where the guide says"
    );
}

/// The README's 3 am path, as written: the demo system started by hand, triggered, left
/// stuck for a minute, then detected (exit 10), dry-run, recovered with the shipped
/// runbook (exit 0), and stopped.
#[test]
fn e2e_readme_3am_path_runs_as_written() {
    let readme = readme();
    let path: Vec<Step> = tagged(&readme, "sh 3am")
        .into_iter()
        .flat_map(steps)
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let search = search_path();
    // Stops whatever the 3 am path started, also when a step fails.
    let _down = Down(tmp.path().join("recover-demo"));
    let mut said = String::new();
    for step in &path {
        let (code, text) = run(step, tmp.path(), &search, None);
        assert_eq!(
            code, step.expect,
            "{}:{}: `{}` exited {code}, the README says {}:\n{text}",
            step.file, step.line, step.command, step.expect
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
