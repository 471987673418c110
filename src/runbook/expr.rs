//! The small expression language runbooks use for check conditions
//! (`goodput >= 0.8 * gate_admitted_rate and queue_depth < 100`) and for computed
//! quantities (`plan.admit_rate * 0.5`). It exists so conditions are data the validator can
//! inspect (which signals they read) and the engine can evaluate as a pure function, with
//! missing data reported as such instead of being read as zero.

use serde::{Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;

/// A parsed expression, kept with its source text for messages and the journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub source: String,
    node: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Num(f64),
    Var(String),
    Neg(Box<Node>),
    Not(Box<Node>),
    Bin(BinOp, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

/// What an expression yields: a number or a truth value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Number,
    Bool,
}

/// The result of evaluating an expression against observed values.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Bool(bool),
    /// A variable had no value; the names are listed. Never treated as zero or false.
    Missing(Vec<String>),
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Expr {
    /// Parse `source`; the error says what was expected and where (character offset).
    pub fn parse(source: &str) -> Result<Expr, String> {
        let tokens = lex(source)?;
        let mut p = Parser {
            tokens,
            pos: 0,
            depth: 0,
        };
        let node = p.or()?;
        if let Some(t) = p.tokens.get(p.pos) {
            return Err(format!("unexpected {} in {source:?}", t.describe()));
        }
        let e = Expr {
            source: source.to_string(),
            node,
        };
        e.type_of()?;
        Ok(e)
    }

    /// A constant number as an expression (for quantities written as plain YAML numbers).
    pub fn number(v: f64) -> Expr {
        Expr {
            source: format_num(v),
            node: Node::Num(v),
        }
    }

    /// Every variable the expression reads (`goodput`, `plan.admit_rate`).
    pub fn variables(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        collect_vars(&self.node, &mut out);
        out
    }

    pub fn type_of(&self) -> Result<Type, String> {
        type_of(&self.node)
    }

    /// Evaluate with `lookup` giving each variable's value (None = no data).
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<f64>) -> Value {
        let missing: Vec<String> = self
            .variables()
            .into_iter()
            .filter(|v| lookup(v).is_none())
            .collect();
        if !missing.is_empty() {
            return Value::Missing(missing);
        }
        eval(&self.node, lookup)
    }
}

fn format_num(v: f64) -> String {
    format!("{v}")
}

fn collect_vars(n: &Node, out: &mut BTreeSet<String>) {
    match n {
        Node::Num(_) => {}
        Node::Var(v) => {
            out.insert(v.clone());
        }
        Node::Neg(a) | Node::Not(a) => collect_vars(a, out),
        Node::Bin(_, a, b) => {
            collect_vars(a, out);
            collect_vars(b, out);
        }
    }
}

fn type_of(n: &Node) -> Result<Type, String> {
    use BinOp::*;
    match n {
        Node::Num(_) | Node::Var(_) => Ok(Type::Number),
        Node::Neg(a) => expect(a, Type::Number, "`-`").map(|_| Type::Number),
        Node::Not(a) => expect(a, Type::Bool, "`not`").map(|_| Type::Bool),
        Node::Bin(op, a, b) => {
            let (operand, result) = match op {
                Add | Sub | Mul | Div => (Type::Number, Type::Number),
                Lt | Le | Gt | Ge | Eq | Ne => (Type::Number, Type::Bool),
                And | Or => (Type::Bool, Type::Bool),
            };
            let what = format!("`{}`", op_str(*op));
            expect(a, operand, &what)?;
            expect(b, operand, &what)?;
            Ok(result)
        }
    }
}

fn expect(n: &Node, want: Type, what: &str) -> Result<(), String> {
    let got = type_of(n)?;
    if got == want {
        Ok(())
    } else {
        let name = |t| match t {
            Type::Number => "a number",
            Type::Bool => "a condition",
        };
        Err(format!("{what} needs {} but got {}", name(want), name(got)))
    }
}

fn op_str(op: BinOp) -> &'static str {
    use BinOp::*;
    match op {
        Add => "+",
        Sub => "-",
        Mul => "*",
        Div => "/",
        Lt => "<",
        Le => "<=",
        Gt => ">",
        Ge => ">=",
        Eq => "==",
        Ne => "!=",
        And => "and",
        Or => "or",
    }
}

fn eval(n: &Node, lookup: &dyn Fn(&str) -> Option<f64>) -> Value {
    use BinOp::*;
    let num = |n: &Node| match eval(n, lookup) {
        Value::Number(v) => v,
        _ => f64::NAN,
    };
    let truth = |n: &Node| matches!(eval(n, lookup), Value::Bool(true));
    match n {
        Node::Num(v) => Value::Number(*v),
        Node::Var(v) => Value::Number(lookup(v).unwrap_or(f64::NAN)),
        Node::Neg(a) => Value::Number(-num(a)),
        Node::Not(a) => Value::Bool(!truth(a)),
        Node::Bin(op, a, b) => match op {
            Add => Value::Number(num(a) + num(b)),
            Sub => Value::Number(num(a) - num(b)),
            Mul => Value::Number(num(a) * num(b)),
            Div => Value::Number(num(a) / num(b)),
            Lt => Value::Bool(num(a) < num(b)),
            Le => Value::Bool(num(a) <= num(b)),
            Gt => Value::Bool(num(a) > num(b)),
            Ge => Value::Bool(num(a) >= num(b)),
            Eq => Value::Bool(num(a) == num(b)),
            Ne => Value::Bool(num(a) != num(b)),
            And => Value::Bool(truth(a) && truth(b)),
            Or => Value::Bool(truth(a) || truth(b)),
        },
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Num(v) => format!("number {v}"),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Op(o) => format!("`{o}`"),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
        }
    }
}

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == 'e')
            {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let v = text
                .parse::<f64>()
                .map_err(|_| format!("bad number {text:?} in {src:?}"))?;
            out.push(Tok::Num(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match word.as_str() {
                "and" => out.push(Tok::Op("and")),
                "or" => out.push(Tok::Op("or")),
                "not" => out.push(Tok::Op("not")),
                _ => out.push(Tok::Ident(word)),
            }
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let op = match two.as_str() {
                "<=" => Some("<="),
                ">=" => Some(">="),
                "==" => Some("=="),
                "!=" => Some("!="),
                "&&" => Some("and"),
                "||" => Some("or"),
                _ => None,
            };
            if let Some(op) = op {
                out.push(Tok::Op(op));
                i += 2;
                continue;
            }
            let tok = match c {
                '<' => Tok::Op("<"),
                '>' => Tok::Op(">"),
                '+' => Tok::Op("+"),
                '-' => Tok::Op("-"),
                '*' => Tok::Op("*"),
                '/' => Tok::Op("/"),
                '!' => Tok::Op("not"),
                '(' => Tok::LParen,
                ')' => Tok::RParen,
                _ => return Err(format!("unexpected character {c:?} in {src:?}")),
            };
            out.push(tok);
            i += 1;
        }
    }
    if out.is_empty() {
        return Err("empty expression".into());
    }
    Ok(out)
}

/// Nesting (parentheses, `not`, unary minus) deeper than any real condition needs. The
/// parser recurses once per level: without a limit, a runbook with a few thousand `(`
/// overflows the stack and aborts the process instead of being refused.
pub const MAX_DEPTH: usize = 100;

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
    /// Levels of [`Parser::not`] and [`Parser::unary`] entered and not left.
    depth: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn binary(
        &mut self,
        ops: &[(&str, BinOp)],
        next: fn(&mut Parser) -> Result<Node, String>,
        chain: bool,
    ) -> Result<Node, String> {
        let mut left = next(self)?;
        while let Some(o) = self.peek_op() {
            let Some((_, op)) = ops.iter().find(|(s, _)| *s == o) else {
                break;
            };
            self.pos += 1;
            let right = next(self)?;
            left = Node::Bin(*op, Box::new(left), Box::new(right));
            if !chain {
                break;
            }
        }
        Ok(left)
    }

    fn or(&mut self) -> Result<Node, String> {
        self.binary(&[("or", BinOp::Or)], Parser::and, true)
    }

    fn and(&mut self) -> Result<Node, String> {
        self.binary(&[("and", BinOp::And)], Parser::not, true)
    }

    /// Run one nesting level of the parse, refusing past [`MAX_DEPTH`].
    fn nested(&mut self, level: fn(&mut Parser) -> Result<Node, String>) -> Result<Node, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} levels deep"));
        }
        self.depth += 1;
        let node = level(self);
        self.depth -= 1;
        node
    }

    fn not(&mut self) -> Result<Node, String> {
        self.nested(|p| {
            if p.peek_op() == Some("not") {
                p.pos += 1;
                return Ok(Node::Not(Box::new(p.not()?)));
            }
            p.cmp()
        })
    }

    fn cmp(&mut self) -> Result<Node, String> {
        use BinOp::*;
        let ops = [
            ("<", Lt),
            ("<=", Le),
            (">", Gt),
            (">=", Ge),
            ("==", Eq),
            ("!=", Ne),
        ];
        self.binary(&ops, Parser::sum, false)
    }

    fn sum(&mut self) -> Result<Node, String> {
        self.binary(&[("+", BinOp::Add), ("-", BinOp::Sub)], Parser::prod, true)
    }

    fn prod(&mut self) -> Result<Node, String> {
        self.binary(&[("*", BinOp::Mul), ("/", BinOp::Div)], Parser::unary, true)
    }

    fn unary(&mut self) -> Result<Node, String> {
        self.nested(|p| {
            if p.peek_op() == Some("-") {
                p.pos += 1;
                return Ok(Node::Neg(Box::new(p.unary()?)));
            }
            p.primary()
        })
    }

    fn primary(&mut self) -> Result<Node, String> {
        let tok = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        match tok {
            Some(Tok::Num(v)) => Ok(Node::Num(v)),
            Some(Tok::Ident(s)) => Ok(Node::Var(s)),
            Some(Tok::LParen) => {
                let inner = self.or()?;
                match self.tokens.get(self.pos) {
                    Some(Tok::RParen) => {
                        self.pos += 1;
                        Ok(inner)
                    }
                    _ => Err("missing `)`".into()),
                }
            }
            Some(t) => Err(format!(
                "expected a number or a name, found {}",
                t.describe()
            )),
            None => Err("expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(name: &str) -> Option<f64> {
        match name {
            "goodput" => Some(90.0),
            "gate_admitted_rate" => Some(100.0),
            "queue_depth" => Some(5.0),
            _ => None,
        }
    }

    #[test]
    fn evaluates_conditions_with_precedence() {
        let e = Expr::parse("goodput >= 0.8 * gate_admitted_rate and queue_depth < 10").unwrap();
        assert_eq!(e.type_of().unwrap(), Type::Bool);
        assert_eq!(e.eval(&vals), Value::Bool(true));
        let e = Expr::parse("not (goodput > 95) or queue_depth > 100").unwrap();
        assert_eq!(e.eval(&vals), Value::Bool(true));
        let e = Expr::parse("-queue_depth + 10 / 2").unwrap();
        assert_eq!(e.eval(&vals), Value::Number(0.0));
    }

    #[test]
    fn missing_data_is_reported_not_zero() {
        let e = Expr::parse("latency_p99 < 1 or goodput > 0").unwrap();
        assert_eq!(e.eval(&vals), Value::Missing(vec!["latency_p99".into()]));
    }

    #[test]
    fn rejects_type_errors_and_garbage() {
        assert!(Expr::parse("goodput and 3")
            .unwrap_err()
            .contains("needs a condition"));
        assert!(Expr::parse("goodput >")
            .unwrap_err()
            .contains("ends too early"));
        assert!(Expr::parse("goodput ? 2")
            .unwrap_err()
            .contains("unexpected character"));
        assert!(Expr::parse("(goodput > 1")
            .unwrap_err()
            .contains("missing `)`"));
        assert!(Expr::parse("a > 1 2")
            .unwrap_err()
            .contains("unexpected number"));
    }

    #[test]
    fn nesting_past_the_limit_is_refused_not_a_stack_overflow() {
        let deep = format!("{}x > 1", "not ".repeat(50_000));
        let e = Expr::parse(&deep).unwrap_err();
        assert!(e.contains("nested more than 100 levels deep"), "{e}");
        assert!(Expr::parse(&format!("{}x > 1", "not ".repeat(90))).is_ok());
    }
}
