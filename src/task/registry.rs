//! The benchmarks onebash knows: the one place a [`Source`] is registered
//! (as `env/choose.rs` is for environments). Adding a benchmark is a file
//! of `task/` implementing [`Source`] and `Benchmark` (benchmark.rs)
//! (source.rs), and one line in [`SOURCES`].
//!
//! The order of [`SOURCES`] is the order of `onebash datasets`' table and
//! the order in which sources are asked to claim a task; a line is read
//! by the first source whose own keys it has ([`Fit::Keys`]), else by the
//! first that reads any line of its shape ([`Fit::Shape`]), else as
//! onebash's own line.

use std::path::Path;

use serde_json::{Map, Value};

use crate::dataset::Alias;
use crate::task::source::{Fit, FolderFetch, ParsedLine, ReferenceContext, Referenced, Source};
use crate::task::spec::{TaskFile, TaskFileError};

/// Every source, in order. One line a benchmark.
pub(crate) const SOURCES: &[&dyn Source] = &[
    &crate::task::swebench::SOURCE,
    &crate::task::swebench5::SOURCE,
    &crate::task::pro::SOURCE,
    &crate::task::multi::SOURCE,
    &crate::task::smith::SOURCE,
    &crate::task::harbor::SOURCE,
    &crate::task::harbor_registry::SOURCE,
    &crate::task::own::SOURCE,
];

/// The source that reads a line of these fields, when it is not
/// onebash's own.
pub(crate) fn line_reader(fields: &Map<String, Value>) -> Option<&'static dyn Source> {
    let fit = |wanted: Fit| {
        SOURCES
            .iter()
            .copied()
            .find(|source| source.reads_line(fields) == Some(wanted))
    };
    fit(Fit::Keys).or_else(|| fit(Fit::Shape))
}

/// The source that answers for a task read from `line`: the first that
/// claims it (onebash's own line claims every line).
pub(crate) fn claimer(line: &ParsedLine) -> &'static dyn Source {
    SOURCES
        .iter()
        .copied()
        .find(|source| source.claims(line))
        .unwrap_or(&crate::task::own::SOURCE)
}

/// The tasks of `path` when a source reads it as a folder format.
pub(crate) fn load_path(path: &Path) -> Option<Result<TaskFile, TaskFileError>> {
    SOURCES.iter().find_map(|source| source.load_path(path))
}

/// The tasks of `raw` when a source reads it as a reference of its own
/// (a registry's dataset).
pub(crate) fn load_reference(
    raw: &str,
    context: &ReferenceContext,
    fetch: &dyn FolderFetch,
) -> Option<Result<Referenced, TaskFileError>> {
    SOURCES
        .iter()
        .find_map(|source| source.load_reference(raw, context, fetch))
}

/// The datasets of a registry (at `location`, else the source's own), as
/// the first source that reads registries lists them.
pub(crate) fn registry_datasets(location: Option<&str>) -> Option<Result<String, TaskFileError>> {
    SOURCES
        .iter()
        .find_map(|source| source.registry_datasets(location))
}

/// The files that make a folder a task, every source's that reads
/// folders: a Hub dataset repo holding any is read as task folders.
pub(crate) fn folder_markers() -> Vec<&'static str> {
    SOURCES
        .iter()
        .filter_map(|source| source.folder_marker())
        .collect()
}

/// The datasets onebash knows by a short name, every source's in order.
pub(crate) fn datasets() -> Vec<&'static Alias> {
    SOURCES
        .iter()
        .flat_map(|source| source.datasets().iter())
        .collect()
}

/// The hint's offer of each source's published images, each as `; for
/// X: --image 'TEMPLATE'` (it follows the hint's own advice), or nothing
/// when no source publishes any.
pub(crate) fn image_templates() -> String {
    SOURCES
        .iter()
        .filter_map(|source| source.image_template())
        .map(|(whose, template)| format!("; for {whose}: --image '{template}'"))
        .collect()
}

/// What `--model oracle` needs of every task: a gold patch, or what a
/// source takes instead.
pub(crate) fn oracle_needs() -> String {
    let others: Vec<&str> = SOURCES
        .iter()
        .filter_map(|source| source.oracle_needs())
        .collect();
    if others.is_empty() {
        "a gold_patch".to_owned()
    } else {
        format!("a gold_patch ({})", others.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reader(line: Value) -> Option<&'static str> {
        line_reader(line.as_object().expect("object")).map(|source| source.name())
    }

    /// A format named by its own keys wins over SWE-bench's instance
    /// shape, which its lines share; onebash's own lines (an `id`) are
    /// read by none.
    #[test]
    fn a_line_is_read_by_the_format_its_keys_name() {
        let swebench = json!({"instance_id": "a__b-1", "repo": "a/b", "base_commit": "c", "FAIL_TO_PASS": "[]"});
        assert_eq!(reader(swebench), Some("swebench"));
        assert_eq!(
            reader(json!({"instance_id": "x", "dockerhub_tag": "t"})),
            Some("swe-bench-pro")
        );
        assert_eq!(
            reader(json!({"instance_id": "x", "org": "o", "number": 1, "base": {}})),
            Some("multi-swe-bench")
        );
        assert_eq!(
            reader(json!({"instance_id": "x", "image_name": "i"})),
            Some("swe-smith")
        );
        assert_eq!(
            reader(json!({"id": "t", "org": "x", "number": 1, "base": {}})),
            None
        );
    }

    /// The table of `onebash datasets` keeps its order and size.
    #[test]
    fn the_datasets_are_listed_in_order() {
        let names: Vec<&str> = datasets().iter().map(|alias| alias.name).collect();
        assert_eq!(
            names,
            [
                "swe-bench-lite",
                "swe-bench-verified",
                "swe-bench",
                "swe-bench-multilingual",
                "swe-bench-multimodal",
                "swe-gym",
                "swe-bench-pro",
                "multi-swe-bench"
            ]
        );
        assert_eq!(
            oracle_needs(),
            "a gold_patch (a Harbor task: a solution/solve.sh)"
        );
    }
}
