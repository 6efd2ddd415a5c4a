//! Which input row each table row is.

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
    use super::RowOrder;

    #[test]
    fn an_identity_permutation_is_held_as_a_count_and_compares_equal_to_its_vector() {
        let order = RowOrder::new(vec![0, 1, 2]);
        assert!(matches!(order, RowOrder::Identity(3)));
        assert_eq!(order, vec![0, 1, 2]);
        assert_eq!(order, RowOrder::Permuted(vec![0, 1, 2]));
        assert_eq!(order.table_rows(), None);
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
