//! Module templates: one function per module kind (errors, settings, base
//! classes, components, the package facade, `__init__`), each producing a
//! [`Module`] whose functions call into the modules it depends on.

use std::collections::BTreeSet;
use std::ops::Range;

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use super::bodies::{self, BodyContext, CallTarget, Literals, pick};
use super::code::{Callee, Class, Function, Module, ModuleKind, Raise};
use super::project::Package;
use super::vocab::{self, CLASS_ROLES, COMMON_VERBS, CONFIG_ATTRS, DOMAINS};

/// The generator's mutable state: the random stream and the names taken.
#[derive(Debug)]
pub(crate) struct Gen {
    pub rng: ChaCha8Rng,
    pub literals: Literals,
    pub class_names: BTreeSet<String>,
}

/// Where a new module goes.
#[derive(Debug)]
pub(crate) struct Placement<'a> {
    pub package: &'a Package,
    /// Directory of the module (the package's, or a subpackage's).
    pub dir: &'a str,
    /// File stem (`retry`, `header_block`).
    pub stem: &'a str,
    pub added_at: usize,
}

impl Placement<'_> {
    fn path(&self) -> String {
        format!("{}/{}.py", self.dir, self.stem)
    }

    fn dotted(&self) -> String {
        format!("{}.{}", self.dir.replace('/', "."), self.stem)
    }
}

/// The package's exception hierarchy.
pub(crate) fn errors_module(g: &mut Gen, place: &Placement<'_>) -> Module {
    let domain = &DOMAINS[place.package.domain];
    let root = format!("{}Error", vocab::camel(&[domain.package]));
    let mut classes = vec![Class {
        name: root.clone(),
        base: Some("Exception".to_string()),
        project_base: None,
        doc: format!("Base class of every {} error.", domain.title),
        attributes: Vec::new(),
        methods: Vec::new(),
    }];
    let mut used = BTreeSet::new();
    for _ in 0..g.rng.random_range(2..4) {
        let noun = pick(&mut g.rng, domain.nouns);
        if !used.insert(*noun) {
            continue;
        }
        classes.push(Class {
            name: format!("{}Error", vocab::camel(&[noun])),
            base: Some(root.clone()),
            project_base: None,
            doc: format!("Raised when a {noun} cannot be used by the {}.", domain.title),
            attributes: Vec::new(),
            methods: Vec::new(),
        });
    }
    Module {
        path: place.path(),
        dotted: place.dotted(),
        domain: place.package.domain,
        kind: ModuleKind::Errors,
        doc: format!("Exceptions raised by the {}.", domain.title),
        imports: Vec::new(),
        constants: Vec::new(),
        classes,
        functions: Vec::new(),
        added_at: place.added_at,
    }
}

/// The package's config keys and their accessor. Returns the module and keys.
pub(crate) fn settings_module(g: &mut Gen, place: &Placement<'_>) -> (Module, Vec<String>) {
    let domain = &DOMAINS[place.package.domain];
    let mut keys = BTreeSet::new();
    while keys.len() < g.rng.random_range(5..9) {
        let noun = pick(&mut g.rng, domain.nouns);
        let attr = pick(&mut g.rng, CONFIG_ATTRS);
        keys.insert(format!("{}.{noun}.{attr}", domain.package));
    }
    let keys: Vec<String> = keys.into_iter().collect();
    let mut dict = String::from("{\n");
    for key in &keys {
        let value = match key.rsplit('.').next().unwrap_or_default() {
            "enabled" | "strict" => "True".to_string(),
            "backend" | "mode" => format!("\"{}\"", pick(&mut g.rng, &["default", "memory", "local", "auto"])),
            _ => g.rng.random_range(1..120).to_string(),
        };
        dict.push_str(&format!("    \"{key}\": {value},\n"));
    }
    dict.push('}');
    let literal = format!("unknown {} setting", domain.package);
    g.literals.claim(&literal);
    let get_setting = Function {
        name: "get_setting".to_string(),
        params: vec!["key".to_string(), "overrides=None".to_string()],
        doc: vec!["Return the configured value of ``key``.".to_string()],
        body: vec![
            "if overrides and key in overrides:".to_string(),
            "    return overrides[key]".to_string(),
            "if key not in DEFAULTS:".to_string(),
            format!("    raise KeyError(f\"{literal}: {{key!r}}\")"),
            "return DEFAULTS[key]".to_string(),
        ],
        raises: vec![Raise {
            exception: "KeyError".to_string(),
            literal: literal.clone(),
            example: format!("{literal}: '{}.{}'", domain.package, pick(&mut g.rng, domain.nouns)),
        }],
        calls: Vec::new(),
        log_message: None,
    };
    let enabled = Function {
        name: "setting_enabled".to_string(),
        params: vec!["key".to_string()],
        doc: vec!["Return whether the boolean setting ``key`` is on.".to_string()],
        body: vec!["return bool(get_setting(key))".to_string()],
        raises: Vec::new(),
        calls: Vec::new(),
        log_message: None,
    };
    let module = Module {
        path: place.path(),
        dotted: place.dotted(),
        domain: place.package.domain,
        kind: ModuleKind::Settings,
        doc: format!("Configuration keys of the {} and their defaults.", domain.title),
        imports: Vec::new(),
        constants: vec![("DEFAULTS".to_string(), dict)],
        classes: Vec::new(),
        functions: vec![get_setting, enabled],
        added_at: place.added_at,
    };
    (module, keys)
}

/// Abstract base class(es) that components subclass.
pub(crate) fn base_module(g: &mut Gen, place: &Placement<'_>) -> Module {
    let domain_index = place.package.domain;
    let domain = &DOMAINS[domain_index];
    let role = *pick(&mut g.rng, CLASS_ROLES);
    let name = unique_class(g, &format!("Base{}{role}", vocab::camel(&[domain.package])));
    let noun = *pick(&mut g.rng, domain.nouns);
    let verb = *pick(&mut g.rng, domain.verbs);
    let ctx = BodyContext {
        domain: domain_index,
        is_method: true,
        package_errors: &place.package.errors,
        call_targets: &[],
        setting: None,
        state_attr: "_state",
    };
    let validate =
        bodies::function(&mut g.rng, &mut g.literals, &ctx, &format!("validate_{noun}"), vec![noun.to_string()], true);
    let abstract_method = Function {
        name: format!("{verb}_{noun}"),
        params: vec![noun.to_string()],
        doc: vec![format!("{} a {noun}; subclasses implement this.", capitalised(&vocab::plural(verb)))],
        body: vec![format!("raise NotImplementedError(type(self).__name__ + \".{verb}_{noun}\")")],
        raises: Vec::new(),
        calls: Vec::new(),
        log_message: None,
    };
    let close = Function {
        name: "close".to_string(),
        params: Vec::new(),
        doc: vec![format!("Release the resources held by this {}.", role.to_lowercase())],
        body: vec![
            "with self._lock:".to_string(),
            "    self._closed = True".to_string(),
            "    self._state.clear()".to_string(),
        ],
        raises: Vec::new(),
        calls: Vec::new(),
        log_message: None,
    };
    let mut imports = vec!["import threading".to_string()];
    imports.extend(error_import(place.package));
    Module {
        path: place.path(),
        dotted: place.dotted(),
        domain: domain_index,
        kind: ModuleKind::Base,
        doc: format!("Base classes shared by the {} implementations.", domain.title),
        imports,
        constants: Vec::new(),
        classes: vec![Class {
            name,
            base: None,
            project_base: None,
            doc: format!("Common behaviour of every {} {}.", domain.title, role.to_lowercase()),
            attributes: Vec::new(),
            methods: vec![init_method(&[], None, "_state"), validate, abstract_method, close],
        }],
        functions: Vec::new(),
        added_at: place.added_at,
    }
}

/// An ordinary module: one or two classes and a few helper functions that
/// call into `deps` (module indices into `modules`).
pub(crate) fn component_module(g: &mut Gen, modules: &[Module], place: &Placement<'_>, deps: &[usize]) -> Module {
    let domain_index = place.package.domain;
    let domain = &DOMAINS[domain_index];
    let topic: Vec<&str> = place.stem.split('_').collect();
    let mut imports = vec!["import threading".to_string()];
    imports.extend(error_import(place.package));
    let setting = place.package.config_keys.choose(&mut g.rng).cloned();
    if setting.is_some()
        && let Some(settings) = &place.package.settings_dotted
    {
        imports.push(format!("from {settings} import get_setting"));
    }
    // Collaborators: an instance attribute per class dependency, direct
    // imports for function dependencies.
    let mut collaborators: Vec<(String, String)> = Vec::new();
    let mut method_targets = Vec::new();
    let mut function_targets = Vec::new();
    for &dep in deps {
        let module = &modules[dep];
        let mut names = Vec::new();
        if let Some(class) = module.classes.iter().find(|c| !c.methods.is_empty() && module.kind != ModuleKind::Base) {
            let attr = format!("_{}", snake(&class.name));
            names.push(class.name.clone());
            collaborators.push((attr.clone(), class.name.clone()));
            for method in class.methods.iter().filter(|m| !m.name.starts_with('_')) {
                method_targets.push(CallTarget {
                    expr: format!("self.{attr}.{}", method.name),
                    callee: Callee { module: dep, qualname: format!("{}.{}", class.name, method.name) },
                    arity: method.params.iter().filter(|p| !p.contains('=')).count().max(1),
                });
            }
        }
        if let Some(function) = module.functions.iter().find(|f| f.name != "get_setting") {
            names.push(function.name.clone());
            function_targets.push(CallTarget {
                expr: function.name.clone(),
                callee: Callee { module: dep, qualname: function.name.clone() },
                arity: function.params.iter().filter(|p| !p.contains('=')).count().max(1),
            });
        }
        if !names.is_empty() {
            imports.push(format!("from {} import {}", module.dotted, names.join(", ")));
        }
    }
    let base = place.package.base.clone().filter(|_| g.rng.random_bool(0.5));
    if let Some((base_module, base_name)) = &base {
        imports.push(format!("from {} import {base_name}", modules[*base_module].dotted));
    }
    let mut all_targets = method_targets.clone();
    all_targets.extend(function_targets.iter().cloned());

    // The module's functions are written in this context; its methods in one
    // that adds the class's state and the calls open to a method.
    let module_ctx = BodyContext {
        domain: domain_index,
        is_method: false,
        package_errors: &place.package.errors,
        call_targets: &function_targets,
        setting: setting.as_deref(),
        state_attr: "_state",
    };
    let mut classes = Vec::new();
    for class_number in 0..g.rng.random_range(1..3) {
        let role = *pick(&mut g.rng, CLASS_ROLES);
        let lead = if class_number == 0 { topic.clone() } else { vec![*pick(&mut g.rng, domain.nouns)] };
        let name = unique_class(g, &format!("{}{role}", vocab::camel(&lead)));
        let state_attr = format!("_{}", vocab::plural(pick::<&str>(&mut g.rng, domain.nouns)));
        let mut targets = all_targets.clone();
        if let Some((base_module, base_name)) = &base
            && let Some(validate) =
                modules[*base_module].classes[0].methods.iter().find(|m| m.name.starts_with("validate_"))
        {
            targets.push(CallTarget {
                expr: format!("self.{}", validate.name),
                callee: Callee { module: *base_module, qualname: format!("{base_name}.{}", validate.name) },
                arity: 1,
            });
        }
        let ctx = BodyContext { is_method: true, call_targets: &targets, state_attr: &state_attr, ..module_ctx };
        let mut methods = vec![init_method(&collaborators, base.as_ref().map(|(_, n)| n.as_str()), &state_attr)];
        methods.extend(draw_functions(g, &ctx, &topic, 3..7, BTreeSet::new()));
        let doc = class_doc(&mut g.rng, domain_index, role, &lead);
        let attributes = if g.rng.random_bool(0.4) {
            vec![format!(
                "{}_{} = {}",
                pick(&mut g.rng, &["DEFAULT", "MAX", "MIN"]),
                pick(&mut g.rng, domain.nouns).to_uppercase(),
                g.rng.random_range(1..64)
            )]
        } else {
            Vec::new()
        };
        classes.push(Class {
            name,
            base: base.as_ref().map(|(_, n)| n.clone()),
            project_base: base.clone(),
            doc,
            attributes,
            methods,
        });
    }
    let method_names = classes.iter().flat_map(|c| c.methods.iter().map(|m| m.name.clone())).collect();
    let functions = draw_functions(g, &module_ctx, &topic, 1..4, method_names);
    let constants = vec![(
        format!("DEFAULT_{}_{}", topic.join("_").to_uppercase(), pick(&mut g.rng, CONFIG_ATTRS).to_uppercase()),
        g.rng.random_range(1..300).to_string(),
    )];
    Module {
        path: place.path(),
        dotted: place.dotted(),
        domain: domain_index,
        kind: ModuleKind::Component,
        doc: format!("{} support for the {}.", vocab::camel(&topic), domain.title),
        imports,
        constants,
        classes,
        functions,
        added_at: place.added_at,
    }
}

/// The package's public entry point: a client class whose methods call the
/// components' methods.
pub(crate) fn facade_module(g: &mut Gen, modules: &[Module], place: &Placement<'_>, components: &[usize]) -> Module {
    let domain_index = place.package.domain;
    let domain = &DOMAINS[domain_index];
    let suffix = *pick(&mut g.rng, &["Client", "Service", "Engine"]);
    let name = unique_class(g, &format!("{}{suffix}", vocab::camel(&[domain.package])));
    let mut imports = Vec::new();
    let mut collaborators = Vec::new();
    let mut methods = Vec::new();
    let mut taken = BTreeSet::new();
    for &component in components {
        let module = &modules[component];
        let Some(class) = module.classes.first() else { continue };
        let attr = format!("_{}", snake(&class.name));
        imports.push(format!("from {} import {}", module.dotted, class.name));
        collaborators.push((attr.clone(), class.name.clone()));
        let public: Vec<&Function> = class.methods.iter().filter(|m| !m.name.starts_with('_')).collect();
        for method in public.choose_multiple(&mut g.rng, 2) {
            let verb = pick(&mut g.rng, domain.verbs);
            let noun = method.name.rsplit('_').next().unwrap_or("item");
            let facade_name = format!("{verb}_{noun}");
            if !taken.insert(facade_name.clone()) {
                continue;
            }
            let params: Vec<String> = method.params.iter().map(|p| bodies::subject_word(p).to_string()).collect();
            let call_args: Vec<&str> = params.iter().map(String::as_str).collect();
            methods.push(Function {
                name: facade_name,
                params: params.clone(),
                doc: vec![format!("{} the {noun} through the {}.", capitalised(&vocab::plural(verb)), domain.title)],
                body: vec![
                    "self._ensure_open()".to_string(),
                    format!("return self.{attr}.{}({})", method.name, call_args.join(", ")),
                ],
                raises: Vec::new(),
                calls: vec![Callee { module: component, qualname: format!("{}.{}", class.name, method.name) }],
                log_message: None,
            });
        }
    }
    let literal = format!("{} client is closed", domain.package);
    g.literals.claim(&literal);
    let ensure_open = Function {
        name: "_ensure_open".to_string(),
        params: Vec::new(),
        doc: vec!["Fail fast when the client was closed.".to_string()],
        body: vec!["if self._closed:".to_string(), format!("    raise RuntimeError(\"{literal}\")")],
        raises: Vec::new(),
        calls: Vec::new(),
        log_message: None,
    };
    let mut all = vec![init_method(&collaborators, None, "_state"), ensure_open];
    all.extend(methods);
    Module {
        path: place.path(),
        dotted: place.dotted(),
        domain: domain_index,
        kind: ModuleKind::Facade,
        doc: format!("Public entry point of the {}.", domain.title),
        imports: {
            let mut all_imports = vec!["import threading".to_string()];
            all_imports.extend(imports);
            all_imports
        },
        constants: Vec::new(),
        classes: vec![Class {
            name,
            base: None,
            project_base: None,
            doc: format!("High-level interface to the {}.", domain.title),
            attributes: Vec::new(),
            methods: all,
        }],
        functions: Vec::new(),
        added_at: place.added_at,
    }
}

/// A package `__init__.py` re-exporting the public classes of `members`.
pub(crate) fn init_module(
    modules: &[Module],
    path: String,
    dotted: String,
    doc: String,
    members: &[usize],
    version: Option<&str>,
    added_at: usize,
) -> Module {
    let mut imports = Vec::new();
    let mut exported = Vec::new();
    for &member in members {
        let module = &modules[member];
        let names: Vec<String> = module
            .classes
            .iter()
            .filter(|c| module.kind != ModuleKind::Errors || c.base.as_deref() == Some("Exception"))
            .map(|c| c.name.clone())
            .collect();
        if names.is_empty() {
            continue;
        }
        let stem = module.dotted.rsplit('.').next().unwrap_or_default();
        imports.push(format!("from .{stem} import {}", names.join(", ")));
        exported.extend(names);
    }
    let mut constants = Vec::new();
    if let Some(version) = version {
        constants.push(("__version__".to_string(), format!("\"{version}\"")));
    }
    if !exported.is_empty() {
        let list: Vec<String> = exported.iter().map(|n| format!("    \"{n}\",")).collect();
        constants.push(("__all__".to_string(), format!("[\n{}\n]", list.join("\n"))));
    }
    Module {
        path,
        dotted,
        domain: modules.get(*members.first().unwrap_or(&0)).map_or(0, |m| m.domain),
        kind: ModuleKind::Init,
        doc,
        imports,
        constants,
        classes: Vec::new(),
        functions: Vec::new(),
        added_at,
    }
}

/// A new public method for an existing class (a later commit's feature).
pub(crate) fn new_method(g: &mut Gen, module: &Module, class_index: usize, package: &Package) -> Function {
    let topic: Vec<&str> = module.dotted.rsplit('.').next().unwrap_or("item").split('_').collect();
    let class = &module.classes[class_index];
    let state_attr = class
        .methods
        .iter()
        .flat_map(|m| m.body.iter())
        .find_map(|line| {
            line.trim().strip_prefix("self._").and_then(|rest| rest.split(' ').next()).filter(|a| a.ends_with('s'))
        })
        .map_or_else(|| "_state".to_string(), |a| format!("_{a}"));
    let ctx = BodyContext {
        domain: module.domain,
        is_method: true,
        package_errors: &package.errors,
        call_targets: &[],
        setting: None,
        state_attr: &state_attr,
    };
    for _ in 0..16 {
        let (name, params) = function_signature(&mut g.rng, module.domain, &topic);
        if class.methods.iter().all(|m| m.name != name) {
            return bodies::function(&mut g.rng, &mut g.literals, &ctx, &name, params, true);
        }
    }
    let name = format!("{}_{}_checked", pick(&mut g.rng, COMMON_VERBS), topic.join("_"));
    bodies::function(&mut g.rng, &mut g.literals, &ctx, &name, vec!["value".to_string()], true)
}

/// The `from ... import` line for a package's errors.
fn error_import(package: &Package) -> Option<String> {
    package
        .errors_dotted
        .as_ref()
        .filter(|_| !package.errors.is_empty())
        .map(|dotted| format!("from {dotted} import {}", package.errors.join(", ")))
}

/// `__init__` storing collaborators and the instance state.
fn init_method(collaborators: &[(String, String)], base: Option<&str>, state_attr: &str) -> Function {
    let mut params = Vec::new();
    let mut body = Vec::new();
    if base.is_some() {
        body.push("super().__init__()".to_string());
    }
    for (attr, class) in collaborators {
        let param = attr.trim_start_matches('_').to_string();
        body.push(format!("self.{attr} = {param} if {param} is not None else {class}()"));
        params.push(format!("{param}=None"));
    }
    body.push("self._lock = threading.RLock()".to_string());
    body.push("self._closed = False".to_string());
    body.push("self._revision = 0".to_string());
    body.push(format!("self.{state_attr} = {{}}"));
    Function {
        name: "__init__".to_string(),
        params,
        doc: Vec::new(),
        body,
        raises: Vec::new(),
        calls: Vec::new(),
        log_message: None,
    }
}

/// Up to `count` (drawn from its range) functions or methods on the module's
/// `topic`, with bodies under `ctx`; a drawn name already `taken` (or drawn
/// before) is skipped, so the module names each once.
fn draw_functions(
    g: &mut Gen,
    ctx: &BodyContext<'_>,
    topic: &[&str],
    count: Range<usize>,
    mut taken: BTreeSet<String>,
) -> Vec<Function> {
    let mut functions = Vec::new();
    for _ in 0..g.rng.random_range(count) {
        let (name, params) = function_signature(&mut g.rng, ctx.domain, topic);
        if taken.insert(name.clone()) {
            let want_raise = g.rng.random_bool(0.45);
            functions.push(bodies::function(&mut g.rng, &mut g.literals, ctx, &name, params, want_raise));
        }
    }
    functions
}

/// A function name and parameters built from the domain and module topic.
fn function_signature(rng: &mut ChaCha8Rng, domain: usize, topic: &[&str]) -> (String, Vec<String>) {
    let domain = &DOMAINS[domain];
    let noun = if rng.random_bool(0.5) { *pick(rng, topic) } else { *pick(rng, domain.nouns) };
    let other = *pick(rng, domain.nouns);
    let verb = if rng.random_bool(0.6) { *pick(rng, domain.verbs) } else { *pick(rng, COMMON_VERBS) };
    let name = match rng.random_range(0..4) {
        0 if noun != other => format!("{noun}_{other}"),
        1 if noun != other => format!("{verb}_{noun}_{other}"),
        _ => format!("{verb}_{noun}"),
    };
    let mut params = vec![if other != noun { other.to_string() } else { format!("{other}_name") }];
    if rng.random_bool(0.4) {
        let extra = pick(rng, &["strict=False", "timeout=None", "limit=None", "default=None"]);
        params.push(extra.to_string());
    }
    (name, params)
}

fn class_doc(rng: &mut ChaCha8Rng, domain: usize, role: &str, lead: &[&str]) -> String {
    let what = lead.join(" ");
    let verb = match role {
        "Policy" => "Decides how to handle",
        "Manager" | "Controller" => "Manages",
        "Store" | "Buffer" | "Queue" | "Pool" => "Holds",
        "Registry" => "Keeps a registry of",
        "Tracker" | "Monitor" => "Tracks",
        "Factory" | "Builder" => "Builds",
        _ => "Handles",
    };
    format!(
        "{verb} {} {} for the {}.",
        what,
        vocab::plural(pick::<&str>(rng, DOMAINS[domain].nouns)),
        DOMAINS[domain].title
    )
}

/// A class name not yet used in the project.
fn unique_class(g: &mut Gen, wanted: &str) -> String {
    if g.class_names.insert(wanted.to_string()) {
        return wanted.to_string();
    }
    let mut n = 0usize;
    loop {
        let name = format!("{wanted}{}", ["Ex", "Lite", "Pro", "V2"][n % 4]);
        let name = if n >= 4 { format!("{name}{n}") } else { name };
        if g.class_names.insert(name.clone()) {
            return name;
        }
        n += 1;
    }
}

/// `RetryPolicy` → `retry_policy`.
pub(crate) fn snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(ch.to_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
