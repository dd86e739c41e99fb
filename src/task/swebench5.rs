//! swebench 5 rows: SWE-bench instances (swebench.rs converts their
//! fields) that carry their own recipe, `eval_script`, `log_parser` and
//! `eval_type`, graded by swebench 5.0's rules unless `--grading` says
//! otherwise. A line with those fields is a row here whatever else it is;
//! its eval script resets the test patch's files and applies it itself.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::grade::Rules;
use crate::task::benchmark::{Benchmark, Code, Tests, Verdict};
use crate::task::recipe::Recipe;
use crate::task::source::{ParsedLine, RecipeResult, Source, Swebench5Fields};
use crate::task::spec::TaskSpec;

/// swebench 5's rows.
pub(crate) struct Swebench5;

pub(crate) const SOURCE: Swebench5 = Swebench5;

impl Source for Swebench5 {
    fn name(&self) -> &'static str {
        "swebench5"
    }

    fn claims(&self, line: &ParsedLine) -> bool {
        line.row.is_swebench5()
    }

    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        Arc::new(Row {
            fields: line.row.clone(),
            repo_in_image: line.repo_in_image,
            recipe: Recipe(recipe),
        })
    }

    fn recipe(&self, task: &TaskSpec, line: &ParsedLine) -> Option<RecipeResult> {
        Some(crate::task::recipe::eval(task, &line.row))
    }
}

/// A swebench 5 row's answers.
#[derive(Debug)]
pub(crate) struct Row {
    pub fields: Swebench5Fields,
    pub repo_in_image: bool,
    pub recipe: Recipe,
}

impl Benchmark for Row {
    fn task_fields(&self, fields: &mut Map<String, Value>) {
        crate::task::own::repo_in_image_field(self.repo_in_image, fields);
        for (key, value) in [
            ("eval_script", &self.fields.eval_script),
            ("log_parser", &self.fields.log_parser),
            ("eval_type", &self.fields.eval_type),
        ] {
            if let Some(value) = value {
                fields.insert(key.to_owned(), Value::String(value.clone()));
            }
        }
    }

    fn code(&self) -> Code {
        if self.repo_in_image {
            Code::ImageRepo
        } else {
            Code::Checkout
        }
    }

    /// The row's own eval script resets the test_patch's files to the
    /// base and applies the test_patch itself, as it does under the
    /// package, so onebash does not apply it first: the script then sees
    /// the tree the package's run sees (the agent's change alone).
    /// Applied twice, a test_patch that adds a file would make the
    /// script's reset (`git checkout BASE -- FILES`, where the new file is
    /// unknown) fail and its own apply fail on the file already there, a
    /// log the package never writes.
    fn tests(&self) -> Tests<'_> {
        match (&self.recipe.0, &self.fields.eval_script) {
            (Some(Ok(_)), Some(_)) => Tests::EvalScript,
            _ => Tests::Command,
        }
    }

    fn verdict(&self) -> Verdict<'_> {
        self.recipe.verdict()
    }

    fn default_rules(&self) -> Rules {
        Rules::by_format(true)
    }

    fn cannot_run(&self) -> Option<String> {
        self.recipe.cannot_run()
    }

    fn cannot_regrade(&self) -> Option<String> {
        self.recipe.cannot_regrade()
    }
}
