//! `recover runbooks new NAME`: a starter runbook to write one's own from. It names every
//! signal the detector and the plan need, each with a comment saying what for, and runs
//! on the demo system as written, so a first runbook starts from something that works
//! instead of from a reference page. Pure: the caller writes the text where it belongs.

use super::RunbookError;

const TEMPLATE: &str = include_str!("starter.yaml");
const PLACEHOLDER: &str = "__NAME__";

/// The starter runbook named `name`, checked by the same loader a run uses (a name the
/// runbook format does not allow is refused with the loader's words). The name goes in
/// as a quoted string, so whatever it holds cannot change the document's structure.
pub fn starter(name: &str) -> Result<String, RunbookError> {
    let quoted = serde_json::to_string(name).expect("a string encodes");
    let text = TEMPLATE.replace(PLACEHOLDER, &quoted);
    super::parse_str(&format!("{name}.yaml"), &text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_loads_and_lacks_no_signal_the_detector_needs() {
        let text = starter("mine").unwrap();
        assert!(!text.contains(PLACEHOLDER));
        let loaded = super::super::LoadedRunbook {
            runbook: super::super::parse_str("mine.yaml", &text).unwrap(),
            source: text.clone(),
            origin: super::super::Origin::File("mine.yaml".into()),
        };
        assert_eq!(loaded.runbook.name, "mine");
        assert!(super::super::detection_gaps("mine.yaml", &loaded).is_empty());
    }

    #[test]
    fn a_name_the_format_refuses_is_refused() {
        for bad in ["Not A Name", "x\nspec: {}"] {
            let e = starter(bad).unwrap_err().to_string();
            assert!(e.contains("lowercase letters, digits and dashes"), "{e}");
        }
    }
}
