//! What the receiver writes to its log for a decision. Two things an alert sender must not
//! get: its text written raw (a newline in a fingerprint forges a log line, an escape
//! sequence reaches the operator's terminal), and a line per alert (a flood of 698,000
//! alerts was 129 MB of log that buried the lines that mattered). Alert text is escaped
//! by [`clean`]; decisions that every alert of a flood repeats are written once per
//! [`REPEAT_PERIOD`] for each (decision, target), the rest at debug level and counted in
//! the next line written. Exact counts are in `recover_serve_decisions_total`. Pure: the
//! instant is an argument.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// How long like decisions on a target stay at debug level after one was written.
pub const REPEAT_PERIOD: Duration = Duration::from_secs(10);

/// `s` with control characters (newlines, escape sequences), Unicode line separators and
/// bidirectional overrides written as `\u{..}` (and `\` as `\\`), so it stays on its line
/// and shows as the sender wrote it.
pub fn clean(s: &str) -> Cow<'_, str> {
    let needs = |c: char| {
        c == '\\'
            || c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(needs) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// How loud a decision is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
}

/// The level of a decision's line: an open breaker is an error, other refusals warnings.
pub fn level(decision: &str) -> Level {
    match decision {
        "refused_breaker" => Level::Error,
        d if d.starts_with("refused_") => Level::Warn,
        _ => Level::Info,
    }
}

/// Decisions taken once per alert, which a flood repeats: the others (a detection
/// started, a run launched, a verdict) happen at most once per detection.
pub fn per_alert(decision: &str) -> bool {
    matches!(
        decision,
        "joined_run" | "joined_check" | "ignored_resolved" | "no_route"
    ) || decision.starts_with("refused_")
}

/// Whether to write a decision's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// Write it; `quiet_before` like decisions were left at debug level since the last.
    Line { quiet_before: u64 },
    /// Debug level only: one like it was written less than [`REPEAT_PERIOD`] ago.
    Quiet,
}

/// Like decisions left quiet on a target in a period that has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub decision: String,
    pub target: String,
    pub quiet: u64,
}

#[derive(Debug, Clone)]
struct Seen {
    written_at: Instant,
    quiet: u64,
}

/// Per (decision, target): when a line was last written and how many were quiet since.
/// Keys are decision kinds times route targets, so it stays small.
#[derive(Debug, Default)]
pub struct Repeats {
    seen: HashMap<(String, String), Seen>,
}

impl Repeats {
    /// Write this decision's line now, or leave it at debug level.
    pub fn admit(&mut self, decision: &str, target: &str, now: Instant) -> Emit {
        let key = (decision.to_string(), target.to_string());
        match self.seen.get_mut(&key) {
            Some(s) if now.saturating_duration_since(s.written_at) < REPEAT_PERIOD => {
                s.quiet += 1;
                Emit::Quiet
            }
            Some(s) => {
                let quiet_before = s.quiet;
                *s = Seen {
                    written_at: now,
                    quiet: 0,
                };
                Emit::Line { quiet_before }
            }
            None => {
                let seen = Seen {
                    written_at: now,
                    quiet: 0,
                };
                self.seen.insert(key, seen);
                Emit::Line { quiet_before: 0 }
            }
        }
    }

    /// The counts of periods that have ended with decisions left quiet, so a flood's
    /// last period is told too (with the next decision of any kind); those are forgotten.
    pub fn overdue(&mut self, now: Instant) -> Vec<Summary> {
        let mut out = Vec::new();
        self.seen.retain(|(decision, target), s| {
            if now.saturating_duration_since(s.written_at) < REPEAT_PERIOD {
                return true;
            }
            if s.quiet > 0 {
                out.push(Summary {
                    decision: decision.clone(),
                    target: target.clone(),
                    quiet: s.quiet,
                });
            }
            false
        });
        out.sort_by(|a, b| (&a.decision, &a.target).cmp(&(&b.decision, &b.target)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alert_text_stays_on_its_line() {
        assert_eq!(clean("plain text"), "plain text");
        assert_eq!(
            clean("a\nINFO forged\r\x1b[31mred\u{202e}"),
            "a\\nINFO forged\\r\\u{1b}[31mred\\u{202e}"
        );
        assert_eq!(clean("C:\\n"), "C:\\\\n", "a typed backslash-n stays apart");
    }

    #[test]
    fn a_flood_writes_one_line_a_period_with_the_count() {
        let mut r = Repeats::default();
        let t0 = Instant::now();
        assert_eq!(
            r.admit("joined_check", "t", t0),
            Emit::Line { quiet_before: 0 }
        );
        for i in 1..1000u64 {
            let at = t0 + Duration::from_millis(i);
            assert_eq!(r.admit("joined_check", "t", at), Emit::Quiet);
        }
        assert_eq!(
            r.admit("joined_check", "u", t0),
            Emit::Line { quiet_before: 0 }
        );
        let later = t0 + REPEAT_PERIOD;
        assert_eq!(
            r.admit("joined_check", "t", later),
            Emit::Line { quiet_before: 999 }
        );
        r.admit("joined_check", "t", later);
        let end = later + REPEAT_PERIOD;
        assert_eq!(
            r.overdue(end),
            vec![Summary {
                decision: "joined_check".into(),
                target: "t".into(),
                quiet: 1
            }]
        );
        assert!(r.overdue(end).is_empty());
        assert_eq!(
            r.admit("joined_check", "t", end),
            Emit::Line { quiet_before: 0 }
        );
    }

    #[test]
    fn refusals_are_loud_and_per_alert() {
        assert_eq!(level("refused_breaker"), Level::Error);
        assert_eq!(level("refused_budget"), Level::Warn);
        assert_eq!(level("checking"), Level::Info);
        assert!(per_alert("refused_cooldown") && per_alert("joined_run"));
        assert!(!per_alert("checking") && !per_alert("launched"));
    }
}
