//! The Kubernetes rehearsal on a real kind cluster (`scripts/rehearse-kind.sh`). It needs
//! Docker, kind and kubectl, which the development machines here do not have, so it is
//! ignored unless asked for, and fails (never passes) when asked for without them.

use std::process::{Command, Stdio};

/// Whether `program args...` runs and exits 0, with its output discarded.
fn works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
#[ignore = "needs a running Docker engine, kind and kubectl; creates a kind cluster and takes \
            several minutes: cargo nextest run --run-ignored only -E 'test(/^kind_e2e::/)'"]
fn e2e_kind_rehearsal() {
    let missing: Vec<&str> = [
        ("docker (with a running engine)", works("docker", &["info"])),
        ("kind", works("kind", &["version"])),
        ("kubectl", works("kubectl", &["version", "--client"])),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(tool, _)| tool)
    .collect();
    assert!(
        missing.is_empty(),
        "the kind rehearsal cannot run here: missing {}",
        missing.join(", ")
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/rehearse-kind.sh");
    let status = Command::new("bash")
        .arg(script)
        .status()
        .expect("run scripts/rehearse-kind.sh");
    assert!(status.success(), "rehearse-kind.sh failed: {status}");
}
