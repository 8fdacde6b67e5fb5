//! A task directory, or a dataset directory of them, read task by task: one
//! task that cannot load (a `task.toml` that does not parse, a feature not
//! supported, a file it names missing, an eval name another task has) is
//! that task's own config outcome, never the whole dataset's.

use std::path::{Path, PathBuf};

use reeval_core::eval::Eval;

use super::error::HarborError;
use super::eval::{HarborTask, eval_name};

/// A dataset read task by task, in its directories' order.
#[derive(Debug)]
pub struct Dataset {
    /// Each task directory: the task read, or why it cannot run.
    pub tasks: Vec<Result<HarborTask, Refused>>,
}

/// A task that cannot run, and why.
#[derive(Debug)]
pub struct Refused {
    /// The eval it would have been (from its `[task].name` when `task.toml`
    /// gives one, else its directory's name).
    pub eval: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Why it cannot run.
    pub error: HarborError,
}

impl Dataset {
    /// The task at `path`, or every task directory directly under the dataset
    /// directory `path` whose directory name `keep` accepts (sorted by name;
    /// filters apply before a task is read, as Harbor's `-i`/`-x` match
    /// directory names). Templates in the env tables are resolved from this
    /// process's environment now.
    ///
    /// # Errors
    /// [`HarborError::NotATask`] when `path` is neither a task nor a
    /// directory of tasks. A task that cannot be read is not an error here:
    /// it is [`Refused`].
    pub fn read(path: &Path, keep: impl Fn(&str) -> bool) -> Result<Self, HarborError> {
        let lookup = |v: &str| std::env::var(v).ok();
        if path.join("task.toml").is_file() {
            return Ok(Self { tasks: vec![read_one(path, &lookup)] });
        }
        let entries = std::fs::read_dir(path)
            .map_err(|_| HarborError::NotATask { path: path.to_path_buf() })?;
        let mut dirs: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.join("task.toml").is_file()).collect();
        if dirs.is_empty() {
            return Err(HarborError::NotATask { path: path.to_path_buf() });
        }
        dirs.sort();
        dirs.retain(|d| keep(&dir_name(d)));
        let mut tasks: Vec<Result<HarborTask, Refused>> =
            dirs.iter().map(|d| read_one(d, &lookup)).collect();
        refuse_same_names(path, &mut tasks);
        Ok(Self { tasks })
    }

    /// The tasks' evals, each refused alone (`Eval::refuse_alone`); a task
    /// that cannot run is an [`Eval::cannot_run`] saying why.
    pub fn into_evals(self) -> Vec<Eval> {
        self.tasks
            .into_iter()
            .map(|t| match t {
                Ok(task) => task.into_eval(),
                Err(refused) => Eval::cannot_run(refused.eval, refused.error.to_string()),
            })
            .map(|e| e.refuse_alone(true))
            .collect()
    }

    /// Every warning of the tasks read (`task.toml` keys Harbor does not
    /// know), each naming its task.
    pub fn warnings(&self) -> Vec<String> {
        self.tasks
            .iter()
            .flatten()
            .flat_map(|t| {
                t.warnings.iter().map(|w| format!("Harbor task {}: task.toml {w}", t.name))
            })
            .collect()
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The task at `dir`, or why it cannot run.
fn read_one(dir: &Path, lookup: &dyn Fn(&str) -> Option<String>) -> Result<HarborTask, Refused> {
    HarborTask::read(dir, lookup).map_err(|error| Refused {
        eval: eval_name(&declared_name(dir).unwrap_or_else(|| dir_name(dir))),
        dir: dir.to_path_buf(),
        error,
    })
}

/// `[task].name` of the task at `dir`, when its `task.toml` parses enough to say.
fn declared_name(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("task.toml")).ok()?;
    let table: toml::Table = text.parse().ok()?;
    let name = table.get("task")?.get("name")?.as_str()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// A task whose eval name an earlier task of the dataset has is refused, naming both.
fn refuse_same_names(path: &Path, tasks: &mut [Result<HarborTask, Refused>]) {
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    for slot in tasks.iter_mut() {
        let (eval, task_name) = match slot {
            Ok(t) => (eval_name(&t.name), t.name.clone()),
            Err(r) => (r.eval.clone(), r.dir.display().to_string()),
        };
        let Some(first) = seen.get(&eval).cloned() else {
            seen.insert(eval, task_name);
            continue;
        };
        let dir = match slot {
            Ok(t) => t.dir.clone(),
            Err(r) => r.dir.clone(),
        };
        *slot = Err(Refused {
            eval: eval.clone(),
            dir,
            error: HarborError::SameName {
                path: path.to_path_buf(),
                first,
                second: task_name,
                eval,
            },
        });
    }
}
