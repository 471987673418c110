//! What `runbooks validate` adds to a valid runbook: the signals a run needs before it can
//! act, so a runbook that the dry run would refuse for want of a signal ("the detector
//! says unknown") is refused at validation instead, naming the file, the line of
//! `spec.signals` and what to define ([`crate::detect::needs`]). Not part of loading: a run
//! given every plan input (`--assume-*`) does not need the detector to say Stuck.

use super::{Diagnostic, LoadedRunbook};
use crate::detect::VerdictKind;
use crate::util::yaml::Seg;

/// One diagnostic per thing the detector cannot do with the runbook's signals, when the
/// runbook runs on a Stuck verdict.
pub fn detection_gaps(file: &str, loaded: &LoadedRunbook) -> Vec<Diagnostic> {
    let rb = &loaded.runbook;
    if !rb.when.contains(&VerdictKind::Stuck) {
        return Vec::new();
    }
    let path = [Seg::Key("spec".into()), Seg::Key("signals".into())];
    crate::detect::needs::unmet(&|n| rb.signals.contains_key(n), &rb.detect)
        .into_iter()
        .map(|u| {
            Diagnostic::at(
                file,
                &loaded.source,
                &path,
                format!(
                    "the detector {} with these signals, so a run is refused (the detector says unknown): define {}",
                    u.cannot, u.define
                ),
            )
        })
        .collect()
}
