//! Layers without cycles: no file of `src/` may depend, through its
//! `crate::` paths, on a file that depends back on it. Read from the
//! sources, so a new cycle fails here, not in a later refactor.
//!
//! One family still has cycles and is allowed them until a leaf module of
//! shared types breaks them (issue 13, part 5): the model protocols, which
//! import `agent/model.rs` for its types while it dispatches to them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files allowed to be in one cycle with each other, and only each other.
const ALLOWED_CYCLE: &[&str] = &[
    "agent/anthropic",
    "agent/http",
    "agent/model",
    "agent/openai",
    "agent/oracle",
    "agent/replay",
    "agent/retry",
];

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

/// The module a `crate::a::b::C` path names: its longest prefix that is a
/// file.
fn target(path: &str, modules: &BTreeMap<String, PathBuf>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("/"))
        .find(|candidate| modules.contains_key(candidate))
}

/// Each file's dependencies on other files (not on its own submodules),
/// outside its tests.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    modules(&root, &root, &mut found);
    let mut edges = BTreeMap::new();
    for (name, path) in &found {
        let text = std::fs::read_to_string(path).expect("read a source file");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let mut deps = BTreeSet::new();
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches(':');
            if let Some(dep) = target(path, &found)
                && dep != *name
                && !dep.starts_with(&format!("{name}/"))
            {
                deps.insert(dep);
            }
        }
        edges.insert(name.clone(), deps);
    }
    edges
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
    let allowed: BTreeSet<String> = ALLOWED_CYCLE.iter().map(|s| (*s).to_owned()).collect();
    for component in cycles(&edges) {
        let outside: Vec<&String> = component.difference(&allowed).collect();
        assert!(
            outside.is_empty(),
            "a cycle between {component:?}: {:?}",
            component.iter().map(|m| (m, &edges[m])).collect::<Vec<_>>()
        );
    }
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
