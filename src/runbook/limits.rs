//! How big a runbook may be. A runbook is read whole and parsed into memory, by the CLI,
//! by `recover serve` for every alert it acts on, and from a journal on resume: a file
//! of hundreds of thousands of steps (643 MB to parse one of 300,000) is a mistake or an
//! attack, never a procedure. The limits are far above any real runbook (the built-in
//! ones are a few KiB with under 20 steps) and are checked before parsing, on the
//! size, and right after it, on the steps.

use super::error::{Diagnostic, RunbookError};
use crate::util::yaml::{locate, Seg};
use std::io::Read;
use std::path::Path;

/// The largest runbook file read.
pub const MAX_BYTES: usize = 1024 * 1024;
/// The most steps in `spec.steps` and `spec.on_failure` together.
pub const MAX_STEPS: usize = 200;

/// Read a runbook file, refusing one over [`MAX_BYTES`] without reading it whole.
pub fn read_capped(path: &Path) -> Result<String, RunbookError> {
    let file = path.display().to_string();
    let io = |source| RunbookError::Io {
        path: file.clone(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    check_size(&file, bytes.len()).map_err(|d| RunbookError::Invalid(vec![d]))?;
    String::from_utf8(bytes)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Refuse a runbook text over [`MAX_BYTES`].
pub fn check_size(file: &str, len: usize) -> Result<(), Diagnostic> {
    if len <= MAX_BYTES {
        return Ok(());
    }
    Err(Diagnostic {
        file: file.to_string(),
        line: 1,
        column: 1,
        path: "(file)".into(),
        message: format!("the runbook is over {} bytes (1 MiB), the limit", MAX_BYTES),
    })
}

/// Refuse a runbook with more than [`MAX_STEPS`] steps, pointing at the list that passes it.
pub fn check_steps(
    file: &str,
    src: &str,
    steps: usize,
    on_failure: usize,
) -> Result<(), Diagnostic> {
    if steps + on_failure <= MAX_STEPS {
        return Ok(());
    }
    let field = if steps > MAX_STEPS {
        "steps"
    } else {
        "on_failure"
    };
    let path = [Seg::Key("spec".into()), Seg::Key(field.into())];
    let (line, column) = locate(src, &path);
    Err(Diagnostic {
        file: file.to_string(),
        line,
        column,
        path: format!("spec.{field}"),
        message: format!(
            "{steps} steps and {on_failure} on_failure steps; the limit is {MAX_STEPS} in all"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_steps_over_the_limits_are_named() {
        assert!(check_size("rb.yaml", MAX_BYTES).is_ok());
        let e = check_size("rb.yaml", MAX_BYTES + 1).unwrap_err();
        assert!(e.to_string().contains("over 1048576 bytes (1 MiB)"), "{e}");
        assert!(check_steps("rb.yaml", "", 150, 50).is_ok());
        let src = "spec:\n  steps: []\n";
        let e = check_steps("rb.yaml", src, 201, 0).unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (2, "spec.steps"));
        assert!(e.message.contains("limit is 200"), "{e}");
        let e = check_steps("rb.yaml", src, 150, 51).unwrap_err();
        assert_eq!(e.path, "spec.on_failure");
    }
}
