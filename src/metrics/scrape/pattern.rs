//! The regular-expression subset label matchers (`=~`, `!~`) accept, so runbooks can write
//! `outcome=~"rejected_.*"` as they would in PromQL, without a regex dependency.
//!
//! Supported: literal characters, `.` (any character), `\` escapes, the postfix
//! quantifiers `*`, `+` and `?`, and top-level alternation `a|b`. Like PromQL, a pattern
//! must match the whole label value. Groups, classes, anchors and counted repetition are
//! refused with a clear error rather than misread.

#[derive(Debug, Clone, PartialEq)]
enum Atom {
    Any,
    Char(char),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Rep {
    One,
    Star,
    Plus,
    Opt,
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    alternatives: Vec<Vec<(Atom, Rep)>>,
}

impl Pattern {
    pub fn parse(src: &str) -> Result<Pattern, String> {
        let mut alternatives = vec![Vec::new()];
        let mut chars = src.chars().peekable();
        while let Some(c) = chars.next() {
            let atom = match c {
                '|' => {
                    alternatives.push(Vec::new());
                    continue;
                }
                '.' => Atom::Any,
                '\\' => Atom::Char(chars.next().ok_or("pattern ends with a lone backslash")?),
                '(' | ')' | '[' | ']' | '{' | '}' | '^' | '$' => {
                    return Err(format!(
                        "{c:?} is not supported in label patterns (only literals, '.', '*', '+', '?', '|')"
                    ))
                }
                '*' | '+' | '?' => return Err(format!("{c:?} must follow a character or '.'")),
                c => Atom::Char(c),
            };
            let rep = match chars.peek() {
                Some('*') => Rep::Star,
                Some('+') => Rep::Plus,
                Some('?') => Rep::Opt,
                _ => Rep::One,
            };
            if rep != Rep::One {
                chars.next();
            }
            if let Some(alt) = alternatives.last_mut() {
                alt.push((atom, rep));
            }
        }
        Ok(Pattern { alternatives })
    }

    /// Does the whole of `s` match? A simulation of every position of the pattern at
    /// once (Thompson's construction): time is the value's length times the pattern's,
    /// whatever the value. Label values come from the targets and may be megabytes;
    /// backtracking was polynomial in them with the number of `*` (`.*a.*b` against a
    /// long run of `a` took the square of its length).
    pub fn matches(&self, s: &str) -> bool {
        self.alternatives.iter().any(|alt| simulate(alt, s))
    }
}

fn atom_matches(a: &Atom, c: char) -> bool {
    match a {
        Atom::Any => true,
        Atom::Char(x) => *x == c,
    }
}

/// Add position `i` and every position reachable from it without a character (past
/// `*` and `?` items, which may match nothing).
fn enter(pat: &[(Atom, Rep)], mut i: usize, set: &mut [bool]) {
    loop {
        if set[i] {
            return;
        }
        set[i] = true;
        match pat.get(i) {
            Some((_, Rep::Star | Rep::Opt)) => i += 1,
            _ => return,
        }
    }
}

fn simulate(pat: &[(Atom, Rep)], text: &str) -> bool {
    let mut now = vec![false; pat.len() + 1];
    let mut next = vec![false; pat.len() + 1];
    enter(pat, 0, &mut now);
    for c in text.chars() {
        next.iter_mut().for_each(|b| *b = false);
        let mut any = false;
        for (i, (atom, rep)) in pat.iter().enumerate() {
            if !now[i] || !atom_matches(atom, c) {
                continue;
            }
            any = true;
            match rep {
                // After one, `+` is `*`: stay, or move on.
                Rep::Star | Rep::Plus => {
                    next[i] = true;
                    enter(pat, i + 1, &mut next);
                }
                Rep::One | Rep::Opt => enter(pat, i + 1, &mut next),
            }
        }
        if !any {
            return false;
        }
        std::mem::swap(&mut now, &mut next);
    }
    now[pat.len()]
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    #[test]
    fn whole_value_matching() {
        let p = Pattern::parse("rejected_.*").unwrap();
        assert!(p.matches("rejected_rate"));
        assert!(p.matches("rejected_"));
        assert!(!p.matches("admitted"));
        assert!(!p.matches("xrejected_rate"));
        let p = Pattern::parse("2xx|5x+|4\\.?x").unwrap();
        assert!(p.matches("2xx") && p.matches("5xxx") && p.matches("4.x") && p.matches("4x"));
        assert!(!p.matches("3xx") && !p.matches("5"));
        assert!(Pattern::parse("(a|b)").is_err());
        assert!(Pattern::parse("[ab]").is_err());
        assert!(Pattern::parse("*a").is_err());
        let p = Pattern::parse("a+b?c*|x").unwrap();
        assert!(p.matches("a") && p.matches("aabccc") && p.matches("x") && !p.matches(""));
        assert!(!p.matches("b") && !p.matches("abb"));
    }

    /// Backtracking took the square of the value's length here (and a higher power with
    /// more stars): a 16 MiB label value would have held the detector for days.
    #[test]
    fn a_long_value_costs_its_length_times_the_pattern() {
        let p = Pattern::parse(".*a.*a.*b").unwrap();
        let long = "a".repeat(1 << 20);
        assert!(!p.matches(&long));
        assert!(p.matches(&format!("{long}b")));
    }
}
