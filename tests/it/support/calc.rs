//! A small Python project whose `add` subtracts, for the tests that grade
//! with a real pytest (junit.rs, swebench.rs): two tasks over it, one whose
//! scripted agent fixes `add` and one whose agent only reads, graded
//! against hidden tests each test file writes in its own way.

use serde_json::{Value, json};

use super::harness::{Fixture, RunOutput, diff_of, scripted_agent, task};

/// `calc.py`: `add` subtracts, `neg` is right.
pub const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n";
/// The tests the agent sees.
pub const VISIBLE: &str = "from calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n";

/// Runs the tasks `fixed` (its agent fixes `add` with `sed`) and
/// `untouched` (its agent runs `cat`) over the project, with the fix as gold
/// patch and `hidden` as the test patch's `tests/test_calc.py`; each task
/// has `test_command` and the `fields` given (the lists of tests). `args`
/// follow the model flags.
pub fn run_fixed_and_untouched(
    fixture: &Fixture,
    hidden: &str,
    test_command: &str,
    fields: Value,
    args: &[&str],
) -> RunOutput {
    let (repo, sha) = fixture.repo(
        "repo",
        &[("calc.py", CALC), ("tests/test_calc.py", VISIBLE)],
    );
    let gold = diff_of(&repo, &[("calc.py", &CALC.replacen("a - b", "a + b", 1))]);
    let test_patch = diff_of(&repo, &[("tests/test_calc.py", hidden)]);
    let spec = |id: &str| {
        let mut extra = json!({
            "problem_statement": format!("Problem of task {id}. add() subtracts."),
            "gold_patch": gold,
            "test_patch": test_patch,
        });
        if let (Some(extra), Value::Object(fields)) = (extra.as_object_mut(), fields.clone()) {
            extra.extend(fields);
        }
        task(id, &repo, &sha, test_command, extra)
    };
    let tasks = fixture.tasks(&[spec("fixed"), spec("untouched")]);
    let server = scripted_agent(&[
        ("fixed", &["sed -i '0,/a - b/s//a + b/' calc.py"]),
        ("untouched", &["cat calc.py"]),
    ]);
    fixture.run_scripted(&tasks, &server, args)
}
