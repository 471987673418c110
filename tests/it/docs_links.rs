//! The documentation holds together: every relative link in README.md, ARCHITECTURE.md
//! and docs/ points at a file of the repository, and every `#anchor` at a heading of the
//! page it names; every page is reachable from the README or the docs index; and the
//! README opens with the two commands a newcomer needs, and stays short.

use crate::support::docs;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// Pages other work adds, linked before they land: a link to one passes while the file is
/// absent, and is checked like any other once it exists.
const NOT_YET_HERE: &[&str] = &[];

/// The README's length limit: the rest belongs under docs/.
const README_MAX_LINES: usize = 200;

/// `(line, target)` of every inline link outside code (fenced blocks and `code spans`).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in docs::prose(text) {
        // Odd pieces between backticks are code spans.
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 1 {
                continue;
            }
            let mut rest = piece;
            while let Some(at) = rest.find("](") {
                let after = &rest[at + 2..];
                let Some(end) = after.find(')') else { break };
                out.push((n, after[..end].trim().to_string()));
                rest = &after[end..];
            }
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation dropped
/// (hyphens and underscores kept), a repeated heading numbered `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in docs::prose(text) {
        let t = line.trim_start();
        if !t.starts_with('#') {
            continue;
        }
        let title = t.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c),
                _ => None,
            })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// `base/target` with `.` and `..` resolved, relative to the repository root; `None` when
/// it climbs out of the repository.
fn resolve(from_file: &str, target: &str) -> Option<String> {
    let joined = Path::new(from_file).parent().unwrap().join(target);
    let mut parts: Vec<String> = Vec::new();
    for c in joined.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

#[test]
fn every_relative_link_points_at_an_existing_file_and_heading() {
    let root = docs::root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in docs::files() {
        let text = docs::read(&file);
        for (line, target) in links(&text) {
            let at = format!("{file}:{line}: ({target})");
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            if target.starts_with('/') {
                problems.push(format!("{at}: absolute; links must be relative"));
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let rel = if path.is_empty() {
                file.clone()
            } else {
                match resolve(&file, path) {
                    Some(r) => r,
                    None => {
                        problems.push(format!("{at}: points outside the repository"));
                        continue;
                    }
                }
            };
            checked += 1;
            let full: PathBuf = root.join(&rel);
            if !full.exists() {
                if !NOT_YET_HERE.contains(&rel.as_str()) {
                    problems.push(format!("{at}: no such file {rel}"));
                }
                continue;
            }
            if let Some(anchor) = anchor {
                if !rel.ends_with(".md") {
                    problems.push(format!("{at}: an anchor into a file that is not markdown"));
                } else if !anchors(&docs::read(&rel)).contains(anchor) {
                    problems.push(format!("{at}: {rel} has no heading #{anchor}"));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the parser broken?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_documentation_page_is_linked_from_the_readme_or_the_docs_index() {
    let mut linked = BTreeSet::new();
    for index in ["README.md", "docs/README.md"] {
        for (_, target) in links(&docs::read(index)) {
            let path = target.split('#').next().unwrap_or_default();
            if let Some(rel) = resolve(index, path) {
                linked.insert(rel);
            }
        }
    }
    let orphans: Vec<String> = docs::files()
        .into_iter()
        .filter(|f| f != "README.md" && !linked.contains(f))
        .collect();
    assert!(
        orphans.is_empty(),
        "pages no index links to (add them to README.md or docs/README.md): {orphans:?}"
    );
}

#[test]
fn the_readme_opens_with_the_two_commands_and_stays_short() {
    let text = docs::read("README.md");
    let lines = text.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; keep it at most {README_MAX_LINES} and move the rest under docs/"
    );
    let first = docs::blocks("README.md", &text)
        .into_iter()
        .next()
        .expect("a first block in the README");
    let commands: Vec<&str> = first
        .text
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        commands,
        ["cargo run --release -- rehearse", "./scripts/test.sh"],
        "{}: the README opens with the main job and the tests",
        first.at()
    );
    let heading_before = text
        .lines()
        .take(first.line - 1)
        .filter(|l| l.starts_with("## "))
        .count();
    assert_eq!(
        heading_before, 0,
        "the two commands come before any section"
    );
    let ci = docs::read(".ci/run");
    assert!(
        ci.lines()
            .any(|l| !l.trim_start().starts_with('#') && l.contains("scripts/test.sh")),
        ".ci/run must run the README's test command"
    );
}
