//! `--set key=value`: change any parameter by the name it has in scenario files. Works on
//! any serde parameter struct by round-tripping through a YAML mapping, so a new field is
//! settable the moment it exists, and errors name the key.

use super::error::SimError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_yaml::Value;

/// Split `key=value`.
pub fn split_set(arg: &str) -> Result<(&str, &str), SimError> {
    match arg.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim(), v.trim())),
        _ => Err(SimError::SetSyntax(arg.to_string())),
    }
}

/// The parameter names of `params` (its YAML keys), in declaration order.
pub fn keys<T: Serialize>(params: &T) -> Vec<String> {
    match serde_yaml::to_value(params) {
        Ok(Value::Mapping(m)) => m
            .keys()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect(),
        _ => vec![],
    }
}

/// Return `params` with `key` set to `value` (a YAML scalar: `4`, `true`, `2s`, `null`).
pub fn apply<T: Serialize + DeserializeOwned>(
    params: &T,
    model: &'static str,
    key: &str,
    value: &str,
) -> Result<T, SimError> {
    let bad = |reason: String| SimError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let Ok(Value::Mapping(mut map)) = serde_yaml::to_value(params) else {
        return Err(bad("parameters are not a mapping".into()));
    };
    let k = Value::String(key.to_string());
    if !map.contains_key(&k) {
        return Err(SimError::UnknownParam {
            key: key.to_string(),
            model,
            known: keys(params).join(", "),
        });
    }
    let parsed: Value = serde_yaml::from_str(value).map_err(|e| bad(e.to_string()))?;
    if matches!(parsed, Value::Mapping(_) | Value::Sequence(_)) {
        return Err(bad("expected a single value".into()));
    }
    map.insert(k, parsed);
    serde_path_to_error::deserialize(Value::Mapping(map)).map_err(|e| bad(e.inner().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::scenarios::config_deploy::params::SystemParams;

    #[test]
    fn sets_numbers_bools_durations_and_options() {
        let p = SystemParams::default();
        let p = apply(&p, "config-deploy", "overload_factor", "1").unwrap();
        let p = apply(&p, "config-deploy", "shedding", "true").unwrap();
        let p = apply(&p, "config-deploy", "timeout", "5s").unwrap();
        let p = apply(&p, "config-deploy", "retry_budget", "0.1").unwrap();
        assert_eq!(p.overload_factor, 1.0);
        assert!(p.shedding);
        assert_eq!(p.timeout.as_secs(), 5);
        assert_eq!(p.retry_budget, Some(0.1));
    }

    #[test]
    fn unknown_key_and_bad_value_name_the_key() {
        let p = SystemParams::default();
        let e = apply(&p, "config-deploy", "overload", "2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown parameter `overload`"), "{e}");
        assert!(e.contains("overload_factor"), "{e}");
        let e = apply(&p, "config-deploy", "timeout", "2")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--set timeout=2:"), "{e}");
        let e = apply(&p, "config-deploy", "shedding", "maybe")
            .unwrap_err()
            .to_string();
        assert!(e.contains("shedding"), "{e}");
    }
}
