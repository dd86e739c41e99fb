//! SWE-bench's own eval recipe per repo and version, as data.
//!
//! Owns the table `scripts/swebench-specs.py` writes from the `swebench`
//! package (data/swebench-specs.json, embedded: onebash needs no Python at
//! run time), the test directives SWE-bench derives from a `test_patch`,
//! the eval script it runs, per language as `harness/test_spec` builds it
//! (Python: env activation, the spec's eval commands and install step, the
//! test command on the directives; the other languages: the spec's build
//! steps and its test commands as they are, wp-calypso's derived from the
//! test patch), and its image names. Reading the log and the verdict are
//! log.rs's; the test patch itself goes in through runner/test_run.rs, as for
//! every task, so the package's reset and apply lines are rendered only in
//! [`package_script`], the script the parity tests compare with the
//! package's.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::grade::swebench::{END_TEST_OUTPUT, Parser, ParserError, START_TEST_OUTPUT, parser_for};

/// The generated table, embedded.
const SPECS_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/swebench-specs.json"
));

/// data/swebench-specs.json.
#[derive(Debug, Deserialize)]
pub struct Specs {
    /// The `swebench` package the table was read from.
    pub swebench_version: String,
    /// The lines that activate the testbed environment in its images.
    pub env_activation: Vec<String>,
    /// Where the repo is in SWE-bench's images.
    pub repo_directory: String,
    /// Endings of files in a test patch that are not tests.
    pub non_test_exts: Vec<String>,
    /// Repos graded by "no test FAILED" rather than by passes.
    #[serde(default)]
    pub fail_only_repos: Vec<String>,
    pub repos: BTreeMap<String, RepoSpecs>,
}

/// One repo's entry.
#[derive(Debug, Deserialize)]
pub struct RepoSpecs {
    /// The constants module it came from (`py`, `js`, `go`...).
    pub language: String,
    /// The name of its function in `swebench.harness.log_parsers`.
    pub parser: Option<String>,
    pub versions: BTreeMap<String, VersionSpec>,
}

/// One version's recipe.
#[derive(Debug, Deserialize)]
pub struct VersionSpec {
    /// Missing for a few versions the package lists without one.
    pub test_cmd: Option<Commands>,
    #[serde(default)]
    pub eval_commands: Vec<String>,
    pub install: Option<Commands>,
    /// Run when the image was built; recorded, not run again.
    #[serde(default)]
    pub pre_install: Vec<String>,
    /// Run before the tests by the non-Python eval scripts (`make`,
    /// `cargo build`...).
    #[serde(default)]
    pub build: Vec<String>,
}

/// Python repos have one command; some others a list of steps.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Commands {
    One(String),
    Steps(Vec<String>),
}

impl Commands {
    fn lines(&self) -> Vec<String> {
        match self {
            Commands::One(command) => vec![command.clone()],
            Commands::Steps(steps) => steps.clone(),
        }
    }
}

/// The embedded table. It is checked by a unit test, so a table that does
/// not parse never ships.
pub fn specs() -> &'static Specs {
    static SPECS: OnceLock<Specs> = OnceLock::new();
    SPECS.get_or_init(|| {
        serde_json::from_str(SPECS_JSON).unwrap_or_else(|err| {
            // The table is embedded at build time and parsed by a unit test.
            panic!("data/swebench-specs.json does not parse: {err}")
        })
    })
}

/// How an instance is graded SWE-bench's way.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SwebenchEval {
    /// `owner/name`, as in the instance.
    pub repo: String,
    pub version: String,
    pub parser: Parser,
    /// Whether the repo is graded by "no test FAILED" (FAIL_ONLY_REPOS).
    pub fail_only: bool,
    /// The eval script: the test command onebash runs.
    pub script: String,
    /// swebench 4.1.0's Python eval script resets the test files with `git
    /// checkout BASE FILES`, FILES the files the test patch modifies; when
    /// it modifies none (it only adds files), that is a bare `git checkout
    /// BASE`, which moves HEAD off the image's setup commit and undoes what
    /// the setup committed (fixed after 4.1.0; 5.x's scripts reset files
    /// only). The command the test stage runs then under 4.1's rules, so
    /// that its verdict is 4.1.0's, bug included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bare_reset: Option<String>,
}

impl SwebenchEval {
    /// [`SwebenchEval::bare_reset`] when `rules` are 4.1's, whose script
    /// has it; 5.0's reset only files.
    pub fn bare_reset_under(&self, rules: crate::grade::swebench::Rules) -> Option<&str> {
        self.bare_reset
            .as_deref()
            .filter(|_| rules == crate::grade::swebench::Rules::Swebench41)
    }
}

/// Why an instance cannot be graded SWE-bench's way.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "SWE-bench (swebench {0}) has no eval spec for repo {1}; hint: give a test command with --test-command"
    )]
    UnknownRepo(String, String),
    #[error(
        "SWE-bench (swebench {swebench}) has no eval spec for {repo} version {version:?} (it has {known}); hint: give a test command with --test-command"
    )]
    UnknownVersion {
        swebench: String,
        repo: String,
        version: String,
        known: String,
    },
    #[error(
        "SWE-bench (swebench {0}) names no log parser for {1}; hint: give a test command with --test-command"
    )]
    NoParser(String, String),
    #[error("{source} (repo {repo}); hint: give a test command with --test-command")]
    Parser { repo: String, source: ParserError },
    #[error(
        "SWE-bench's spec for {0} version {1:?} has no test command; hint: give one with --test-command"
    )]
    NoTestCommand(String, String),
    #[error(
        "the SWE-bench instance has no `{0}`, which picks its eval spec; hint: give a test command with --test-command"
    )]
    Missing(&'static str),
    /// A swebench 5 row whose `log_parser` onebash cannot read by.
    #[error("the row's log_parser: {0}; hint: give a test command with --test-command")]
    RowParser(#[source] ParserError),
    /// A swebench 5 row without one of the fields it is graded by.
    #[error(
        "the swebench 5 row has `{has}` but no `{missing}`; hint: give both, or a test command with --test-command"
    )]
    RowIncomplete {
        has: &'static str,
        missing: &'static str,
    },
    #[error("the row's eval_type {0:?} is neither \"pass_and_fail\" nor \"fail_only\"")]
    EvalType(String),
}

/// A swebench 5 row's own eval (`make_test_spec`): its `eval_script` run
/// as it is, read by its `log_parser` ([`super::parser_for_5`]), graded
/// "no test FAILED" when its `eval_type` is `fail_only` (absent:
/// `pass_and_fail`).
pub fn row_eval(
    instance: &Instance,
    eval_script: Option<&str>,
    log_parser: Option<&str>,
    eval_type: Option<&str>,
) -> Result<SwebenchEval, SpecError> {
    let (script, parser_name) = match (eval_script, log_parser) {
        (Some(script), Some(parser)) => (script, parser),
        (Some(_), None) => {
            return Err(SpecError::RowIncomplete {
                has: "eval_script",
                missing: "log_parser",
            });
        }
        (None, _) => {
            return Err(SpecError::RowIncomplete {
                has: "log_parser",
                missing: "eval_script",
            });
        }
    };
    let parser =
        super::parser_for_5(parser_name, instance.instance_id).map_err(SpecError::RowParser)?;
    let fail_only = match eval_type {
        None | Some("pass_and_fail") => false,
        Some("fail_only") => true,
        Some(other) => return Err(SpecError::EvalType(other.to_owned())),
    };
    Ok(SwebenchEval {
        repo: instance.repo.to_owned(),
        version: instance.version.to_owned(),
        parser,
        fail_only,
        script: script.to_owned(),
        bare_reset: None,
    })
}

/// The fields of an instance its eval is built from.
#[derive(Debug, Clone, Copy)]
pub struct Instance<'a> {
    /// Two repos' parsers depend on it (jekyll, immutable-js).
    pub instance_id: &'a str,
    /// `owner/name`.
    pub repo: &'a str,
    pub version: &'a str,
    /// Named only by the package's reset lines ([`package_script`]).
    pub base_commit: &'a str,
    pub test_patch: &'a str,
}

/// The eval of an instance: its parser and the script onebash runs.
pub fn eval_for(instance: &Instance) -> Result<SwebenchEval, SpecError> {
    let specs = specs();
    let (entry, spec) = lookup(specs, instance)?;
    let repo = instance.repo;
    let parser_name = entry
        .parser
        .as_deref()
        .ok_or_else(|| SpecError::NoParser(specs.swebench_version.clone(), repo.to_owned()))?;
    let parser =
        parser_for(parser_name, instance.instance_id).map_err(|source| SpecError::Parser {
            repo: repo.to_owned(),
            source,
        })?;
    let lines = script_lines(specs, entry, spec, instance)?;
    let mut script = vec!["set -uxo pipefail".to_owned()];
    script.extend(lines.into_iter().filter_map(|line| match line {
        Line::Run(line) => Some(line),
        Line::Harness(_) => None,
    }));
    Ok(SwebenchEval {
        repo: repo.to_owned(),
        version: instance.version.to_owned(),
        parser,
        fail_only: specs.fail_only_repos.iter().any(|r| r == repo),
        script: script.join("\n") + "\n",
        bare_reset: bare_reset(entry, instance),
    })
}

/// [`SwebenchEval::bare_reset`]: 4.1.0's reset of a Python instance whose
/// test patch modifies no file of the base, `git checkout BASE` with no
/// path (the base quoted for the shell).
fn bare_reset(entry: &RepoSpecs, instance: &Instance) -> Option<String> {
    let files = crate::grade::swebench::patch::modified_files(instance.test_patch);
    (entry.language == "py" && files.is_empty()).then(|| {
        format!(
            "git checkout '{}'",
            instance.base_commit.replace('\'', r"'\''")
        )
    })
}

/// The package's whole eval script of an instance (`make_test_spec(..)
/// .eval_script`), the lines onebash does itself included: what the
/// parity tests compare.
pub fn package_script(instance: &Instance) -> Result<String, SpecError> {
    let specs = specs();
    let (entry, spec) = lookup(specs, instance)?;
    let mut script = vec!["#!/bin/bash".to_owned(), "set -uxo pipefail".to_owned()];
    script.extend(
        script_lines(specs, entry, spec, instance)?
            .into_iter()
            .map(|line| match line {
                Line::Run(line) | Line::Harness(line) => line,
            }),
    );
    Ok(script.join("\n") + "\n")
}

/// The repo's entry and the version's recipe, or why there is none.
fn lookup<'s>(
    specs: &'s Specs,
    instance: &Instance,
) -> Result<(&'s RepoSpecs, &'s VersionSpec), SpecError> {
    let (repo, version) = (instance.repo, instance.version);
    let entry = specs
        .repos
        .get(repo)
        .ok_or_else(|| SpecError::UnknownRepo(specs.swebench_version.clone(), repo.to_owned()))?;
    let spec = entry
        .versions
        .get(version)
        .ok_or_else(|| SpecError::UnknownVersion {
            swebench: specs.swebench_version.clone(),
            repo: repo.to_owned(),
            version: version.to_owned(),
            known: entry
                .versions
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    Ok((entry, spec))
}

/// One line of the package's eval script.
enum Line {
    /// onebash runs it.
    Run(String),
    /// onebash does it itself (runner/test_run.rs resets the test files and
    /// applies the test patch; the repo is the working directory) or leaves it
    /// out (`git status`, `git show`, `git diff` are only informational;
    /// `git config --global` would change the host's settings; the tests
    /// are not reset after the run, whose checkout or container goes).
    Harness(String),
}

/// The package's heredoc delimiter around the test patch.
const HEREDOC: &str = "EOF_114329324912";

/// `make_eval_script_list`: Python's (`make_eval_script_list_py`), or the
/// common one (`make_eval_script_list_common`) every other language uses,
/// JavaScript's with wp-calypso's test commands.
fn script_lines(
    specs: &Specs,
    entry: &RepoSpecs,
    spec: &VersionSpec,
    instance: &Instance,
) -> Result<Vec<Line>, SpecError> {
    let (repo, version) = (instance.repo, instance.version);
    let test_cmd = spec
        .test_cmd
        .as_ref()
        .ok_or_else(|| SpecError::NoTestCommand(repo.to_owned(), version.to_owned()))?;
    let dir = &specs.repo_directory;
    let files = crate::grade::swebench::patch::modified_files(instance.test_patch);
    let base = instance.base_commit;
    let mut lines = Vec::new();
    if entry.language == "py" {
        let reset = format!("git checkout {base} {}", files.join(" "));
        let activate = || specs.env_activation.iter().cloned().map(Line::Run);
        lines.extend(activate());
        lines.push(Line::Harness(format!("cd {dir}")));
        lines.extend(spec.eval_commands.iter().cloned().map(Line::Run));
        lines.extend(
            [
                format!("git config --global --add safe.directory {dir}"),
                format!("cd {dir}"),
                "git status".to_owned(),
                "git show".to_owned(),
                format!("git -c core.fileMode=false diff {base}"),
            ]
            .map(Line::Harness),
        );
        lines.extend(activate());
        lines.extend(spec.install.iter().flat_map(Commands::lines).map(Line::Run));
        lines.push(Line::Harness(reset.clone()));
        lines.push(Line::Harness(format!(
            "git apply -v - <<'{HEREDOC}'\n{}\n{HEREDOC}",
            instance.test_patch
        )));
        let directives = test_directives(repo, instance.test_patch, &specs.non_test_exts);
        let mut command = vec![test_cmd.lines().join("\n")];
        command.extend(directives);
        lines.push(Line::Run(format!(": '{START_TEST_OUTPUT}'")));
        lines.push(Line::Run(command.join(" ")));
        lines.push(Line::Run(format!(": '{END_TEST_OUTPUT}'")));
        lines.push(Line::Harness(reset));
        return Ok(lines);
    }
    let reset = if files.is_empty() {
        "echo \"No test files to reset\"".to_owned()
    } else {
        format!("git checkout {base} {}", files.join(" "))
    };
    lines.extend(
        [
            format!("cd {dir}"),
            format!("git config --global --add safe.directory {dir}"),
            format!("cd {dir}"),
            reset.clone(),
            format!(
                "git apply --verbose --reject - <<'{HEREDOC}'\n{}\n{HEREDOC}",
                instance.test_patch
            ),
        ]
        .map(Line::Harness),
    );
    // JavaScript's downloads of an instance's `image_assets` would go
    // here (SWE-bench Multimodal, with curl): not run, see docs/tasks.md.
    lines.extend(spec.build.iter().cloned().map(Line::Run));
    lines.push(Line::Run(format!(": '{START_TEST_OUTPUT}'")));
    let tests = if repo == "Automattic/wp-calypso" {
        crate::grade::swebench::patch::calypso_test_commands(version, instance.test_patch)
    } else {
        test_cmd.lines()
    };
    lines.extend(tests.into_iter().map(Line::Run));
    lines.push(Line::Run(format!(": '{END_TEST_OUTPUT}'")));
    lines.push(Line::Harness(reset));
    Ok(lines)
}

/// The files a test patch names, as `harness/test_spec/python.py`'s
/// `get_test_directives` turns them into arguments of the test command:
/// every `diff --git a/X b/Y` line's Y (duplicates kept, as the package
/// keeps them), less files with a non-test ending; for django, module
/// names (`.py` and a leading `tests/` cut, `/` -> `.`); for humaneval,
/// `test.py` whatever the patch. Other repos, sympy included, pass the
/// paths as they are.
pub fn test_directives(repo: &str, test_patch: &str, non_test_exts: &[String]) -> Vec<String> {
    // The package's seq2seq repo has a fixed test command.
    if repo == "swe-bench/humaneval" {
        return vec!["test.py".to_owned()];
    }
    let mut directives: Vec<String> = test_patch
        .split('\n')
        .filter_map(diff_target)
        .filter(|d| !non_test_exts.iter().any(|ext| d.ends_with(ext.as_str())))
        .collect();
    if repo == "django/django" {
        for d in &mut directives {
            let module = d.strip_suffix(".py").unwrap_or(d);
            let module = module.strip_prefix("tests/").unwrap_or(module);
            *d = module.replace('/', ".");
        }
    }
    directives
}

/// The `Y` of the package's `diff --git a/.* b/(.*)` on one line: after
/// the first `diff --git a/`, the text after the last ` b/` (the pattern's
/// `.*` is greedy).
fn diff_target(line: &str) -> Option<String> {
    let line = line.strip_suffix('\r').map_or(line, |l| l);
    let (_, rest) = line.split_once("diff --git a/")?;
    let (_, target) = rest.rsplit_once(" b/")?;
    Some(target.to_owned())
}

/// The name of an instance's image in SWE-bench: `sweb.eval.x86_64.` and
/// the instance id in lower case with `__` as `_1776_` (docker refuses a
/// double underscore there).
pub fn image_name(instance_id: &str) -> String {
    format!(
        "sweb.eval.x86_64.{}",
        instance_id.to_lowercase().replace("__", "_1776_")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "diff --git a/tests/forms_tests/tests/test_forms.py b/tests/forms_tests/tests/test_forms.py\n\
        --- a/tests/forms_tests/tests/test_forms.py\n+++ b/tests/forms_tests/tests/test_forms.py\n@@ -1 +1 @@\n-x\n+y\n\
        diff --git a/tests/forms_tests/data/sample.json b/tests/forms_tests/data/sample.json\n\
        diff --git a/sympy/core/tests/test_basic.py b/sympy/core/tests/test_basic.py\n\
        diff --git a/docs/a b/b.md b/docs/a b/b.md\n";

    fn instance<'a>(repo: &'a str, version: &'a str, test_patch: &'a str) -> Instance<'a> {
        Instance {
            instance_id: "o__r-1",
            repo,
            version,
            base_commit: "abc123",
            test_patch,
        }
    }

    fn exts() -> Vec<String> {
        specs().non_test_exts.clone()
    }

    #[test]
    fn the_embedded_table_parses_and_covers_swebench() {
        let specs = specs();
        assert!(specs.swebench_version.starts_with("4."));
        for repo in [
            "astropy/astropy",
            "django/django",
            "matplotlib/matplotlib",
            "mwaskom/seaborn",
            "pallets/flask",
            "psf/requests",
            "pydata/xarray",
            "pylint-dev/pylint",
            "pytest-dev/pytest",
            "scikit-learn/scikit-learn",
            "sphinx-doc/sphinx",
            "sympy/sympy",
        ] {
            let entry = &specs.repos[repo];
            let parser = entry.parser.as_deref().unwrap_or_default();
            assert!(Parser::from_name(parser).is_some(), "{repo}: {parser}");
            assert_eq!(entry.language, "py", "{repo}");
            assert!(!entry.versions.is_empty(), "{repo}");
        }
    }

    #[test]
    fn directives_per_repo() {
        let cases: &[(&str, &[&str])] = &[
            (
                "django/django",
                &[
                    "forms_tests.tests.test_forms",
                    "sympy.core.tests.test_basic",
                ],
            ),
            (
                "sympy/sympy",
                &[
                    "tests/forms_tests/tests/test_forms.py",
                    "sympy/core/tests/test_basic.py",
                ],
            ),
            (
                "psf/requests",
                &[
                    "tests/forms_tests/tests/test_forms.py",
                    "sympy/core/tests/test_basic.py",
                ],
            ),
        ];
        // The JSON file has a non-test ending; of `docs/a b/b.md` the
        // package's greedy pattern keeps what follows the last ` b/`,
        // `b.md`, which has one too.
        for (repo, expected) in cases {
            assert_eq!(test_directives(repo, PATCH, &exts()), *expected, "{repo}");
        }
    }

    #[test]
    fn the_eval_script_runs_the_specs_command_on_the_directives_between_markers() {
        let patch = "diff --git a/tests/test_requests.py b/tests/test_requests.py\n";
        let eval = eval_for(&instance("psf/requests", "2.0", patch)).expect("known");
        assert_eq!(eval.parser, Parser::PytestOptions);
        let lines: Vec<&str> = eval.script.lines().collect();
        assert_eq!(lines[0], "set -uxo pipefail");
        assert!(lines.contains(&"conda activate testbed"), "{lines:?}");
        let start = lines
            .iter()
            .position(|l| l.contains(START_TEST_OUTPUT))
            .expect("start");
        assert_eq!(
            lines[start + 1],
            "pytest -rA tests/test_requests.py",
            "{lines:?}"
        );
        assert!(lines[start + 2].contains(END_TEST_OUTPUT));
        let django = eval_for(&instance(
            "django/django",
            "3.0",
            "diff --git a/tests/queries/tests.py b/tests/queries/tests.py\n",
        ))
        .expect("known");
        assert!(
            django.script.contains(
                "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 queries.tests"
            ),
            "{}",
            django.script
        );
        assert!(django.script.contains("export LANG=en_US.UTF-8"));
    }

    #[test]
    fn every_repo_of_the_table_has_a_parser_and_a_script() {
        // jekyll's and immutable-js's parsers depend on the instance:
        // their versions are its numbers.
        for (repo, entry) in &specs().repos {
            for (version, spec) in &entry.versions {
                let id = format!("{}-{version}", repo.replace('/', "__"));
                let patch = "diff --git a/t/x b/t/x\n";
                let found = eval_for(&Instance {
                    instance_id: &id,
                    ..instance(repo, version, patch)
                });
                match (found, &spec.test_cmd) {
                    (Ok(eval), Some(_)) => assert!(eval.script.contains(START_TEST_OUTPUT)),
                    (Err(SpecError::NoTestCommand(..)), None) => {}
                    // dbt-core and humaneval: the package's
                    // MAP_REPO_TO_PARSER lacks them.
                    (Err(SpecError::NoParser(..)), _) if entry.parser.is_none() => {}
                    (other, _) => panic!("{id}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn other_languages_run_the_build_steps_and_test_commands_as_they_are() {
        let patch = "diff --git a/tests/unit/type/stream.tcl b/tests/unit/type/stream.tcl\n\
            --- a/tests/unit/type/stream.tcl\n+++ b/tests/unit/type/stream.tcl\n@@ -1 +1 @@\n-a\n+b\n";
        let eval = eval_for(&instance("redis/redis", "10068", patch)).expect("known");
        assert_eq!(eval.parser, Parser::Redis);
        assert_eq!(
            eval.script,
            "set -uxo pipefail\nmake distclean\nmake\n: '>>>>> Start Test Output'\n\
             TERM=dumb ./runtest --durable --single unit/type/stream --only \"/*XTRIM*\"\n\
             : '>>>>> End Test Output'\n"
        );
        // The package's script also resets and applies (runner/test_run.rs's
        // work), and resets again after.
        let whole = package_script(&instance("redis/redis", "10068", patch)).expect("known");
        assert!(whole.starts_with("#!/bin/bash\nset -uxo pipefail\ncd /testbed\n"));
        assert!(whole.contains("git checkout abc123 tests/unit/type/stream.tcl\ngit apply --verbose --reject - <<'EOF_114329324912'\n"));
        assert!(whole.ends_with(
            ": '>>>>> End Test Output'\ngit checkout abc123 tests/unit/type/stream.tcl\n"
        ));
        // Without files to reset, the package echoes instead.
        let empty = package_script(&instance("redis/redis", "10068", "")).expect("known");
        assert!(empty.contains("echo \"No test files to reset\""));
        // wp-calypso's test commands come from the patch's files.
        let calypso = eval_for(&instance(
            "Automattic/wp-calypso",
            "10.12.0",
            "diff --git a/client/a/test/index.js b/client/a/test/index.js\n",
        ))
        .expect("known");
        assert!(
            calypso.script.contains(
                "\n./node_modules/.bin/jest --verbose -c=test/client/jest.config.js 'client/a/test/index.js'\n"
            ),
            "{}",
            calypso.script
        );
        // jekyll's parser is picked by the instance's number.
        let jekyll = |id: &str| {
            eval_for(&Instance {
                instance_id: id,
                ..instance("jekyll/jekyll", "8047", "")
            })
        };
        assert_eq!(
            jekyll("jekyll__jekyll-8047").map(|e| e.parser),
            Ok(Parser::Minitest)
        );
        let err = jekyll("jekyll__jekyll-1").expect_err("no parser");
        assert!(
            err.to_string()
                .contains("knows no instance jekyll__jekyll-1"),
            "{err}"
        );
        assert!(err.to_string().contains("--test-command"), "{err}");
    }

    #[test]
    fn unknown_repos_and_versions_say_what_is_known() {
        let err = eval_for(&instance("django/django", "0.1", "")).expect_err("no such version");
        let text = err.to_string();
        assert!(text.contains("version \"0.1\""), "{text}");
        assert!(text.contains("3.0"), "{text}");
        assert!(text.contains("--test-command"), "{text}");
        assert!(matches!(
            eval_for(&instance("o/r", "1.0", "")),
            Err(SpecError::UnknownRepo(..))
        ));
    }

    #[test]
    fn image_names_follow_swebench() {
        assert_eq!(
            image_name("django__django-11099"),
            "sweb.eval.x86_64.django_1776_django-11099"
        );
        assert_eq!(
            image_name("Pylint-Dev__Pylint-7080"),
            "sweb.eval.x86_64.pylint-dev_1776_pylint-7080"
        );
    }
}
