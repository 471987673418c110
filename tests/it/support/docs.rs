//! The repository's documentation as the tests read it: which files there are (the
//! README, ARCHITECTURE.md and everything under `docs/`), their fenced blocks with the
//! info string that says what each claims to be, and their prose with the code left out.

use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every documentation file, as a path relative to the root: `README.md`,
/// `ARCHITECTURE.md` and every `.md` under `docs/`, sorted.
pub fn files() -> Vec<String> {
    let mut out = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    let mut under = Vec::new();
    markdown_under(&root().join("docs"), &mut under);
    under.sort();
    out.extend(under.into_iter().map(|p| relative(&p)));
    out
}

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The text of a documentation file given relative to the root; panics naming it.
pub fn read(rel: &str) -> String {
    let p = root().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One fenced block.
pub struct Block {
    /// The file it is in, relative to the root.
    pub file: String,
    /// The info string after the opening fence (`sh 3am`, `yaml runbook`, ...).
    pub tag: String,
    /// Line of the opening fence (1-based).
    pub line: usize,
    pub text: String,
}

impl Block {
    /// `file:line` of the opening fence, for messages.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// The fenced blocks of one file, in order.
pub fn blocks(file: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, is_fence(line)) {
            (None, true) => {
                open = Some(Block {
                    file: file.to_string(),
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

/// The lines outside fenced blocks, with their 1-based numbers.
pub fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if is_fence(line) {
            inside = !inside;
            continue;
        }
        if !inside {
            out.push((i + 1, line));
        }
    }
    out
}
