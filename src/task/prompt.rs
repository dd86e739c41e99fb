//! Prompt variants: a TOML file with a `system` and an `instance` template.
//!
//! Owns loading (from a file or the built-in `prompts/default.toml`), the
//! name and sha256 recorded with every row, and strict rendering: an
//! undefined variable is an error. It does not know how messages are sent.

use std::path::Path;

use minijinja::{Environment, UndefinedBehavior};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::task::TaskSpec;
use crate::task::benchmark::BuiltinPrompt;

/// The built-in prompt, compiled into the binary.
pub(crate) const DEFAULT_PROMPT: &str = include_str!("../../prompts/default.toml");
/// The built-in prompt of tasks that are jobs in a container (a
/// benchmark's [`BuiltinPrompt::Terminal`]).
const TERMINAL_PROMPT: &str = include_str!("../../prompts/terminal.toml");

/// A loaded prompt variant.
#[derive(Debug, Clone)]
pub(crate) struct PromptVariant {
    pub name: String,
    /// sha256 of the file's bytes, hex.
    pub sha256: String,
    system: String,
    instance: String,
}

/// The two messages a task starts with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RenderedPrompt {
    pub system: String,
    pub instance: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("failed to read prompt file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("failed to parse prompt file {path}: {message}")]
    Parse { path: String, message: String },
    #[error(
        "failed to render the {template} template of prompt {prompt} for task {task}: {message}"
    )]
    Render {
        prompt: String,
        template: &'static str,
        task: String,
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    name: Option<String>,
    system: String,
    instance: String,
}

impl PromptVariant {
    /// A built-in prompt by what it is for.
    pub(crate) fn of(builtin: BuiltinPrompt) -> Result<PromptVariant, PromptError> {
        match builtin {
            BuiltinPrompt::Repository => {
                PromptVariant::parse(DEFAULT_PROMPT, "default", "built-in prompts/default.toml")
            }
            BuiltinPrompt::Terminal => PromptVariant::parse(
                TERMINAL_PROMPT,
                "terminal",
                "built-in prompts/terminal.toml",
            ),
        }
    }

    /// The built-in prompt the tasks' benchmarks ask for when `--prompt`
    /// names none: the one they all ask for (a run's tasks come from one
    /// file or one folder, so they agree), else the repository prompt.
    pub(crate) fn builtin_for(tasks: &[TaskSpec]) -> Result<PromptVariant, PromptError> {
        let mut wanted = tasks.iter().map(|task| task.benchmark.default_prompt());
        let first = wanted.next().unwrap_or(BuiltinPrompt::Repository);
        let agreed = wanted.all(|other| other == first);
        PromptVariant::of(if agreed {
            first
        } else {
            BuiltinPrompt::Repository
        })
    }

    pub(crate) fn load(path: &Path) -> Result<PromptVariant, PromptError> {
        let text = std::fs::read_to_string(path).map_err(|source| PromptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("prompt")
            .to_owned();
        PromptVariant::parse(&text, &stem, &path.display().to_string())
    }

    fn parse(text: &str, default_name: &str, origin: &str) -> Result<PromptVariant, PromptError> {
        let file: PromptFile = toml::from_str(text).map_err(|err| PromptError::Parse {
            path: origin.to_owned(),
            message: err.to_string().trim_end().to_owned(),
        })?;
        let variant = PromptVariant {
            name: file.name.unwrap_or_else(|| default_name.to_owned()),
            sha256: hex(&Sha256::digest(text.as_bytes())),
            system: file.system,
            instance: file.instance,
        };
        // Syntax errors surface now, not at the first task.
        let mut env = environment();
        for (label, source) in [("system", &variant.system), ("instance", &variant.instance)] {
            env.add_template_owned(label.to_owned(), source.clone())
                .map_err(|err| PromptError::Parse {
                    path: origin.to_owned(),
                    message: format!("the {label} template: {err}"),
                })?;
        }
        Ok(variant)
    }

    /// `name@` and the first 12 hex digits of the sha256: the CSV's `prompt`.
    pub(crate) fn label(&self) -> String {
        format!("{}@{}", self.name, &self.sha256[..12])
    }

    /// Renders both templates for a task. Undefined variables are errors.
    pub(crate) fn render(
        &self,
        task: &TaskSpec,
        max_turns: u32,
    ) -> Result<RenderedPrompt, PromptError> {
        let context = minijinja::context! {
            task => task_context(task),
            problem_statement => task.problem_statement,
            repo => task.repo,
            base_commit => task.base_commit,
            id => task.id.as_str(),
            max_turns => max_turns,
        };
        let env = environment();
        let render = |template: &'static str, source: &str| {
            env.render_str(source, &context)
                .map_err(|err| PromptError::Render {
                    prompt: self.name.clone(),
                    template,
                    task: task.id.to_string(),
                    message: describe(&err),
                })
        };
        Ok(RenderedPrompt {
            system: render("system", &self.system)?.trim().to_owned(),
            instance: render("instance", &self.instance)?.trim().to_owned(),
        })
    }
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env
}

/// The task as templates see it: every field, unknown ones included, with
/// `metadata` an empty object when absent so `task.metadata.x` is checkable.
fn task_context(task: &TaskSpec) -> serde_json::Map<String, serde_json::Value> {
    let mut map = task.to_json();
    map.entry("metadata")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    map
}

fn describe(err: &minijinja::Error) -> String {
    let mut message = err.to_string();
    if let Some(line) = err.line() {
        message.push_str(&format!(" (line {line})"));
    }
    message
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::parse_tasks;

    fn task() -> TaskSpec {
        let line = r#"{"id":"t1","repo":"r","base_commit":"abc","problem_statement":"fix the bug","test_command":"true","metadata":{"level":"easy"},"hints_text":"look at x"}"#;
        parse_tasks(line, "f", Path::new("/"))
            .expect("valid")
            .remove(0)
    }

    #[test]
    fn builtin_prompt_renders_every_variable() {
        let prompt = PromptVariant::of(BuiltinPrompt::Repository).expect("builtin parses");
        assert_eq!(prompt.name, "default");
        assert_eq!(prompt.sha256.len(), 64);
        let rendered = prompt.render(&task(), 7).expect("renders");
        assert!(rendered.system.contains("at most 7 answers"));
        assert!(rendered.instance.contains("fix the bug"));
        assert!(rendered.instance.contains("abc"));
    }

    #[test]
    fn undefined_variables_are_errors() {
        let text = "system = \"hi {{ nope }}\"\ninstance = \"{{ problem_statement }}\"\n";
        let prompt = PromptVariant::parse(text, "v", "v.toml").expect("parses");
        let err = prompt.render(&task(), 1).expect_err("undefined");
        assert!(err.to_string().contains("system template"), "{err}");
        let text = "system = \"{{ task.metadata.missing }}\"\ninstance = \"x\"\n";
        let prompt = PromptVariant::parse(text, "v", "v.toml").expect("parses");
        assert!(prompt.render(&task(), 1).is_err());
    }

    #[test]
    fn task_fields_metadata_and_unknown_fields_are_available() {
        let text = "system = \"{{ task.metadata.level }} {{ task.hints_text }} {{ id }}\"\ninstance = \"{{ repo }}\"\n";
        let prompt = PromptVariant::parse(text, "v", "v.toml").expect("parses");
        let rendered = prompt.render(&task(), 1).expect("renders");
        assert_eq!(rendered.system, "easy look at x t1");
        assert_eq!(prompt.label(), format!("v@{}", &prompt.sha256[..12]));
    }

    #[test]
    fn syntax_errors_and_unknown_keys_fail_at_load() {
        assert!(PromptVariant::parse("system = \"{{ x\"\ninstance = \"\"", "v", "v").is_err());
        assert!(
            PromptVariant::parse("system = \"\"\ninstance = \"\"\nsytem = 1", "v", "v").is_err()
        );
        assert!(PromptVariant::parse("instance = \"\"", "v", "v").is_err());
    }

    #[test]
    fn shipped_variants_load_and_render() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        for (file, name) in [
            ("terse.toml", "terse"),
            ("test-first.toml", "test-first"),
            ("terminal.toml", "terminal"),
            ("default.toml", "default"),
        ] {
            let prompt = PromptVariant::load(&dir.join(file)).expect(file);
            assert_eq!(prompt.name, name);
            let rendered = prompt.render(&task(), 9).expect(file);
            assert!(rendered.instance.contains("fix the bug"), "{file}");
            assert!(rendered.system.contains('9'), "{file}");
        }
        // The built-in prompts are the shipped files, byte for byte.
        for (builtin, file) in [
            (BuiltinPrompt::Repository, "default.toml"),
            (BuiltinPrompt::Terminal, "terminal.toml"),
        ] {
            let builtin = PromptVariant::of(builtin).expect("builtin");
            let shipped = PromptVariant::load(&dir.join(file)).expect(file);
            assert_eq!(
                (builtin.sha256, builtin.name),
                (shipped.sha256, shipped.name)
            );
        }
    }
}
