//! Feature tables: the columnar input of evaluation, and its outputs.
//!
//! Rows are rollouts; rollouts of one group (one prompt) are contiguous.
//! Columns are `f64`, keyed by the canonical feature key (`grade(word)`, `cost`).

use std::borrow::Cow;

/// Columnar rollout features, grouped.
#[derive(Clone, Debug, Default)]
pub struct FeatureTable {
    /// Group `g` is rows `group_offsets[g]..group_offsets[g + 1]`.
    group_offsets: Vec<usize>,
    /// The size of every group when all have one size (`None` without groups): an evaluation
    /// that wants one size checks it without reading the offsets.
    group_size: Option<usize>,
    group_names: GroupNames,
    columns: Vec<(String, Vec<f64>)>,
}

/// The groups' names: given one by one, or each group's index (uniform
/// tables, whose million-row evaluations should not allocate a string per group).
#[derive(Clone, Debug, Default)]
enum GroupNames {
    #[default]
    Indices,
    Given(Vec<String>),
}

impl PartialEq for FeatureTable {
    /// Equal groups (sizes and names, however the names are held) and equal columns.
    fn eq(&self, other: &FeatureTable) -> bool {
        self.group_offsets == other.group_offsets
            && self.columns == other.columns
            && (0..self.groups()).all(|g| self.group_name(g) == other.group_name(g))
    }
}

/// Why a table could not be built.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum TableError {
    #[error("column `{key}` has {got} values, the table has {want} rows")]
    /// A column's length differs from the table's row count.
    Length {
        /// The column's key.
        key: String,
        /// Values in the column.
        got: usize,
        /// Rows in the table.
        want: usize,
    },
    #[error("column `{key}` is given twice")]
    /// The same column key is supplied twice.
    Duplicate {
        /// The repeated key.
        key: String,
    },
    #[error("group sizes must be at least 1 (group `{group}` is empty)")]
    /// A group has no rows.
    EmptyGroup {
        /// The empty group's name.
        group: String,
    },
}

impl FeatureTable {
    /// A table with the given groups (name, number of rollouts) and no columns yet.
    pub fn new(groups: impl IntoIterator<Item = (String, usize)>) -> Result<FeatureTable, TableError> {
        let mut group_offsets = vec![0];
        let mut group_names = Vec::new();
        let (mut first, mut one_size) = (None, true);
        for (name, size) in groups {
            if size == 0 {
                return Err(TableError::EmptyGroup { group: name });
            }
            group_offsets.push(group_offsets.last().copied().unwrap_or(0) + size);
            group_names.push(name);
            one_size &= *first.get_or_insert(size) == size;
        }
        let group_size = first.filter(|_| one_size);
        Ok(FeatureTable { group_offsets, group_size, group_names: GroupNames::Given(group_names), columns: Vec::new() })
    }

    /// `n_groups` groups of `size` rollouts each, named by their index.
    ///
    /// # Panics
    /// If `size` is 0 while `n_groups` is not.
    pub fn uniform(n_groups: usize, size: usize) -> FeatureTable {
        assert!(size > 0 || n_groups == 0, "uniform groups are non-empty");
        let group_offsets = (0..=n_groups).map(|g| g * size).collect();
        let group_size = (n_groups > 0).then_some(size);
        FeatureTable { group_offsets, group_size, group_names: GroupNames::Indices, columns: Vec::new() }
    }

    /// Adds a feature column; it must have one value per row and a new key.
    pub fn add_column(&mut self, key: impl Into<String>, values: Vec<f64>) -> Result<(), TableError> {
        let key = key.into();
        if values.len() != self.rows() {
            return Err(TableError::Length { key, got: values.len(), want: self.rows() });
        }
        if self.column(&key).is_some() {
            return Err(TableError::Duplicate { key });
        }
        self.columns.push((key, values));
        Ok(())
    }

    /// How many rollouts the table holds.
    pub fn rows(&self) -> usize {
        *self.group_offsets.last().unwrap_or(&0)
    }

    /// How many groups the rollouts fall into.
    pub fn groups(&self) -> usize {
        self.group_offsets.len().saturating_sub(1)
    }

    /// The number of rows every group has, when all groups have the same number (`None` for a
    /// table without groups or with groups of several sizes).
    pub fn group_size(&self) -> Option<usize> {
        self.group_size
    }

    /// The first row of each group, then the row count.
    pub fn group_offsets(&self) -> &[usize] {
        &self.group_offsets
    }

    /// The name of group `g` (its prompt id).
    ///
    /// # Panics
    /// If `g` is not a group of the table.
    pub fn group_name(&self, g: usize) -> Cow<'_, str> {
        match &self.group_names {
            GroupNames::Given(names) => Cow::Borrowed(&names[g]),
            GroupNames::Indices => {
                assert!(g < self.groups(), "group {g} of {}", self.groups());
                Cow::Owned(g.to_string())
            }
        }
    }

    /// The rows of group `g`.
    pub fn group_rows(&self, g: usize) -> std::ops::Range<usize> {
        self.group_offsets[g]..self.group_offsets[g + 1]
    }

    /// The group a row belongs to (binary search).
    pub fn group_of(&self, row: usize) -> usize {
        self.group_offsets.partition_point(|&o| o <= row) - 1
    }

    /// A lookup of the group of each row asked in turn: constant time while
    /// the rows asked stay in one group or step to the next (rows in table
    /// order, as when a table is written out), a binary search otherwise.
    pub fn group_finder(&self) -> impl FnMut(usize) -> usize + '_ {
        let offsets = &self.group_offsets;
        let mut g = 0;
        move |row| {
            let within = |g: usize| g + 1 < offsets.len() && offsets[g] <= row && row < offsets[g + 1];
            if !within(g) {
                g = if within(g + 1) { g + 1 } else { self.group_of(row) };
            }
            g
        }
    }

    /// The column of a canonical feature key, if present.
    pub fn column(&self, key: &str) -> Option<&[f64]> {
        self.columns.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_slice())
    }

    /// Every column key, in the order added.
    pub fn column_keys(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(k, _)| k.as_str())
    }
}

/// What evaluation produces, one value per row of the input table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outputs {
    /// `reward` per rollout.
    pub reward: Vec<f64>,
    /// `adv` per rollout.
    pub adv: Vec<f64>,
    /// `advantage` per rollout, what the policy update reads.
    pub advantage: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::FeatureTable;

    #[test]
    fn the_group_finder_agrees_with_the_binary_search_in_any_order_of_rows() {
        let table = FeatureTable::new([("a", 3), ("b", 1), ("c", 2), ("d", 4)].map(|(n, s)| (n.to_string(), s)))
            .expect("a table");
        let want: Vec<usize> = (0..table.rows()).map(|r| table.group_of(r)).collect();
        assert_eq!(want, [0, 0, 0, 1, 2, 2, 3, 3, 3, 3]);
        let mut find = table.group_finder();
        assert_eq!((0..table.rows()).map(&mut find).collect::<Vec<_>>(), want);
        for row in [9, 0, 5, 3, 4, 1, 8, 2, 7, 6] {
            assert_eq!(find(row), want[row], "row {row}");
        }
    }

    #[test]
    fn a_table_knows_when_its_groups_have_one_size() {
        let named = |sizes: &[usize]| {
            FeatureTable::new(sizes.iter().enumerate().map(|(g, &n)| (format!("g{g}"), n))).expect("a table")
        };
        assert_eq!(named(&[4, 4, 4]).group_size(), Some(4));
        assert_eq!(named(&[4, 4, 3, 5]).group_size(), None);
        assert_eq!(named(&[1]).group_size(), Some(1));
        assert_eq!(named(&[]).group_size(), None);
        assert_eq!(FeatureTable::uniform(3, 8).group_size(), Some(8));
        assert_eq!(FeatureTable::uniform(0, 8).group_size(), None);
        assert_eq!(FeatureTable::default().group_size(), None);
    }
}
