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
//! - [`files`]: the task's directories uploaded into the sandbox, its Dockerfile's WORKDIR.
//! - [`reward`]: the reward files, read as Harbor reads them.
//! - [`verifier_env`]: a separate verifier environment, a sandbox of its own.

mod artifacts;
mod collect;
pub mod compose;
mod compose_volumes;
mod error;
pub mod eval;
pub mod files;
mod healthcheck;
mod place;
pub mod reward;
mod run;
mod separate;
mod steps;
pub mod task;
pub mod verifier_env;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reeval_core::eval::Eval;

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
/// under a dataset directory (sorted by name). Templates in the env tables
/// are resolved from this process's environment now.
///
/// # Errors
/// A [`HarborError`] naming the task for the first task that cannot be
/// read, parsed or run (unsupported features are refused here, not mid-run).
pub fn tasks(path: impl AsRef<Path>) -> Result<Vec<Eval>, HarborError> {
    Ok(load(path.as_ref())?.into_iter().map(HarborTask::into_eval).collect())
}

/// The tasks at `path`, read but not yet made evals.
///
/// # Errors
/// As [`tasks`].
pub fn load(path: &Path) -> Result<Vec<HarborTask>, HarborError> {
    if path.join("task.toml").is_file() {
        return Ok(vec![HarborTask::read(path, &|v| std::env::var(v).ok())?]);
    }
    let entries =
        std::fs::read_dir(path).map_err(|_| HarborError::NotATask { path: path.to_path_buf() })?;
    let mut dirs: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.join("task.toml").is_file()).collect();
    if dirs.is_empty() {
        return Err(HarborError::NotATask { path: path.to_path_buf() });
    }
    dirs.sort();
    let tasks: Vec<HarborTask> = dirs
        .iter()
        .map(|d| HarborTask::read(d, &|v| std::env::var(v).ok()))
        .collect::<Result<_, _>>()?;
    let mut seen = std::collections::BTreeMap::new();
    for task in &tasks {
        if let Some(first) = seen.insert(eval_name(&task.name), task.name.clone()) {
            return Err(HarborError::SameName {
                path: path.to_path_buf(),
                first,
                second: task.name.clone(),
                eval: eval_name(&task.name),
            });
        }
    }
    Ok(tasks)
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
        let e = tasks(&dir).unwrap_err().to_string();
        assert!(e.contains("org1/fix and org2/fix both become the eval `fix`"), "{e}");
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
