//! The synthetic project as a whole: packages, modules, tests, and the
//! initial import that lays them out.

use std::collections::BTreeSet;

use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};

use super::bodies::pick;
use super::code::{Module, ModuleKind};
use super::templates::{self, Gen, Placement};
use super::vocab::{DOMAINS, SUBPACKAGES};

/// A package of the project (one domain).
#[derive(Clone, Debug)]
pub(crate) struct Package {
    pub domain: usize,
    /// Directory (`relaykit/http`).
    pub dir: String,
    /// A second-level package directory (`relaykit/http/backends`), if any.
    pub subdir: Option<String>,
    /// Exception class names defined by the package's errors module.
    pub errors: Vec<String>,
    pub errors_dotted: Option<String>,
    pub settings_dotted: Option<String>,
    pub config_keys: Vec<String>,
    /// Module index and name of the package's base class.
    pub base: Option<(usize, String)>,
    pub facade: Option<usize>,
    /// Module stems taken in `dir` and `subdir`.
    pub stems: BTreeSet<String>,
}

/// A test module that exercises one project module.
#[derive(Clone, Debug)]
pub(crate) struct TestModule {
    pub path: String,
    pub module: usize,
    /// `Class.method` or `function` names the tests call; `true` when the
    /// test asserts the function's first error message.
    pub cases: Vec<(String, bool)>,
}

/// The whole project at one commit.
#[derive(Clone, Debug)]
pub(crate) struct Project {
    pub name: String,
    pub version: String,
    pub packages: Vec<Package>,
    /// Every code module except `__init__.py` files, which are derived.
    pub modules: Vec<Module>,
    pub tests: Vec<TestModule>,
    /// Changelog sections, newest last: (version, entries).
    pub changelog: Vec<(String, Vec<String>)>,
}

impl Project {
    /// Modules that belong to package `package`, in index order.
    pub(crate) fn members(&self, package: usize, sub: bool) -> Vec<usize> {
        let dir =
            if sub { self.packages[package].subdir.as_deref() } else { Some(self.packages[package].dir.as_str()) };
        let Some(dir) = dir else { return Vec::new() };
        self.modules
            .iter()
            .enumerate()
            .filter(|(_, m)| m.path.rsplit_once('/').map(|(d, _)| d) == Some(dir))
            .map(|(i, _)| i)
            .collect()
    }

    /// Modules (other than `module`) whose functions call `qualname` of `module`.
    pub(crate) fn callers(&self, module: usize, qualname: &str) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (index, caller) in self.modules.iter().enumerate() {
            if index == module {
                continue;
            }
            for (name, function) in caller.qualified_functions() {
                if function.calls.iter().any(|c| c.module == module && c.qualname == qualname) {
                    out.push((index, name));
                }
            }
        }
        out
    }

    /// The test module of `module`, if it has one.
    pub(crate) fn test_of(&self, module: usize) -> Option<&TestModule> {
        self.tests.iter().find(|t| t.module == module)
    }

    /// Adds a component module (and usually its test) to `package`.
    pub(crate) fn add_component(&mut self, g: &mut Gen, package: usize, added_at: usize) -> usize {
        let domain = &DOMAINS[self.packages[package].domain];
        let in_sub = self.packages[package].subdir.is_some() && g.rng.random_bool(0.3);
        let stem = loop {
            let first = *pick(&mut g.rng, domain.nouns);
            let candidate = if g.rng.random_bool(0.5) {
                first.to_string()
            } else {
                format!("{first}_{}", pick(&mut g.rng, domain.nouns))
            };
            let reserved = ["errors", "settings", "base", "client", "__init__"];
            if !reserved.contains(&candidate.as_str()) && self.packages[package].stems.insert(candidate.clone()) {
                break candidate;
            }
        };
        let deps = self.pick_deps(g, package);
        let dir = if in_sub { self.packages[package].subdir.clone() } else { Some(self.packages[package].dir.clone()) };
        let dir = dir.expect("in_sub implies a subdir");
        let module = {
            let place = Placement { package: &self.packages[package], dir: &dir, stem: &stem, added_at };
            templates::component_module(g, &self.modules, &place, &deps)
        };
        self.modules.push(module);
        let index = self.modules.len() - 1;
        if g.rng.random_bool(0.85) {
            self.add_test(g, index);
        }
        index
    }

    /// Writes a test module for `module`.
    pub(crate) fn add_test(&mut self, g: &mut Gen, module: usize) {
        let target = &self.modules[module];
        let relative = target.path.split_once('/').map_or(target.path.as_str(), |(_, rest)| rest);
        let (dir, file) = relative.rsplit_once('/').unwrap_or(("", relative));
        let path = format!("tests/{}/test_{}", dir.replace('/', "_"), file);
        let mut cases = Vec::new();
        let mut candidates: Vec<(String, bool)> = target
            .qualified_functions()
            .filter(|(name, _)| !name.contains("._") && !name.starts_with('_'))
            .map(|(name, f)| (name, !f.raises.is_empty()))
            .collect();
        candidates.shuffle(&mut g.rng);
        for (name, raises) in candidates.into_iter().take(g.rng.random_range(2..5)) {
            cases.push((name, raises && g.rng.random_bool(0.35)));
        }
        self.tests.push(TestModule { path, module, cases });
    }

    /// One to three dependencies for a new component of `package`.
    fn pick_deps(&self, g: &mut Gen, package: usize) -> Vec<usize> {
        let same: Vec<usize> = self
            .modules
            .iter()
            .enumerate()
            .filter(|(_, m)| m.kind == ModuleKind::Component && m.domain == self.packages[package].domain)
            .map(|(i, _)| i)
            .collect();
        let other: Vec<usize> = self
            .modules
            .iter()
            .enumerate()
            .filter(|(_, m)| m.kind == ModuleKind::Component && m.domain != self.packages[package].domain)
            .map(|(i, _)| i)
            .collect();
        let mut deps = BTreeSet::new();
        for _ in 0..g.rng.random_range(1..4) {
            let pool = if g.rng.random_bool(0.65) && !same.is_empty() { &same } else { &other };
            if let Some(&dep) = pool.choose(&mut g.rng) {
                deps.insert(dep);
            }
        }
        deps.into_iter().collect()
    }
}

/// Lays out the initial import: every package's errors, settings, optional
/// base class, `initial_components` components spread over packages, and a
/// facade per package.
pub(crate) fn initial_project(g: &mut Gen, name: &str, packages: usize, initial_components: usize) -> Project {
    let mut project = Project {
        name: name.to_string(),
        version: "0.1.0".to_string(),
        packages: Vec::new(),
        modules: Vec::new(),
        tests: Vec::new(),
        changelog: vec![("0.1.0".to_string(), vec!["Initial release.".to_string()])],
    };
    for (domain, spec) in DOMAINS.iter().enumerate().take(packages) {
        let dir = format!("{name}/{}", spec.package);
        let subdir = g.rng.random_bool(0.4).then(|| format!("{dir}/{}", pick(&mut g.rng, SUBPACKAGES)));
        project.packages.push(Package {
            domain,
            dir,
            subdir,
            errors: Vec::new(),
            errors_dotted: None,
            settings_dotted: None,
            config_keys: Vec::new(),
            base: None,
            facade: None,
            stems: BTreeSet::new(),
        });
    }
    for package in 0..project.packages.len() {
        let dir = project.packages[package].dir.clone();
        let errors = templates::errors_module(
            g,
            &Placement { package: &project.packages[package], dir: &dir, stem: "errors", added_at: 0 },
        );
        let p = &mut project.packages[package];
        p.errors = errors.classes.iter().map(|c| c.name.clone()).collect();
        p.errors_dotted = Some(errors.dotted.clone());
        project.modules.push(errors);
        let (settings, keys) = templates::settings_module(
            g,
            &Placement { package: &project.packages[package], dir: &dir, stem: "settings", added_at: 0 },
        );
        let p = &mut project.packages[package];
        p.settings_dotted = Some(settings.dotted.clone());
        p.config_keys = keys;
        project.modules.push(settings);
        if g.rng.random_bool(0.6) {
            let base = templates::base_module(
                g,
                &Placement { package: &project.packages[package], dir: &dir, stem: "base", added_at: 0 },
            );
            let name = base.classes[0].name.clone();
            project.modules.push(base);
            project.packages[package].base = Some((project.modules.len() - 1, name));
        }
    }
    // Components round-robin over packages so that early packages can be
    // dependencies of later ones and the other way round.
    let count = project.packages.len().max(1);
    for n in 0..initial_components {
        project.add_component(g, n % count, 0);
    }
    for package in 0..project.packages.len() {
        let components: Vec<usize> = project
            .members(package, false)
            .into_iter()
            .filter(|&m| project.modules[m].kind == ModuleKind::Component)
            .collect();
        let chosen: Vec<usize> = components.choose_multiple(&mut g.rng, 4).copied().collect();
        let dir = project.packages[package].dir.clone();
        let facade = {
            let place = Placement { package: &project.packages[package], dir: &dir, stem: "client", added_at: 0 };
            templates::facade_module(g, &project.modules, &place, &chosen)
        };
        project.modules.push(facade);
        let index = project.modules.len() - 1;
        project.packages[package].facade = Some(index);
        project.add_test(g, index);
    }
    project
}
