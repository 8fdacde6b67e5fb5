//! Harbor tasks as evals: a Harbor task directory (`task.toml`,
//! `instruction.md`, `environment/`, `tests/`, `solution/`), or a dataset
//! directory of them, read into [`Eval`]s that run as Harbor 0.26 runs them
//! (see the book's `harbor.md` for what is supported and what is not yet).
//!
//! - [`task`]: `task.toml`, typed, with Harbor's deprecated keys and env templates.
//! - [`eval`]: one task as an [`Eval`]: its environment, budget, tags and oracle.
//! - `run`: in the sandbox: the turn, artifacts, verifier, reward outcome, oracle.
//! - `steps`: multi-step tasks, step by step.
//! - [`files`]: the task's directories uploaded into the sandbox, its Dockerfile's WORKDIR.
//! - [`reward`]: the reward files, read as Harbor reads them.

pub mod eval;
pub mod files;
pub mod reward;
mod run;
mod steps;
pub mod task;

use std::path::{Path, PathBuf};

use crate::eval::Eval;

pub use eval::HarborTask;

/// What can go wrong reading a Harbor task.
#[derive(Debug, thiserror::Error)]
pub enum HarborError {
    /// The path is neither a task nor a directory of tasks.
    #[error(
        "failed to read Harbor tasks at {}: it is neither a task directory (with task.toml) nor a directory of task directories",
        path.display()
    )]
    NotATask {
        /// The path given.
        path: PathBuf,
    },
    /// A file of the task could not be read.
    #[error("failed to read {} of Harbor task {task}: {message}", path.display())]
    Read {
        /// The task.
        task: String,
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// `task.toml` is not valid.
    #[error("failed to parse task.toml of Harbor task {task}: {message}")]
    Parse {
        /// The task.
        task: String,
        /// Why.
        message: String,
    },
    /// A `${VAR}` template names a variable the host does not set.
    #[error(
        "failed to resolve [{table}].env.{key} of Harbor task {task}: the host environment variable {var} is not set and the template gives no default (use ${{{var}:-default}})"
    )]
    EnvVar {
        /// The task.
        task: String,
        /// `environment`, `verifier` or `solution`.
        table: String,
        /// The variable's key in the table.
        key: String,
        /// The host variable.
        var: String,
    },
    /// Two tasks of a dataset would be evals of the same name.
    #[error(
        "failed to load the Harbor tasks at {}: {first} and {second} both become the eval `{eval}` (rename one's [task].name)",
        path.display()
    )]
    SameName {
        /// The dataset.
        path: PathBuf,
        /// The first task.
        first: String,
        /// The second task.
        second: String,
        /// The eval name both become.
        eval: String,
    },
    /// The task uses something reeval does not support yet.
    #[error("failed to load Harbor task {task}: {what} is not supported yet")]
    Unsupported {
        /// The task.
        task: String,
        /// What it uses.
        what: String,
    },
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

/// A task name made an eval name: the part after `org/`, with every
/// character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn eval_name(task_name: &str) -> String {
    let short = task_name.rsplit_once('/').map_or(task_name, |(_, n)| n);
    let name: String = short
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if name.is_empty() { "task".into() } else { name }
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
