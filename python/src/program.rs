//! A checked reward program and its evaluation over NumPy columns.
//!
//! `load_source` is `rewardlab check`'s front half (parse, check against the
//! rewards' feature schema, render diagnostics with carets); `Program.evaluate`
//! is `rewardlab eval`'s back half (the fused CPU backend over a feature table).
//! Rows arrive in the caller's order with a group id each; the table wants the
//! rows of a group contiguous, so rows are permuted in only when they are not
//! already, and outputs are permuted back the same way the CLI's CSV path does
//! (groups by first appearance, input order within a group).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::csv_table::grouping_order;
use rewardlab_dsl::diag::{render, render_all};
use rewardlab_dsl::{EvalOptions, FeatureTable, NonFinite, SourceFile};

use crate::errors::reward_error;

/// `reward`, `adv` and `advantage` as NumPy arrays that own the evaluation's vectors.
type OutputArrays<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// A reward file that parsed and checked without errors, compiled for the CPU.
#[pyclass(module = "rewardlab._core", frozen)]
#[derive(Debug)]
pub struct Program {
    compiled: CompiledProgram,
    source: SourceFile,
    /// Each warning rendered on its own (`file:line:col: warning: ...` with carets).
    warnings: Vec<String>,
    /// Every warning rendered together with the count line, as the CLI prints them.
    warnings_text: String,
}

/// Parses and checks `text` (named `name` in diagnostics) against the
/// rewards' feature schema, then applies `params` overrides in order.
#[pyfunction]
#[pyo3(signature = (name, text, params = None))]
pub fn load_source(
    py: Python<'_>,
    name: String,
    text: String,
    params: Option<Vec<(String, f64)>>,
) -> PyResult<Program> {
    let source = SourceFile::new(name, text);
    let result = py.detach(|| {
        let schema = rewardlab_rewards::feature_schema();
        compile_source(&source, &schema, &CheckOptions::default())
    });
    let (program, warnings) = match result {
        Ok(ok) => ok,
        Err(diags) => {
            let err = reward_error(render_all(&source, &diags));
            let rendered: Vec<String> = diags.iter().map(|d| render(&source, d)).collect();
            err.value(py).setattr("diagnostics", rendered)?;
            return Err(err);
        }
    };
    let mut compiled = CompiledProgram::new(&program);
    for (name, value) in params.unwrap_or_default() {
        if !compiled.set_param(&name, value) {
            let known: Vec<&str> = compiled.program().params.iter().map(|p| p.name.as_str()).collect();
            let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            return Err(reward_error(format!(
                "param `{name}`: the reward file declares no such param (it declares: {known})"
            )));
        }
    }
    Ok(Program {
        warnings: warnings.iter().map(|d| render(&source, d)).collect(),
        warnings_text: if warnings.is_empty() { String::new() } else { render_all(&source, &warnings) },
        compiled,
        source,
    })
}

#[pymethods]
impl Program {
    /// The name diagnostics use for the file (its path as given, or `<string>`).
    #[getter]
    fn name(&self) -> &str {
        self.source.name()
    }

    /// The reward file's text.
    #[getter]
    fn text(&self) -> &str {
        self.source.text()
    }

    /// Each warning rendered with its location and carets.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// All warnings rendered together with the closing count line, as `rewardlab check` prints them.
    #[getter]
    fn warnings_text(&self) -> &str {
        &self.warnings_text
    }

    /// The canonical keys of the features the program reads (`Fb(file)`, `c`), in schema order.
    #[getter]
    fn feature_keys(&self) -> Vec<String> {
        self.compiled.program().features.iter().map(|f| f.key.clone()).collect()
    }

    /// The `param`s and their current values, in declaration order.
    #[getter]
    fn params(&self) -> Vec<(String, f64)> {
        self.compiled.program().params.iter().map(|p| (p.name.clone(), p.value)).collect()
    }

    /// Evaluates `reward`, `adv` and `advantage` for every row.
    ///
    /// `features` maps feature keys to 1-D arrays (any numeric or bool array,
    /// or a list); `groups` is either one id per row (str or int) or an int G
    /// for consecutive groups of G rows. Returns three float64 arrays in row order.
    #[pyo3(signature = (features, groups, group_size = None, allow_non_finite = false))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        features: &Bound<'py, PyAny>,
        groups: &Bound<'py, PyAny>,
        group_size: Option<usize>,
        allow_non_finite: bool,
    ) -> PyResult<OutputArrays<'py>> {
        let input = Input::from_py(self, features, groups)?;
        let options =
            EvalOptions { group_size, non_finite: if allow_non_finite { NonFinite::Allow } else { NonFinite::Error } };
        let (grouping, slices) = (&input.grouping, input.slices());
        let outputs = py.detach(|| -> Result<_, String> {
            let table = table(grouping, &slices)?;
            let outputs = self.compiled.eval(&table, &options).map_err(|e| e.to_string())?;
            Ok(match &grouping.order {
                None => (outputs.reward, outputs.adv, outputs.advantage),
                Some(order) => (
                    unpermute(order, outputs.reward),
                    unpermute(order, outputs.adv),
                    unpermute(order, outputs.advantage),
                ),
            })
        });
        let (reward, adv, advantage) = outputs.map_err(reward_error)?;
        Ok((reward.into_pyarray(py), adv.into_pyarray(py), advantage.into_pyarray(py)))
    }

    /// Seconds each of `repeats` evaluations of the kernel alone takes (the
    /// table built once beforehand, no conversions): what `rewardlab eval`
    /// spends evaluating, for comparing the binding's overhead with. With
    /// `with_table`, each repeat also builds the feature table from the
    /// columns (one copy of them), as `rewardlab eval` builds one from its input.
    #[pyo3(signature = (features, groups, repeats = 5, with_table = false))]
    fn kernel_seconds(
        &self,
        py: Python<'_>,
        features: &Bound<'_, PyAny>,
        groups: &Bound<'_, PyAny>,
        repeats: usize,
        with_table: bool,
    ) -> PyResult<Vec<f64>> {
        let input = Input::from_py(self, features, groups)?;
        let options = EvalOptions::default();
        let (grouping, slices) = (&input.grouping, input.slices());
        py.detach(|| -> Result<Vec<f64>, String> {
            let built = if with_table { None } else { Some(table(grouping, &slices)?) };
            let mut seconds = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let start = std::time::Instant::now();
                let fresh = if with_table { Some(table(grouping, &slices)?) } else { None };
                let table = fresh.as_ref().or(built.as_ref()).expect("one of the two is built");
                let outputs = self.compiled.eval(table, &options).map_err(|e| e.to_string())?;
                seconds.push(start.elapsed().as_secs_f64());
                drop(std::hint::black_box((outputs, fresh)));
            }
            Ok(seconds)
        })
        .map_err(reward_error)
    }

    fn __repr__(&self) -> String {
        format!("<rewardlab Program {} reading {}>", self.source.name(), self.feature_keys().join(", "))
    }
}

impl Program {
    /// The compiled program, for the features module.
    pub fn compiled(&self) -> &CompiledProgram {
        &self.compiled
    }
}

/// The columns a program reads, as given, and how their rows fall into groups.
struct Input<'py> {
    columns: Vec<(String, Column<'py>)>,
    grouping: Grouping,
}

impl<'py> Input<'py> {
    fn from_py(program: &Program, features: &Bound<'py, PyAny>, groups: &Bound<'py, PyAny>) -> PyResult<Input<'py>> {
        let py = features.py();
        let mut columns: Vec<(String, Column<'py>)> = Vec::new();
        for f in &program.compiled.program().features {
            if let Some(value) = lookup(features, &f.key)? {
                columns.push((f.key.clone(), Column::from_py(py, &f.key, &value)?));
            }
        }
        let grouping = Grouping::from_py(groups, columns.first().map(|(_, c)| c.len()))?;
        for (key, values) in &columns {
            if values.len() != grouping.rows {
                // The same words as the table's own length check, naming the rows the groups imply.
                return Err(reward_error(format!(
                    "column `{key}` has {} values, the table has {} rows",
                    values.len(),
                    grouping.rows
                )));
            }
        }
        Ok(Input { columns, grouping })
    }

    /// The columns as plain slices, which may cross into code that runs without the GIL.
    fn slices(&self) -> Vec<(&str, &[f64])> {
        self.columns.iter().map(|(k, c)| (k.as_str(), c.as_slice())).collect()
    }
}

/// The feature table, rows permuted into contiguous groups when they are not already.
fn table(grouping: &Grouping, columns: &[(&str, &[f64])]) -> Result<FeatureTable, String> {
    let mut table = match &grouping.groups {
        Groups::Uniform { size } => FeatureTable::uniform(grouping.rows / size, *size),
        Groups::Named { names, sizes } => {
            FeatureTable::new(names.iter().cloned().zip(sizes.iter().copied())).map_err(|e| e.to_string())?
        }
    };
    for (key, values) in columns {
        let values = match &grouping.order {
            None => values.to_vec(),
            Some(order) => order.iter().map(|&i| values[i]).collect(),
        };
        table.add_column(*key, values).map_err(|e| e.to_string())?;
    }
    Ok(table)
}

/// `features[key]`, or `None` when the mapping has no such key.
fn lookup<'py>(features: &Bound<'py, PyAny>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    if let Ok(dict) = features.cast::<PyDict>() {
        return dict.get_item(key);
    }
    match features.get_item(key) {
        Ok(value) => Ok(Some(value)),
        Err(err) if err.is_instance_of::<pyo3::exceptions::PyKeyError>(features.py()) => Ok(None),
        Err(err) => Err(err),
    }
}

/// One feature column: borrowed from a contiguous float64 array, or converted once.
enum Column<'py> {
    Borrowed(PyReadonlyArray1<'py, f64>),
    Owned(Vec<f64>),
}

impl<'py> Column<'py> {
    fn from_py(py: Python<'py>, key: &str, value: &Bound<'py, PyAny>) -> PyResult<Column<'py>> {
        if let Ok(array) = value.extract::<PyReadonlyArray1<'py, f64>>() {
            if array.as_slice().is_ok() {
                return Ok(Column::Borrowed(array));
            }
            return Ok(Column::Owned(array.as_array().to_vec()));
        }
        // Lists, ints, bools and other dtypes go through NumPy's own conversion to float64.
        let numpy = py.import("numpy")?;
        let converted = numpy
            .call_method1("asarray", (value, "float64"))
            .map_err(|e| reward_error(format!("feature `{key}`: expected numbers ({})", e.value(py))))?;
        let array = converted.extract::<PyReadonlyArray1<'py, f64>>().map_err(|_| {
            let ndim = converted.getattr("ndim").and_then(|n| n.extract::<usize>()).unwrap_or(0);
            reward_error(format!("feature `{key}`: expected a 1-D array, got {ndim} dimensions"))
        })?;
        Ok(Column::Owned(array.as_array().to_vec()))
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn as_slice(&self) -> &[f64] {
        match self {
            Column::Borrowed(a) => a.as_slice().unwrap_or(&[]),
            Column::Owned(v) => v,
        }
    }
}

/// How rows fall into groups: names and sizes in table order, and the
/// permutation from table rows to input rows when the input's groups are not contiguous.
#[derive(Debug)]
struct Grouping {
    groups: Groups,
    /// `order[t]` is the input row of table row `t`; `None` when it is the identity.
    order: Option<Vec<usize>>,
    rows: usize,
}

/// The groups in table order.
#[derive(Debug)]
enum Groups {
    /// Consecutive groups of `size` rows, named by their index.
    Uniform { size: usize },
    /// Groups given by id, named and sized in order of first appearance.
    Named { names: Vec<String>, sizes: Vec<usize> },
}

impl Grouping {
    fn from_py(groups: &Bound<'_, PyAny>, rows: Option<usize>) -> PyResult<Grouping> {
        if let Ok(size) = groups.extract::<usize>()
            && !groups.is_instance_of::<pyo3::types::PyBool>()
        {
            return Grouping::uniform(size, rows);
        }
        if let Ok(ids) = groups.extract::<PyReadonlyArray1<'_, i64>>() {
            let ids = ids.as_array();
            let ids: Vec<i64> = ids.iter().copied().collect();
            return Ok(Grouping::of(&ids, |id| id.to_string()));
        }
        if groups.is_instance_of::<PyString>() {
            return Err(reward_error("groups: expected one group id per row or a group size, got a string"));
        }
        let mut ids = Vec::new();
        for item in groups.try_iter()? {
            let item = item?;
            ids.push(match item.cast::<PyString>() {
                Ok(s) => s.to_str()?.to_owned(),
                Err(_) => item.str()?.to_str()?.to_owned(),
            });
        }
        Ok(Grouping::of(&ids, String::clone))
    }

    /// Consecutive groups of `size` rows, named by their index as `FeatureTable::uniform` names them.
    fn uniform(size: usize, rows: Option<usize>) -> PyResult<Grouping> {
        let Some(rows) = rows else {
            return Err(reward_error(
                "groups: a group size needs at least one feature column to count rows; pass one group id per row",
            ));
        };
        if size == 0 || rows % size != 0 {
            return Err(reward_error(format!("groups: {rows} rows do not split into groups of {size}")));
        }
        Ok(Grouping { groups: Groups::Uniform { size }, order: None, rows })
    }

    /// Groups by first appearance, input order within each group.
    fn of<K: Eq + Hash + Clone>(ids: &[K], name: impl Fn(&K) -> String) -> Grouping {
        let mut index: HashMap<K, usize> = HashMap::new();
        let mut names = Vec::new();
        let mut sizes: Vec<usize> = Vec::new();
        // `(group, rows)` per stretch of rows of one group.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut contiguous = true;
        let mut last: Option<(&K, usize)> = None;
        for id in ids {
            let g = match last {
                Some((prev, g)) if prev == id => {
                    runs.last_mut().expect("a run is open").1 += 1;
                    g
                }
                _ => {
                    let g = match index.entry(id.clone()) {
                        Entry::Occupied(e) => {
                            contiguous = false;
                            *e.get()
                        }
                        Entry::Vacant(e) => {
                            names.push(name(id));
                            sizes.push(0);
                            *e.insert(names.len() - 1)
                        }
                    };
                    runs.push((g, 1));
                    g
                }
            };
            sizes[g] += 1;
            last = Some((id, g));
        }
        let order = (!contiguous).then(|| grouping_order(&sizes, &runs));
        Grouping { groups: Groups::Named { names, sizes }, order, rows: ids.len() }
    }
}

/// Values in table order back to input order.
fn unpermute(order: &[usize], values: Vec<f64>) -> Vec<f64> {
    let mut out = vec![0.0; values.len()];
    for (t, &input) in order.iter().enumerate() {
        out[input] = values[t];
    }
    out
}

/// The arrays of a feature mapping, for callers that build one (the features module).
pub fn arrays_dict<'py>(py: Python<'py>, columns: Vec<(String, Vec<f64>)>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, values) in columns {
        dict.set_item(key, values.into_pyarray(py))?;
    }
    Ok(dict)
}
