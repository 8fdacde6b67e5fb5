//! Which task directories a run takes, before any task is read: a task or a
//! dataset directory (`-p`), or a registry dataset (`-d NAME[@VERSION]`),
//! narrowed by Harbor's filters (`-t`, `-i`, `-x`, `-l`). Each task comes
//! back as its directory, or as the error that is that task's alone (a wrong
//! commit, a missing path): the rest of the dataset still runs.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};

use super::error::DatasetError;
use super::fetch::TaskCache;
use super::registry::Registry;

/// Where the tasks come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A task directory, or a directory of task directories (`-p`).
    Path(PathBuf),
    /// A dataset of a registry (`-d NAME[@VERSION]` with `--registry-path` or `--registry-url`).
    Registry {
        /// The registry, read.
        registry: Registry,
        /// The dataset's name.
        name: String,
        /// Its version; none: the one Harbor resolves.
        version: Option<String>,
    },
}

/// Harbor's filters, applied to task names (each task directory's name)
/// before any task is read or fetched.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// `-t NAME`: only this task (its registry name or its directory's name).
    pub task: Option<String>,
    /// `-i GLOB`: only tasks matching one of these (fnmatch globs).
    pub include: Vec<String>,
    /// `-x GLOB`: no task matching one of these.
    pub exclude: Vec<String>,
    /// `-l N`: at most this many, after the globs.
    pub n_tasks: Option<usize>,
}

/// How a task was found: Harbor's `task_id` of its results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskId {
    /// A directory on this machine.
    Local(PathBuf),
    /// A path in a repository at a commit.
    Git {
        /// The repository.
        url: String,
        /// The commit, when the registry pins one.
        commit: Option<String>,
        /// The task's path in it.
        path: PathBuf,
    },
}

/// One task of the run: its name, how it was found, and its directory or why there is none.
#[derive(Debug, Clone)]
pub struct FoundTask {
    /// The name Harbor's filters match (the directory's name).
    pub name: String,
    /// How it was found.
    pub id: TaskId,
    /// Its directory, or the error that is this task's alone.
    pub dir: Result<PathBuf, DatasetError>,
}

/// The tasks of a run.
#[derive(Debug, Clone)]
pub struct Found {
    /// Harbor's `source` of the results: the dataset's name (a registry
    /// dataset, or a dataset directory's name); none for one task (`adhoc`).
    pub source: Option<String>,
    /// The registry dataset's version.
    pub version: Option<String>,
    /// The tasks, in the dataset's order.
    pub tasks: Vec<FoundTask>,
}

impl Found {
    /// Each task's name with its directory or its error: the simple view.
    pub fn dirs(&self) -> Vec<(String, Result<PathBuf, DatasetError>)> {
        self.tasks.iter().map(|t| (t.name.clone(), t.dir.clone())).collect()
    }
}

/// The tasks of `source` that `selection` keeps, each fetched into `cache`
/// when it lives in a repository (fetching happens here, task by task).
///
/// # Errors
/// [`DatasetError::NotTasks`] for a path that holds no task,
/// [`DatasetError::Selection`] for a glob that does not parse, an `-i`
/// that matches nothing or a `-t` that names no task. A task that cannot be
/// fetched is not an error here: it comes back with its own.
pub fn find(
    source: &Source,
    selection: &Selection,
    cache: &TaskCache,
) -> Result<Found, DatasetError> {
    match source {
        Source::Path(path) => find_local(path, selection),
        Source::Registry { registry, name, version } => {
            let dataset = registry.dataset(name, version.as_deref())?;
            let picked = select(&dataset.tasks, |t| t.dir_name(), |t| &t.name, selection)?;
            let tasks = picked
                .into_iter()
                .map(|t| FoundTask {
                    name: t.dir_name(),
                    id: match &t.git_url {
                        Some(url) => TaskId::Git {
                            url: url.clone(),
                            commit: t.git_commit_id.clone(),
                            path: t.path.clone(),
                        },
                        None => TaskId::Local(t.path.clone()),
                    },
                    dir: cache.task_dir(t, registry.base.as_deref()),
                })
                .collect();
            Ok(Found {
                source: Some(dataset.name.clone()),
                version: Some(dataset.version.clone()),
                tasks,
            })
        }
    }
}

/// `-p PATH`: the task at PATH, or every directory under it with a `task.toml`.
fn find_local(path: &Path, selection: &Selection) -> Result<Found, DatasetError> {
    let local = |dir: PathBuf| FoundTask {
        name: dir_name(&dir),
        id: TaskId::Local(dir.clone()),
        dir: Ok(dir),
    };
    if path.join("task.toml").is_file() {
        let one = [path.to_path_buf()];
        let picked = select(&one, |d| dir_name(d), |_| "", selection)?;
        return Ok(Found {
            source: None,
            version: None,
            tasks: picked.into_iter().cloned().map(local).collect(),
        });
    }
    let missing = || DatasetError::NotTasks { path: path.to_path_buf() };
    let entries = std::fs::read_dir(path).map_err(|_| missing())?;
    let mut dirs: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.join("task.toml").is_file()).collect();
    if dirs.is_empty() {
        return Err(missing());
    }
    dirs.sort();
    let picked = select(&dirs, |d| dir_name(d), |_| "", selection)?;
    let source =
        Some(dir_name(&std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())));
    Ok(Found { source, version: None, tasks: picked.into_iter().cloned().map(local).collect() })
}

fn dir_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The items `selection` keeps, in order: `-t` (by name or registry name),
/// then `-i`, then `-x`, then the first `-l`.
fn select<'a, T>(
    items: &'a [T],
    name: impl Fn(&T) -> String,
    registry_name: impl Fn(&T) -> &str,
    selection: &Selection,
) -> Result<Vec<&'a T>, DatasetError> {
    let mut kept: Vec<&T> = items.iter().collect();
    if let Some(task) = &selection.task {
        kept.retain(|t| name(t) == *task || registry_name(t) == task);
        if kept.is_empty() {
            let names: Vec<String> = items.iter().map(&name).collect();
            let near = reeval_core::suggest::nearest(task, names.iter().map(String::as_str))
                .map(|n| format!("; did you mean `{n}`?"))
                .unwrap_or_default();
            return Err(DatasetError::Selection(format!(
                "-t {task} names no task of the dataset{near}"
            )));
        }
    }
    if !selection.include.is_empty() {
        let include = globs(&selection.include)?;
        let before: Vec<String> = kept.iter().map(|t| name(t)).collect();
        kept.retain(|t| include.iter().any(|g| g.is_match(name(t))));
        if kept.is_empty() {
            let mut examples = before;
            examples.sort();
            examples.truncate(5);
            return Err(DatasetError::Selection(format!(
                "no task matched -i {}; there are {} tasks, e.g. {}",
                selection.include.join(" -i "),
                items.len(),
                examples.join(", ")
            )));
        }
    }
    let exclude = globs(&selection.exclude)?;
    kept.retain(|t| !exclude.iter().any(|g| g.is_match(name(t))));
    if let Some(n) = selection.n_tasks {
        kept.truncate(n);
    }
    Ok(kept)
}

/// Harbor's globs (Python's `fnmatch`): `*` and `?` match any character, `/` too.
fn globs(patterns: &[String]) -> Result<Vec<GlobMatcher>, DatasetError> {
    patterns
        .iter()
        .map(|p| {
            globset::GlobBuilder::new(p)
                .literal_separator(false)
                .backslash_escape(false)
                .build()
                .map(|g: Glob| g.compile_matcher())
                .map_err(|e| DatasetError::Selection(format!("the glob {p:?} does not parse: {e}")))
        })
        .collect()
}

#[cfg(test)]
#[path = "dataset_tests.rs"]
mod tests;
