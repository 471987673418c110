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
    &["rehearse", "serve", "simulate", "demo", "postmortem"],
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

// ---------------------------------------------------------------------------------------
// No import circle between files of src/ (a module and its children count as one)
// ---------------------------------------------------------------------------------------

/// Which crate a file belongs to, and its module path there; `#[path]` modules (a file's
/// tests kept beside it) take the path of the module that declares them.
fn modules(src: &Path, files: &[PathBuf]) -> BTreeMap<PathBuf, (bool, Vec<String>)> {
    let mut out: BTreeMap<PathBuf, (bool, Vec<String>)> = files
        .iter()
        .map(|f| {
            let mut m = module_path(src, f);
            let bin = matches!(m.first().map(String::as_str), Some("main" | "cli"));
            if matches!(m.as_slice(), [one] if one == "main" || one == "lib") {
                m.clear();
            }
            (f.clone(), (bin, m))
        })
        .collect();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for w in lines.windows(2) {
            let (Some(p), Some(name)) = (
                w[0].strip_prefix("#[path = \"")
                    .and_then(|r| r.strip_suffix("\"]")),
                w[1].strip_prefix("mod ").and_then(|r| r.strip_suffix(';')),
            ) else {
                continue;
            };
            let (bin, mut m) = out[f].clone();
            m.push(name.to_string());
            out.insert(f.parent().unwrap().join(p), (bin, m));
        }
    }
    out
}

/// The paths a `use` tree names, each as its segments: `a::{b, c::d as e}` ->
/// [a, b], [a, c, d].
fn use_tree_paths(tree: &str) -> Vec<Vec<String>> {
    fn parse(toks: &[String], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        while *i < toks.len() {
            match toks[*i].as_str() {
                "::" => *i += 1,
                "{" => {
                    *i += 1;
                    while *i < toks.len() && toks[*i] != "}" {
                        parse(toks, i, &path, out);
                        if *i < toks.len() && toks[*i] == "," {
                            *i += 1;
                        }
                    }
                    *i += 1;
                    return;
                }
                "," | "}" => break,
                "as" => *i += 2,
                "*" => *i += 1,
                "self" if path.len() > prefix.len() || !prefix.is_empty() => *i += 1,
                seg => {
                    path.push(seg.to_string());
                    *i += 1;
                }
            }
        }
        out.push(path);
    }
    let mut toks = Vec::new();
    let mut word = String::new();
    let mut chars = tree.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            toks.push(std::mem::take(&mut word));
        }
        match c {
            ':' if chars.peek() == Some(&':') => {
                chars.next();
                toks.push("::".into());
            }
            '{' | '}' | ',' | '*' => toks.push(c.to_string()),
            _ => {}
        }
    }
    if !word.is_empty() {
        toks.push(word);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        parse(&toks, &mut i, &[], &mut out);
        i += 1;
    }
    out
}

/// The paths written in a line of code outside `use` (`crate::x::f()`, `super::y::Z`,
/// `child::g()`), each as its segments.
fn code_paths(code: &str) -> Vec<Vec<String>> {
    let bytes: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = ident(bytes[i])
            && (i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == ':' || bytes[i - 1] == '"'));
        if !starts {
            i += 1;
            continue;
        }
        let mut path = Vec::new();
        let mut j = i;
        loop {
            let s = j;
            while j < bytes.len() && ident(bytes[j]) {
                j += 1;
            }
            path.push(bytes[s..j].iter().collect::<String>());
            if j + 2 < bytes.len() && bytes[j] == ':' && bytes[j + 1] == ':' && ident(bytes[j + 2])
            {
                j += 2;
            } else {
                break;
            }
        }
        if path.len() > 1 {
            out.push(path);
        }
        i = j.max(i + 1);
    }
    out
}

/// Every import between two files of `src/` (a `use`, or a path written in the code), as
/// file -> files it imports. A `pub use` only hands names on and is no import; nor is a
/// path between a module and one nested in it (one unit, the parent holding what its
/// children share).
fn imports(src: &Path) -> BTreeMap<PathBuf, std::collections::BTreeSet<PathBuf>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mods = modules(src, &files);
    let by_module: BTreeMap<(bool, Vec<String>), PathBuf> = mods
        .iter()
        .map(|(f, (bin, m))| ((*bin, m.clone()), f.clone()))
        .collect();
    let resolve = |bin: bool, abs: &[String]| -> Option<PathBuf> {
        (0..=abs.len())
            .rev()
            .find_map(|n| by_module.get(&(bin, abs[..n].to_vec())).cloned())
    };
    let mut edges: BTreeMap<PathBuf, std::collections::BTreeSet<PathBuf>> = BTreeMap::new();
    for (file, (bin, module)) in &mods {
        let text = std::fs::read_to_string(file).unwrap();
        let children: Vec<&String> = by_module
            .keys()
            .filter(|(b, m)| b == bin && m.len() == module.len() + 1 && m.starts_with(module))
            .map(|(_, m)| m.last().unwrap())
            .collect();
        let mut at = module.clone();
        let mut pending: Option<(bool, String)> = None;
        let mut paths: Vec<(Vec<String>, Vec<String>)> = Vec::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let t = code.trim();
            if (t.starts_with("mod ") || t.starts_with("pub mod ")) && t.ends_with('{') {
                at.push("(inline)".into());
            }
            if pending.is_none() {
                let re_export = t.starts_with("pub");
                if let Some(rest) = t
                    .strip_prefix("use ")
                    .or_else(|| t.split_once(" use ").map(|(_, r)| r).filter(|_| re_export))
                {
                    pending = Some((re_export, String::new()));
                    let (_, acc) = pending.as_mut().unwrap();
                    acc.push_str(rest);
                } else {
                    paths.extend(code_paths(code).into_iter().map(|p| (at.clone(), p)));
                    continue;
                }
            } else if let Some((_, acc)) = pending.as_mut() {
                acc.push_str(t);
            }
            let done = pending.as_ref().is_some_and(|(_, acc)| acc.contains(';'));
            if done {
                let (re_export, acc) = pending.take().unwrap();
                if !re_export {
                    let tree = acc.split(';').next().unwrap();
                    paths.extend(use_tree_paths(tree).into_iter().map(|p| (at.clone(), p)));
                }
            }
        }
        for (at, p) in paths {
            let (target_bin, abs) = match p[0].as_str() {
                "crate" => (*bin, p[1..].to_vec()),
                "recover" => (false, p[1..].to_vec()),
                "self" => (*bin, [at.clone(), p[1..].to_vec()].concat()),
                "super" => {
                    let ups = p.iter().take_while(|s| *s == "super").count();
                    let Some(base) = at.len().checked_sub(ups) else {
                        continue;
                    };
                    (*bin, [at[..base].to_vec(), p[ups..].to_vec()].concat())
                }
                first if children.iter().any(|c| c.as_str() == first) => {
                    (*bin, [module.clone(), p.clone()].concat())
                }
                _ => continue,
            };
            let Some(to) = resolve(target_bin, &abs) else {
                continue;
            };
            // A module and the modules inside it are one unit: the parent holds what its
            // children share (`super::X`) and may call them; that is no circle.
            let (to_bin, to_module) = &mods[&to];
            let nested =
                to_bin == bin && (to_module.starts_with(module) || module.starts_with(to_module));
            if !nested {
                edges.entry(file.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// The groups of files that import each other in a loop (strongly connected components
/// of more than one file, Tarjan's algorithm).
fn import_circles(
    edges: &BTreeMap<PathBuf, std::collections::BTreeSet<PathBuf>>,
) -> Vec<Vec<PathBuf>> {
    struct T<'a> {
        edges: &'a BTreeMap<PathBuf, std::collections::BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, (usize, usize)>,
        stack: Vec<&'a PathBuf>,
        on: std::collections::BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a PathBuf) {
        let n = t.index.len();
        t.index.insert(v, (n, n));
        t.stack.push(v);
        t.on.insert(v);
        for w in t.edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let low = t.index[v].1.min(t.index[w].1);
                t.index.get_mut(v).unwrap().1 = low;
            } else if t.on.contains(w) {
                let low = t.index[v].1.min(t.index[w].0);
                t.index.get_mut(v).unwrap().1 = low;
            }
        }
        if t.index[v].0 == t.index[v].1 {
            let mut group = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                group.push(w.clone());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: Default::default(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_files_of_src_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = imports(&src);
    let found = import_circles(&edges);
    let show = |f: &PathBuf| f.strip_prefix(&src).unwrap().display().to_string();
    assert!(
        found.is_empty(),
        "import circles (move the shared vocabulary into a module below both):\n{}",
        found
            .iter()
            .map(|g| {
                let names: Vec<String> = g.iter().map(show).collect();
                let ties: Vec<String> = g
                    .iter()
                    .flat_map(|a| {
                        edges[a]
                            .iter()
                            .filter(|b| g.contains(b))
                            .map(move |b| format!("{} -> {}", show(a), show(b)))
                    })
                    .collect();
                format!("  {}\n    {}", names.join(", "), ties.join("\n    "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_import_scan_reads_use_trees_and_paths_in_code() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(
        use_tree_paths("super::{ctx::append, Act as A, journal::{self, Event}}"),
        [
            m("super::ctx::append"),
            m("super::Act"),
            m("super::journal"),
            m("super::journal::Event")
        ]
    );
    assert_eq!(
        use_tree_paths("crate::util::procfs"),
        [m("crate::util::procfs")]
    );
    assert_eq!(
        code_paths("let x = crate::a::b(super::c::D, e.f::<g::H>()); \"s::t\""),
        [m("crate::a::b"), m("super::c::D"), m("g::H")]
    );
    let edges = BTreeMap::from([
        (PathBuf::from("a"), [PathBuf::from("b")].into()),
        (PathBuf::from("b"), [PathBuf::from("a")].into()),
        (PathBuf::from("c"), [PathBuf::from("a")].into()),
    ]);
    assert_eq!(
        import_circles(&edges),
        [vec![PathBuf::from("a"), PathBuf::from("b")]]
    );
}

// ---------------------------------------------------------------------------------------
// No import circle inside the simulator
// ---------------------------------------------------------------------------------------

/// The file of a module path, if the module is a file of its own: `[simulate, plot]` ->
/// `src/simulate/plot.rs`, `[simulate, kernel]` -> `src/simulate/kernel/mod.rs`.
fn module_file(src: &Path, module: &[String]) -> Option<PathBuf> {
    let mut p = src.to_path_buf();
    for seg in module {
        p.push(seg);
    }
    let file = p.with_extension("rs");
    if file.is_file() {
        return Some(file);
    }
    let dir = p.join("mod.rs");
    dir.is_file().then_some(dir)
}

/// Every path a `use` tree names, its braces spread out: `a::{b, c::{d, e}}` -> a::b,
/// a::c::d, a::c::e (as segment lists).
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut depth, mut start, mut out) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(&s[start..]);
        out
    }
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let prefix: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut out = Vec::new();
        for part in split_top(inner) {
            for rest in use_paths(part) {
                let mut p = prefix.clone();
                p.extend(rest);
                out.push(p);
            }
        }
        return out;
    }
    let path = tree.split(" as ").next().unwrap_or("");
    let segs: Vec<String> = path
        .split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if segs.is_empty() {
        vec![]
    } else {
        vec![segs]
    }
}

/// Identifier chains joined by `::` in a line of code (`super::params::NAME`, `model::run`).
fn chains(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        if is_id(bytes[i]) && (i == 0 || !(is_id(bytes[i - 1]) || bytes[i - 1] == ':')) {
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let start = j;
                while j < bytes.len() && is_id(bytes[j]) {
                    j += 1;
                }
                segs.push(bytes[start..j].iter().collect::<String>());
                if j + 2 < bytes.len()
                    && bytes[j] == ':'
                    && bytes[j + 1] == ':'
                    && is_id(bytes[j + 2])
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if segs.len() > 1 {
                out.push(segs);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The file a path used in `file` (of module `module`, `children` its declared
/// submodules) leads to: the deepest module of the path that is a file of its own.
fn target(src: &Path, module: &[String], children: &[String], path: &[String]) -> Option<PathBuf> {
    let (mut base, rest): (Vec<String>, &[String]) = match path.first().map(String::as_str) {
        Some("crate") => (vec![], &path[1..]),
        Some("self") => (module.to_vec(), &path[1..]),
        Some("super") => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let keep = module.len().checked_sub(ups)?;
            (module[..keep].to_vec(), &path[ups..])
        }
        Some(first) if children.iter().any(|c| c == first) => (module.to_vec(), path),
        _ => return None,
    };
    let mut found = module_file(src, &base);
    for seg in rest {
        base.push(seg.clone());
        match module_file(src, &base) {
            Some(f) => found = Some(f),
            None => break,
        }
    }
    found
}

/// Which files under `src/simulate` each file there uses.
fn simulate_imports(src: &Path) -> BTreeMap<PathBuf, Vec<PathBuf>> {
    let mut files = Vec::new();
    rust_files(&src.join("simulate"), &mut files);
    let mut graph = BTreeMap::new();
    for file in &files {
        let module = module_path(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let mut children = Vec::new();
        let mut edges = Vec::new();
        let mut at = module.clone();
        let mut pending_use: Option<String> = None;
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let t = code.trim();
            if (t.starts_with("mod ") || t.starts_with("pub mod ")) && t.ends_with(';') {
                let name = t.trim_start_matches("pub ").trim_start_matches("mod ");
                children.push(name.trim_end_matches(';').trim().to_string());
                continue;
            }
            if (t.starts_with("mod ") || t.starts_with("pub mod ")) && t.ends_with('{') {
                at.push("(inline)".into());
            }
            let mut paths = Vec::new();
            let starts_use = t.starts_with("use ")
                || t.starts_with("pub use ")
                || t.starts_with("pub(crate) use ");
            if starts_use || pending_use.is_some() {
                let mut acc = pending_use.take().unwrap_or_default();
                acc.push_str(if starts_use {
                    t.split_once("use ").map_or("", |x| x.1)
                } else {
                    t
                });
                match acc.find(';') {
                    Some(end) => paths.extend(use_paths(&acc[..end])),
                    None => pending_use = Some(acc),
                }
            } else {
                paths.extend(chains(code));
            }
            let inline = at.len() > module.len();
            for p in paths {
                // Inside an inline `mod tests`, `super` is the file's own module.
                let p: Vec<String> = if inline && p.first().is_some_and(|s| s == "super") {
                    std::iter::once("self".to_string())
                        .chain(p[1..].iter().cloned())
                        .collect()
                } else {
                    p
                };
                if let Some(to) = target(src, &module, &children, &p) {
                    if &to != file && to.starts_with(src.join("simulate")) {
                        edges.push(to);
                    }
                }
            }
        }
        edges.sort();
        edges.dedup();
        graph.insert(file.clone(), edges);
    }
    graph
}

/// The circles of a graph: its strongly connected components of more than one file.
fn circles(graph: &BTreeMap<PathBuf, Vec<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Kosaraju: order by finish time, then walk the reversed graph in reverse order.
    fn visit(
        n: &PathBuf,
        g: &BTreeMap<PathBuf, Vec<PathBuf>>,
        seen: &mut std::collections::BTreeSet<PathBuf>,
        out: &mut Vec<PathBuf>,
    ) {
        if !seen.insert(n.clone()) {
            return;
        }
        for m in g.get(n).into_iter().flatten() {
            visit(m, g, seen, out);
        }
        out.push(n.clone());
    }
    let mut order = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for n in graph.keys() {
        visit(n, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for (from, tos) in graph {
        for to in tos {
            reversed.entry(to.clone()).or_default().push(from.clone());
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for n in order.iter().rev() {
        let mut component = Vec::new();
        visit(n, &reversed, &mut seen, &mut component);
        if component.len() > 1 {
            component.sort();
            out.push(component);
        }
    }
    out
}

#[test]
fn no_import_circle_inside_the_simulator() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = simulate_imports(&src);
    let edges: usize = graph.values().map(Vec::len).sum();
    assert!(
        edges > 50,
        "the scan found only {edges} imports: it is broken"
    );
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "import circles under src/simulate (a module and a file it uses using it back):\n{}",
        found
            .iter()
            .map(|c| {
                let names: Vec<String> = c
                    .iter()
                    .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
                    .collect();
                format!("  {}", names.join(" <-> "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The circle check sees `use` trees, paths in code, and a parent's re-export used back by
/// its child: the shape that tied the drills into one circle.
#[test]
fn the_circle_check_finds_a_module_and_its_child_using_each_other() {
    assert_eq!(
        use_paths("super::{a, b::{C, d::E as F}}"),
        vec![
            vec!["super", "a"],
            vec!["super", "b", "C"],
            vec!["super", "b", "d", "E"],
        ]
    );
    assert_eq!(
        chains("let x = super::params::NAME + model::run(p);"),
        vec![vec!["super", "params", "NAME"], vec!["model", "run"]]
    );
    let g: BTreeMap<PathBuf, Vec<PathBuf>> = [
        ("m/mod.rs", vec!["m/child.rs"]),
        ("m/child.rs", vec!["m/mod.rs", "m/leaf.rs"]),
        ("m/leaf.rs", vec![]),
    ]
    .into_iter()
    .map(|(a, b)| (PathBuf::from(a), b.into_iter().map(PathBuf::from).collect()))
    .collect();
    assert_eq!(
        circles(&g),
        vec![vec![PathBuf::from("m/child.rs"), PathBuf::from("m/mod.rs")]]
    );
}

// ---------------------------------------------------------------------------------------
// ARCHITECTURE.md names only what exists
// ---------------------------------------------------------------------------------------

/// Is there a module `name` (a file `name.rs` or a directory `name/`) at any depth under
/// `dir`?
fn has_module(dir: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        let stem = p.file_stem().and_then(|s| s.to_str()) == Some(name);
        if p.is_dir() {
            stem || has_module(&p, name)
        } else {
            stem && p.extension().is_some_and(|x| x == "rs")
        }
    })
}

/// The `code spans` of a table row's cell outside parentheses (inside them a row names
/// functions, commands and flags as well as modules).
fn spans_outside_parentheses(cell: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut code, mut span) = (0usize, false, String::new());
    for c in cell.chars() {
        match c {
            '`' if code => {
                if depth == 0 {
                    out.push(std::mem::take(&mut span));
                }
                span.clear();
                code = false;
            }
            '`' => code = true,
            _ if code => span.push(c),
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    out
}

/// Every module the "Where things live" table names exists under its row's module, every
/// top-level module of the library has a row, and every repository path the document
/// names in a code span exists: the map cannot go on describing files that are gone.
#[test]
fn architecture_md_names_only_modules_and_paths_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let module = cells[1]
            .split('`')
            .nth(1)
            .unwrap_or("")
            .trim_end_matches('/');
        let dir = src.join(module);
        let (is_dir, is_file) = (dir.is_dir(), src.join(format!("{module}.rs")).is_file());
        if !is_dir && !is_file {
            continue;
        }
        rows.push(module.to_string());
        for span in spans_outside_parentheses(cells[2]) {
            let name = span.trim_end_matches('/');
            let ident = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if ident && !(is_dir && has_module(&dir, name)) {
                missing.push(format!(
                    "`{module}/` row: no module `{name}` under src/{module}/"
                ));
            }
        }
    }
    for (n, piece) in text.split('`').enumerate() {
        let roots = [
            "src/",
            "tests/",
            "scripts/",
            "docs/",
            "manifests/",
            "deploy/",
            "runbooks/",
            "examples/",
        ];
        if n % 2 == 1
            && roots.iter().any(|r| piece.starts_with(r))
            && !piece.contains(['*', '<', ' '])
            && !root.join(piece).exists()
        {
            missing.push(format!("no such path: {piece}"));
        }
    }
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(m) = line
            .strip_prefix("pub mod ")
            .and_then(|r| r.strip_suffix(';'))
        {
            if m != "exit" && !rows.iter().any(|r| r == m) {
                missing.push(format!("src/{m}: no row in \"Where things live\""));
            }
        }
    }
    assert!(
        rows.len() > 10,
        "read only {} rows: the table's shape changed",
        rows.len()
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md:\n  {}",
        missing.join("\n  ")
    );
}
