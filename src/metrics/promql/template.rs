//! The placeholders a runbook's `promql:` expressions may use, so that one runbook works
//! at any scrape interval and under any labelling:
//!
//! - `$__rate_interval`: the range of `rate()` and `increase()`, derived from the source's
//!   scrape interval as Grafana derives its variable of the same name (at least four
//!   scrape intervals), so the same expression pastes into a Grafana panel unchanged;
//! - `$ROLE` (`$gate`, `$service`, `$clients`, any role the runbook declares): the label
//!   matchers that select that role's series, e.g. `{kind="useful", $service}`.
//!
//! Roles are bound when the runbook is loaded (they are part of its text); the rate
//! interval is bound by the source once it knows the scrape interval. `$` inside a string
//! literal (a regex anchor) is left alone. Also here: the fixed range windows an expression
//! writes, so a `[5s]` on 30 s data is refused instead of silently reading nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The variable the source fills in with the rate window.
pub const RATE_INTERVAL: &str = "__rate_interval";

/// Why an expression's placeholders could not be filled in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`${role}` names no declared role (declared: {declared}); declare it under spec.roles or with --role {role}=MATCHERS")]
    UnknownRole { role: String, declared: String },
    #[error("unknown variable `${name}` (the one built-in variable is `$__rate_interval`)")]
    UnknownVariable { name: String },
    #[error("a `$` must be followed by a variable name (`$__rate_interval` or a role)")]
    BareDollar,
}

/// One piece of an expression: text to copy, or a `$variable`.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Split an expression into text and variables, copying string literals as text.
fn pieces(q: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = q.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        match c {
            '"' | '\'' | '`' => {
                // Skip to the closing quote; backticks take no escapes.
                while let Some((_, d)) = it.next() {
                    if d == '\\' && c != '`' {
                        it.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            '$' => {
                let name_start = i + 1;
                let mut end = name_start;
                if it.peek().is_some_and(|&(_, d)| is_ident_start(d)) {
                    while let Some(&(j, d)) = it.peek() {
                        if !is_ident(d) {
                            break;
                        }
                        end = j + d.len_utf8();
                        it.next();
                    }
                }
                if end == name_start {
                    return Err(TemplateError::BareDollar);
                }
                out.push(Piece::Text(&q[start..i]));
                out.push(Piece::Var(&q[name_start..end]));
                start = end;
            }
            _ => {}
        }
    }
    out.push(Piece::Text(&q[start..]));
    Ok(out)
}

/// Replace every `$ROLE` with the role's matchers; `$__rate_interval` stays for the source.
pub fn bind_roles(q: &str, roles: &BTreeMap<String, String>) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(q.len());
    for p in pieces(q)? {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(RATE_INTERVAL) => {
                out.push('$');
                out.push_str(RATE_INTERVAL);
            }
            Piece::Var(v) if v.starts_with("__") => {
                return Err(TemplateError::UnknownVariable { name: v.into() })
            }
            Piece::Var(v) => match roles.get(v) {
                Some(m) => out.push_str(m),
                None => {
                    return Err(TemplateError::UnknownRole {
                        role: v.into(),
                        declared: if roles.is_empty() {
                            "none".into()
                        } else {
                            roles.keys().cloned().collect::<Vec<_>>().join(", ")
                        },
                    })
                }
            },
        }
    }
    Ok(out)
}

/// Replace `$__rate_interval` with `window`; any other variable left is an error.
pub fn bind_rate_interval(q: &str, window: Duration) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(q.len());
    for p in pieces(q)? {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(RATE_INTERVAL) => out.push_str(&format_range(window)),
            Piece::Var(v) if v.starts_with("__") => {
                return Err(TemplateError::UnknownVariable { name: v.into() })
            }
            Piece::Var(v) => {
                return Err(TemplateError::UnknownRole {
                    role: v.into(),
                    declared: "none at this point".into(),
                })
            }
        }
    }
    Ok(out)
}

/// Does the expression use `$__rate_interval`?
pub fn uses_rate_interval(q: &str) -> bool {
    pieces(q).is_ok_and(|ps| ps.contains(&Piece::Var(RATE_INTERVAL)))
}

/// The roles an expression names.
pub fn roles_used(q: &str) -> BTreeSet<String> {
    pieces(q)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            Piece::Var(v) if !v.starts_with("__") => Some(v.to_string()),
            _ => None,
        })
        .collect()
}

/// A range as PromQL writes it: whole seconds when it has no fraction, else milliseconds.
pub fn format_range(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A PromQL duration: `5m`, `1h30m`, `90s`, `250ms` (units ms s m h d w y).
pub fn parse_prom_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total_ms: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u128 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit_ms: u128 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total_ms += n * unit_ms;
    }
    Some(Duration::from_millis(u64::try_from(total_ms).ok()?))
}

/// The range windows an expression writes as fixed durations (`[5m]`, and the range of a
/// subquery `[5m:30s]`); placeholders are not fixed and are left out.
pub fn fixed_windows(q: &str) -> Vec<Duration> {
    let mut out = Vec::new();
    let mut it = q.char_indices();
    while let Some((i, c)) = it.next() {
        match c {
            '"' | '\'' | '`' => {
                while let Some((_, d)) = it.next() {
                    if d == '\\' && c != '`' {
                        it.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            '[' => {
                let Some(close) = q[i..].find(']') else { break };
                let inner = &q[i + 1..i + close];
                let range = inner.split(':').next().unwrap_or("");
                if let Some(d) = parse_prom_duration(range) {
                    out.push(d);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles() -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "service".into(),
                r#"job="config-service",namespace="shop""#.into(),
            ),
            (
                "gate".into(),
                r#"app_kubernetes_io_name="recover-gate""#.into(),
            ),
        ])
    }

    #[test]
    fn roles_are_bound_and_the_rate_interval_waits_for_the_source() {
        let q = r#"sum(rate(x_total{kind="useful", $service}[$__rate_interval])) / sum(up{$gate})"#;
        let bound = bind_roles(q, &roles()).unwrap();
        assert_eq!(
            bound,
            r#"sum(rate(x_total{kind="useful", job="config-service",namespace="shop"}[$__rate_interval])) / sum(up{app_kubernetes_io_name="recover-gate"})"#
        );
        assert!(uses_rate_interval(&bound));
        let done = bind_rate_interval(&bound, Duration::from_secs(60)).unwrap();
        assert!(done.contains("[60s]"), "{done}");
        assert!(!uses_rate_interval(&done));
        assert_eq!(
            roles_used(q),
            BTreeSet::from(["gate".to_string(), "service".to_string()])
        );
    }

    #[test]
    fn dollars_inside_strings_are_regex_anchors_not_variables() {
        let q = r#"up{job=~"gate$", $gate} or x{a='b$c'} or y{a=`$z`}"#;
        let bound = bind_roles(q, &roles()).unwrap();
        assert!(bound.starts_with(r#"up{job=~"gate$", app_kubernetes_io_name="#));
        assert!(bound.ends_with("y{a=`$z`}"));
    }

    #[test]
    fn unknown_names_are_errors_that_say_what_exists() {
        let e = bind_roles("up{$clients}", &roles()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`$clients` names no declared role (declared: gate, service); declare it under spec.roles or with --role clients=MATCHERS"
        );
        assert!(matches!(
            bind_roles("rate(x[$__interval])", &roles()),
            Err(TemplateError::UnknownVariable { .. })
        ));
        assert_eq!(
            bind_roles("x $ y", &roles()),
            Err(TemplateError::BareDollar)
        );
    }

    #[test]
    fn ranges_are_written_as_promql_reads_them() {
        assert_eq!(format_range(Duration::from_secs(120)), "120s");
        assert_eq!(format_range(Duration::from_millis(2500)), "2500ms");
        assert_eq!(
            parse_prom_duration("1h30m"),
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            parse_prom_duration("250ms"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_prom_duration("5"), None);
        assert_eq!(parse_prom_duration("$__rate_interval"), None);
    }

    #[test]
    fn fixed_windows_are_found_outside_strings() {
        let q =
            r#"rate(a{x=~"[0-9]+"}[5s]) + max_over_time(b[10m:30s]) + rate(c[$__rate_interval])"#;
        assert_eq!(
            fixed_windows(q),
            vec![Duration::from_secs(5), Duration::from_secs(600)]
        );
    }
}
