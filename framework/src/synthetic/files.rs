//! Renders a [`Project`] to the files of one commit: code modules, derived
//! `__init__.py` files, tests, docs, README, packaging metadata.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::code::{FunctionSpan, ModuleKind};
use super::project::{Project, TestModule};
use super::templates;
use super::vocab::DOMAINS;

/// All files of one commit, with the function spans of code modules.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileSet {
    pub files: BTreeMap<String, String>,
    pub spans: BTreeMap<String, Vec<FunctionSpan>>,
}

/// Renders every file of `project`.
pub(crate) fn render(project: &Project) -> FileSet {
    let mut set = FileSet::default();
    for module in &project.modules {
        let rendered = module.render();
        set.files.insert(module.path.clone(), rendered.text);
        set.spans.insert(module.path.clone(), rendered.spans);
    }
    render_inits(project, &mut set);
    for test in &project.tests {
        set.files.insert(test.path.clone(), render_test(project, test));
    }
    set.files.insert("tests/conftest.py".to_string(), conftest(project));
    for (index, package) in project.packages.iter().enumerate() {
        let name = format!("docs/{}.md", DOMAINS[package.domain].package);
        set.files.insert(name, package_doc(project, index));
    }
    set.files.insert("docs/configuration.md".to_string(), configuration_doc(project));
    set.files.insert("docs/index.md".to_string(), index_doc(project));
    set.files.insert("README.md".to_string(), readme(project));
    set.files.insert("CHANGELOG.md".to_string(), changelog(project));
    set.files.insert("setup.py".to_string(), setup_py(project));
    set.files.insert("pyproject.toml".to_string(), pyproject(project));
    set.files.insert(
        ".gitignore".to_string(),
        "__pycache__/\n*.pyc\n.pytest_cache/\nbuild/\ndist/\n*.egg-info/\n".to_string(),
    );
    set
}

fn render_inits(project: &Project, set: &mut FileSet) {
    let mut root_imports = Vec::new();
    for (index, package) in project.packages.iter().enumerate() {
        let domain = &DOMAINS[package.domain];
        let members: Vec<usize> = project
            .members(index, false)
            .into_iter()
            .filter(|&m| {
                matches!(project.modules[m].kind, ModuleKind::Component | ModuleKind::Facade | ModuleKind::Errors)
            })
            .collect();
        let init = templates::init_module(
            &project.modules,
            format!("{}/__init__.py", package.dir),
            package.dir.replace('/', "."),
            format!("The {}.", domain.title),
            &members,
            None,
            0,
        );
        set.files.insert(init.path.clone(), init.render().text);
        if let Some(subdir) = &package.subdir {
            let members = project.members(index, true);
            let init = templates::init_module(
                &project.modules,
                format!("{subdir}/__init__.py"),
                subdir.replace('/', "."),
                format!("Pluggable parts of the {}.", domain.title),
                &members,
                None,
                0,
            );
            set.files.insert(init.path.clone(), init.render().text);
        }
        if let Some(facade) = package.facade {
            let module = &project.modules[facade];
            if let Some(class) = module.classes.first() {
                root_imports.push(format!("from .{}.client import {}", domain.package, class.name));
            }
        }
    }
    let mut text = format!("\"\"\"{}: building blocks for networked services.\"\"\"\n\n", project.name);
    for line in &root_imports {
        let _ = writeln!(text, "{line}");
    }
    let _ = write!(text, "\n__version__ = \"{}\"\n", project.version);
    set.files.insert(format!("{}/__init__.py", project.name), text);
}

fn render_test(project: &Project, test: &TestModule) -> String {
    let module = &project.modules[test.module];
    let package = &project.packages[module.domain];
    let mut names: Vec<String> = Vec::new();
    let mut error_names: Vec<String> = Vec::new();
    let mut body = String::new();
    for (qualname, asserts_raise) in &test.cases {
        let Some(function) = module.function(qualname) else { continue };
        let (owner, call) = match qualname.split_once('.') {
            Some((class, method)) => {
                if !names.contains(&class.to_string()) {
                    names.push(class.to_string());
                }
                (Some(class), method)
            }
            None => {
                if !names.contains(qualname) {
                    names.push(qualname.clone());
                }
                (None, qualname.as_str())
            }
        };
        let receiver = owner.map(|class| (templates::snake(class), class));
        let target = match &receiver {
            Some((var, _)) => format!("{var}.{call}"),
            None => call.to_string(),
        };
        let setup = receiver.as_ref().map(|(var, class)| format!("    {var} = {class}()\n")).unwrap_or_default();
        let raise = function.raises.first().filter(|_| *asserts_raise);
        match raise {
            Some(raise) => {
                let _ = write!(
                    body,
                    "\n\ndef test_{call}_rejects_bad_input():\n{setup}    with pytest.raises({}, match=\"{}\"):\n        {target}(None)\n",
                    raise.exception, raise.literal
                );
                let builtin =
                    raise.exception.ends_with("Error") && package.errors.iter().all(|e| e != &raise.exception);
                if !builtin && !error_names.contains(&raise.exception) {
                    error_names.push(raise.exception.clone());
                }
            }
            None => {
                let _ = write!(
                    body,
                    "\n\ndef test_{call}_is_stable():\n{setup}    first = {target}(\"sample\")\n    assert first == {target}(\"sample\")\n"
                );
            }
        }
    }
    let mut text = format!("\"\"\"Tests for {}.\"\"\"\n\nimport pytest\n\n", module.dotted);
    if !names.is_empty() {
        let _ = writeln!(text, "from {} import {}", module.dotted, names.join(", "));
    }
    if let (false, Some(dotted)) = (error_names.is_empty(), &package.errors_dotted) {
        let _ = writeln!(text, "from {dotted} import {}", error_names.join(", "));
    }
    text.push_str(&body);
    text
}

fn conftest(project: &Project) -> String {
    format!(
        "\"\"\"Shared fixtures.\"\"\"\n\nimport pytest\n\n\n@pytest.fixture\ndef {name}_settings():\n    \"\"\"Return an empty override mapping.\"\"\"\n    return {{}}\n",
        name = project.name
    )
}

fn package_doc(project: &Project, index: usize) -> String {
    let package = &project.packages[index];
    let domain = &DOMAINS[package.domain];
    let mut text = format!("# {}\n\n", capitalised(domain.title));
    let mut classes = Vec::new();
    for member in project.members(index, false).into_iter().chain(project.members(index, true)) {
        let module = &project.modules[member];
        if module.kind == ModuleKind::Component || module.kind == ModuleKind::Facade {
            for class in &module.classes {
                classes.push((class.name.clone(), class.doc.clone()));
            }
        }
    }
    let _ = writeln!(
        text,
        "The `{}` package provides the {}. Most applications only need the client; \
         the other classes are public for advanced use.\n",
        package.dir.replace('/', "."),
        domain.title
    );
    if let Some(facade) = package.facade.map(|f| &project.modules[f])
        && let Some(class) = facade.classes.first()
    {
        let _ = writeln!(text, "## Usage\n\n```python\nfrom {} import {}\n", package.dir.replace('/', "."), class.name);
        let var = templates::snake(&class.name);
        let _ = writeln!(text, "{var} = {}()", class.name);
        for method in class.methods.iter().filter(|m| !m.name.starts_with('_')).take(2) {
            let _ = writeln!(text, "{var}.{}(...)", method.name);
        }
        text.push_str("```\n\n");
    }
    text.push_str("## Classes\n\n");
    for (name, doc) in classes {
        let _ = writeln!(text, "- `{name}`: {doc}");
    }
    text.push_str("\n## Configuration\n\n");
    for key in &package.config_keys {
        let _ = writeln!(text, "- `{key}`");
    }
    text
}

fn configuration_doc(project: &Project) -> String {
    let mut text =
        String::from("# Configuration\n\nEvery setting can be overridden per client with an `overrides` mapping.\n\n");
    for package in &project.packages {
        let domain = &DOMAINS[package.domain];
        let _ = writeln!(text, "## {}\n", capitalised(domain.title));
        for key in &package.config_keys {
            let words: Vec<&str> = key.split('.').skip(1).collect();
            let _ = writeln!(text, "- `{key}`: the {} of the {}.", words.join(" ").replace('_', " "), domain.title);
        }
        text.push('\n');
    }
    text
}

fn index_doc(project: &Project) -> String {
    let mut text = format!("# {} documentation\n\n", project.name);
    for package in &project.packages {
        let domain = &DOMAINS[package.domain];
        let _ = writeln!(text, "- [{}]({}.md)", capitalised(domain.title), domain.package);
    }
    text.push_str("- [Configuration](configuration.md)\n");
    text
}

fn readme(project: &Project) -> String {
    let mut text = format!(
        "# {name}\n\n{name} is a toolkit for building networked services in Python: an HTTP client, \
         caching, scheduling, parsing and more, sharing one configuration system.\n\n\
         ## Installation\n\n```\npip install {name}\n```\n\n## Packages\n\n",
        name = project.name
    );
    for package in &project.packages {
        let domain = &DOMAINS[package.domain];
        let _ = writeln!(text, "- `{}`: the {}", package.dir.replace('/', "."), domain.title);
    }
    let _ = write!(text, "\n## Development\n\n```\npip install -e .\npytest tests\n```\n");
    text
}

fn changelog(project: &Project) -> String {
    let mut text = String::from("# Changelog\n");
    for (version, entries) in project.changelog.iter().rev() {
        let _ = write!(text, "\n## {version}\n\n");
        for entry in entries {
            let _ = writeln!(text, "- {entry}");
        }
    }
    text
}

fn setup_py(project: &Project) -> String {
    format!(
        "from setuptools import find_packages, setup\n\nsetup(\n    name=\"{}\",\n    version=\"{}\",\n    \
         packages=find_packages(exclude=[\"tests\", \"tests.*\"]),\n    python_requires=\">=3.9\",\n)\n",
        project.name, project.version
    )
}

fn pyproject(project: &Project) -> String {
    format!(
        "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n\
         [project]\nname = \"{}\"\nversion = \"{}\"\nrequires-python = \">=3.9\"\n\n\
         [tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
        project.name, project.version
    )
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
