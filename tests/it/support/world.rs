//! One fixture with one repo that every task of a test works on, the tasks
//! differing only in their ids: the world of the tests of the agent loop
//! (agent_protocol.rs) and of misbehaving model APIs (model_faults.rs).
//! How a run reaches its model is each test file's own.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::harness::{Fixture, RunOutput, task};

/// What every task of a [`World`] runs to grade: it passes once the agent
/// ran [`FIX`].
pub const TEST_COMMAND: &str = "grep -qx fixed fix.txt";
pub const FIX: &str = "echo fixed > fix.txt";

/// One fixture with one repo; every task of a test works on that repo.
pub struct World {
    pub fixture: Fixture,
    pub repo: PathBuf,
    pub commit: String,
}

impl World {
    pub fn new() -> World {
        let fixture = Fixture::new();
        let (repo, commit) = fixture.repo("repo", &[("README.md", "A small repo.\n")]);
        World {
            fixture,
            repo,
            commit,
        }
    }

    /// Writes the tasks `ids` (each graded by [`TEST_COMMAND`]) and runs
    /// them into the run folder `<fixture>/<out>` with `args` and `env`.
    pub fn run(&self, out: &str, ids: &[&str], args: &[&str], env: &[(&str, &str)]) -> RunOutput {
        let tasks: Vec<Value> = ids
            .iter()
            .map(|id| task(id, &self.repo, &self.commit, TEST_COMMAND, json!({})))
            .collect();
        let tasks = self.fixture.tasks(&tasks);
        self.fixture
            .run_into(&self.fixture.path(out), &tasks, args, env)
    }
}
