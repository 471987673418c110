//! The scrape expression language: how a runbook's `SignalSpec.scrape` says what to read
//! from the `/metrics` pages the scrape source fetched. It is a small PromQL look-alike,
//! so a signal can carry the same idea for both sources, but every expression evaluates to
//! ONE number (or a reason there is none): signals are scalars.
//!
//! Grammar (whitespace is free between tokens):
//!
//! ```text
//! expr      := sum_expr ( "or" sum_expr )*          -- a or b: b only where a has no series
//! sum_expr  := term ( ("+" | "-") term )*
//! term      := unary ( ("*" | "/") unary )*
//! unary     := "-" unary | primary
//! primary   := NUMBER | "(" expr ")" | call | selector
//! call      := ("rate" | "increase") "(" selector "[" DURATION "]" ")"
//!            | ("sum" | "max" | "min" | "avg" | "count") "(" expr ")"
//!            | "histogram_quantile" "(" NUMBER "," expr ")"
//!            | "alive" "(" selector ")"
//! selector  := METRIC [ "{" [ matcher ("," matcher)* [","] ] "}" ] [ "@" ROLE ]
//! matcher   := LABEL ("=" | "!=" | "=~" | "!~") STRING   -- "double quoted", \" \\ \n
//!                                                     -- =~ !~: literals . * + ? | only
//! DURATION  := a human duration: 10s, 500ms, 1m
//! ```
//!
//! Semantics:
//! - A selector picks the series with that metric name and labels from the latest scrape
//!   of every target, or only of targets whose role is ROLE (`@gate`, `@service`,
//!   `@clients`, as given by `--metrics-url ROLE=URL` or the platform).
//! - `alive(sel)` reads only the targets that are up (a down target is left out instead of
//!   making the result missing), so `count(up@service) - sum(up@service) +
//!   (sum(1 - alive(ready@service)) or 0)` counts replicas down or not ready.
//! - `up` is synthesised per target, as Prometheus does: 1 if its last scrape worked, 0 if not.
//! - `rate(m[w])`: per-second increase of counter `m` over the scrapes of the last `w`,
//!   counter resets handled; `increase` is the same without dividing by time.
//! - `sum`, `max`, `min`, `avg`, `count` reduce the series to one number. Anywhere else
//!   (arithmetic, or the final result) the series are summed, so `sum(x)` and `x` agree.
//!   One exception, as in PromQL: a number literal combined with series applies to each
//!   series, so `sum(1 - recover_demo_service_ready)` counts replicas not ready.
//! - `histogram_quantile(q, rate(m_bucket[w]))` sums buckets by `le` across series and
//!   targets, then interpolates linearly inside the bucket, as Prometheus does.
//! - `a or b` falls back to `b` only when the targets answered and `a`'s series do not
//!   exist (prometheus-client creates a labelled series on first use, so
//!   `rate(errors_total[10s]) or 0` reads "no errors yet" as 0); a target that is down or
//!   too little history stays missing.
//! - No value is ever made up: no matching series, a NaN, a target that is down, too little
//!   history for a rate, or a division by zero all give "missing" with the reason.

use std::time::Duration;

/// A label matcher's operator. `=~` and `!~` take the pattern subset of [`super::pattern`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Eq,
    Ne,
    Re,
    NotRe,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Matcher {
    pub label: String,
    pub op: MatchOp,
    pub value: String,
    /// Compiled `value` for `=~` and `!~`.
    pub pattern: Option<super::pattern::Pattern>,
}

impl Matcher {
    /// Does a label value (empty when the label is absent) satisfy this matcher?
    pub fn accepts(&self, v: &str) -> bool {
        match (self.op, &self.pattern) {
            (MatchOp::Eq, _) => v == self.value,
            (MatchOp::Ne, _) => v != self.value,
            (MatchOp::Re, Some(p)) => p.matches(v),
            (MatchOp::NotRe, Some(p)) => !p.matches(v),
            (_, None) => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub metric: String,
    pub matchers: Vec<Matcher>,
    pub role: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    Sum,
    Max,
    Min,
    Avg,
    Count,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Number(f64),
    Select(Selector),
    /// `alive(sel)`: the selector over the targets that are up only.
    Alive(Selector),
    Rate {
        sel: Selector,
        window: Duration,
        per_second: bool,
    },
    Agg(Agg, Box<Expr>),
    Quantile(f64, Box<Expr>),
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// The longest rate window used, so the history keeps enough scrapes.
    pub fn max_window(&self) -> Duration {
        match self {
            Expr::Number(_) | Expr::Select(_) | Expr::Alive(_) => Duration::ZERO,
            Expr::Rate { window, .. } => *window,
            Expr::Agg(_, e) | Expr::Quantile(_, e) | Expr::Neg(e) => e.max_window(),
            Expr::Bin(_, a, b) | Expr::Or(a, b) => a.max_window().max(b.max_window()),
        }
    }
}

impl Expr {
    /// Every metric name the expression's selectors read: a page's other series can be
    /// dropped when it is read.
    pub fn metric_names(&self, out: &mut std::collections::HashSet<String>) {
        match self {
            Expr::Number(_) => {}
            Expr::Select(sel) | Expr::Alive(sel) | Expr::Rate { sel, .. } => {
                out.insert(sel.metric.clone());
            }
            Expr::Agg(_, e) | Expr::Quantile(_, e) | Expr::Neg(e) => e.metric_names(out),
            Expr::Bin(_, a, b) | Expr::Or(a, b) => {
                a.metric_names(out);
                b.metric_names(out);
            }
        }
    }
}

/// Why an expression does not parse; `at` is a character offset.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("at character {at}: {message}")]
pub struct ExprError {
    pub at: usize,
    pub message: String,
}

/// Parse an expression (see the module doc for the grammar).
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    let mut p = Parser {
        src,
        pos: 0,
        depth: 0,
    };
    let e = p.expr()?;
    p.skip_ws();
    if p.pos < src.len() {
        return Err(p.err(format!("unexpected {:?}", p.rest_short())));
    }
    Ok(e)
}

/// Nesting (parentheses, unary minus, function calls) deeper than any real signal needs.
/// The parser recurses once per level: without a limit, a runbook with a few thousand
/// `(` overflows the stack and aborts the process instead of being refused.
pub const MAX_DEPTH: usize = 100;

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    /// Levels of [`Parser::unary`] entered and not left: every nesting passes there.
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, message: impl Into<String>) -> ExprError {
        ExprError {
            at: self.src[..self.pos].chars().count(),
            message: message.into(),
        }
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn rest_short(&self) -> String {
        self.rest().chars().take(20).collect()
    }

    fn skip_ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    /// Consume `tok` (after whitespace) if it is next.
    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &str) -> Result<(), ExprError> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(self.err(format!("expected {tok:?}, found {:?}", self.rest_short())))
        }
    }

    fn peek_ident(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let r = self.rest();
        let end = r
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    || (i == 0 && c.is_ascii_digit())
            })
            .map(|(i, _)| i)
            .unwrap_or(r.len());
        (end > 0).then(|| &r[..end])
    }

    fn ident(&mut self, what: &str) -> Result<&'a str, ExprError> {
        match self.peek_ident() {
            Some(id) => {
                self.pos += id.len();
                Ok(id)
            }
            None => Err(self.err(format!("expected {what}, found {:?}", self.rest_short()))),
        }
    }

    fn expr(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.sum_expr()?;
        while self.peek_ident() == Some("or") {
            self.pos += 2;
            let right = self.sum_expr()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn sum_expr(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.term()?;
        loop {
            let op = if self.eat("+") {
                BinOp::Add
            } else if self.eat("-") {
                BinOp::Sub
            } else {
                return Ok(left);
            };
            let right = self.term()?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
    }

    fn term(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.unary()?;
        loop {
            let op = if self.eat("*") {
                BinOp::Mul
            } else if self.eat("/") {
                BinOp::Div
            } else {
                return Ok(left);
            };
            let right = self.unary()?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.err(format!("nested more than {MAX_DEPTH} levels deep")));
        }
        self.depth += 1;
        let e = if self.eat("-") {
            self.unary().map(|e| Expr::Neg(Box::new(e)))
        } else {
            self.primary()
        };
        self.depth -= 1;
        e
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        self.skip_ws();
        if self.eat("(") {
            let e = self.expr()?;
            self.expect(")")?;
            return Ok(e);
        }
        if self
            .rest()
            .starts_with(|c: char| c.is_ascii_digit() || c == '.')
        {
            return Ok(Expr::Number(self.number()?));
        }
        let start = self.pos;
        let name = self.ident("a metric name, function or number")?;
        self.skip_ws();
        if !self.rest().starts_with('(') {
            self.pos = start;
            return Ok(Expr::Select(self.selector()?));
        }
        self.expect("(")?;
        let e = match name {
            "rate" | "increase" => {
                let sel = self.selector()?;
                self.expect("[")?;
                let close = self
                    .rest()
                    .find(']')
                    .ok_or_else(|| self.err("expected ']' after the range"))?;
                let text = &self.rest()[..close];
                let window = crate::util::duration::parse(text).map_err(|m| self.err(m))?;
                if window.is_zero() {
                    return Err(self.err("the range must be longer than zero"));
                }
                self.pos += close + 1;
                Expr::Rate {
                    sel,
                    window,
                    per_second: name == "rate",
                }
            }
            "sum" | "max" | "min" | "avg" | "count" => {
                let agg = match name {
                    "sum" => Agg::Sum,
                    "max" => Agg::Max,
                    "min" => Agg::Min,
                    "avg" => Agg::Avg,
                    _ => Agg::Count,
                };
                Expr::Agg(agg, Box::new(self.expr()?))
            }
            "alive" => Expr::Alive(self.selector()?),
            "histogram_quantile" => {
                self.skip_ws();
                let q = self.number()?;
                if !(0.0..=1.0).contains(&q) {
                    return Err(self.err(format!("quantile {q} is not between 0 and 1")));
                }
                self.expect(",")?;
                Expr::Quantile(q, Box::new(self.expr()?))
            }
            other => {
                self.pos = start;
                return Err(self.err(format!(
                    "unknown function {other:?} (known: rate, increase, sum, max, min, avg, count, histogram_quantile, alive)"
                )));
            }
        };
        self.expect(")")?;
        Ok(e)
    }

    fn number(&mut self) -> Result<f64, ExprError> {
        self.skip_ws();
        let r = self.rest();
        let mut end = 0;
        let bytes = r.as_bytes();
        while end < bytes.len() {
            let c = bytes[end] as char;
            let exp_sign =
                (c == '+' || c == '-') && end > 0 && matches!(bytes[end - 1], b'e' | b'E');
            if c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || exp_sign {
                end += 1;
            } else {
                break;
            }
        }
        let text = &r[..end];
        let v = text
            .parse::<f64>()
            .map_err(|_| self.err(format!("bad number {text:?}")))?;
        self.pos += end;
        Ok(v)
    }

    fn selector(&mut self) -> Result<Selector, ExprError> {
        let metric = self.ident("a metric name")?.to_string();
        let mut matchers = Vec::new();
        if self.eat("{") {
            while !self.eat("}") {
                let label = self.ident("a label name")?.to_string();
                let op = if self.eat("!=") {
                    MatchOp::Ne
                } else if self.eat("=~") {
                    MatchOp::Re
                } else if self.eat("!~") {
                    MatchOp::NotRe
                } else if self.eat("=") {
                    MatchOp::Eq
                } else {
                    return Err(self.err(format!("label {label}: expected = or !=")));
                };
                self.expect("\"")?;
                let (value, rest) = super::text::unescape_quoted(self.rest())
                    .ok_or_else(|| self.err(format!("label {label}: unterminated string")))?;
                let pattern = match op {
                    MatchOp::Re | MatchOp::NotRe => Some(
                        super::pattern::Pattern::parse(&value)
                            .map_err(|m| self.err(format!("label {label}: {m}")))?,
                    ),
                    _ => None,
                };
                self.pos = self.src.len() - rest.len();
                matchers.push(Matcher {
                    label,
                    op,
                    value,
                    pattern,
                });
                if !self.eat(",") {
                    self.expect("}")?;
                    break;
                }
            }
        }
        let role = if self.eat("@") {
            Some(self.ident("a role after '@'")?.to_string())
        } else {
            None
        };
        Ok(Selector {
            metric,
            matchers,
            role,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let e =
            parse(r#"rate(recover_gate_requests_total{outcome="admitted"}@gate[10s])"#).unwrap();
        match e {
            Expr::Rate {
                sel,
                window,
                per_second,
            } => {
                assert_eq!(sel.metric, "recover_gate_requests_total");
                assert_eq!(sel.role.as_deref(), Some("gate"));
                assert_eq!(sel.matchers[0].value, "admitted");
                assert_eq!(window, Duration::from_secs(10));
                assert!(per_second);
            }
            other => panic!("{other:?}"),
        }
        let e = parse("histogram_quantile(0.99, rate(x_bucket[5s])) * 1000 - 2 / (a + b) or 0")
            .unwrap();
        assert!(matches!(e, Expr::Or(..)));
        assert_eq!(e.max_window(), Duration::from_secs(5));
        assert!(parse("sum(x{a!=\"b\",}) / count(up@service)").is_ok());
        assert!(parse("-x").is_ok());
    }

    #[test]
    fn errors_say_where() {
        assert!(parse("rate(x[10])").unwrap_err().message.contains("unit"));
        assert!(parse("rate(x)").is_err());
        assert!(parse("foo(x)")
            .unwrap_err()
            .message
            .contains("unknown function"));
        assert!(parse("x{a=~\"(b)\"}").is_err());
        assert!(parse("x{a=~\"rejected_.*\",b!~\"x|y\"}").is_ok());
        assert!(parse("x y").unwrap_err().at >= 1);
        assert!(parse("histogram_quantile(2, x)").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn nesting_past_the_limit_is_refused_not_a_stack_overflow() {
        let deep = format!("{}1{}", "(".repeat(50_000), ")".repeat(50_000));
        let e = parse(&deep).unwrap_err();
        assert!(
            e.message.contains("nested more than 100 levels deep"),
            "{e}"
        );
        assert!(parse(&format!("{}1", "-".repeat(99))).is_ok());
        assert!(parse(&format!("{}1", "-".repeat(100))).is_err());
    }
}
