//! The tasks a run found (`dataset::find`), read one by one: a task that
//! cannot load (a `task.toml` that does not parse, a feature not supported,
//! a file it names missing, a commit that cannot be fetched, an eval name
//! another task has) is that task's own config outcome, never the whole
//! dataset's.

use std::path::Path;

use reeval_core::eval::Eval;

use super::dataset::{self, Found, Selection, Source, TaskId};
use super::error::{DatasetError, HarborError};
use super::eval::{HarborTask, eval_name};
use super::fetch::TaskCache;

/// The tasks of a run, read, in the dataset's order.
#[derive(Debug)]
pub struct Loaded {
    /// Each task: how it was found, and the task read or why it cannot run.
    pub tasks: Vec<(TaskId, Result<HarborTask, Refused>)>,
}

/// A task that cannot run, and why.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The eval it would have been (from its `[task].name` when `task.toml`
    /// gives one, else its directory's name).
    pub eval: String,
    /// Why it cannot run.
    pub why: String,
}

impl Loaded {
    /// The task at `path`, or every task directory directly under the
    /// dataset directory `path` (sorted by name). Templates in the env tables
    /// are resolved from this process's environment now.
    ///
    /// # Errors
    /// [`DatasetError::NotTasks`] when `path` holds no task. A task that
    /// cannot be read is not an error here: it is [`Refused`].
    pub fn read(path: &Path) -> Result<Self, DatasetError> {
        let cache = TaskCache::new(TaskCache::default_root());
        let found =
            dataset::find(&Source::Path(path.to_path_buf()), &Selection::default(), &cache)?;
        Ok(Self::from_found(&found))
    }

    /// Each task `found` found, read (those it could not fetch are refused).
    pub fn from_found(found: &Found) -> Self {
        let lookup = |v: &str| std::env::var(v).ok();
        let mut tasks: Vec<(TaskId, Result<HarborTask, Refused>)> = found
            .tasks
            .iter()
            .map(|t| {
                let read = match &t.dir {
                    Ok(dir) => read_one(dir, &lookup),
                    Err(e) => Err(Refused { eval: eval_name(&t.name), why: e.to_string() }),
                };
                (t.id.clone(), read)
            })
            .collect();
        refuse_same_names(&mut tasks);
        Self { tasks }
    }

    /// The tasks read, mutably (to set Harbor's per-run flags on them).
    pub fn read_tasks_mut(&mut self) -> impl Iterator<Item = &mut HarborTask> {
        self.tasks.iter_mut().filter_map(|(_, t)| t.as_mut().ok())
    }

    /// The tasks' evals, each refused alone (`Eval::refuse_alone`); a task
    /// that cannot run is an [`Eval::cannot_run`] saying why.
    pub fn into_evals(self) -> Vec<Eval> {
        self.tasks
            .into_iter()
            .map(|(_, t)| match t {
                Ok(task) => task.into_eval(),
                Err(refused) => Eval::cannot_run(refused.eval, refused.why),
            })
            .map(|e| e.refuse_alone(true))
            .collect()
    }

    /// Every warning of the tasks read (`task.toml` keys Harbor does not
    /// know), each naming its task.
    pub fn warnings(&self) -> Vec<String> {
        self.tasks
            .iter()
            .filter_map(|(_, t)| t.as_ref().ok())
            .flat_map(|t| {
                t.warnings.iter().map(|w| format!("Harbor task {}: task.toml {w}", t.name))
            })
            .collect()
    }
}

/// The task at `dir`, or why it cannot run.
fn read_one(dir: &Path, lookup: &dyn Fn(&str) -> Option<String>) -> Result<HarborTask, Refused> {
    HarborTask::read(dir, lookup).map_err(|e: HarborError| Refused {
        eval: eval_name(&declared_name(dir).unwrap_or_else(|| dir_name(dir))),
        why: e.to_string(),
    })
}

fn dir_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `[task].name` of the task at `dir`, when its `task.toml` parses enough to say.
fn declared_name(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("task.toml")).ok()?;
    let table: toml::Table = text.parse().ok()?;
    let name = table.get("task")?.get("name")?.as_str()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// A task whose eval name an earlier task has is refused, naming both.
fn refuse_same_names(tasks: &mut [(TaskId, Result<HarborTask, Refused>)]) {
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    for (id, slot) in tasks.iter_mut() {
        let (eval, name) = match slot {
            Ok(t) => (eval_name(&t.name), t.name.clone()),
            Err(r) => (r.eval.clone(), shown(id)),
        };
        match seen.get(&eval) {
            None => {
                seen.insert(eval, name);
            }
            Some(first) => {
                let why = format!(
                    "failed to load Harbor task {name}: {first} and {name} both become the eval `{eval}` (rename one's [task].name)"
                );
                *slot = Err(Refused { eval, why });
            }
        }
    }
}

/// A task's id as a user knows it: its directory, or its repository path.
fn shown(id: &TaskId) -> String {
    match id {
        TaskId::Local(dir) => dir.display().to_string(),
        TaskId::Git { url, path, .. } => format!("{url}:{}", path.display()),
    }
}
