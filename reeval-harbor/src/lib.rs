//! Harbor tasks as evals: a Harbor task directory (`task.toml`,
//! `instruction.md`, `environment/`, `tests/`, `solution/`), or a dataset
//! directory of them, read into [`Eval`]s that run as Harbor 0.26 runs them
//! (see the book's `harbor.md` for what is supported and what is not yet).
//!
//! - [`task`]: `task.toml`, typed, with Harbor's deprecated keys and env templates.
//! - [`eval`]: one task as an [`Eval`]: its environment, budget, tags and oracle.
//! - `run`: in the sandbox: the turn, artifacts, verifier, reward outcome, oracle.
//! - `steps`: multi-step tasks, step by step.
//! - [`compose`]: `environment/docker-compose.yaml`: the services beside the sandbox.
//! - [`Dataset`]: a dataset read task by task; one that cannot load is refused alone.
//! - [`files`]: the task's directories uploaded into the sandbox.
//! - `keys`: the `task.toml` keys Harbor knows, for "did you mean".
//! - [`reward`]: the reward files, read as Harbor reads them.

pub mod compose;
mod dataset;
mod error;
pub mod eval;
pub mod files;
mod keys;
pub mod reward;
mod run;
mod steps;
pub mod task;

use std::path::Path;
use std::sync::Arc;

use reeval_core::eval::Eval;

pub use dataset::{Dataset, Refused};
pub use error::HarborError;
pub use eval::{HarborTask, eval_name};

impl HarborTask {
    /// The eval: named after the task, tagged with its keywords, its budget
    /// the agent's and the verifier's limits, its oracle `solution/solve.sh`.
    pub fn into_eval(self) -> Eval {
        let task = Arc::new(self);
        let budget = task.budget();
        let run = task.clone();
        let mut eval = Eval::new(eval_name(&task.name), move |c| {
            let task = run.clone();
            Box::pin(async move {
                if task.config.steps.is_some() {
                    steps::run(c, &task).await
                } else {
                    run::single(c, &task).await
                }
            })
        })
        .timeout(budget);
        let env_task = task.clone();
        eval = eval.environment(move || env_task.environment());
        for keyword in task.config.task.iter().flat_map(|t| t.keywords.iter()) {
            eval = eval.tag(keyword.clone());
        }
        if task.has_solution() {
            let solve = task.clone();
            eval = eval.oracle(move |c| {
                let task = solve.clone();
                Box::pin(async move {
                    if task.config.steps.is_some() {
                        steps::oracle(c, &task).await
                    } else {
                        run::single_oracle(c, &task).await
                    }
                })
            });
        }
        eval
    }
}

/// The evals of a Harbor task directory, or of every task directory directly
/// under a dataset directory (sorted by name), each refused alone: a task
/// that cannot load is an eval that cannot run, saying why, and the rest of
/// the dataset runs. Warnings (keys Harbor does not know) go to stderr.
///
/// # Errors
/// [`HarborError::NotATask`] when `path` holds no task at all.
pub fn tasks(path: impl AsRef<Path>) -> Result<Vec<Eval>, HarborError> {
    let dataset = Dataset::read(path.as_ref(), |_| true)?;
    for warning in dataset.warnings() {
        eprintln!("reeval: warning: {warning}");
    }
    Ok(dataset.into_evals())
}

/// The tasks at `path` that load, read but not yet made evals.
///
/// # Errors
/// [`HarborError::NotATask`] when `path` holds no task, else the first task
/// that cannot load (see [`Dataset::read`] to take them one by one).
pub fn load(path: &Path) -> Result<Vec<HarborTask>, HarborError> {
    Dataset::read(path, |_| true)?.tasks.into_iter().map(|t| t.map_err(|r| r.error)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_drop_the_org_and_odd_characters() {
        assert_eq!(eval_name("acme/fix-the.bug"), "fix-the_bug");
        assert_eq!(eval_name("plain_name"), "plain_name");
        assert_eq!(eval_name("org/"), "task");
    }

    #[test]
    fn two_tasks_of_one_eval_name_are_refused() {
        let dir = std::env::temp_dir().join(format!("reeval-harbor-same-{}", std::process::id()));
        for (sub, name) in [("a", "org1/fix"), ("b", "org2/fix")] {
            let t = dir.join(sub);
            std::fs::create_dir_all(t.join("environment")).unwrap();
            std::fs::create_dir_all(t.join("tests")).unwrap();
            std::fs::write(t.join("task.toml"), format!("[task]\nname = \"{name}\"\n")).unwrap();
            std::fs::write(t.join("instruction.md"), "x").unwrap();
            std::fs::write(t.join("environment/Dockerfile"), "FROM x\nWORKDIR /app\n").unwrap();
            std::fs::write(t.join("tests/test.sh"), "true").unwrap();
        }
        let tasks = Dataset::read(&dir, |_| true).unwrap().tasks;
        assert!(tasks[0].is_ok(), "the first keeps its name");
        let e = tasks[1].as_ref().unwrap_err().error.to_string();
        assert!(e.contains("org1/fix and org2/fix both become the eval `fix`"), "{e}");
        let evals = Dataset::read(&dir, |_| true).unwrap().into_evals();
        assert_eq!(evals[1].options().cannot_run.as_deref(), Some(e.as_str()));
        assert!(evals.iter().all(|e| e.options().refuse_alone));
        // Filters apply to directory names before anything is read.
        assert_eq!(Dataset::read(&dir, |d| d == "b").unwrap().tasks.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_path_without_tasks_is_refused() {
        let dir = std::env::temp_dir().join(format!("reeval-harbor-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = tasks(&dir).unwrap_err().to_string();
        assert!(e.starts_with("failed to read Harbor tasks"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
