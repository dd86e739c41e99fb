//! run.json: what a run folder says of the run as a whole.
//!
//! Owns [`RunManifest`], the one type `run` and `merge` write and every
//! reader (`--resume`, `merge`, `report`, replay) reads, so a key renamed on
//! one side breaks a test, not a user's run folder. Where the file lives is
//! `run_folder::RunFolder`'s business; what the settings mean is `config`'s.
//! The file format is described in docs/results.md.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::provider::Provider;
use crate::config::{RunConfig, Shard};
use crate::run_folder::{RunFolder, RunFolderError};

/// The contents of run.json. Fields that only some writers give (a merge
/// has no start, a run being written has no end yet) are optional, and so
/// is every field added after the first version, so older folders read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunManifest {
    pub onebash_version: String,
    /// When the run first started; a resume keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// One time per `--resume`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed_at: Vec<String>,
    /// `merge`: when, and the run folders it joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_at: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    pub settings: Settings,
    /// [`RunConfig::fingerprint`]: compared key by key, as a whole, by a
    /// resume and a merge, so it stays the JSON that function builds.
    /// Absent in run folders from before `--resume`.
    #[serde(default)]
    pub fingerprint: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    /// Why the run started no more tasks (the API refused it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Counts of the rows, for people: no command reads them back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Value>,
    /// Absent until the run ends; then `null` where /proc does not say.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub peak_rss_bytes: Option<Option<u64>>,
}

/// A field that is there, `null` or not: serde reads a `null` of an
/// `Option<Option<T>>` as absent otherwise.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The run's settings: [`RunConfig`] as it serializes. The fields commands
/// read back are typed; the rest is kept as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Settings {
    pub model: ModelSettings,
    /// `--shard`; none in a merged run.
    #[serde(default)]
    pub shard: Option<Shard>,
    pub out_dir: PathBuf,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `settings.model`: `config::ModelChoice` as it serializes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelSettings {
    /// `api`, `oracle`, `noop` or `replay`.
    pub kind: String,
    /// The API's protocol (`api` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// The model's name (`api` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `replay:RUN_DIR` as given (`replay` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl ModelSettings {
    /// The name in the CSV's `model` column, as `ModelChoice::name` gives it.
    pub(crate) fn name(&self) -> &str {
        self.name
            .as_deref()
            .or(self.spec.as_deref())
            .unwrap_or(&self.kind)
    }
}

impl RunManifest {
    /// The rule set the run was graded by (`settings.grading`: `--grading`,
    /// or the one a regrade chose); `None` when each row's format decided.
    pub(crate) fn grading(&self) -> Option<crate::grade::Rules> {
        let value = self.settings.other.get("grading")?;
        serde_json::from_value(value.clone()).ok()
    }

    /// Reads a run folder's run.json.
    pub(crate) fn read(folder: &RunFolder) -> Result<RunManifest, RunFolderError> {
        let path = folder.run_json();
        let text = std::fs::read_to_string(&path).map_err(|source| RunFolderError::Read {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| RunFolderError::Json { path, source })
    }

    /// The provider of a recorded run, as its run.json names it (`None`:
    /// no API, or a run from before providers): what a replay speaks.
    pub(crate) fn recorded_provider(
        folder: &RunFolder,
    ) -> Result<Option<Provider>, RunFolderError> {
        Ok(RunManifest::read(folder)?.settings.model.provider)
    }

    /// Writes a run folder's run.json whole, through a temporary file and a
    /// rename.
    pub(crate) fn write(&self, folder: &RunFolder) -> Result<(), RunFolderError> {
        let tmp = folder.root().join("run.json.tmp");
        let text = self.to_json_text().map_err(|err| RunFolderError::Write {
            path: folder.run_json(),
            source: std::io::Error::other(err),
        })?;
        std::fs::write(&tmp, text).map_err(|source| RunFolderError::Write {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, folder.run_json()).map_err(|source| RunFolderError::Write {
            path: folder.run_json(),
            source,
        })
    }

    /// The manifest of a run about to start at `now`.
    pub(crate) fn starting(config: &RunConfig, now: String) -> serde_json::Result<RunManifest> {
        Ok(RunManifest {
            onebash_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: Some(now),
            resumed_at: Vec::new(),
            merged_at: None,
            merged_from: Vec::new(),
            // Through JSON, so the settings are exactly what RunConfig
            // serializes: the readers' fields cannot drift from its names
            // without `settings_read_back_as_the_config_wrote_them` failing.
            settings: serde_json::from_value(serde_json::to_value(config)?)?,
            fingerprint: config.fingerprint(),
            finished_at: None,
            interrupted: None,
            stopped: None,
            summary: None,
            peak_rss_bytes: None,
        })
    }

    /// A resume at `now` of the run `before` describes: its start stays the
    /// run's start, and the resume is noted after the earlier ones.
    pub(crate) fn resume_of(&mut self, before: &RunManifest, now: String) {
        if before.started_at.is_some() {
            self.started_at.clone_from(&before.started_at);
        }
        self.resumed_at.clone_from(&before.resumed_at);
        self.resumed_at.push(now);
    }

    /// The run.json text: pretty JSON with its keys sorted (they always
    /// were: it used to be built as a `serde_json::Value`), and a newline.
    pub(crate) fn to_json_text(&self) -> serde_json::Result<Vec<u8>> {
        let mut text = serde_json::to_vec_pretty(&serde_json::to_value(self)?)?;
        text.push(b'\n');
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunOptions;

    /// run.json of the run in tests/fixtures/run, as the onebash before
    /// this type wrote it (built with `json!`).
    const GOLDEN: &str = include_str!("../../tests/fixtures/run/run.json");

    /// A config as `onebash run TASKS -o OUT` and the options `with` sets
    /// build it, over a one-task file.
    fn config(model: &str, with: impl FnOnce(&mut RunOptions)) -> RunConfig {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(&tasks, crate::config::options::TASK_LINE).expect("write tasks");
        let mut options = RunOptions::defaults(&tasks, model);
        options.out = Some(dir.path().join("out"));
        with(&mut options);
        RunConfig::from_options(&options, &crate::config::Secrets::default())
            .and_then(RunConfig::probe)
            .expect("a valid config")
    }

    #[test]
    fn the_golden_run_json_reads_and_writes_back_byte_for_byte() {
        let manifest: RunManifest = serde_json::from_str(GOLDEN).expect("golden run.json");
        assert_eq!(manifest.settings.model.provider, Some(Provider::Anthropic));
        assert_eq!(manifest.settings.model.name(), "claude-test");
        assert_eq!(manifest.settings.shard, None);
        assert_eq!(manifest.fingerprint["model"], "claude-test");
        assert_eq!(manifest.summary.as_ref().expect("summary")["rows"], 1);
        assert!(manifest.peak_rss_bytes.is_some_and(|bytes| bytes.is_some()));
        let text = manifest.to_json_text().expect("serialize");
        assert_eq!(String::from_utf8(text).expect("UTF-8"), GOLDEN);
    }

    /// Each kind of model, written by `run` and read back: the fields the
    /// readers type are where RunConfig puts them.
    #[test]
    fn settings_read_back_as_the_config_wrote_them() {
        let api = |options: &mut RunOptions| {
            options.provider = Provider::Anthropic;
            options.base_url = Some("http://127.0.0.1:9".to_owned());
            options.shard = Some(Shard::parse("1/2").expect("a shard"));
        };
        let replay = concat!("replay:", env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run");
        let cases: [(&str, Option<Provider>); 4] = [
            ("claude-x", Some(Provider::Anthropic)),
            ("oracle", None),
            ("noop", None),
            (replay, None),
        ];
        for (model, provider) in cases {
            let args = model;
            let config = config(model, |options| {
                if provider.is_some() {
                    api(options);
                }
            });
            let manifest = RunManifest::starting(&config, "now".to_owned()).expect("manifest");
            let text = manifest.to_json_text().expect("serialize");
            let read: RunManifest = serde_json::from_slice(&text).expect("read back");
            assert_eq!(read, manifest);
            assert_eq!(read.settings.model.name(), config.model.name(), "{args:?}");
            assert_eq!(read.settings.model.provider, provider, "{args:?}");
            assert_eq!(read.settings.shard, config.shard, "{args:?}");
            assert_eq!(read.settings.out_dir, config.out_dir, "{args:?}");
            assert_eq!(read.fingerprint, config.fingerprint(), "{args:?}");
            // Nothing RunConfig wrote was lost on the way in.
            let written: Value = serde_json::from_slice(&text).expect("JSON");
            assert_eq!(
                written["settings"],
                serde_json::to_value(&config).expect("config")
            );
        }
    }

    /// A peak /proc did not give is written `null`, as it always was, and
    /// reads back as given, not as a run that has not ended.
    #[test]
    fn an_unknown_peak_is_null_not_absent() {
        let mut manifest: RunManifest = serde_json::from_str(GOLDEN).expect("golden run.json");
        manifest.peak_rss_bytes = Some(None);
        let text = manifest.to_json_text().expect("serialize");
        let json: Value = serde_json::from_slice(&text).expect("JSON");
        assert_eq!(json.get("peak_rss_bytes"), Some(&Value::Null));
        let read: RunManifest = serde_json::from_slice(&text).expect("read back");
        assert_eq!(read.peak_rss_bytes, Some(None));
    }

    #[test]
    fn a_resume_keeps_the_start_and_notes_each_resume() {
        let mut first: RunManifest = serde_json::from_str(GOLDEN).expect("golden run.json");
        first.resumed_at = vec!["r1".to_owned()];
        let mut again = first.clone();
        again.started_at = Some("later".to_owned());
        again.resumed_at.clear();
        again.resume_of(&first, "r2".to_owned());
        assert_eq!(again.started_at, first.started_at);
        assert_eq!(again.resumed_at, ["r1", "r2"]);
    }
}
