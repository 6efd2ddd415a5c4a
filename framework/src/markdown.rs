//! Markdown tables, as the study summaries and `rewardlab locate` write them: a header row, a
//! separator row (`|---|---:|`), then one row per record, each cell between `| ` and ` |`.

use std::fmt::Write as _;

/// How a column's cells are aligned: the separator row's `---` (left) or `---:` (right, for
/// numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    /// `---`, markdown's default.
    Left,
    /// `---:`.
    Right,
}

/// A markdown table being written: the header and separator rows, then one row per
/// [`row`](Table::row) call; [`finish`](Table::finish) gives the text.
#[derive(Debug)]
pub(crate) struct Table {
    text: String,
    columns: usize,
}

impl Table {
    /// A table of the `header`'s columns, every one left-aligned (`|---|---|`).
    pub(crate) fn new(header: impl IntoIterator<Item = impl AsRef<str>>) -> Table {
        let mut table = Table { text: String::new(), columns: 0 };
        table.columns = table.push_row(header);
        table.separator(std::iter::repeat_n(Align::Left, table.columns));
        table
    }

    /// A table of the `header`'s columns aligned as `align` says, one entry per column
    /// (`|---|---:|`).
    pub(crate) fn aligned(header: impl IntoIterator<Item = impl AsRef<str>>, align: &[Align]) -> Table {
        let mut table = Table { text: String::new(), columns: align.len() };
        let columns = table.push_row(header);
        debug_assert_eq!(columns, align.len(), "one alignment per column");
        table.separator(align.iter().copied());
        table
    }

    /// Appends a row: `| a | b |`. A cell holding `|` must escape it (`\|`).
    pub(crate) fn row(&mut self, cells: impl IntoIterator<Item = impl AsRef<str>>) {
        let cells = self.push_row(cells);
        debug_assert_eq!(cells, self.columns, "one cell per column");
    }

    /// The table's text, every row ending in a newline.
    pub(crate) fn finish(self) -> String {
        self.text
    }

    /// Appends `| a | b |` and a newline; returns the number of cells.
    fn push_row(&mut self, cells: impl IntoIterator<Item = impl AsRef<str>>) -> usize {
        self.text.push('|');
        let mut count = 0;
        for cell in cells {
            let _ = write!(self.text, " {} |", cell.as_ref());
            count += 1;
        }
        self.text.push('\n');
        count
    }

    /// Appends the separator row: `---|` or `---:|` per column.
    fn separator(&mut self, align: impl Iterator<Item = Align>) {
        self.text.push('|');
        for a in align {
            self.text.push_str(match a {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        self.text.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::Align::{Left, Right};
    use super::*;

    #[test]
    fn a_table_is_its_header_its_separator_and_its_rows() {
        let mut table = Table::new(["variant", "F_β"]);
        table.row(["v3", "0.458 ± 0.029"]);
        table.row([String::from("BM25 top-2"), format!("{:.3}", 0.2418)]);
        assert_eq!(table.finish(), "| variant | F_β |\n|---|---|\n| v3 | 0.458 ± 0.029 |\n| BM25 top-2 | 0.242 |\n");
    }

    #[test]
    fn numeric_columns_are_right_aligned_and_a_table_without_rows_is_its_header() {
        let table = Table::aligned(["scope", "tasks", "P"], &[Left, Right, Right]);
        assert_eq!(table.finish(), "| scope | tasks | P |\n|---|---:|---:|\n");
    }
}
