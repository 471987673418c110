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

    /// Does the whole of `s` match?
    pub fn matches(&self, s: &str) -> bool {
        let text: Vec<char> = s.chars().collect();
        self.alternatives.iter().any(|alt| match_here(alt, &text))
    }
}

fn atom_matches(a: &Atom, c: char) -> bool {
    match a {
        Atom::Any => true,
        Atom::Char(x) => *x == c,
    }
}

fn match_here(pat: &[(Atom, Rep)], text: &[char]) -> bool {
    let Some(((atom, rep), rest)) = pat.split_first() else {
        return text.is_empty();
    };
    let first = !text.is_empty() && atom_matches(atom, text[0]);
    match rep {
        Rep::One => first && match_here(rest, &text[1..]),
        Rep::Opt => (first && match_here(rest, &text[1..])) || match_here(rest, text),
        Rep::Star | Rep::Plus => {
            let min = usize::from(*rep == Rep::Plus);
            let run = text.iter().take_while(|c| atom_matches(atom, **c)).count();
            (min..=run).rev().any(|n| match_here(rest, &text[n..]))
        }
    }
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
    }
}
