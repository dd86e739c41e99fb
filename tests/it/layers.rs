//! Layers without cycles: no file of `src/` may depend, through its
//! `crate::`, `super::` and `self::` paths, on a file that depends back on
//! it; and no file imports a file of a layer above its own ([`LAYERS`]).
//! Read from the sources, so a new cycle fails here, not in a later
//! refactor.
//!
//! A `super::` or `self::` path is read as the `crate::` path it names
//! (`super::source::Digest` in `env/oci/reference.rs` is
//! `crate::env::oci::source::Digest`). A path names the file of its longest
//! prefix that is a module; a `use` group (`crate::agent::{anthropic,
//! openai}`) names each of its members; and an item a folder module
//! re-exports from a file below it (`pub use model::ModelClient` in
//! `agent/mod.rs`) names that file, so importing through a re-export is no
//! way around a cycle. A module imported by name (`use
//! crate::commands::html;`, a member of a group, a `self` or an `as`) is
//! followed through its uses: `html::write_report` is
//! `crate::commands::html::write_report`, resolved as above
//! (`commands/html/report.rs`, which `commands/html/mod.rs` re-exports it
//! from).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, by module path (`agent/model`; a
/// `mod.rs` by its folder).
fn modules(dir: &Path, root: &Path, found: &mut BTreeMap<String, PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            modules(&path, root, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .expect("under src")
                .with_extension("");
            let mut name = rel.to_string_lossy().into_owned();
            if let Some(parent) = name.strip_suffix("/mod") {
                name = parent.to_owned();
            }
            found.insert(name, path);
        }
    }
}

/// The layers of `src/`, top first: a file may import a file of its own
/// top-level folder (or file) or of one listed after it, never one listed
/// before. ARCHITECTURE.md ("Layers") says why in this order.
const LAYERS: &[&str] = &[
    "main",
    "lib",
    "commands",
    "cli",
    "runner",
    "config",
    "agent",
    "events",
    "env",
    "run_folder",
    "audit",
    "checkout",
    "task",
    "dataset",
    "grade",
    "sys",
];

/// The code of the file `name` (a module path, `env/oci/reference`) with
/// each `super::` and `self::` path written as the `crate::` path it
/// names: `super::source::Digest` there is `crate::env::oci::source::Digest`.
fn absolute(name: &str, code: &str) -> String {
    let module: Vec<&str> = name.split('/').filter(|part| !part.is_empty()).collect();
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find('s') {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let starts_path = !out.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
        let mut ups = 0;
        let mut tail = from;
        while let Some(next) = tail.strip_prefix("super::") {
            ups += 1;
            tail = next;
        }
        let own = ups == 0 && tail.starts_with("self::");
        if starts_path && (ups > 0 || own) {
            if own {
                tail = &tail["self::".len()..];
            }
            let kept = module.len().saturating_sub(ups);
            out.push_str("crate::");
            for part in &module[..kept] {
                out.push_str(part);
                out.push_str("::");
            }
            rest = tail;
        } else {
            out.push('s');
            rest = &from[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The members of a `use` path, its group expanded:
/// `a::{b, c::{D, self}}` is `a::b`, `a::c::D` and `a::c`. An `as`
/// renaming is kept (`a::B as C`) for [`reexports`] to read.
fn expand(path: &str) -> Vec<String> {
    let Some(open) = path.find('{') else {
        return vec![path.trim().trim_end_matches(':').to_owned()];
    };
    let prefix = &path[..open];
    let close = path.rfind('}').unwrap_or(path.len());
    let inner = &path[open + 1..close];
    let (mut members, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                members.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    members.push(&inner[start..]);
    members
        .into_iter()
        .map(str::trim)
        .filter(|member| !member.is_empty())
        .flat_map(|member| match member {
            "self" => vec![prefix.trim_end_matches(':').to_owned()],
            _ => expand(&format!("{prefix}{member}")),
        })
        .collect()
}

/// The `crate::` paths of a file's code, groups expanded.
fn crate_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let mut depth = 0;
        let end = rest
            .find(|c: char| match c {
                '{' => {
                    depth += 1;
                    false
                }
                '}' if depth > 0 => {
                    depth -= 1;
                    false
                }
                _ => depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':'),
            })
            .unwrap_or(rest.len());
        paths.extend(
            expand(&rest[..end])
                .into_iter()
                .map(|path| path.split(" as ").next().unwrap_or_default().to_owned()),
        );
    }
    paths
}

/// The members of each `use` statement that starts with `start` (`pub use
/// `, `use crate::`), groups expanded, each as its path after `start` and
/// the name it is used under (its last part, or its `as` name).
fn use_members(code: &str, start: &str) -> Vec<(String, String)> {
    let mut members = Vec::new();
    for (at, _) in code.match_indices(start) {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + start.len()..];
        let statement = &rest[..rest.find(';').unwrap_or(rest.len())];
        for member in expand(statement) {
            let (path, alias) = match member.split_once(" as ") {
                Some((path, alias)) => (path.trim(), Some(alias.trim())),
                None => (member.as_str(), None),
            };
            let name = alias.unwrap_or(path.rsplit("::").next().unwrap_or(path));
            members.push((path.to_owned(), name.to_owned()));
        }
    }
    members
}

/// What the folder module `name` re-exports from the files below it
/// (`pub use model::ModelClient;`, or `pub(crate) use`, `pub(super) use`):
/// each item's name and its file.
fn reexports(
    name: &str,
    code: &str,
    modules: &BTreeMap<String, PathBuf>,
) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let members = ["pub use ", "pub(crate) use ", "pub(super) use "]
        .into_iter()
        .flat_map(|start| use_members(code, start));
    for (path, item) in members {
        let parts: Vec<&str> = path.split("::").collect();
        let child = format!("{name}/{}", parts[0]);
        if parts.len() > 1 && modules.contains_key(&child) {
            found.insert(item, child);
        }
    }
    found
}

/// The file a `crate::a::b::C` path names: its longest prefix that is a
/// module, or the file below it that the module re-exports `C` from.
fn target(
    path: &str,
    modules: &BTreeMap<String, PathBuf>,
    reexported: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    let n = (1..=parts.len())
        .rev()
        .find(|&n| modules.contains_key(&parts[..n].join("/")))?;
    let module = parts[..n].join("/");
    let through = parts
        .get(n)
        .and_then(|item| reexported.get(&module)?.get(*item));
    Some(through.cloned().unwrap_or(module))
}

/// The modules a file's `use crate::` statements bring in by name
/// (`use crate::commands::html;`, `html` in `use crate::commands::{html,
/// report}`, `use crate::a::b::{self, C}`), each by the name it is used
/// under, with its path (`html` -> `commands::html`).
fn modules_by_name(code: &str, modules: &BTreeMap<String, PathBuf>) -> BTreeMap<String, String> {
    use_members(code, "use crate::")
        .into_iter()
        .filter(|(path, _)| modules.contains_key(&path.replace("::", "/")))
        .map(|(path, name)| (name, path))
        .collect()
}

/// The `crate::` paths a file reaches through the modules it imports by
/// name: each use `html::write_report` of `use crate::commands::html;`
/// is `commands::html::write_report`, for [`target`] to resolve like any
/// other path. A `html::` that ends a longer path (`crate::commands::html::`,
/// `x::html::`) is not one.
fn uses_by_name(code: &str, modules: &BTreeMap<String, PathBuf>) -> Vec<String> {
    let mut paths = Vec::new();
    for (name, path) in modules_by_name(code, modules) {
        let prefix = format!("{name}::");
        for (at, _) in code.match_indices(&prefix) {
            if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let item = rest[..end].trim_end_matches(':');
            if !item.is_empty() {
                paths.push(format!("{path}::{item}"));
            }
        }
    }
    paths
}

/// The files the file `name` depends on (not itself, not its own
/// submodules): its `crate::` paths and its uses of modules it imports by
/// name, each resolved by [`target`].
fn dependencies(
    name: &str,
    code: &str,
    modules: &BTreeMap<String, PathBuf>,
    reexported: &BTreeMap<String, BTreeMap<String, String>>,
) -> BTreeSet<String> {
    crate_paths(code)
        .into_iter()
        .chain(uses_by_name(code, modules))
        .filter_map(|path| target(&path, modules, reexported))
        .filter(|dep| dep != name && !dep.starts_with(&format!("{name}/")))
        .collect()
}

/// Each file's dependencies on other files, outside its tests.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    modules(&root, &root, &mut found);
    let code: BTreeMap<&String, String> = found
        .iter()
        .map(|(name, path)| {
            let text = std::fs::read_to_string(path).expect("read a source file");
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            (name, absolute(name, code))
        })
        .collect();
    let reexported = code
        .iter()
        .map(|(name, code)| ((*name).clone(), reexports(name, code, &found)))
        .collect();
    code.iter()
        .map(|(name, code)| {
            let deps = dependencies(name, code, &found, &reexported);
            ((*name).clone(), deps)
        })
        .collect()
}

/// The strongly connected components of more than one file (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, node: &'a str) {
        let at = walk.index.len();
        walk.index.insert(node, at);
        walk.low.insert(node, at);
        walk.stack.push(node);
        for next in walk.edges.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !walk.index.contains_key(next) {
                visit(walk, next);
                let low = walk.low[node].min(walk.low[next]);
                walk.low.insert(node, low);
            } else if walk.stack.contains(&next) {
                let low = walk.low[node].min(walk.index[next]);
                walk.low.insert(node, low);
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut component = BTreeSet::new();
            while let Some(top) = walk.stack.pop() {
                component.insert(top.to_owned());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                walk.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

#[test]
fn no_file_depends_on_one_that_depends_back_on_it() {
    let edges = graph();
    assert!(edges.len() > 40, "the sources were not found: {edges:?}");
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "cycles between files, each with what its files depend on: {:?}",
        found
            .iter()
            .map(|component| component.iter().map(|m| (m, &edges[m])).collect())
            .collect::<Vec<Vec<_>>>()
    );
}

/// The outcome types every layer shares (`Status`, `ExitReason`, `Usage`)
/// import nothing of the crate, and the types of a model call only them.
#[test]
fn the_shared_types_import_nothing_of_the_crate() {
    let edges = graph();
    assert!(
        edges["run_folder/outcome"].is_empty(),
        "{:?}",
        edges["run_folder/outcome"]
    );
    assert_eq!(
        edges["agent/types"].iter().collect::<Vec<_>>(),
        ["run_folder/outcome"]
    );
}

/// The layer of a file: its top-level folder or file (`env/oci/source` is
/// `env`).
fn layer(name: &str) -> &str {
    name.split('/').next().unwrap_or(name)
}

/// The imports that point up [`LAYERS`], each with the two layers.
fn upward(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let rank = |name: &str| LAYERS.iter().position(|l| *l == layer(name));
    let mut found = Vec::new();
    for (from, deps) in edges {
        for to in deps {
            if let (Some(a), Some(b)) = (rank(from), rank(to))
                && b < a
            {
                found.push(format!("{from} ({}) -> {to} ({})", layer(from), layer(to)));
            }
        }
    }
    found
}

#[test]
fn no_file_imports_a_file_of_a_layer_above_its_own() {
    let edges = graph();
    let unplaced: BTreeSet<&str> = edges
        .keys()
        .map(|name| layer(name))
        .filter(|l| !LAYERS.contains(l))
        .collect();
    assert!(
        unplaced.is_empty(),
        "top-level modules with no place in LAYERS: {unplaced:?}"
    );
    let found = upward(&edges);
    assert!(found.is_empty(), "imports up the layers: {found:#?}");
}

/// The files that import `src/cli.rs`, tests included, other than
/// `main.rs`, `lib.rs` and those of `commands/`: none may.
fn cli_importers(files: &BTreeMap<String, String>) -> Vec<String> {
    files
        .iter()
        .filter(|(name, _)| !matches!(layer(name), "main" | "lib" | "commands" | "cli"))
        .filter(|(_, code)| {
            crate_paths(code)
                .iter()
                .any(|path| path == "cli" || path.starts_with("cli::"))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// The command line is on top: the stages own their value types and
/// `cli.rs` converts to them, so nothing below `commands/` imports it, not
/// even in its tests (those build the stages' own types).
#[test]
fn only_main_lib_and_commands_import_the_command_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    modules(&root, &root, &mut found);
    assert!(found.contains_key("cli"), "src/cli.rs not found");
    let files: BTreeMap<String, String> = found
        .iter()
        .map(|(name, path)| {
            let text = std::fs::read_to_string(path).expect("read a source file");
            (name.clone(), absolute(name, &text))
        })
        .collect();
    let importers = cli_importers(&files);
    assert!(
        importers.is_empty(),
        "files below commands/ that import src/cli.rs: {importers:?}"
    );
}

#[test]
fn an_import_of_the_command_line_is_found() {
    let files: BTreeMap<String, String> = [
        ("config/options", "use crate::cli::RunArgs;\n"),
        (
            "env/container",
            "fn f() { super::super::cli::EnvKind::Host; }\n",
        ),
        (
            "agent/api",
            "#[cfg(test)]\nmod tests { use crate::cli::{Cli, Command}; }\n",
        ),
        ("commands/run", "use crate::cli::RunArgs;\n"),
        ("main", "use onebash::cli::Cli;\nuse crate::cli::Cli;\n"),
        ("cli", "use crate::config::RunOptions;\n"),
        ("runner/tasks", "use crate::client::Client;\n"),
    ]
    .into_iter()
    .map(|(name, code)| (name.to_owned(), absolute(name, code)))
    .collect();
    assert_eq!(
        cli_importers(&files),
        ["agent/api", "config/options", "env/container"]
    );
}

#[test]
fn super_and_self_paths_are_read_as_crate_paths() {
    assert_eq!(
        absolute(
            "env/oci/reference",
            "use super::source::Digest;\nuse super::super::Shell;\nuse self::x::Y;\n"
        ),
        "use crate::env::oci::source::Digest;\nuse crate::env::Shell;\nuse crate::env::oci::reference::x::Y;\n"
    );
    // A group whose `self` is the module, and words that only end in one.
    assert_eq!(
        absolute(
            "checkout/store",
            "use super::thin::{self, A};\nlet myself::x = Self::y;\n"
        ),
        "use crate::checkout::thin::{self, A};\nlet myself::x = Self::y;\n"
    );
    // The circle the old test missed: two files of one folder, by `super::`.
    let (modules, reexported) = sample_tree(
        &["env", "env/oci", "env/oci/reference", "env/oci/source"],
        "env/oci",
        "",
    );
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("env/oci/reference", "use super::source::Digest;\n"),
        ("env/oci/source", "use super::reference::Reference;\n"),
    ]
    .into_iter()
    .map(|(name, code)| {
        let deps = dependencies(name, &absolute(name, code), &modules, &reexported);
        (name.to_owned(), deps)
    })
    .collect();
    assert_eq!(cycles(&edges).len(), 1, "{edges:?}");
}

#[test]
fn an_import_up_the_layers_is_found() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("cli", vec!["agent/types"]),
        ("agent/types", vec![]),
        ("env/host", vec!["sys/exec", "cli"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(upward(&edges), ["env/host (env) -> cli (cli)"]);
}

/// A source tree of these modules, where `folder` re-exports what `code`
/// says, for the resolver's tests.
fn sample_tree(
    modules: &[&str],
    folder: &str,
    code: &str,
) -> (
    BTreeMap<String, PathBuf>,
    BTreeMap<String, BTreeMap<String, String>>,
) {
    let modules: BTreeMap<String, PathBuf> = modules
        .iter()
        .map(|m| ((*m).to_owned(), PathBuf::new()))
        .collect();
    let reexported = BTreeMap::from([(folder.to_owned(), reexports(folder, code, &modules))]);
    (modules, reexported)
}

#[test]
fn a_use_group_and_a_reexport_name_each_file() {
    assert_eq!(
        crate_paths("use crate::agent::{anthropic, openai::{self, Client as C}};\n"),
        ["agent::anthropic", "agent::openai", "agent::openai::Client"]
    );
    let (modules, reexported) = sample_tree(
        &["agent", "agent/model", "agent/run"],
        "agent",
        "pub use model::ModelClient;\npub(crate) use run::{run_agent, Limits as L};\n",
    );
    let file = |path| target(path, &modules, &reexported);
    assert_eq!(file("agent::ModelClient").as_deref(), Some("agent/model"));
    assert_eq!(file("agent::L").as_deref(), Some("agent/run"));
    assert_eq!(file("agent::run_agent").as_deref(), Some("agent/run"));
    assert_eq!(file("agent::model::X").as_deref(), Some("agent/model"));
    assert_eq!(file("agent::Other").as_deref(), Some("agent"));
}

#[test]
fn a_module_imported_by_name_names_the_files_its_uses_come_from() {
    let (modules, reexported) = sample_tree(
        &[
            "commands",
            "commands/html",
            "commands/html/compare",
            "commands/html/report",
            "commands/html/transcript",
            "commands/report",
            "commands/show",
            "results",
        ],
        "commands/html",
        "pub use compare::compare_page;\npub use report::{report_page, write_report};\n",
    );
    let deps = |code| {
        dependencies("commands/output", code, &modules, &reexported)
            .into_iter()
            .collect::<Vec<_>>()
    };
    // By name alone, each form: a whole path, a group member, `self`, `as`.
    assert_eq!(
        deps("use crate::commands::html;\nfn f() { html::write_report(); }\n"),
        ["commands/html", "commands/html/report"]
    );
    assert_eq!(
        deps("use crate::commands::{html, show};\nfn f() { html::compare_page(); }\n"),
        ["commands/html", "commands/html/compare", "commands/show"]
    );
    assert_eq!(
        deps("use crate::commands::html::{self, escape};\nfn f() { html::report_page() }\n"),
        ["commands/html", "commands/html/report"]
    );
    assert_eq!(
        deps("use crate::commands::html as pages;\nfn f() { pages::write_report() }\n"),
        ["commands/html", "commands/html/report"]
    );
    // A submodule by its path, an item the module defines itself, and a
    // name that only ends a longer path (not this import's).
    assert_eq!(
        deps(
            "use crate::commands::html;\n\
             fn f() { html::transcript::page(); html::escape(); other::html::compare_page(); }\n"
        ),
        ["commands/html", "commands/html/transcript"]
    );
    // A name that is no module is not followed: `Status` is a type.
    assert_eq!(
        deps("use crate::results::Status;\nfn f() { Status::Passed; }\n"),
        ["results"]
    );
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("exec", vec!["sandbox"]),
        ("sandbox", vec!["exec", "limits"]),
        ("limits", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    let found = cycles(&edges);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0],
        ["exec", "sandbox"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    );
}
