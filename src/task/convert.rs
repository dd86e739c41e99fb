//! The rewriting of a line in place that the formats named by their own
//! keys share (pro.rs, multi.rs): renaming a field, the `owner/name` repo
//! made a clone location, metadata added to.

use serde_json::{Map, Value};

/// `repo` as `owner/name` becomes its clone location under `repo_base`;
/// the name is kept in metadata as `dataset_repo`.
pub(crate) fn set_repo(
    fields: &mut Map<String, Value>,
    metadata: &mut Map<String, Value>,
    repo_base: &str,
) {
    if let Some(Value::String(repo)) = fields.get("repo").cloned()
        && repo.split('/').count() == 2
        && !repo.contains("..")
        && !repo.contains("://")
    {
        let location = crate::task::swebench::repo_location(repo_base, &repo);
        fields.insert("repo".to_owned(), Value::String(location));
        metadata.insert("dataset_repo".to_owned(), Value::String(repo));
    }
}

/// Adds `extra` to the line's `metadata` object (made when absent).
pub(crate) fn merge_metadata(fields: &mut Map<String, Value>, extra: Map<String, Value>) {
    let mut metadata = match fields.remove("metadata") {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for (key, value) in extra {
        metadata.entry(key).or_insert(value);
    }
    fields.insert("metadata".to_owned(), Value::Object(metadata));
}

pub(crate) fn rename(fields: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(value) = fields.remove(from) {
        fields.insert(to.to_owned(), value);
    }
}
