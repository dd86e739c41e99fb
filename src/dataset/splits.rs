//! Which files of a dataset's commit make up each split, as the `datasets`
//! library decides it: from the card's `configs` (`data_files` globs),
//! else from the file names (`data/test-00000-of-00001.parquet`,
//! `test.jsonl`, `dev/*.json`, the parquet converter's
//! `default/test/0000.parquet`), else everything is `train`.
//!
//! Owns those rules and the choice of the split when none was named (the
//! globs are glob.rs's). Pure: it is handed the
//! file list and the card, and reads nothing.

use serde_json::Value;

use crate::dataset::error::DatasetError;
use crate::dataset::glob::Glob;

/// The extensions onebash reads.
const READABLE: &[&str] = &[".parquet", ".jsonl", ".json"];
/// Data files `datasets` reads that onebash does not: a split made of
/// them is an error that says so, not "no such split".
const UNREADABLE: &[&str] = &[
    ".csv",
    ".tsv",
    ".arrow",
    ".txt",
    ".jsonl.gz",
    ".json.gz",
    ".ndjson",
];
/// Files the `datasets` library never takes for data.
const IGNORED: &[&str] = &[
    "README.md",
    "config.json",
    "dataset_info.json",
    "dataset_infos.json",
    "dummy_data.zip",
    "dataset_dict.json",
];
/// The splits `datasets` knows by name, each with the words a file or
/// folder name may use for it.
const KNOWN_SPLITS: &[(&str, &[&str])] = &[
    ("train", &["train", "training"]),
    ("validation", &["validation", "valid", "dev", "val"]),
    ("test", &["test", "testing", "eval", "evaluation"]),
];
/// What may stand around a split's word in a name (`datasets`'
/// `NON_WORDS_CHARS`).
const SEP: &str = "[-._ 0-9]";

/// Each split of a commit with its files (sorted), in the order the card
/// or the naming rules give them.
pub(crate) type Layout = Vec<(String, Vec<String>)>;

/// The splits of a commit whose files are `siblings`, from its card's
/// `configs` when they name files, else from the names. `requested` is
/// the split asked for: a name the rules do not know (`dev` of
/// `dev.jsonl` is validation's word) is looked for too, under that name.
pub(crate) fn layout(card: Option<&Value>, siblings: &[String], requested: Option<&str>) -> Layout {
    let files: Vec<&str> = siblings
        .iter()
        .map(String::as_str)
        .filter(|path| candidate(path))
        .collect();
    if let Some(config) = card.and_then(default_config) {
        let data_dir = config
            .get("data_dir")
            .and_then(Value::as_str)
            .map(|dir| dir.trim_matches('/'))
            .filter(|dir| !dir.is_empty());
        let prefix = data_dir.map(|dir| format!("{dir}/")).unwrap_or_default();
        if let Some(patterns) = config.get("data_files").and_then(data_files) {
            return patterns
                .into_iter()
                .map(|(split, globs)| {
                    let globs: Vec<String> = globs
                        .iter()
                        .map(|g| format!("{prefix}{}", g.trim_start_matches("./")))
                        .collect();
                    (split, matching(&files, &globs))
                })
                .filter(|(_, files)| !files.is_empty())
                .collect();
        }
        if data_dir.is_some() {
            let inside: Vec<&str> = files
                .iter()
                .filter_map(|f| f.strip_prefix(prefix.as_str()))
                .collect();
            return by_names(&inside, requested)
                .into_iter()
                .map(|(split, files)| {
                    (
                        split,
                        files.into_iter().map(|f| format!("{prefix}{f}")).collect(),
                    )
                })
                .collect();
        }
    }
    by_names(&files, requested)
}

/// The split to read and its files: the one named, else the only one,
/// else `test`. `dataset` names the dataset in errors.
pub(crate) fn choose(
    layout: &Layout,
    requested: Option<&str>,
    dataset: &str,
) -> Result<(String, Vec<String>), DatasetError> {
    let found = || {
        layout
            .iter()
            .map(|(split, _)| split.clone())
            .collect::<Vec<_>>()
    };
    let picked = match requested {
        Some(split) => layout.iter().find(|(name, _)| name == split),
        None if layout.len() == 1 => layout.first(),
        None => layout.iter().find(|(name, _)| name == "test"),
    };
    let Some((split, files)) = picked else {
        return Err(match requested {
            Some(split) => DatasetError::NoSuchSplit {
                dataset: dataset.to_owned(),
                split: split.to_owned(),
                found: found(),
            },
            None if layout.is_empty() => DatasetError::NoSuchSplit {
                dataset: dataset.to_owned(),
                split: "test".to_owned(),
                found: Vec::new(),
            },
            None => DatasetError::WhichSplit {
                dataset: dataset.to_owned(),
                found: found(),
            },
        });
    };
    if let Some(path) = files.iter().find(|path| !readable(path)) {
        return Err(DatasetError::UnsupportedFormat {
            dataset: dataset.to_owned(),
            path: path.clone(),
        });
    }
    Ok((split.clone(), files.clone()))
}

/// Whether onebash reads this file (by its extension).
pub(crate) fn readable(path: &str) -> bool {
    READABLE.iter().any(|ext| path.ends_with(ext))
}

/// A file that can be data: not hidden, not in a `__special__` folder,
/// not one of the files `datasets` ignores.
fn candidate(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let hidden = path.split('/').any(|part| part.starts_with('.'));
    let special = path
        .split('/')
        .rev()
        .skip(1)
        .any(|part| part.starts_with("__"));
    !hidden && !special && !IGNORED.contains(&name)
}

/// The config read: the one marked `default: true`, else the one named
/// `default`, else the first.
fn default_config(card: &Value) -> Option<&Value> {
    let configs = card.get("configs")?.as_array()?;
    configs
        .iter()
        .find(|c| c.get("default").and_then(Value::as_bool) == Some(true))
        .or_else(|| {
            configs
                .iter()
                .find(|c| c.get("config_name").and_then(Value::as_str) == Some("default"))
        })
        .or_else(|| configs.first())
}

/// A config's `data_files` as (split, globs): a glob or a list of them is
/// `train`; a list of `{split, path}` (path a glob or a list) or a map of
/// split to globs names its splits.
fn data_files(value: &Value) -> Option<Vec<(String, Vec<String>)>> {
    let globs = |value: &Value| -> Option<Vec<String>> {
        match value {
            Value::String(glob) => Some(vec![glob.clone()]),
            Value::Array(items) => items
                .iter()
                .map(|g| g.as_str().map(str::to_owned))
                .collect(),
            _ => None,
        }
    };
    match value {
        Value::String(_) => Some(vec![("train".to_owned(), globs(value)?)]),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            Some(vec![("train".to_owned(), globs(value)?)])
        }
        Value::Array(items) => items
            .iter()
            .map(|item| {
                let split = item.get("split")?.as_str()?.to_owned();
                Some((split, globs(item.get("path")?)?))
            })
            .collect(),
        Value::Object(map) => map
            .iter()
            .map(|(split, v)| Some((split.clone(), globs(v)?)))
            .collect(),
        _ => None,
    }
}

/// The files matching any of `globs`, sorted.
fn matching(files: &[&str], globs: &[String]) -> Vec<String> {
    let patterns: Vec<Glob> = globs.iter().map(|g| Glob::new(g)).collect();
    let mut found: Vec<String> = files
        .iter()
        .filter(|file| patterns.iter().any(|p| p.matches(file)))
        .map(|file| (*file).to_owned())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The splits by file names, `datasets`' rules in its order: the parquet
/// converter's folders, then sharded names, then a split's word in a
/// folder name, then in a file name, else all is `train`. The first rule
/// that finds anything decides.
fn by_names(files: &[&str], requested: Option<&str>) -> Layout {
    let data: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| {
            READABLE
                .iter()
                .chain(UNREADABLE)
                .any(|ext| f.ends_with(ext))
        })
        .collect();
    if data.is_empty() {
        return Vec::new();
    }
    let converted = named_by(&data, |f| {
        let rest = f.strip_prefix("default/")?;
        let (split, name) = rest.split_once('/')?;
        (name.ends_with(".parquet") && !name.contains('/')).then(|| split.to_owned())
    });
    if !converted.is_empty() {
        return converted;
    }
    let sharded = named_by(&data, sharded_split);
    if !sharded.is_empty() {
        return sharded;
    }
    let splits = split_words(requested);
    for kind in [folder_globs as fn(&str) -> Vec<String>, file_globs] {
        let layout: Layout = splits
            .iter()
            .map(|(split, words)| {
                let globs: Vec<String> = words.iter().flat_map(|w| kind(w)).collect();
                (split.clone(), matching(&data, &globs))
            })
            .filter(|(_, files)| !files.is_empty())
            .collect();
        if !layout.is_empty() {
            return layout;
        }
    }
    let mut all: Vec<String> = data.iter().map(|f| (*f).to_owned()).collect();
    all.sort();
    vec![("train".to_owned(), all)]
}

/// The known splits with their words; a requested split that is one of
/// their words (`dev`) takes that split's place under its own name, and
/// one that is not is looked for by its own name.
fn split_words(requested: Option<&str>) -> Vec<(String, Vec<String>)> {
    let mut splits: Vec<(String, Vec<String>)> = KNOWN_SPLITS
        .iter()
        .map(|(name, words)| {
            (
                (*name).to_owned(),
                words.iter().map(|w| (*w).to_owned()).collect(),
            )
        })
        .collect();
    if let Some(requested) = requested {
        if let Some(entry) = splits
            .iter_mut()
            .find(|(_, words)| words.iter().any(|w| w == requested))
        {
            entry.0 = requested.to_owned();
        } else {
            splits.push((requested.to_owned(), vec![requested.to_owned()]));
        }
    }
    splits
}

/// `datasets`' patterns of a split word in a folder name.
fn folder_globs(word: &str) -> Vec<String> {
    vec![
        format!("**/{word}/**"),
        format!("**/{word}{SEP}*/**"),
        format!("**/*{SEP}{word}/**"),
        format!("**/*{SEP}{word}{SEP}*/**"),
    ]
}

/// `datasets`' patterns of a split word in a file name.
fn file_globs(word: &str) -> Vec<String> {
    vec![format!("**/{word}{SEP}*"), format!("**/*{SEP}{word}{SEP}*")]
}

/// `data/{split}-00000-of-00003*.*`: the split of a sharded file name.
fn sharded_split(path: &str) -> Option<String> {
    let name = path.strip_prefix("data/")?;
    if name.contains('/') {
        return None;
    }
    // The split is what precedes the first `-NNNNN-of-NNNNN`.
    let bytes = name.as_bytes();
    let shard = |at: usize| {
        let digits = |from: usize| {
            bytes
                .get(from..from + 5)
                .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
        };
        bytes.get(at) == Some(&b'-')
            && digits(at + 1)
            && bytes.get(at + 6..at + 10) == Some(b"-of-")
            && digits(at + 10)
    };
    let at = (1..bytes.len()).find(|&at| shard(at))?;
    let split = &name[..at];
    let word =
        |part: &str| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_');
    (split.split('.').all(word) && name[at + 15..].contains('.')).then(|| split.to_owned())
}

/// The files grouped by the split `split_of` reads from their names, the
/// known splits first in their order, then the others by name.
fn named_by(files: &[&str], split_of: impl Fn(&str) -> Option<String>) -> Layout {
    let mut layout: Layout = Vec::new();
    for file in files {
        let Some(split) = split_of(file) else {
            continue;
        };
        match layout.iter_mut().find(|(name, _)| *name == split) {
            Some((_, list)) => list.push((*file).to_owned()),
            None => layout.push((split, vec![(*file).to_owned()])),
        }
    }
    let rank = |name: &str| {
        KNOWN_SPLITS
            .iter()
            .position(|(known, _)| *known == name)
            .unwrap_or(KNOWN_SPLITS.len())
    };
    layout.sort_by(|(a, _), (b, _)| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    for (_, list) in &mut layout {
        list.sort();
    }
    layout
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(files: &[&str]) -> Vec<String> {
        files.iter().map(|f| (*f).to_owned()).collect()
    }

    fn splits(layout: &Layout) -> Vec<&str> {
        layout.iter().map(|(s, _)| s.as_str()).collect()
    }

    #[test]
    fn the_cards_configs_decide_the_splits_in_every_form_of_data_files() {
        let files = names(&[
            ".gitattributes",
            "README.md",
            "data/dev-00000-of-00001.parquet",
            "data/test-00000-of-00002.parquet",
            "data/test-00001-of-00002.parquet",
            "other/x.jsonl",
        ]);
        let card = json!({"configs": [
            {"config_name": "other", "data_files": "other/*.jsonl"},
            {"config_name": "default", "data_files": [
                {"split": "dev", "path": "data/dev-*"},
                {"split": "test", "path": ["data/test-*"]},
                {"split": "none", "path": "nothing/*"},
            ]},
        ]});
        let layout = layout(Some(&card), &files, None);
        assert_eq!(splits(&layout), ["dev", "test"]);
        assert_eq!(
            layout[1].1,
            [
                "data/test-00000-of-00002.parquet",
                "data/test-00001-of-00002.parquet"
            ]
        );

        let first = json!({"configs": [{"config_name": "a", "data_files": ["other/*.jsonl"]}]});
        assert_eq!(
            super::layout(Some(&first), &files, None),
            vec![("train".to_owned(), names(&["other/x.jsonl"]))]
        );
        let marked = json!({"configs": [
            {"config_name": "a", "data_files": "other/*"},
            {"config_name": "b", "default": true, "data_files": {"eval": "data/dev-*"}},
        ]});
        assert_eq!(
            splits(&super::layout(Some(&marked), &files, None)),
            ["eval"]
        );
        let in_dir = json!({"configs": [{"config_name": "default", "data_dir": "data", "data_files": [{"split": "test", "path": "test-*"}]}]});
        assert_eq!(super::layout(Some(&in_dir), &files, None)[0].1.len(), 2);
        // A card without configs, or configs without files: the names decide.
        let no_files = json!({"configs": [{"config_name": "default", "features": []}]});
        assert_eq!(
            splits(&super::layout(Some(&no_files), &files, None)),
            ["test", "dev"]
        );
        assert_eq!(
            splits(&super::layout(
                Some(&json!({"license": "mit"})),
                &files,
                None
            )),
            ["test", "dev"]
        );
    }

    #[test]
    fn without_configs_the_file_names_decide_in_datasets_order() {
        let cases: &[(&[&str], Option<&str>, &[&str])] = &[
            // The parquet converter's layout (refs/convert/parquet).
            (
                &[
                    "default/test/0000.parquet",
                    "default/train/0000.parquet",
                    "default/train/0001.parquet",
                ],
                None,
                &["train", "test"],
            ),
            // Sharded names, any split name.
            (
                &[
                    "data/dev-00000-of-00001.parquet",
                    "data/test-00000-of-00001.parquet",
                ],
                None,
                &["test", "dev"],
            ),
            // A split's word in a folder, then in a file name.
            (
                &["valid/a.json", "train/b.json", "test.jsonl"],
                None,
                &["train", "validation"],
            ),
            (
                &["data/train.jsonl", "data/my_test.jsonl", "data/notes.jsonl"],
                None,
                &["train", "test"],
            ),
            // A requested word of a known split takes its name.
            (&["dev.jsonl", "test.jsonl"], Some("dev"), &["dev", "test"]),
            // A requested name the rules do not know is looked for too.
            (
                &["smoke.jsonl", "test.jsonl"],
                Some("smoke"),
                &["test", "smoke"],
            ),
            // Nothing named: everything is train.
            (
                &["tasks.jsonl", "more/tasks2.parquet", "LICENSE"],
                None,
                &["train"],
            ),
            (&["README.md", "LICENSE"], None, &[]),
        ];
        for (files, requested, want) in cases {
            let layout = layout(None, &names(files), *requested);
            assert_eq!(splits(&layout), *want, "{files:?}");
        }
        let all = layout(
            None,
            &names(&[
                "b.jsonl",
                "a/c.parquet",
                ".hidden/x.json",
                "__pycache__/y.json",
            ]),
            None,
        );
        assert_eq!(all[0].1, ["a/c.parquet", "b.jsonl"]);
    }

    #[test]
    fn the_split_is_the_one_named_else_the_only_one_else_test() {
        let two: Layout = vec![
            ("dev".into(), names(&["d.jsonl"])),
            ("test".into(), names(&["t.parquet"])),
        ];
        assert_eq!(choose(&two, Some("dev"), "hf:o/n").expect("dev").0, "dev");
        assert_eq!(choose(&two, None, "hf:o/n").expect("test").1, ["t.parquet"]);
        let one: Layout = vec![("train".into(), names(&["x.json"]))];
        assert_eq!(choose(&one, None, "hf:o/n").expect("train").0, "train");

        let err = choose(&two, Some("tset"), "hf:o/n").expect_err("no such split");
        assert!(
            err.to_string()
                .contains("no split `tset`; the dataset has: dev, test"),
            "{err}"
        );
        let several: Layout = vec![
            ("a".into(), names(&["a.json"])),
            ("b".into(), names(&["b.json"])),
        ];
        let err = choose(&several, None, "hf:o/n").expect_err("which");
        assert!(
            err.to_string().contains("several splits (a, b)")
                && err.to_string().contains("hf:o/n:a"),
            "{err}"
        );
        let err = choose(&Vec::new(), None, "hf:o/n").expect_err("empty");
        assert!(
            err.to_string().contains("no data files for split `test`"),
            "{err}"
        );
        let csv: Layout = vec![("test".into(), names(&["test.csv"]))];
        let err = choose(&csv, None, "hf:o/n").expect_err("csv");
        assert!(err.to_string().contains("test.csv is neither"), "{err}");
    }

    #[test]
    fn sharded_names_give_their_split() {
        assert_eq!(
            sharded_split("data/test-00000-of-00001.parquet").as_deref(),
            Some("test")
        );
        assert_eq!(
            sharded_split("data/train.clean-00003-of-00010-abc.jsonl").as_deref(),
            Some("train.clean")
        );
        assert_eq!(sharded_split("data/test.parquet"), None);
        assert_eq!(sharded_split("data/x/test-00000-of-00001.parquet"), None);
        assert_eq!(sharded_split("test-00000-of-00001.parquet"), None);
    }
}
