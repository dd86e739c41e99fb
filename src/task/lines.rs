//! Reading task lines: [`load_tasks`] reads a JSONL task file once (its
//! tasks and the sha256 of the bytes they came from) and checks every
//! line before anything runs; [`parse_rows`] checks a dataset's rows the
//! same way. A line of another format is rewritten by the source that
//! reads it, and each task gets the benchmark handle of the source that
//! claims it (registry.rs). Also the reading back of a task from its
//! trajectory's header, for `regrade`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::task::error::{BadLine, FieldError, LineError};
use crate::task::source::{ParsedLine, Source, Swebench5Fields};
use crate::task::spec::{LoadOptions, MAX_SECONDS, TaskFile, TaskFileError, TaskId, TaskSpec};

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            repo_base: crate::task::swebench::DEFAULT_REPO_BASE.to_owned(),
            test_command: None,
            image: None,
        }
    }
}

impl TaskSpec {
    /// A task read back from its trajectory's header (what [`to_json`]
    /// wrote), by the loading code of a task line, for `regrade`: the same
    /// fields, the repo where the run found it, and a SWE-bench instance's
    /// eval again when the run graded it by SWE-bench's recipe.
    /// `graded_by_recipe` is what the run recorded (its `test` event); a
    /// trajectory from before the record (`None`) is taken as graded so
    /// when the header's test command is today's eval script, and when it
    /// is not, the second value is a warning (the caller names the task):
    /// its rows are graded by onebash's own rules then. A recipe the run used but that
    /// cannot be built today is `Some(Err)`. A Harbor task's own settings
    /// are not in the header: its reward decides, not a test log.
    ///
    /// [`to_json`]: TaskSpec::to_json
    pub(crate) fn from_header(
        task: &Value,
        graded_by_recipe: Option<bool>,
    ) -> Result<(TaskSpec, Option<String>), LineError> {
        let Value::Object(fields) = task else {
            return Err(LineError::NotAnObject);
        };
        let mut fields = fields.clone();
        let location = fields.remove("repo_location");
        let (mut spec, line) = parse_line(fields, Path::new("/"), &LoadOptions::default())?;
        if let Some(Value::String(location)) = location {
            spec.repo_location = location;
        }
        let warning = crate::task::swebench::reread(&mut spec, &line, graded_by_recipe);
        Ok((spec, warning))
    }
}

/// Reads and checks a whole task file. Every bad line is reported as
/// `FILE:LINE: what is wrong`; nothing is returned unless all lines are good.
///
/// The file is read once: the tasks and the hash come from the same bytes,
/// also when the file is a pipe (`<(jq ...)`) or changes meanwhile.
pub(crate) fn load_tasks(path: &Path, options: &LoadOptions) -> Result<TaskFile, TaskFileError> {
    let bytes = std::fs::read(path).map_err(|source| TaskFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let base_dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let tasks = parse_tasks_with(&text, &path.display().to_string(), &base_dir, options)?;
    Ok(TaskFile {
        tasks,
        sha256: format!("{:x}", Sha256::digest(&bytes)),
    })
}

/// [`parse_tasks_with`] with the default options.
#[cfg(test)]
pub(crate) fn parse_tasks(
    text: &str,
    file_name: &str,
    base_dir: &Path,
) -> Result<Vec<TaskSpec>, TaskFileError> {
    parse_tasks_with(text, file_name, base_dir, &LoadOptions::default())
}

/// The parsing half of [`load_tasks`], separate so it can be tested on strings.
pub(crate) fn parse_tasks_with(
    text: &str,
    file_name: &str,
    base_dir: &Path,
    options: &LoadOptions,
) -> Result<Vec<TaskSpec>, TaskFileError> {
    let rows = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| (index + 1, object_of_line(line)));
    parse_rows(rows, file_name, base_dir, options)
}

/// One line of a task file or row of a dataset, as read: its 1-based
/// number, and its fields or why it could not be read.
pub(crate) type Row = (usize, Result<Map<String, Value>, LineError>);

/// Checks every row of a task file or dataset (`source` names it in each
/// error: `SOURCE:ROW: what is wrong`); nothing is returned unless all
/// rows are good. Relative repo paths are resolved against `base_dir`.
pub(crate) fn parse_rows(
    rows: impl IntoIterator<Item = Row>,
    source: &str,
    base_dir: &Path,
    options: &LoadOptions,
) -> Result<Vec<TaskSpec>, TaskFileError> {
    let mut tasks = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (line_no, fields) in rows {
        let parsed = fields
            .and_then(|fields| parse_fields(fields, base_dir, options))
            .and_then(|task| {
                if seen.insert(task.id.as_str().to_owned()) {
                    Ok(task)
                } else {
                    Err(LineError::DuplicateId(task.id.as_str().to_owned()))
                }
            });
        match parsed {
            Ok(task) => tasks.push(task),
            Err(error) => errors.push(BadLine {
                file: source.to_owned(),
                line: line_no,
                error,
            }),
        }
    }
    if !errors.is_empty() {
        return Err(TaskFileError::Lines(errors));
    }
    if tasks.is_empty() {
        return Err(TaskFileError::NoTask {
            file: source.to_owned(),
        });
    }
    Ok(tasks)
}

/// A line of a task file as the object it must be.
fn object_of_line(line: &str) -> Result<Map<String, Value>, LineError> {
    match serde_json::from_str(line).map_err(LineError::Json)? {
        Value::Object(fields) => Ok(fields),
        _ => Err(LineError::NotAnObject),
    }
}

fn parse_fields(
    fields: Map<String, Value>,
    base_dir: &Path,
    options: &LoadOptions,
) -> Result<TaskSpec, LineError> {
    parse_line(fields, base_dir, options).map(|(task, _)| task)
}

/// A line as its task, and what its benchmark was chosen by.
fn parse_line(
    mut fields: Map<String, Value>,
    base_dir: &Path,
    options: &LoadOptions,
) -> Result<(TaskSpec, ParsedLine), LineError> {
    // A line of another format becomes a onebash line first.
    let reader = crate::task::registry::line_reader(&fields);
    if let Some(reader) = reader {
        reader.convert_line(&mut fields, options)?;
    }
    // A line whose format grades it needs no test command (below).
    let instance = reader.is_some_and(|r| r.grades_itself());
    let mut problems = Vec::new();
    let id = take_string(&mut fields, "id", true, &mut problems);
    let repo = take_string(&mut fields, "repo", true, &mut problems);
    let base_commit = take_string(&mut fields, "base_commit", true, &mut problems);
    let problem_statement = take_string(&mut fields, "problem_statement", true, &mut problems);
    // An instance without one is graded by SWE-bench's recipe (below).
    let test_command = take_string(
        &mut fields,
        "test_command",
        options.test_command.is_none() && !instance,
        &mut problems,
    );
    let setup_command = take_string(&mut fields, "setup_command", false, &mut problems);
    let test_patch = take_string(&mut fields, "test_patch", false, &mut problems);
    let gold_patch = take_string(&mut fields, "gold_patch", false, &mut problems);
    let image = take_string(&mut fields, "image", false, &mut problems);
    let workdir = take_string(&mut fields, "workdir", false, &mut problems);
    let swebench5 = take_row_fields(&mut fields, &mut problems);
    let repo_in_image = take_bool(
        &mut fields,
        "repo_in_image",
        reader.is_some_and(|r| r.repo_in_image()),
        &mut problems,
    );
    let fail_to_pass = take_string_list(&mut fields, "fail_to_pass", &mut problems);
    let pass_to_pass = take_string_list(&mut fields, "pass_to_pass", &mut problems);
    let test_timeout_s = take_seconds(&mut fields, "test_timeout_s", &mut problems);
    let metadata = take_object(&mut fields, "metadata", &mut problems);
    let id = id.and_then(|raw| {
        TaskId::parse(&raw)
            .map_err(|error| problems.push(error.into()))
            .ok()
    });
    check_values(
        [
            ("repo", &repo),
            ("base_commit", &base_commit),
            ("test_command", &test_command),
        ],
        image.as_deref(),
        workdir.as_deref(),
        &mut problems,
    );
    if !problems.is_empty() {
        return Err(LineError::Fields(problems));
    }
    // Every required field is present here: a missing one added a problem
    // above (test_command is optional only when a template is given).
    let (Some(id), Some(repo), Some(base_commit), Some(problem_statement)) =
        (id, repo, base_commit, problem_statement)
    else {
        return Err(LineError::RequiredGone);
    };
    let repo_location = resolve_repo(&repo, base_dir);
    let line = ParsedLine {
        converted_by: reader.map(|r| r.name()),
        repo_in_image,
        row: swebench5,
    };
    let claimer = crate::task::registry::claimer(&line);
    let mut task = TaskSpec {
        id,
        repo,
        repo_location,
        base_commit,
        problem_statement,
        test_command: test_command.clone().unwrap_or_default(),
        setup_command,
        test_patch,
        gold_patch,
        fail_to_pass,
        pass_to_pass,
        test_timeout_s,
        metadata,
        image,
        workdir,
        benchmark: claimer.benchmark(&line, None),
        extra: fields,
    };
    if instance && test_command.is_none() && options.test_command.is_none() {
        give_recipe(&mut task, claimer, &line);
    }
    complete_from_options(&mut task, test_command.is_some(), options)?;
    Ok((task, line))
}

/// swebench 5's row fields of a line. Only such a row (one with its own
/// eval script or log parser) has them: on another line `eval_type` stays
/// the line's own field, as written.
fn take_row_fields(
    fields: &mut Map<String, Value>,
    problems: &mut Vec<FieldError>,
) -> Swebench5Fields {
    let mut row = Swebench5Fields {
        eval_script: take_string(fields, "eval_script", false, problems),
        log_parser: take_string(fields, "log_parser", false, problems),
        eval_type: take_string(fields, "eval_type", false, problems),
    };
    if !row.is_swebench5()
        && let Some(eval_type) = row.eval_type.take()
    {
        fields.insert("eval_type".to_owned(), Value::String(eval_type));
    }
    row
}

/// A task graded by its format's recipe: the recipe's script is its test
/// command, or the reason it has none is the task's error.
fn give_recipe(task: &mut TaskSpec, claimer: &dyn Source, line: &ParsedLine) {
    let recipe = claimer.recipe(task, line);
    if let Some(Ok(eval)) = &recipe {
        task.test_command = eval.script.clone();
    }
    task.benchmark = claimer.benchmark(line, recipe);
}

/// Takes the optional boolean `key` out of `fields` (`default` when it is
/// absent or null), adding a problem when it is something else.
fn take_bool(
    fields: &mut Map<String, Value>,
    key: &'static str,
    default: bool,
    problems: &mut Vec<FieldError>,
) -> bool {
    match fields.remove(key) {
        None | Some(Value::Null) => default,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            problems.push(FieldError::Kind {
                field: key,
                expected: "a boolean",
                got: kind_of(&other),
            });
            false
        }
    }
}

/// Takes the optional number of seconds `key` out of `fields`: positive,
/// at most [`MAX_SECONDS`]; a problem when it is not.
fn take_seconds(
    fields: &mut Map<String, Value>,
    key: &'static str,
    problems: &mut Vec<FieldError>,
) -> Option<f64> {
    match fields.remove(key) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(s) if s > 0.0 && s <= MAX_SECONDS => Some(s),
            _ => {
                problems.push(FieldError::Seconds {
                    field: key,
                    at_most: MAX_SECONDS,
                    value: n,
                });
                None
            }
        },
        Some(other) => {
            problems.push(FieldError::Kind {
                field: key,
                expected: "a number",
                got: kind_of(&other),
            });
            None
        }
    }
}

/// Takes the optional object `key` out of `fields`; a problem when it is
/// something else.
fn take_object(
    fields: &mut Map<String, Value>,
    key: &'static str,
    problems: &mut Vec<FieldError>,
) -> Option<Map<String, Value>> {
    match fields.remove(key) {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(other) => {
            problems.push(FieldError::Kind {
                field: key,
                expected: "an object",
                got: kind_of(&other),
            });
            None
        }
    }
}

/// The fields that must not be empty when given, and `workdir`'s form.
fn check_values(
    non_empty: [(&'static str, &Option<String>); 3],
    image: Option<&str>,
    workdir: Option<&str>,
    problems: &mut Vec<FieldError>,
) {
    for (name, value) in non_empty {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            problems.push(FieldError::Empty(name));
        }
    }
    if image.is_some_and(|v| v.trim().is_empty()) {
        problems.push(FieldError::Empty("image"));
    }
    if let Some(dir) = workdir
        && (!dir.starts_with('/') || dir.trim_end_matches('/').is_empty())
    {
        problems.push(FieldError::Workdir(dir.to_owned()));
    }
}

/// What a parsed line gets from the flags: a line without a test command
/// `--test-command`'s rendering, a line without an image `--image`'s.
fn complete_from_options(
    task: &mut TaskSpec,
    has_test_command: bool,
    options: &LoadOptions,
) -> Result<(), LineError> {
    if !has_test_command && let Some(template) = &options.test_command {
        let files = task
            .test_patch
            .as_deref()
            .map(crate::task::swebench::patch_files)
            .unwrap_or_default();
        let mut context = task.to_json();
        context.insert("test_files".to_owned(), serde_json::json!(files));
        task.test_command = render_template("--test-command", template, context)?;
    }
    if task.image.is_none()
        && let Some(template) = &options.image
    {
        // SWE-bench's image names are made of `instance_id`, which an
        // instance line's `id` was.
        let mut context = task.to_json();
        context
            .entry("instance_id")
            .or_insert_with(|| serde_json::json!(task.id.as_str()));
        task.image = Some(
            render_template("--image", template, context)?
                .trim()
                .to_owned(),
        );
    }
    Ok(())
}

/// Renders a template flag for a task over `context` (its fields, and
/// `test_files` for `--test-command`, `instance_id` for `--image`).
/// Undefined variables are errors.
fn render_template(
    flag: &'static str,
    template: &str,
    context: Map<String, Value>,
) -> Result<String, LineError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    let rendered = env
        .render_str(template, context)
        .map_err(|source| LineError::Render { flag, source })?;
    if rendered.trim().is_empty() {
        return Err(LineError::RendersEmpty { flag });
    }
    Ok(rendered)
}

/// A URL stays as written; a path is made absolute against the task file's folder.
fn resolve_repo(repo: &str, base_dir: &Path) -> String {
    let is_url = repo.contains("://") || looks_like_scp_url(repo);
    if is_url {
        return repo.to_owned();
    }
    let path = Path::new(repo);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base_dir.join(path)
    };
    // Canonicalizing gives stable cache keys; a path that does not exist yet is
    // kept as joined and fails later, at checkout, with a message naming it.
    std::fs::canonicalize(&joined)
        .unwrap_or(joined)
        .display()
        .to_string()
}

/// `git@host:owner/name.git`: scp-like ssh syntax, which has a colon before any slash.
fn looks_like_scp_url(repo: &str) -> bool {
    match (repo.find(':'), repo.find('/')) {
        (Some(colon), Some(slash)) => colon < slash && repo[..colon].contains('@'),
        (Some(_), None) => repo.contains('@'),
        _ => false,
    }
}

fn take_string(
    fields: &mut Map<String, Value>,
    name: &'static str,
    required: bool,
    problems: &mut Vec<FieldError>,
) -> Option<String> {
    match fields.remove(name) {
        Some(Value::String(s)) => Some(s),
        None | Some(Value::Null) => {
            if required {
                problems.push(FieldError::Missing(name));
            }
            None
        }
        Some(other) => {
            problems.push(FieldError::Kind {
                field: name,
                expected: "a string",
                got: kind_of(&other),
            });
            None
        }
    }
}

fn take_string_list(
    fields: &mut Map<String, Value>,
    name: &'static str,
    problems: &mut Vec<FieldError>,
) -> Option<Vec<String>> {
    match fields.remove(name) {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => out.push(s),
                    other => {
                        problems.push(FieldError::Item {
                            field: name,
                            got: kind_of(&other),
                        });
                        return None;
                    }
                }
            }
            Some(out)
        }
        Some(other) => {
            problems.push(FieldError::Kind {
                field: name,
                expected: "a list of strings",
                got: kind_of(&other),
            });
            None
        }
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::Rules;
    use crate::task::error::IdError;

    /// A dataset's rows go through the line checks: numbered as given
    /// (an unreadable row keeps its number), each error as
    /// `SOURCE:ROW: ...`, and a swebench 5 row keeps its own eval script,
    /// parser and type.
    #[test]
    fn rows_are_checked_as_lines_are() {
        let row =
            |text: &str| -> Map<String, Value> { serde_json::from_str(text).expect("an object") };
        let good = row(
            r##"{"id": "a", "repo": "/r", "base_commit": "HEAD", "problem_statement": "p", "test_command": "true", "eval_script": "#!/bin/bash\npytest", "log_parser": "pytest", "eval_type": "pytest"}"##,
        );
        let tasks = parse_rows(
            [(1, Ok(good.clone()))],
            "hf:acme/tasks",
            Path::new("/"),
            &LoadOptions::default(),
        )
        .expect("valid");
        let json = tasks[0].to_json();
        assert_eq!(json["eval_script"], "#!/bin/bash\npytest");
        assert_eq!(json["log_parser"], "pytest");
        assert_eq!(json["eval_type"], "pytest");
        // Its format picks swebench 5.0's rules unless --grading says.
        assert_eq!(tasks[0].rules(None), Rules::Swebench50);
        assert_eq!(tasks[0].rules(Some(Rules::Swebench41)), Rules::Swebench41);
        let mut bad = good.clone();
        bad.insert("id".to_owned(), Value::from("b"));
        bad.insert("eval_script".to_owned(), Value::from(3));
        let err = parse_rows(
            [
                (1, Ok(good)),
                (2, Err(LineError::NotAnObject)),
                (3, Ok(bad)),
            ],
            "hf:acme/tasks",
            Path::new("/"),
            &LoadOptions::default(),
        )
        .expect_err("bad rows");
        assert_eq!(
            err.to_string(),
            "hf:acme/tasks:2: expected a JSON object\nhf:acme/tasks:3: `eval_script` must be a string, got a number"
        );
    }

    const GOOD: &str = r#"{"id":"t1","repo":"https://example.com/r.git","base_commit":"abc","problem_statement":"fix it","test_command":"true"}"#;

    fn parse(text: &str) -> Result<Vec<TaskSpec>, Vec<String>> {
        parse_tasks(text, "tasks.jsonl", Path::new("/base")).map_err(|err| match err {
            TaskFileError::Lines(lines) => lines.iter().map(ToString::to_string).collect(),
            other => vec![other.to_string()],
        })
    }

    #[test]
    fn good_line_parses_and_keeps_unknown_fields() {
        let line = GOOD.replace(
            "}",
            r#","metadata":{"k":1},"extra_field":[1],"test_timeout_s":5}"#,
        );
        let tasks = parse(&format!("\n{line}\n\n")).expect("valid");
        assert_eq!(tasks.len(), 1);
        let task = &tasks[0];
        assert_eq!(task.id.as_str(), "t1");
        assert_eq!(task.test_timeout_s, Some(5.0));
        assert!(task.extra.contains_key("extra_field"));
        assert_eq!(task.repo_location, "https://example.com/r.git");
    }

    #[test]
    fn every_bad_line_is_reported_with_file_and_line() {
        let cases = [
            ("not json", "tasks.jsonl:1: not valid JSON"),
            ("[1,2]", "tasks.jsonl:1: expected a JSON object"),
            (
                r#"{"id":"x","repo":"r","base_commit":"c","problem_statement":"p"}"#,
                "tasks.jsonl:1: missing required field `test_command`",
            ),
            (
                r#"{"id":5,"repo":"r","base_commit":"c","problem_statement":"p","test_command":"t"}"#,
                "tasks.jsonl:1: `id` must be a string, got a number",
            ),
            (
                r#"{"id":"../x","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t"}"#,
                "contains '/'",
            ),
            (
                r#"{"id":"..","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t"}"#,
                "would name a parent",
            ),
            (
                r#"{"id":"a","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t","fail_to_pass":"x"}"#,
                "`fail_to_pass` must be a list of strings",
            ),
            (
                r#"{"id":"a","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t","test_timeout_s":-1}"#,
                "`test_timeout_s` must be a positive number",
            ),
            (
                r#"{"id":"a","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t","test_timeout_s":1e19}"#,
                "`test_timeout_s` must be a positive number of seconds, at most 1e9",
            ),
            (
                r#"{"id":"a","repo":"","base_commit":"c","problem_statement":"p","test_command":"t"}"#,
                "`repo` must not be empty",
            ),
            (
                r#"{"id":"a","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t","workdir":"testbed"}"#,
                "`workdir` must be an absolute path other than `/`",
            ),
            (
                r#"{"id":"a","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t","workdir":"/"}"#,
                "`workdir` must be an absolute path other than `/`",
            ),
            (
                r#"{"id":"a","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t","image":" "}"#,
                "`image` must not be empty",
            ),
        ];
        for (line, expected) in cases {
            let errors = parse(line).expect_err(line);
            assert_eq!(errors.len(), 1, "{line}: {errors:?}");
            assert!(errors[0].contains(expected), "{line}: {errors:?}");
            assert!(errors[0].starts_with("tasks.jsonl:1:"), "{errors:?}");
        }
    }

    /// A line's problems are typed: each names its field and the value
    /// found, all of them in the line's one error, under FILE:LINE.
    #[test]
    fn a_bad_line_keeps_each_field_and_value() {
        let line = r#"{"id":"a/b","repo":"r","base_commit":"c","problem_statement":7,"test_command":"t","workdir":"rel"}"#;
        let text = format!("{GOOD}\n{line}\n");
        let err = parse_tasks(&text, "tasks.jsonl", Path::new("/")).expect_err("bad line");
        let TaskFileError::Lines(lines) = &err else {
            panic!("{err:?}");
        };
        let [bad] = lines.as_slice() else {
            panic!("{lines:?}");
        };
        assert_eq!((bad.file.as_str(), bad.line), ("tasks.jsonl", 2));
        let LineError::Fields(fields) = &bad.error else {
            panic!("{bad:?}");
        };
        assert!(
            matches!(
                fields.as_slice(),
                [
                    FieldError::Kind {
                        field: "problem_statement",
                        expected: "a string",
                        got: "a number"
                    },
                    FieldError::Id(IdError::Character { bad: '/', .. }),
                    FieldError::Workdir(dir),
                ] if dir == "rel"
            ),
            "{fields:?}"
        );
        assert_eq!(
            err.to_string(),
            "tasks.jsonl:2: `problem_statement` must be a string, got a number; \
             `id` \"a/b\" contains '/'; only letters, digits, `.`, `_` and `-` are allowed; \
             `workdir` must be an absolute path other than `/`, got \"rel\""
        );
    }

    #[test]
    fn duplicate_ids_are_caught() {
        let errors = parse(&format!("{GOOD}\n{GOOD}\n")).expect_err("duplicate");
        assert_eq!(
            errors,
            vec!["tasks.jsonl:2: duplicate id \"t1\" (ids must be unique in the file)"]
        );
    }

    #[test]
    fn long_error_lists_are_cut_at_twenty() {
        let text = "x\n".repeat(25);
        let err = parse_tasks(&text, "f", Path::new(".")).expect_err("bad");
        let rendered = err.to_string();
        assert_eq!(rendered.lines().count(), 21);
        assert!(rendered.ends_with("... and 5 more bad lines"));
    }

    #[test]
    fn empty_file_is_an_error() {
        assert!(parse("\n\n").is_err());
    }

    #[test]
    fn relative_repo_paths_resolve_against_the_task_file() {
        let line = GOOD.replace("https://example.com/r.git", "repos/r.git");
        let tasks = parse(&line).expect("valid");
        assert_eq!(tasks[0].repo_location, "/base/repos/r.git");
        assert_eq!(tasks[0].repo, "repos/r.git");
    }

    #[test]
    fn scp_like_urls_are_not_paths() {
        assert!(looks_like_scp_url("git@github.com:owner/name.git"));
        assert!(!looks_like_scp_url("repos/a:b"));
        assert!(!looks_like_scp_url("relative/path"));
    }

    /// No input makes the parser panic: random lines built from JSON-ish
    /// pieces, with a fixed seed so a failure reproduces.
    #[test]
    fn random_lines_never_panic() {
        const PIECES: &[&str] = &[
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"id\"",
            "\"repo\"",
            "\"base_commit\"",
            "\"problem_statement\"",
            "\"test_command\"",
            "\"metadata\"",
            "\"test_timeout_s\"",
            "\"fail_to_pass\"",
            "\"x\"",
            "\"../a\"",
            "\"\"",
            "1",
            "-1",
            "1e999",
            "null",
            "true",
            "\"\\u0000\"",
            "\"é\"",
            " ",
            "\n",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2000 {
            let len = next() % 40;
            let line: String = (0..len)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            let _ = parse_tasks(&line, "f", Path::new("/"));
        }
    }

    #[test]
    fn the_repo_in_the_image_is_the_default_of_swebench_lines_only() {
        let instance = r#"{"instance_id":"o__r-1","repo":"o/r","base_commit":"abc","problem_statement":"p","test_command":"true"}"#;
        let text = format!("{GOOD}\n{instance}\n");
        let tasks = parse_tasks(&text, "f", Path::new("/")).expect("valid");
        assert!(!tasks[0].repo_in_image());
        assert!(tasks[1].repo_in_image());
        assert_eq!(tasks[1].to_json()["repo_in_image"], true);
        assert!(!tasks[0].to_json().contains_key("repo_in_image"));
        let text = format!(
            "{}\n{}\n",
            GOOD.replace("}", r#","repo_in_image":true}"#),
            instance.replace("}", r#","repo_in_image":false}"#)
        );
        let tasks = parse_tasks(&text, "f", Path::new("/")).expect("valid");
        assert!(tasks[0].repo_in_image());
        assert!(!tasks[1].repo_in_image());
        let err = parse_tasks(
            &GOOD.replace("}", r#","repo_in_image":"yes"}"#),
            "f",
            Path::new("/"),
        )
        .expect_err("not a boolean");
        assert!(
            err.to_string()
                .contains("`repo_in_image` must be a boolean, got a string"),
            "{err}"
        );
    }

    #[test]
    fn swebench_lines_read_beside_onebash_lines_with_a_test_command_template() {
        let text = format!(
            "{GOOD}\n{}\n",
            r#"{"instance_id":"o__r-1","repo":"o/r","base_commit":"abc","problem_statement":"p","patch":"diff --git a/src/x.py b/src/x.py","test_patch":"diff --git a/tests/test_x.py b/tests/test_x.py\n","FAIL_TO_PASS":"[\"tests/test_x.py::test_a\"]","PASS_TO_PASS":"[]","version":"1.0"}"#
        );
        let options = LoadOptions {
            repo_base: "/mirrors".to_owned(),
            test_command: Some(
                "pytest -rA {{ test_files | join(' ') }}  # {{ metadata.version }}".to_owned(),
            ),
            image: Some(
                r#"swebench/sweb.eval.x86_64.{{ instance_id | lower | replace("__", "_1776_") }}:latest"#
                    .to_owned(),
            ),
        };
        let tasks = parse_tasks_with(&text, "f", Path::new("/"), &options).expect("valid");
        assert_eq!(tasks[0].test_command, "true", "a task's own command wins");
        // SWE-bench's rule, over the instance's id; a onebash line's id
        // stands in for `instance_id`.
        assert_eq!(
            tasks[1].image.as_deref(),
            Some("swebench/sweb.eval.x86_64.o_1776_r-1:latest")
        );
        assert_eq!(
            tasks[0].image.as_deref(),
            Some("swebench/sweb.eval.x86_64.t1:latest")
        );
        let own = GOOD.replace("}", r#","image":"mine:1","workdir":"/src"}"#);
        let tasks_own = parse_tasks_with(&own, "f", Path::new("/"), &options).expect("valid");
        assert_eq!(
            tasks_own[0].image.as_deref(),
            Some("mine:1"),
            "a task's own image wins"
        );
        assert_eq!(tasks_own[0].workdir.as_deref(), Some("/src"));
        let instance = &tasks[1];
        assert_eq!(instance.id.as_str(), "o__r-1");
        assert_eq!(instance.repo, "/mirrors/o/r.git");
        assert_eq!(
            instance.gold_patch.as_deref(),
            Some("diff --git a/src/x.py b/src/x.py")
        );
        assert_eq!(
            instance.fail_to_pass,
            Some(vec!["tests/test_x.py::test_a".to_owned()])
        );
        assert_eq!(instance.pass_to_pass, Some(vec![]));
        assert_eq!(instance.test_command, "pytest -rA tests/test_x.py  # 1.0");
        let bad = LoadOptions {
            test_command: Some("{{ nope }}".to_owned()),
            ..LoadOptions::default()
        };
        let err = parse_tasks_with(&text, "f", Path::new("/"), &bad).expect_err("undefined");
        assert!(
            err.to_string()
                .contains("f:2: failed to render --test-command"),
            "{err}"
        );
    }

    /// `regrade` rebuilds a task from what its trajectory's header holds:
    /// the same fields, and a SWE-bench instance graded SWE-bench's way
    /// gets its eval again; one whose test command is another's does not.
    #[test]
    fn a_header_s_task_reads_back_as_the_task_it_was() {
        let line = serde_json::json!({
            "instance_id": "psf__requests-1",
            "repo": "psf/requests",
            "base_commit": "abc1234",
            "problem_statement": "p",
            "patch": "diff --git a/x.py b/x.py\n",
            "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
            "FAIL_TO_PASS": "[\"tests/test_x.py::test_a\"]",
            "PASS_TO_PASS": "[]",
            "version": "2.0",
            "hints_text": "kept as an unknown field",
        });
        let tasks = parse_tasks(&line.to_string(), "t.jsonl", Path::new("/")).expect("a task");
        let task = &tasks[0];
        let Some(eval) = task.recipe() else {
            panic!("requests 2.0 has a recipe: {:?}", task.benchmark)
        };
        let header = Value::Object(task.to_json());
        let (again, warning) = TaskSpec::from_header(&header, None).expect("reads back");
        assert_eq!(warning, None);
        assert_eq!(Value::Object(again.to_json()), header);
        assert_eq!(again.repo_location, task.repo_location);
        assert_eq!(again.recipe(), Some(eval));
        let mut other = task.to_json();
        other.insert("test_command".to_owned(), Value::from("pytest -x"));
        let other = Value::Object(other);
        // An old trajectory: graded by onebash's own rules, and named.
        let (again, warning) = TaskSpec::from_header(&other, None).expect("reads back");
        assert!(again.recipe().is_none());
        assert!(warning.is_some_and(|w| w.contains("own rules")));
        // The run recorded either way: trusted, and no warning.
        let (again, warning) = TaskSpec::from_header(&other, Some(true)).expect("reads back");
        assert_eq!(again.recipe(), Some(eval));
        assert_eq!(warning, None);
        let (again, warning) = TaskSpec::from_header(&header, Some(false)).expect("reads back");
        assert!(again.recipe().is_none() && warning.is_none());
        assert!(matches!(
            TaskSpec::from_header(&Value::from("a string"), None),
            Err(LineError::NotAnObject)
        ));
        // A swebench 5 row: its own script and parser, read back too.
        let row = serde_json::json!({
            "instance_id": "o__r-5",
            "repo": "o/r",
            "base_commit": "abc1234",
            "problem_statement": "p",
            "FAIL_TO_PASS": "[\"tests/test_x.py::test_a\"]",
            "PASS_TO_PASS": "[]",
            "eval_script": "#!/bin/bash\npytest -rA tests/test_x.py",
            "log_parser": "parse_log_pytest",
            "eval_type": "pass_and_fail",
        });
        let tasks = parse_tasks(&row.to_string(), "t.jsonl", Path::new("/")).expect("a task");
        let eval = tasks[0].recipe().expect("graded by its row's recipe");
        let (again, _) =
            TaskSpec::from_header(&Value::Object(tasks[0].to_json()), None).expect("reads back");
        assert_eq!(again.recipe(), Some(eval));
        assert_eq!(again.rules(None), Rules::Swebench50);
    }
}
