//! `--compare`, for every scenario alike: each alternative runs with the same seeds (20 by
//! default), and every figure is reported as its median and its range over them, so that a
//! conclusion read off the table is one that holds across seeds or visibly does not,
//! rather than one seed's luck.

use super::kernel::record::Spread;
use super::model::{Alternative, Figure, Model, Unit};
use super::text;
use serde::ser::SerializeMap;
use serde::Serialize;
use std::fmt::Write;

/// The seeds a comparison runs: `first`, `first + 1`, ... (`count` of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Seeds {
    pub first: u64,
    pub count: u32,
}

impl Seeds {
    /// How many seeds `--compare` runs unless told otherwise.
    pub const DEFAULT_COUNT: u32 = 20;

    pub fn iter(&self) -> impl Iterator<Item = u64> {
        let first = self.first;
        (0..u64::from(self.count.max(1))).map(move |i| first.wrapping_add(i))
    }
}

/// One figure of one alternative over the seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub key: &'static str,
    pub header: String,
    pub unit: Unit,
    /// What a missing value reads.
    pub none: &'static str,
    /// Per seed, in seed order.
    pub values: Vec<Option<f64>>,
}

impl Measured {
    pub fn spread(&self) -> Spread {
        Spread::of(&self.values)
    }

    /// For a flag: the seeds in which it is set.
    pub fn set_in(&self) -> usize {
        self.values.iter().filter(|v| **v == Some(1.0)).count()
    }
}

/// One row: an alternative and its figures over the seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub variant: String,
    pub change: String,
    pub figures: Vec<Measured>,
}

/// A whole `--compare`.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub scenario: String,
    pub heading: String,
    pub seeds: Seeds,
    pub rows: Vec<Row>,
}

/// Run every alternative of `M` for every seed.
pub fn compare<M: Model>(scenario: &str, p: &M, seeds: Seeds) -> Comparison {
    let rows = p
        .alternatives()
        .into_iter()
        .map(
            |Alternative {
                 label,
                 change,
                 params,
             }| {
                let mut figures: Vec<Measured> = Vec::new();
                for seed in seeds.iter() {
                    for (i, f) in p.figures(&params, seed).into_iter().enumerate() {
                        match figures.get_mut(i) {
                            Some(m) => m.values.push(f.value),
                            None => figures.push(measured(f)),
                        }
                    }
                }
                Row {
                    variant: label,
                    change,
                    figures,
                }
            },
        )
        .collect();
    Comparison {
        scenario: scenario.to_string(),
        heading: p.compare_heading(),
        seeds,
        rows,
    }
}

fn measured(f: Figure) -> Measured {
    Measured {
        key: f.key,
        header: f.header,
        unit: f.unit,
        none: f.none,
        values: vec![f.value],
    }
}

/// One value in a figure's unit; `none` is what a missing one reads.
pub fn format_value(unit: Unit, v: Option<f64>, none: &str) -> String {
    let Some(x) = v else {
        return none.to_string();
    };
    match unit {
        Unit::Count => format!("{x:.0}"),
        Unit::Percent => text::pct(x),
        Unit::Seconds => format!("{x:.1} s"),
        Unit::Ticks => format!("{x:.0} ticks"),
        Unit::Millis => text::fmt_ms(x),
        Unit::Ratio => format!("{x:.2}"),
        Unit::Flag(yes, no) => (if x >= 0.5 { yes } else { no }).to_string(),
    }
}

/// A table cell: the median, and the range when the seeds disagree.
fn cell(m: &Measured) -> String {
    let s = m.spread();
    if m.values.iter().all(Option::is_none) {
        return m.none.to_string();
    }
    if let Unit::Flag(yes, no) = m.unit {
        let n = m.values.len();
        return match m.set_in() {
            k if k == n => yes.to_string(),
            0 => no.to_string(),
            k => format!("{yes} {k}/{n}"),
        };
    }
    let f = |v| format_value(m.unit, v, m.none);
    if s.is_constant() {
        f(s.median)
    } else {
        format!("{} ({}-{})", f(s.median), f(s.min), f(s.max))
    }
}

impl Comparison {
    /// The table: each cell the median over the seeds, with the range when they disagree.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}", self.heading);
        let (first, n) = (self.seeds.first, self.seeds.count.max(1));
        let _ = writeln!(
            o,
            "seeds {first}-{}: each cell is the median, with the range (lowest-highest) where the seeds disagree",
            first + u64::from(n) - 1
        );
        let Some(head) = self.rows.first() else {
            return o;
        };
        let mut headers = vec![String::new()];
        headers.extend(head.figures.iter().map(|f| f.header.clone()));
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut v = vec![r.variant.clone()];
                v.extend(r.figures.iter().map(cell));
                v
            })
            .collect();
        let hs: Vec<&str> = headers.iter().map(String::as_str).collect();
        o.push_str(&text::table(&hs, &rows));
        o
    }
}

fn json_value(unit: Unit, v: Option<f64>) -> serde_json::Value {
    match (unit, v) {
        (_, None) => serde_json::Value::Null,
        (Unit::Flag(..), Some(x)) => serde_json::Value::Bool(x >= 0.5),
        (Unit::Count, Some(x)) if x.fract() == 0.0 && x.abs() < 9e15 => (x as i64).into(),
        (_, Some(x)) => serde_json::json!(x),
    }
}

/// A row as JSON: `variant`, `change`, `seeds`, every figure's median under its key, and
/// `min` and `max` holding the range.
impl Serialize for Row {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let by = |pick: fn(&Spread) -> Option<f64>| -> serde_json::Map<String, serde_json::Value> {
            self.figures
                .iter()
                .map(|f| (f.key.to_string(), json_value(f.unit, pick(&f.spread()))))
                .collect()
        };
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("variant", &self.variant)?;
        m.serialize_entry("change", &self.change)?;
        m.serialize_entry("seeds", &self.figures.first().map_or(0, |f| f.values.len()))?;
        for (k, v) in by(|s| s.median) {
            m.serialize_entry(&k, &v)?;
        }
        m.serialize_entry("min", &by(|s| s.min))?;
        m.serialize_entry("max", &by(|s| s.max))?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(unit: Unit, values: &[Option<f64>]) -> Row {
        Row {
            variant: "v".into(),
            change: "k=1".into(),
            figures: vec![Measured {
                key: "x",
                header: "x".into(),
                unit,
                none: "never",
                values: values.to_vec(),
            }],
        }
    }

    #[test]
    fn cells_show_the_median_and_the_range_only_when_seeds_disagree() {
        let r = row(Unit::Seconds, &[Some(2.0), Some(4.0), None]);
        assert_eq!(cell(&r.figures[0]), "4.0 s (2.0 s-never)");
        let r = row(Unit::Count, &[Some(3.0), Some(3.0)]);
        assert_eq!(cell(&r.figures[0]), "3");
        let r = row(
            Unit::Flag("recovers", "stuck"),
            &[Some(1.0), Some(0.0), Some(1.0)],
        );
        assert_eq!(cell(&r.figures[0]), "recovers 2/3");
    }

    #[test]
    fn json_rows_carry_the_median_under_the_key_and_the_range_beside_it() {
        let r = row(
            Unit::Flag("recovers", "stuck"),
            &[Some(0.0), Some(0.0), Some(1.0)],
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["variant"], "v");
        assert_eq!(v["x"], false);
        assert_eq!(v["max"]["x"], true);
        assert_eq!(v["seeds"], 3);
    }
}
