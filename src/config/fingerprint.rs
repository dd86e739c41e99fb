//! The fingerprint of a run: the settings that decide outcomes, as run.json
//! keeps them (`fingerprint`), compared key by key by a resume and a merge.
//! A setting added after the first version is in it only when given, so
//! run folders from before it keep resuming.

use crate::checkout::History;
use crate::config::model_choice::ModelChoice;
use crate::config::run_config::RunConfig;
use crate::env::EnvKind;

impl RunConfig {
    /// The settings that decide outcomes. A resumed run and the shards of a
    /// merge must agree on every one; how many tasks run at once, which
    /// tasks are selected and where the cache is may differ.
    pub(crate) fn fingerprint(&self) -> serde_json::Value {
        self.fingerprint_with(self.probed.sandbox_used)
    }
}

impl<P> RunConfig<P> {
    /// [`RunConfig::fingerprint`] with the sandbox a probe found (or, for
    /// `--dry-run`, would find).
    pub(crate) fn fingerprint_with(&self, sandbox_used: &str) -> serde_json::Value {
        let (provider, request) = match &self.model {
            ModelChoice::Api(api) => (Some(api.provider), Some(&api.request)),
            _ => (None, None),
        };
        let mut fingerprint = serde_json::json!({
            "task_file_sha256": self.task_file_sha256,
            "model": self.model.name(),
            "provider": provider,
            "request": request.map(|r| serde_json::json!({
                "temperature": r.temperature,
                "top_p": r.top_p,
                "seed": r.seed,
                "max_output_tokens": r.max_output_tokens,
                "model_args": r.extra,
            })),
            "prompt": format!("{}@{}", self.prompt_name, self.prompt_sha256),
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "max_cost": self.max_cost,
            "command_timeout_s": self.command_timeout.as_secs_f64(),
            "task_timeout_s": self.task_timeout.as_secs_f64(),
            "test_timeout_s": self.test_timeout.as_secs_f64(),
            "sandbox": sandbox_used,
            "junit_path": self.junit_path,
            "allow_network": self.allow_network,
            "limits": self.limits,
        });
        // The template decides what grades tasks that have no test command,
        // so a resume or merge must use the same. It is in the fingerprint
        // only when given, so run folders from before it was keep resuming.
        // (`--repo-base` is not: it says where a commit comes from, and a
        // full sha pins what it holds.)
        self.add_request_fields(&mut fingerprint);
        // The commit a dataset's rows came from (their hashes are in
        // task_file_sha256 already): in the fingerprint only for a dataset,
        // so task-file runs from before datasets keep resuming.
        if let (Some(dataset), Some(fields)) = (&self.dataset, fingerprint.as_object_mut()) {
            fields.insert(
                "dataset".to_owned(),
                serde_json::json!(dataset.fingerprint()),
            );
        }
        // The hosts a task may reach change what it can do; only when
        // given, so run folders from before the flag keep resuming.
        if let (Some(hosts), Some(fields)) = (&self.allowed_hosts, fingerprint.as_object_mut()) {
            fields.insert("allow_hosts".to_owned(), serde_json::json!(hosts));
        }
        // Likewise the dataset and version of a registry read.
        if let (Some(registry), Some(fields)) = (&self.registry, fingerprint.as_object_mut()) {
            fields.insert(
                "registry_dataset".to_owned(),
                serde_json::json!(registry.fingerprint()),
            );
        }
        if let (Some(template), Some(fields)) = (&self.test_command, fingerprint.as_object_mut()) {
            fields.insert("test_command".to_owned(), serde_json::json!(template));
        }
        // The rules a verdict is reached by; when not given, the rows'
        // format decides, and the rows are in task_file_sha256 already.
        if let (Some(rules), Some(fields)) = (self.grading, fingerprint.as_object_mut()) {
            fields.insert("grading".to_owned(), serde_json::json!(rules));
        }
        // Likewise `--history none`: the default is what runs from before
        // the flag did (as far as the past goes).
        // The predictions are their bytes, wherever the file is: a resume
        // or a shard with a changed file is refused, a moved one is not.
        if let (Some(predictions), Some(fields)) = (&self.predictions, fingerprint.as_object_mut())
        {
            fields.insert("model".to_owned(), serde_json::json!("predictions"));
            fields.insert(
                "predictions_sha256".to_owned(),
                serde_json::json!(predictions.sha256),
            );
        }
        if let (History::None, Some(fields)) = (self.history, fingerprint.as_object_mut()) {
            fields.insert("history".to_owned(), serde_json::json!(self.history));
        }
        self.add_env_fields(&mut fingerprint);
        fingerprint
    }

    /// The request settings added after the first version, each only when
    /// given: extended thinking and the reasoning effort.
    fn add_request_fields(&self, fingerprint: &mut serde_json::Value) {
        let ModelChoice::Api(api) = &self.model else {
            return;
        };
        let Some(request) = fingerprint
            .get_mut("request")
            .and_then(serde_json::Value::as_object_mut)
        else {
            return;
        };
        // Thinking changes what the model answers; it is there only when
        // asked for, so runs from before the flag keep resuming. (Prompt
        // caching changes only the bill.)
        if let Some(budget) = api.request.thinking_budget {
            request.insert("thinking_budget".to_owned(), serde_json::json!(budget));
            request.insert(
                "interleaved_thinking".to_owned(),
                serde_json::json!(api.request.interleaved_thinking),
            );
        }
        // The reasoning effort changes what the model does; in the
        // fingerprint only when given, as above.
        if let Some(effort) = api.request.reasoning_effort {
            request.insert("reasoning_effort".to_owned(), serde_json::json!(effort));
        }
    }

    /// A container environment: its image names and where the working copy
    /// goes decide what the commands find.
    fn add_env_fields(&self, fingerprint: &mut serde_json::Value) {
        if let (EnvKind::Podman | EnvKind::Docker | EnvKind::Oci, Some(fields)) =
            (self.env_kind, fingerprint.as_object_mut())
        {
            fields.insert("env".to_owned(), serde_json::json!(self.env_kind));
            fields.insert("image".to_owned(), serde_json::json!(self.image));
            fields.insert("workdir".to_owned(), serde_json::json!(self.workdir));
            fields.insert("cpus".to_owned(), serde_json::json!(self.cpus));
        }
    }
}
