//! Crash-safe file replacement: a reader sees the old content or the new, never half of it.
//! The gate's state file and the engine's lock rely on this.
//!
//! [`write_atomic`] returns once the new content would survive a power cut (two fsyncs).
//! Where a caller must not wait for the disk, [`write_replace`] returns once every process
//! sees the new content (a process restart is not a power cut: the page cache survives
//! it), and [`sync_replaced`] makes that content survive a power cut later.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Write `bytes` to `path` atomically: write a sibling temp file, fsync it, rename it over
/// `path`, then fsync the directory so the rename itself survives a power cut.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)?;
    File::open(parent(path))?.sync_all()
}

/// Write `bytes` to `path` atomically for every process (a sibling temp file renamed over
/// `path`), without waiting for the disk: after a power cut before [`sync_replaced`], the
/// file may hold the old content, the new, or (on a filesystem that does not order the
/// rename after the data) nothing readable.
pub fn write_replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, false)
}

/// Make what [`write_replace`] put at `path` survive a power cut: fsync the file, then
/// its directory (the rename).
pub fn sync_replaced(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()?;
    File::open(parent(path))?.sync_all()
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn replace(path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    let dir = parent(path);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_all()?;
        }
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "temp files left behind: {names:?}");
    }
}
