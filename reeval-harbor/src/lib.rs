//! Harbor tasks as evals: a Harbor task directory (`task.toml`,
//! `instruction.md`, `environment/`, `tests/`, `solution/`), or a dataset
//! directory of them, read into [`Eval`]s that run as Harbor 0.26 runs them
//! (see the book's `harbor.md` for what is supported and what is not yet).
//!
//! - [`task`]: `task.toml`, typed, with Harbor's deprecated keys and env templates.
//! - [`eval`]: one task as an [`Eval`]: its environment, budget, tags and oracle.
//! - `run`: in the sandbox: the turn, artifacts, verifier, reward outcome, oracle.
//! - `steps`: multi-step tasks, step by step.
//! - `together`: a script copied in and run in one exec, when it runs as root.
//! - [`compose`]: `environment/docker-compose.yaml`: the services beside the sandbox.
//! - [`Loaded`]: the tasks found, read one by one; one that cannot load is refused alone.
//! - [`files`]: the task's directories uploaded into the sandbox.
//! - `keys`: the `task.toml` keys Harbor knows, for "did you mean".
//! - [`reward`]: the reward files, read as Harbor reads them.
//! - [`dataset`]: which task directories a run takes (`-p`, `-d`, Harbor's filters);
//!   [`registry`]: `registry.json`; [`version`]: which version `-d NAME` means;
//!   [`fetch`]: registry tasks fetched with git into a cache.
//! - [`job`]: Harbor's job directory written from a run's records, beside them.
//! - [`verifier_env`]: a separate verifier environment, a sandbox of its own.

mod artifacts;
mod collect;
pub mod compose;
mod compose_volumes;
pub mod dataset;
mod declared;
mod error;
pub mod eval;
pub mod fetch;
pub mod files;
mod healthcheck;
pub mod job;
mod keys;
mod load;
mod mcp;
mod place;
pub mod registry;
pub mod reward;
mod run;
mod separate;
mod shell;
mod single;
mod steps;
mod steps_read;
pub mod task;
mod together;
pub mod verifier_env;
pub mod version;

use std::path::Path;
use std::sync::Arc;

use reeval_core::eval::Eval;

pub use error::{DatasetError, HarborError};
pub use eval::{HarborTask, eval_name};
pub use load::{Loaded, Refused};

impl HarborTask {
    /// The eval: named after the task, tagged with its keywords, its budget
    /// the agent's and the verifier's limits, its oracle `solution/solve.sh`,
    /// refused alone when preflight finds a fault of its own (`Eval::refuse_alone`).
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
                    single::run(c, &task).await
                }
            })
        })
        .timeout(budget)
        // A fault of the task's own found before the run refuses it alone.
        .refuse_alone(true);
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
                        single::oracle(c, &task).await
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
/// [`DatasetError::NotTasks`] when `path` holds no task at all.
pub fn tasks(path: impl AsRef<Path>) -> Result<Vec<Eval>, DatasetError> {
    let loaded = Loaded::read(path.as_ref())?;
    for warning in loaded.warnings() {
        eprintln!("reeval: warning: {warning}");
    }
    Ok(loaded.into_evals())
}

/// The tasks at `path`, read but not yet made evals; the first that cannot
/// load stops it (see [`Loaded::read`] to take them one by one).
///
/// # Errors
/// [`HarborError::NotATask`] when `path` holds no task, else the first task
/// that cannot load, or two tasks that would be evals of one name.
pub fn load(path: &Path) -> Result<Vec<HarborTask>, HarborError> {
    let cache = fetch::TaskCache::new(fetch::TaskCache::default_root());
    let source = dataset::Source::Path(path.to_path_buf());
    let found = dataset::find(&source, &dataset::Selection::default(), &cache)
        .map_err(|_| HarborError::NotATask { path: path.to_path_buf() })?;
    let lookup = |v: &str| std::env::var(v).ok();
    let mut tasks: Vec<HarborTask> = Vec::new();
    for dir in found.tasks.iter().filter_map(|t| t.dir.as_ref().ok()) {
        let task = HarborTask::read(dir, &lookup)?;
        if let Some(first) = tasks.iter().find(|t| eval_name(&t.name) == eval_name(&task.name)) {
            return Err(HarborError::SameName {
                path: path.to_path_buf(),
                first: first.name.clone(),
                second: task.name.clone(),
                eval: eval_name(&task.name),
            });
        }
        tasks.push(task);
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
        let e = load(&dir).unwrap_err().to_string();
        assert!(e.contains("org1/fix and org2/fix both become the eval `fix`"), "{e}");
        let loaded = Loaded::read(&dir).unwrap();
        assert!(loaded.tasks[0].1.is_ok(), "the first keeps its name");
        let e = loaded.tasks[1].1.as_ref().unwrap_err().why.clone();
        assert!(e.contains("org1/fix and org2/fix both become the eval `fix`"), "{e}");
        let evals = loaded.into_evals();
        assert_eq!(evals[1].options().cannot_run.as_deref(), Some(e.as_str()));
        assert!(evals.iter().all(|e| e.options().refuse_alone));
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
