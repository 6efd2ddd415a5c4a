//! Which input row each table row is, and how rows read in runs of one
//! group each are grouped into a table.

use std::collections::HashMap;

use rayon::prelude::*;

/// The input row of each table row: table row `t` is input row `order[t]`.
///
/// A table groups its rows by first appearance, so when the input's rows are
/// already grouped (what every logger writes) the order is the identity, held
/// as a row count instead of a vector of a million indices.
#[derive(Clone, Debug)]
pub enum RowOrder {
    /// Table row `t` is input row `t`, for this many rows.
    Identity(usize),
    /// Table row `t` is input row `p[t]` (a permutation).
    Permuted(Vec<usize>),
}

impl RowOrder {
    /// The order a permutation gives: [`RowOrder::Identity`] when it is one.
    pub fn new(order: Vec<usize>) -> RowOrder {
        if order.iter().enumerate().all(|(t, &i)| t == i) {
            RowOrder::Identity(order.len())
        } else {
            RowOrder::Permuted(order)
        }
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        match self {
            RowOrder::Identity(n) => *n,
            RowOrder::Permuted(p) => p.len(),
        }
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The input row of table row `t`.
    ///
    /// # Panics
    /// If `t` is not a row.
    pub fn input_row(&self, t: usize) -> usize {
        match self {
            RowOrder::Identity(n) => {
                assert!(t < *n, "row {t} of {n}");
                t
            }
            RowOrder::Permuted(p) => p[t],
        }
    }

    /// The input row of each table row, in table order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).map(|t| self.input_row(t))
    }

    /// The table row of each input row (`table_row[input]`), or `None` when
    /// table and input order agree.
    pub fn table_rows(&self) -> Option<Vec<usize>> {
        let RowOrder::Permuted(order) = self else {
            return None;
        };
        let mut inverse = vec![0; order.len()];
        for (t, &input) in order.iter().enumerate() {
            inverse[input] = t;
        }
        Some(inverse)
    }
}

impl RowOrder {
    /// `column`, given in input order, in table order (moved as it is for the identity).
    pub fn permute(&self, column: Vec<f64>) -> Vec<f64> {
        match self {
            RowOrder::Identity(_) => column,
            RowOrder::Permuted(p) => p.par_iter().map(|&r| column[r]).collect(),
        }
    }
}

/// How a table groups rows that were read in runs, a run being a stretch of
/// consecutive rows of one group (a group may come back in a later run):
/// groups by first appearance, rows in input order within a group.
#[derive(Clone, Debug, PartialEq)]
pub struct RunGrouping {
    /// Each group's first run, as an index into the runs given, in group order.
    pub first_runs: Vec<usize>,
    /// Each group's row count, in group order.
    pub sizes: Vec<usize>,
    /// The input row of each table row.
    pub order: RowOrder,
}

impl RunGrouping {
    /// The grouping of `runs`, `(group name, rows)` in input order.
    pub fn of<'a>(runs: impl IntoIterator<Item = (&'a str, usize)>) -> RunGrouping {
        let mut group_index: HashMap<&str, usize> = HashMap::new();
        let mut first_runs = Vec::new();
        let mut sizes: Vec<usize> = Vec::new();
        let mut run_groups: Vec<(usize, usize)> = Vec::new();
        let mut in_order = true;
        for (r, (name, n)) in runs.into_iter().enumerate() {
            let next = sizes.len();
            let g = *group_index.entry(name).or_insert_with(|| {
                first_runs.push(r);
                sizes.push(0);
                next
            });
            // Rows are already grouped iff every run starts a new group (or
            // continues the previous run's group, across a chunk boundary).
            in_order &= g == next || run_groups.last().is_some_and(|&(last, _)| last == g);
            sizes[g] += n;
            run_groups.push((g, n));
        }
        let order = if in_order {
            RowOrder::Identity(sizes.iter().sum())
        } else {
            RowOrder::Permuted(super::grouping_order(&sizes, &run_groups))
        };
        RunGrouping { first_runs, sizes, order }
    }
}

impl PartialEq for RowOrder {
    /// The same input row for every table row, however each is held.
    fn eq(&self, other: &RowOrder) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<Vec<usize>> for RowOrder {
    fn eq(&self, other: &Vec<usize>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::{RowOrder, RunGrouping};

    #[test]
    fn an_identity_permutation_is_held_as_a_count_and_compares_equal_to_its_vector() {
        let order = RowOrder::new(vec![0, 1, 2]);
        assert!(matches!(order, RowOrder::Identity(3)));
        assert_eq!(order, vec![0, 1, 2]);
        assert_eq!(order, RowOrder::Permuted(vec![0, 1, 2]));
        assert_eq!(order.table_rows(), None);
    }

    #[test]
    fn runs_group_by_first_appearance_and_a_grouped_input_keeps_its_order() {
        // `a` continues across a chunk boundary: still in order.
        let grouped = RunGrouping::of([("a", 2), ("a", 1), ("b", 2)]);
        assert_eq!((grouped.first_runs, grouped.sizes), (vec![0, 2], vec![3, 2]));
        assert!(matches!(grouped.order, RowOrder::Identity(5)));
        // `a` comes back after `b`: its third row moves up.
        let back = RunGrouping::of([("a", 2), ("b", 1), ("a", 1)]);
        assert_eq!((back.first_runs, back.sizes), (vec![0, 1], vec![3, 1]));
        assert_eq!(back.order, vec![0, 1, 3, 2]);
        assert_eq!(back.order.permute(vec![10.0, 11.0, 12.0, 13.0]), [10.0, 11.0, 13.0, 12.0]);
    }

    #[test]
    fn a_permutation_is_kept_and_inverted() {
        let order = RowOrder::new(vec![0, 2, 1, 3]);
        assert_eq!(order.input_row(1), 2);
        assert_eq!(order.iter().collect::<Vec<_>>(), vec![0, 2, 1, 3]);
        assert_eq!(order.table_rows(), Some(vec![0, 2, 1, 3]));
        let order = RowOrder::new(vec![2, 0, 1]);
        assert_eq!(order.table_rows(), Some(vec![1, 2, 0]));
        assert_ne!(order, vec![0, 1, 2]);
    }
}
