//! What can go wrong with a Hub dataset: opening it ([`DatasetError`]:
//! the reference, the Hub's answer, the cache, a download) and reading
//! its rows ([`RowError`]). Texts read after "failed to" and name the
//! dataset as `hf:OWNER/NAME@REVISION:SPLIT`; a `hint:` line says what to
//! do when the user can fix it. No text ever holds the token.

use std::path::PathBuf;

/// The longest repo name the Hub takes (huggingface_hub's
/// `validate_repo_id` allows 96 characters per part).
pub(crate) const MAX_NAME: usize = 96;

/// Why a reference is of a bad form (the text reads after "failed to read
/// the dataset reference `RAW`: ").
#[derive(Debug, thiserror::Error)]
pub enum BadForm {
    #[error("expected `@REVISION` or `:SPLIT` after the name")]
    AfterName,
    #[error("`{0}` is not OWNER/NAME (the dataset's page is huggingface.co/datasets/OWNER/NAME)")]
    NotOwnerName(String),
    #[error("`{0}` has more than one `/`: expected OWNER/NAME")]
    Slashes(String),
    #[error("the {what} in `{repo}` is empty: expected OWNER/NAME")]
    EmptyPart { what: &'static str, repo: String },
    #[error("the {what} in `{repo}` is longer than {MAX_NAME} characters")]
    LongPart { what: &'static str, repo: String },
    #[error("the {what} in `{repo}` has `{c}`: only letters, digits, `-`, `_` and `.` are allowed")]
    RepoChar {
        what: &'static str,
        repo: String,
        c: char,
    },
    #[error("the {what} in `{repo}` starts or ends with `-` or `.`, or has `--` or `..`")]
    Edge { what: &'static str, repo: String },
    #[error("the revision after `@` is empty")]
    EmptyRevision,
    #[error("the revision `{revision}` has `{}`", c.escape_default())]
    RevisionChar { revision: String, c: char },
    #[error("`{0}` is not a branch, tag or commit name")]
    NotARef(String),
    #[error("the split after `:` is empty")]
    EmptySplit,
    #[error(
        "the split `{split}` has `{}`: only letters, digits, `_`, `-` and `.` are allowed",
        c.escape_default()
    )]
    SplitChar { split: String, c: char },
}

/// Why a dataset could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error(
        "failed to read the dataset reference `{raw}`: {why}\nhint: write hf:OWNER/NAME[@REVISION][:SPLIT], e.g. {example}"
    )]
    BadReference {
        raw: String,
        #[source]
        why: BadForm,
        /// A reference of the right form (the first short name known).
        example: String,
    },
    /// No connection (refused, no such host, timed out), or the Hub kept
    /// failing (5xx, 429) through the retries, and nothing usable cached.
    #[error(
        "failed to open dataset {dataset}: the Hub at {endpoint} could not be reached: {why}\nhint: check the network or HF_ENDPOINT; a dataset opened once before is read from the cache with no network (pin its commit as @SHA, or set HF_HUB_OFFLINE=1)"
    )]
    Unreachable {
        dataset: String,
        endpoint: String,
        why: String,
    },
    /// Offline (`HF_HUB_OFFLINE`) and the cache lacks what is needed.
    #[error(
        "failed to open dataset {dataset}: offline (HF_HUB_OFFLINE is set) and {why} in the cache at {}\nhint: run once with the network (unset HF_HUB_OFFLINE) to fill the cache",
        cache.display()
    )]
    NotCached {
        dataset: String,
        why: String,
        cache: PathBuf,
    },
    #[error("failed to open dataset {dataset}: {}", not_found(*token_sent, url))]
    NoSuchDataset {
        dataset: String,
        /// The dataset's page, where a gated one's terms are accepted.
        url: String,
        token_sent: bool,
    },
    #[error(
        "failed to open dataset {dataset}: the dataset has no revision `{revision}`\nhint: name a branch, tag or full commit sha of {url}/tree/main"
    )]
    NoSuchRevision {
        dataset: String,
        revision: String,
        url: String,
    },
    /// 401 for the token itself: the Hub does not know it.
    #[error(
        "failed to open dataset {dataset}: the Hub refused the token: {message}\nhint: check HF_TOKEN (or the token file, $HF_TOKEN_PATH or $HF_HOME/token): a token of your account, from the Hub's settings, that can read the dataset"
    )]
    BadToken { dataset: String, message: String },
    /// 401 or 403 past "not found": a gated dataset whose terms are not
    /// accepted, or a token without access.
    #[error("failed to open dataset {dataset}: the Hub refused access ({status}): {}", denied(*token_sent, url))]
    Denied {
        dataset: String,
        status: u16,
        url: String,
        token_sent: bool,
    },
    #[error("failed to open dataset {dataset}: {url} answered {status}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Http {
        dataset: String,
        url: String,
        status: u16,
        message: Option<String>,
    },
    #[error("failed to open dataset {dataset}: the answer of {url} cannot be read: {why}")]
    BadAnswer {
        dataset: String,
        url: String,
        why: String,
    },
    /// A file the dataset's listing names that the Hub does not have.
    #[error("failed to open dataset {dataset}: the Hub has no file {path} at this commit")]
    MissingFile { dataset: String, path: String },
    #[error("failed to open dataset {dataset}: {}", no_split(split, found))]
    NoSuchSplit {
        dataset: String,
        split: String,
        /// The splits the dataset has, as its card or its file names say.
        found: Vec<String>,
    },
    /// The split was not named and the dataset has several, none `test`.
    #[error(
        "failed to open dataset {dataset}: it has several splits ({}) and none was named\nhint: add one, e.g. {dataset}:{}",
        found.join(", "),
        found.first().map_or("test", String::as_str)
    )]
    WhichSplit { dataset: String, found: Vec<String> },
    #[error(
        "failed to open dataset {dataset}: {path} is neither Parquet, JSON Lines nor JSON\nhint: onebash reads .parquet, .jsonl and .json data files"
    )]
    UnsupportedFormat { dataset: String, path: String },
    #[error(
        "failed to open dataset {dataset}: {path} does not match the Hub's hash: its {algorithm} is {got}, the Hub's is {expected} (downloaded twice; the bad copy was deleted)\nhint: run again to fetch it again; if it stays so, something between here and the Hub changes its bytes"
    )]
    Corrupt {
        dataset: String,
        path: String,
        algorithm: &'static str,
        expected: String,
        got: String,
    },
    /// Two folders of a dataset read as folders share a name.
    #[error(
        "failed to open dataset {dataset}: {first} and {second} are both folders named {name}, which would be one folder"
    )]
    FolderNames {
        dataset: String,
        name: String,
        first: String,
        second: String,
    },
    #[error("failed to open dataset {dataset}: cannot {action} {}: {source}", path.display())]
    Cache {
        dataset: String,
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The HTTP client or the runtime it runs on could not be made.
    #[error("failed to open dataset {dataset}: cannot start the HTTP client: {why}")]
    Client { dataset: String, why: String },
}

impl DatasetError {
    /// The Hub could not be reached (or must not be: offline) and nothing
    /// usable was cached: exit 3, as for a model API that refuses the run
    /// (else 2, bad input; `commands/error.rs` decides).
    pub(crate) fn unreachable(&self) -> bool {
        matches!(
            self,
            DatasetError::Unreachable { .. } | DatasetError::NotCached { .. }
        )
    }
}

/// The Hub says 401 + `RepoNotFound` for a missing dataset and for a
/// private or gated one alike when no token is sent, so without a token
/// "not found" may mean "not allowed".
fn not_found(token_sent: bool, url: &str) -> String {
    if token_sent {
        format!(
            "no such dataset, or the token sent cannot see it ({url})\nhint: check OWNER/NAME; for a private dataset use a token (HF_TOKEN) of an account that can read it"
        )
    } else {
        format!(
            "no such dataset, or it is private or gated ({url})\nhint: check OWNER/NAME; for a private or gated dataset set HF_TOKEN (no token was sent)"
        )
    }
}

fn denied(token_sent: bool, url: &str) -> String {
    if token_sent {
        format!(
            "the token sent has no access\nhint: accept the dataset's terms at {url} with the token's account, or use a token that can read it (HF_TOKEN)"
        )
    } else {
        format!(
            "no token was sent\nhint: accept the dataset's terms at {url}, then set HF_TOKEN to a token of that account"
        )
    }
}

fn no_split(split: &str, found: &[String]) -> String {
    if found.is_empty() {
        format!(
            "no data files for split `{split}`: no file of the dataset matches its card's `configs` or the usual names of data files"
        )
    } else {
        format!(
            "no split `{split}`; the dataset has: {}\nhint: name one after `:`, e.g. :{}",
            found.join(", "),
            found[0]
        )
    }
}

/// A row, or a whole file, of a split that could not be read. Reading
/// goes on past a bad row; a file that cannot be read is one error.
#[derive(Debug, thiserror::Error)]
#[error("failed to read {dataset}: {}: {why}", located(*row, place))]
pub struct RowError {
    /// `hf:OWNER/NAME@SHA:SPLIT`.
    pub(crate) dataset: String,
    /// The row's number across the split, from 1; `None` for a file.
    pub(crate) row: Option<usize>,
    /// The file, and where in it (`data/test.jsonl line 5`).
    pub(crate) place: String,
    pub(crate) why: RowFault,
}

/// What is wrong with a row, or with a file that cannot be read on.
#[derive(Debug, thiserror::Error)]
pub enum RowFault {
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    #[error("not a JSON array of objects: {0}")]
    NotArray(#[source] serde_json::Error),
    #[error("not a Parquet file: {0}")]
    NotParquet(#[source] parquet::errors::ParquetError),
    /// A compression this build of the `parquet` crate lacks.
    #[error(
        "the file is compressed with {codec}, which onebash is built without (it reads uncompressed, SNAPPY, GZIP, LZ4 and ZSTD Parquet files)"
    )]
    Codec { codec: &'static str },
    #[error("cannot read: {0}")]
    ParquetRow(#[source] parquet::errors::ParquetError),
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A JSON value that is no object: `kind` says what it is.
    #[error("not a JSON object but {kind}")]
    NotObject { kind: &'static str },
}

fn located(row: Option<usize>, place: &str) -> String {
    match row {
        Some(n) => format!("row {n} ({place})"),
        None => place.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unreachable_hub_with_nothing_cached_exits_3() {
        let unreachable = DatasetError::Unreachable {
            dataset: "hf:o/n".into(),
            endpoint: "http://127.0.0.1:1".into(),
            why: "connection refused".into(),
        };
        assert!(unreachable.unreachable());
        let offline = DatasetError::NotCached {
            dataset: "hf:o/n".into(),
            why: "no commit of main".into(),
            cache: PathBuf::from("/c"),
        };
        assert!(offline.unreachable());
        let split = DatasetError::NoSuchSplit {
            dataset: "hf:o/n".into(),
            split: "tset".into(),
            found: vec!["dev".into(), "test".into()],
        };
        assert!(!split.unreachable());
        assert_eq!(
            split.to_string(),
            "failed to open dataset hf:o/n: no split `tset`; the dataset has: dev, test\nhint: name one after `:`, e.g. :dev"
        );
    }

    #[test]
    fn a_refusal_says_whether_a_token_was_sent_and_where_to_accept_terms() {
        let url = "https://huggingface.co/datasets/o/n".to_owned();
        let without = DatasetError::NoSuchDataset {
            dataset: "hf:o/n".into(),
            url: url.clone(),
            token_sent: false,
        };
        assert!(
            without.to_string().contains("private or gated"),
            "{without}"
        );
        assert!(without.to_string().contains("set HF_TOKEN"), "{without}");
        let gated = DatasetError::Denied {
            dataset: "hf:o/n".into(),
            status: 403,
            url: url.clone(),
            token_sent: true,
        };
        let text = gated.to_string();
        assert!(
            text.contains("token sent has no access") && text.contains(&url),
            "{text}"
        );
    }

    #[test]
    fn a_row_error_names_its_row_and_place() {
        let row = RowError {
            dataset: "hf:o/n@abc:test".into(),
            row: Some(7),
            place: "data/test.jsonl line 2".into(),
            why: RowFault::NotObject { kind: "an array" },
        };
        assert_eq!(
            row.to_string(),
            "failed to read hf:o/n@abc:test: row 7 (data/test.jsonl line 2): not a JSON object but an array"
        );
        let file = RowError {
            dataset: "hf:o/n@abc:test".into(),
            row: None,
            place: "data/x.parquet".into(),
            why: RowFault::Codec { codec: "LZO" },
        };
        assert_eq!(
            file.to_string(),
            "failed to read hf:o/n@abc:test: data/x.parquet: the file is compressed with LZO, which onebash is built without (it reads uncompressed, SNAPPY, GZIP, LZ4 and ZSTD Parquet files)"
        );
    }
}
