//! Data flows one way: metrics -> detect -> plan -> runbook -> platform -> engine, with
//! `util` under everything and the gate needing nothing but `util`. This test reads every
//! file of the library under `src/` and fails when a module names one in a layer above
//! its own (`crate::x`, or `super::` climbing out of its module), so the layering cannot
//! erode one convenient import at a time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The library's top-level modules, lowest layer first. A module may use the modules of
/// the layers below its own; within a layer only the top one (the applications built on
/// everything else) may use its neighbours.
const LAYERS: &[&[&str]] = &[
    // Helpers with no knowledge of the domain; exit codes.
    &["util", "exit"],
    // The admission gate stands alone; metric sources read signals; what a client does
    // after a failed attempt (the demo workers' and the simulator's one retry policy).
    &["gate", "metrics", "retry"],
    // The verdict from a window of signals.
    &["detect"],
    // The shed and the ramp from the verdict's numbers.
    &["plan"],
    // Runbooks: signals, detector settings, plan settings and steps.
    &["runbook"],
    // What the engine acts on (local processes, Kubernetes), and how to reach a target.
    &["platform"],
    // The runbook engine.
    &["engine"],
    // Applications: the rehearsal, the webhook receiver, the simulator, the demo system.
    &["rehearse", "serve", "simulate", "demo"],
];

const TOP: usize = LAYERS.len() - 1;

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file: `src/engine/actions/gate.rs` -> [engine, actions, gate];
/// `src/engine/actions/mod.rs` -> [engine, actions].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The top-level modules a line of code names: `crate::x::...`, and `super::` paths that
/// climb out to the crate root.
fn named_modules(code: &str, module: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        out.push(ident(&code[i + "crate::".len()..]));
    }
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let mut tail = &rest[i..];
        let mut ups = 0;
        while let Some(t) = tail.strip_prefix("super::") {
            ups += 1;
            tail = t;
        }
        // A file's own module is `module`; `super` is its parent.
        if ups >= module.len() {
            out.push(ident(tail));
        }
        rest = &rest[i + "super::".len() * ups..];
    }
    out
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unknown = Vec::new();
    for file in &files {
        let module = module_path(&src, file);
        let top = module[0].as_str();
        // The binary (`main.rs`, `cli/`) sits above the library and names it `recover::`.
        if matches!(top, "main" | "lib" | "cli") {
            continue;
        }
        let Some(own) = layer_of(top) else {
            unknown.push(top.to_string());
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        // Inside an inline `mod tests { ... }`, `super` is one level further from the root
        // (inline modules close at the end of the file in this code base).
        let mut at = module.clone();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let t = code.trim();
            if (t.starts_with("mod ") || t.starts_with("pub mod ")) && t.ends_with('{') {
                at.push("(inline)".into());
            }
            for used in named_modules(code, &at) {
                if used == top || used.is_empty() {
                    continue;
                }
                let ok = match layer_of(&used) {
                    Some(l) => l < own || (l == own && own == TOP),
                    None => false,
                };
                if !ok {
                    wrong
                        .entry(format!("{top} -> {used}"))
                        .or_default()
                        .push(format!(
                            "{}:{}",
                            file.strip_prefix(&src).unwrap().display(),
                            n + 1
                        ));
                }
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(
        unknown.is_empty(),
        "modules missing from LAYERS (add them where they belong): {unknown:?}"
    );
    assert!(
        wrong.is_empty(),
        "imports against the data flow (a lower layer using a higher one):\n{}",
        wrong
            .iter()
            .map(|(edge, at)| format!("  {edge}: {}", at.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_scan_sees_crate_and_climbing_super_paths() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(
        named_modules(
            "use crate::engine::journal::Entry;",
            &m("platform::local::lock")
        ),
        ["engine"]
    );
    assert_eq!(
        named_modules(
            "let x = super::super::super::plan::make_plan(a);",
            &m("engine::actions::gate")
        ),
        ["plan"]
    );
    assert!(named_modules("use super::super::ramp;", &m("engine::actions::gate")).is_empty());
    assert!(named_modules("let s = \"mycrate::x\";", &m("util::net")).is_empty());
}

/// The names of the actions, as written in the enums that own them: the engine's journal
/// records (`ActionRecord`) and the runbook's step actions (`ActionKind`).
fn action_names(src: &Path) -> Vec<(String, &'static str)> {
    let mut names = Vec::new();
    for (file, block) in [
        ("engine/journal/action.rs", "pub enum ActionRecord"),
        ("runbook/schema.rs", "pub enum ActionKind"),
    ] {
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        let start = text
            .find(block)
            .unwrap_or_else(|| panic!("{file}: no {block}"));
        let body = &text[start..];
        let body = &body[..body.find("\n}").unwrap()];
        for (i, _) in body.match_indices("rename = \"") {
            let rest = &body[i + "rename = \"".len()..];
            names.push((rest[..rest.find('"').unwrap()].to_string(), file));
        }
    }
    assert!(names.len() >= 12, "{names:?}");
    names
}

#[test]
fn no_string_literal_names_an_action_outside_its_enum() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let names = action_names(&src);
    let owners: Vec<&str> = names.iter().map(|(_, f)| *f).collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        // A test module (at the end of a file in this code base) may spell the wire format.
        let code_part = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        for (n, line) in code_part.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (name, owner) in &names {
                if code.contains(&format!("\"{name}\"")) && !owners.contains(&rel.as_str()) {
                    found.push(format!("{rel}:{}: \"{name}\" (owned by {owner})", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "action names written outside their enums (match the variant instead):\n  {}",
        found.join("\n  ")
    );
}
