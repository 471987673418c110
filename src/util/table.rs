//! Text tables whose columns fit their content. Fixed widths (`{:<16}`) break the moment a
//! runbook or target name is longer than the guess, and a misaligned table at 3 am reads
//! as a different table; here each column is as wide as its widest cell.

/// Rows of cells under a header, rendered with two spaces between columns. The last
/// column is not padded, so lines carry no trailing blanks.
#[derive(Debug, Clone, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with this header row.
    pub fn new<I, S>(header: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Table {
            rows: vec![header.into_iter().map(Into::into).collect()],
        }
    }

    /// Add a row (missing cells are empty, extra cells widen the table).
    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// The table as lines, each ending in a newline.
    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; cols];
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                if i + 1 < cols {
                    line.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_the_widest_cell() {
        let long = "x".repeat(60);
        let mut t = Table::new(["run", "runbook", "status"]);
        t.row(["r1", long.as_str(), "succeeded"]);
        t.row(["r2", "short", "failed"]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        let col = |l: &str, word: &str| l.find(word).unwrap();
        assert_eq!(col(lines[0], "status"), col(lines[1], "succeeded"));
        assert_eq!(col(lines[0], "status"), col(lines[2], "failed"));
        assert_eq!(col(lines[0], "status"), 3 + 2 + 60 + 2);
        assert!(lines.iter().all(|l| !l.ends_with(' ')));
    }

    #[test]
    fn counts_characters_not_bytes() {
        let mut t = Table::new(["a", "b"]);
        t.row(["é", "x"]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "a  b");
        assert_eq!(lines[1], "é  x");
    }
}
