//! The in-memory model of a Python-like module and its rendering to text.
//!
//! The generator edits modules structurally (add a method, insert a guard)
//! and renders them at every commit; rendering records the 1-based line span
//! of every function, so line-range targets are exact by construction rather
//! than recovered by re-parsing the text.

use std::fmt::Write as _;

/// A module of the synthetic project (one `.py` file that holds code).
#[derive(Clone, Debug)]
pub(crate) struct Module {
    /// Path in the repository (`relaykit/http/retry.py`).
    pub path: String,
    /// Dotted import path (`relaykit.http.retry`).
    pub dotted: String,
    /// Index of the domain in [`super::vocab::DOMAINS`].
    pub domain: usize,
    pub kind: ModuleKind,
    /// Docstring (one paragraph).
    pub doc: String,
    /// Import lines, rendered verbatim after `import logging`.
    pub imports: Vec<String>,
    /// `NAME = literal` constants.
    pub constants: Vec<(String, String)>,
    pub classes: Vec<Class>,
    /// Module-level functions.
    pub functions: Vec<Function>,
    /// Commit index that added the module.
    pub added_at: usize,
}

/// What a module is for; decides its template and its role in tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModuleKind {
    /// Package `__init__.py`: re-exports only.
    Init,
    /// Exception classes of a package.
    Errors,
    /// Config keys and their defaults.
    Settings,
    /// Abstract base classes that components subclass.
    Base,
    /// Ordinary module: classes and helper functions.
    Component,
    /// The package's public entry point that calls into its components.
    Facade,
}

/// A class and its methods.
#[derive(Clone, Debug)]
pub(crate) struct Class {
    pub name: String,
    /// Base class expression (`BaseStore`, `Exception`), if any.
    pub base: Option<String>,
    /// Module index and class name of a base defined in the project.
    pub project_base: Option<(usize, String)>,
    pub doc: String,
    /// Class attributes (`name = value` lines).
    pub attributes: Vec<String>,
    pub methods: Vec<Function>,
}

/// A function or method.
#[derive(Clone, Debug)]
pub(crate) struct Function {
    pub name: String,
    /// Parameters after `self` (methods) or all parameters (functions).
    pub params: Vec<String>,
    pub doc: Vec<String>,
    /// Body lines, indented relative to the body (multiples of four spaces).
    pub body: Vec<String>,
    /// Errors raised with a literal message, in body order.
    pub raises: Vec<Raise>,
    /// Project functions this one calls.
    pub calls: Vec<Callee>,
    /// A log message literal, when the body logs one.
    pub log_message: Option<String>,
}

/// A `raise` with a literal message.
#[derive(Clone, Debug)]
pub(crate) struct Raise {
    /// Exception class name (`ValueError`, `CacheError`).
    pub exception: String,
    /// The constant part of the message as it appears in the source
    /// (`invalid retry budget`); unique in the repository.
    pub literal: String,
    /// The message as a user would see it (`invalid retry budget: -1`).
    pub example: String,
}

/// A call edge to a project function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Callee {
    /// Index of the module that defines the callee.
    pub module: usize,
    /// `Class.method` or `function`.
    pub qualname: String,
}

/// The span of a rendered function, 1-based and inclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FunctionSpan {
    /// `Class.method` or `function`.
    pub qualname: String,
    pub start: usize,
    pub end: usize,
}

/// A rendered module: its text and the spans of its functions.
#[derive(Clone, Debug)]
pub(crate) struct Rendered {
    pub text: String,
    pub spans: Vec<FunctionSpan>,
}

impl Module {
    /// Every function of the module with its qualified name.
    pub(crate) fn qualified_functions(&self) -> impl Iterator<Item = (String, &Function)> {
        let methods =
            self.classes.iter().flat_map(|c| c.methods.iter().map(move |m| (format!("{}.{}", c.name, m.name), m)));
        methods.chain(self.functions.iter().map(|f| (f.name.clone(), f)))
    }

    /// Looks a function up by qualified name.
    pub(crate) fn function(&self, qualname: &str) -> Option<&Function> {
        self.qualified_functions().find(|(q, _)| q == qualname).map(|(_, f)| f)
    }

    /// Renders the module to Python source.
    pub(crate) fn render(&self) -> Rendered {
        let mut out = Lines::default();
        out.push(format!("\"\"\"{}\"\"\"", self.doc));
        if self.kind != ModuleKind::Init {
            out.blank();
            out.push("import logging".to_string());
        }
        if !self.imports.is_empty() {
            out.blank();
            for import in &self.imports {
                out.push(import.clone());
            }
        }
        if self.kind != ModuleKind::Init {
            out.blank();
            out.push("logger = logging.getLogger(__name__)".to_string());
        }
        if !self.constants.is_empty() {
            out.blank();
            for (name, value) in &self.constants {
                out.push(format!("{name} = {value}"));
            }
        }
        let mut spans = Vec::new();
        for class in &self.classes {
            out.blank();
            out.blank();
            match &class.base {
                Some(base) => out.push(format!("class {}({}):", class.name, base)),
                None => out.push(format!("class {}:", class.name)),
            }
            out.push(format!("    \"\"\"{}\"\"\"", class.doc));
            if !class.attributes.is_empty() {
                out.blank();
                for attribute in &class.attributes {
                    out.push(format!("    {attribute}"));
                }
            }
            for method in &class.methods {
                out.blank();
                let qualname = format!("{}.{}", class.name, method.name);
                spans.push(render_function(&mut out, method, "    ", true, qualname));
            }
            if class.methods.is_empty() && class.attributes.is_empty() {
                // A docstring alone is a valid body, but exception classes in
                // real code often say so explicitly.
                out.blank();
                out.push("    pass".to_string());
            }
        }
        for function in &self.functions {
            out.blank();
            out.blank();
            spans.push(render_function(&mut out, function, "", false, function.name.clone()));
        }
        Rendered { text: out.finish(), spans }
    }
}

/// Renders one function at `indent` and returns its span.
fn render_function(
    out: &mut Lines,
    function: &Function,
    indent: &str,
    is_method: bool,
    qualname: String,
) -> FunctionSpan {
    let start = out.next_line();
    let mut params: Vec<&str> = Vec::new();
    if is_method {
        params.push("self");
    }
    params.extend(function.params.iter().map(String::as_str));
    out.push(format!("{indent}def {}({}):", function.name, params.join(", ")));
    let inner = format!("{indent}    ");
    match function.doc.as_slice() {
        [] => {}
        [one] => out.push(format!("{inner}\"\"\"{one}\"\"\"")),
        [first, rest @ ..] => {
            out.push(format!("{inner}\"\"\"{first}"));
            for line in rest {
                if line.is_empty() {
                    out.blank();
                } else {
                    out.push(format!("{inner}{line}"));
                }
            }
            out.push(format!("{inner}\"\"\""));
        }
    }
    for line in &function.body {
        out.push(format!("{inner}{line}"));
    }
    if function.body.is_empty() {
        out.push(format!("{inner}pass"));
    }
    FunctionSpan { qualname, start, end: out.next_line() - 1 }
}

/// A line buffer that knows the 1-based number of the next line.
#[derive(Default)]
struct Lines {
    text: String,
    count: usize,
}

impl Lines {
    /// Appends a line; a multi-line string (a dict literal) counts as the
    /// lines it holds.
    fn push(&mut self, line: String) {
        let _ = writeln!(self.text, "{line}");
        self.count += 1 + line.matches('\n').count();
    }

    fn blank(&mut self) {
        self.text.push('\n');
        self.count += 1;
    }

    fn next_line(&self) -> usize {
        self.count + 1
    }

    fn finish(self) -> String {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, body: &[&str]) -> Function {
        Function {
            name: name.to_string(),
            params: vec!["value".to_string()],
            doc: vec!["Does a thing.".to_string()],
            body: body.iter().map(|s| s.to_string()).collect(),
            raises: Vec::new(),
            calls: Vec::new(),
            log_message: None,
        }
    }

    #[test]
    fn spans_cover_def_through_last_body_line() {
        let module = Module {
            path: "pkg/mod.py".into(),
            dotted: "pkg.mod".into(),
            domain: 0,
            kind: ModuleKind::Component,
            doc: "A module.".into(),
            imports: vec!["import os".into()],
            constants: vec![("LIMIT".into(), "3".into())],
            classes: vec![Class {
                name: "Thing".into(),
                base: None,
                project_base: None,
                doc: "A thing.".into(),
                attributes: vec![],
                methods: vec![function("run", &["return value"])],
            }],
            functions: vec![function("helper", &["if value:", "    return 1", "return 0"])],
            added_at: 0,
        };
        let rendered = module.render();
        let lines: Vec<&str> = rendered.text.lines().collect();
        for span in &rendered.spans {
            assert!(lines[span.start - 1].trim_start().starts_with("def "), "{span:?}");
            assert!(!lines[span.end - 1].trim().is_empty());
            if let Some(next) = lines.get(span.end) {
                assert!(next.trim().is_empty(), "line after {span:?} should be blank");
            }
        }
        assert_eq!(rendered.spans[0].qualname, "Thing.run");
        assert_eq!(lines[rendered.spans[1].end - 1], "    return 0");
    }
}
