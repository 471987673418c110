//! Roles in Prometheus: which series are the gate's, the service's and the clients'. A
//! role is a list of PromQL label matchers the runbook declares (`spec.roles`) or a flag
//! overrides (`--role service='job="config-service",namespace="shop"'`), using the labels
//! the user's service discovery attaches (`job`, `namespace`, `app_kubernetes_io_name`),
//! never a label `recover` would need someone to add.
//!
//! Matchers are checked here when they are declared, so a typo is reported on the runbook
//! line or the flag rather than by Prometheus in the middle of a detection.

use std::collections::BTreeMap;

/// The roles the built-in signal set and the shipped runbooks use, as Prometheus labels
/// pods found by Kubernetes service discovery with the usual `labelmap` of pod labels
/// (`app.kubernetes.io/name` becomes `app_kubernetes_io_name`).
pub fn default_roles() -> BTreeMap<String, String> {
    [
        ("gate", r#"app_kubernetes_io_name="recover-gate""#),
        ("service", r#"app_kubernetes_io_name="config-service""#),
        ("clients", r#"app_kubernetes_io_name="workers""#),
    ]
    .into_iter()
    .map(|(r, m)| (r.to_string(), m.to_string()))
    .collect()
}

/// Is `name` usable as a role (`$name` in an expression)?
pub fn check_role_name(name: &str) -> Result<(), String> {
    let mut cs = name.chars();
    let ok = cs
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && cs.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "role name {name:?} must be lowercase letters, digits and underscores (it is written `${name}` in expressions)"
        ))
    }
}

/// Check a comma-separated list of label matchers as PromQL writes them between braces:
/// `label op "value"` with op one of `=`, `!=`, `=~`, `!~` and the value quoted.
pub fn check_matchers(src: &str) -> Result<(), String> {
    let s = src.trim();
    if s.starts_with('{') || s.ends_with('}') {
        return Err(format!(
            "write the matchers without braces: {:?}",
            s.trim_matches(|c| c == '{' || c == '}')
        ));
    }
    let mut rest = s;
    let mut count = 0;
    loop {
        rest = rest.trim_start();
        let name_len = rest
            .char_indices()
            .take_while(|&(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit())
            })
            .count();
        if name_len == 0 {
            return Err(format!(
                "expected a label name at {:?} (matchers look like job=\"config-service\")",
                rest
            ));
        }
        let label = &rest[..name_len];
        rest = rest[name_len..].trim_start();
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .ok_or_else(|| format!("label {label}: expected one of = != =~ !~"))?;
        rest = rest[op.len()..].trim_start();
        let quote = rest
            .chars()
            .next()
            .filter(|c| matches!(c, '"' | '\'' | '`'))
            .ok_or_else(|| {
                format!("label {label}: the value must be quoted, like {label}{op}\"x\"")
            })?;
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.char_indices().skip(1) {
            if escaped {
                escaped = false;
            } else if c == '\\' && quote != '`' {
                escaped = true;
            } else if c == quote {
                end = Some(i);
                break;
            }
        }
        let end = end.ok_or_else(|| format!("label {label}: unterminated value"))?;
        rest = rest[end + 1..].trim_start();
        count += 1;
        if rest.is_empty() {
            break;
        }
        rest = rest
            .strip_prefix(',')
            .ok_or_else(|| format!("expected `,` between matchers at {rest:?}"))?;
        if rest.trim().is_empty() {
            break;
        }
    }
    if count == 0 {
        return Err("a role needs at least one matcher".into());
    }
    Ok(())
}

/// `--role ROLE=MATCHERS`, e.g. `service=job="config-service",namespace="shop"`.
pub fn parse_role_flag(s: &str) -> Result<(String, String), String> {
    let (role, matchers) = s.split_once('=').ok_or_else(|| {
        format!("{s:?}: expected ROLE=MATCHERS, like service='job=\"config-service\"'")
    })?;
    check_role_name(role)?;
    check_matchers(matchers).map_err(|e| format!("role {role}: {e}"))?;
    Ok((role.to_string(), matchers.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_as_promql_writes_them() {
        for ok in [
            r#"job="config-service""#,
            r#"job="config-service", namespace="shop""#,
            r#"app_kubernetes_io_name=~"config-.*",pod!='x',"#,
            r#"a!~`b\`"#,
        ] {
            assert_eq!(check_matchers(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            (r#"{job="x"}"#, "without braces"),
            (r#"job=x"#, "must be quoted"),
            (r#"job=="x""#, "must be quoted"),
            (r#"job="x" namespace="y""#, "expected `,`"),
            (r#"job~"x""#, "expected one of"),
            (r#"job="x"#, "unterminated"),
            ("", "expected a label name"),
        ] {
            let e = check_matchers(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn role_flags() {
        assert_eq!(
            parse_role_flag(r#"service=job="config-service",namespace="shop""#).unwrap(),
            (
                "service".to_string(),
                r#"job="config-service",namespace="shop""#.to_string()
            )
        );
        assert!(parse_role_flag("service").is_err());
        assert!(parse_role_flag(r#"Service=job="x""#).is_err());
        assert!(parse_role_flag(r#"__x=job="x""#).is_err());
        for (r, m) in default_roles() {
            check_role_name(&r).unwrap();
            check_matchers(&m).unwrap();
        }
    }
}
