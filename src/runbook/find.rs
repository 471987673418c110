//! Finding runbooks by name: `--runbook-dir` first, then `./runbooks/`, then the runbooks
//! built into the binary, so the shipped procedures work from any directory and a team can
//! still override them with their own copy.

use super::error::RunbookError;
use super::load::{load_file, load_file_with_roles, parse_str, parse_str_with_roles};
use super::{LoadedRunbook, Origin};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The runbooks compiled into the binary: (name, YAML text).
pub fn embedded() -> &'static [(&'static str, &'static str)] {
    &[
        (
            "stuck-overload",
            include_str!("../../runbooks/stuck-overload.yaml"),
        ),
        (
            "retry-storm",
            include_str!("../../runbooks/retry-storm.yaml"),
        ),
        (
            "slow-replica",
            include_str!("../../runbooks/slow-replica.yaml"),
        ),
    ]
}

fn search_dirs(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = dirs.to_vec();
    out.push(PathBuf::from("runbooks"));
    out
}

fn looks_like_path(name: &str) -> bool {
    name.contains('/') || name.ends_with(".yaml") || name.ends_with(".yml")
}

/// Find a runbook by path (anything with a `/` or a `.yaml` suffix) or by name in `dirs`,
/// then `./runbooks/`, then the built-in set.
pub fn find(name: &str, dirs: &[PathBuf]) -> Result<LoadedRunbook, RunbookError> {
    find_with_roles(name, dirs, &BTreeMap::new())
}

/// [`find`], with roles (from flags, already checked) replacing or adding to the
/// runbook's `spec.roles`.
pub fn find_with_roles(
    name: &str,
    dirs: &[PathBuf],
    roles: &BTreeMap<String, String>,
) -> Result<LoadedRunbook, RunbookError> {
    if looks_like_path(name) && Path::new(name).exists() {
        return load_file_with_roles(Path::new(name), roles);
    }
    let mut searched = Vec::new();
    for dir in search_dirs(dirs) {
        for ext in ["yaml", "yml"] {
            let p = dir.join(format!("{name}.{ext}"));
            if p.is_file() {
                return load_file_with_roles(&p, roles);
            }
        }
        searched.push(dir.display().to_string());
    }
    if let Some((n, src)) = embedded().iter().find(|(n, _)| *n == name) {
        let runbook = parse_str_with_roles(&format!("(built in) {n}.yaml"), src, roles)?;
        return Ok(LoadedRunbook {
            runbook,
            source: src.to_string(),
            origin: Origin::Embedded(n.to_string()),
        });
    }
    searched.push("the built-in runbooks".into());
    Err(RunbookError::NotFound {
        name: name.to_string(),
        searched: searched.join(", "),
    })
}

/// One entry of [`list`]: a runbook's name, where it is, and whether it is valid.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ListedRunbook {
    pub name: String,
    pub origin: Origin,
    pub description: Option<String>,
    /// The validation error, if the file does not load.
    pub error: Option<String>,
    /// False when an earlier directory has a runbook with the same name.
    pub active: bool,
}

/// Every runbook visible from `dirs` (same order as [`find`]), shadowed ones included.
pub fn list(dirs: &[PathBuf]) -> Vec<ListedRunbook> {
    let mut out: Vec<ListedRunbook> = Vec::new();
    let push = |out: &mut Vec<ListedRunbook>,
                name: String,
                origin,
                res: Result<LoadedRunbook, RunbookError>| {
        let active = !out.iter().any(|r| r.name == name);
        let (description, error) = match res {
            Ok(l) => (Some(l.runbook.description), None),
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(ListedRunbook {
            name,
            origin,
            description,
            error,
            active,
        });
    };
    for dir in search_dirs(dirs) {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .collect();
        files.sort();
        for f in files {
            let name = f
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default();
            let res = load_file(&f);
            push(&mut out, name, Origin::File(f), res);
        }
    }
    for (n, src) in embedded() {
        let res = parse_str(n, src).map(|runbook| LoadedRunbook {
            runbook,
            source: src.to_string(),
            origin: Origin::Embedded(n.to_string()),
        });
        push(
            &mut out,
            n.to_string(),
            Origin::Embedded(n.to_string()),
            res,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn shipped_runbooks_use_the_detectors_signal_definitions() {
        let want = crate::detect::default_signals::demo_signals();
        let detect = crate::detect::default_signals::detector_config();
        for (name, src) in super::embedded() {
            let rb = super::parse_str(name, src).unwrap();
            assert_eq!(
                rb.roles,
                crate::metrics::promql::roles::default_roles(),
                "{name}: spec.roles"
            );
            assert_eq!(
                (rb.detect.grace, rb.detect.grace_scrapes),
                (detect.grace, detect.grace_scrapes),
                "{name}: grace"
            );
            assert_eq!(
                (rb.detect.persist, rb.detect.persist_scrapes),
                (detect.persist, detect.persist_scrapes),
                "{name}: persist"
            );
            for (sig, spec) in &rb.signals {
                assert_eq!(
                    Some(spec),
                    want.get(sig),
                    "{name}: signal {sig} differs from detect::default_signals"
                );
            }
        }
    }
}
