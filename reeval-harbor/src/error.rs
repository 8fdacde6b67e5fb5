//! What can go wrong reading Harbor tasks.

use std::path::PathBuf;

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
    /// The task's `environment/docker-compose.yaml` does not parse, or uses
    /// what reeval does not support.
    #[error("failed to load Harbor task {task}: docker-compose.yaml {message}")]
    Compose {
        /// The task.
        task: String,
        /// What is wrong, naming the service and the key.
        message: String,
    },
}

/// What can go wrong finding a dataset's tasks: its `registry.json`, its
/// version, the filters, and (per task) fetching a task with git. A task's
/// own fault ([`DatasetError::Git`], [`DatasetError::MissingTask`]) is that
/// task's alone; the rest of the dataset still runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatasetError {
    /// `registry.json` could not be read or fetched.
    #[error("failed to read the Harbor registry {origin}: {message}")]
    Registry {
        /// The registry's path or URL.
        origin: String,
        /// Why.
        message: String,
    },
    /// `-p PATH` is neither a task nor a directory of tasks.
    #[error(
        "failed to read Harbor tasks at {}: it is neither a task directory (with task.toml) nor a directory of task directories",
        path.display()
    )]
    NotTasks {
        /// The path given.
        path: PathBuf,
    },
    /// The registry lists no dataset of that name.
    #[error("failed to find the dataset `{name}` in the Harbor registry {origin}: {hint}")]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// The registry's path or URL.
        origin: String,
        /// `did you mean …? it lists: …`.
        hint: String,
    },
    /// The dataset has no such version.
    #[error(
        "failed to find version `{version}` of the dataset `{name}` in the Harbor registry {origin}: it has {versions}"
    )]
    UnknownVersion {
        /// The dataset.
        name: String,
        /// The version asked for.
        version: String,
        /// The registry's path or URL.
        origin: String,
        /// The versions it has.
        versions: String,
    },
    /// `-i` matched no task, or `-t` names none.
    #[error("failed to select Harbor tasks: {0}")]
    Selection(String),
    /// git could not fetch the task's repository at its commit.
    #[error("failed to fetch Harbor task {task} from {url} at {commit}: {message}")]
    Git {
        /// The task.
        task: String,
        /// Its `git_url`.
        url: String,
        /// Its `git_commit_id` (`HEAD` when none).
        commit: String,
        /// git's words.
        message: String,
    },
    /// The task's path is not there (in the repository at its commit, or on disk).
    #[error("failed to find Harbor task {task}: {message}")]
    MissingTask {
        /// The task.
        task: String,
        /// Where it was looked for and what was missing.
        message: String,
    },
    /// The task cache could not be written.
    #[error("failed to write the Harbor task cache {}: {message}", path.display())]
    Cache {
        /// The cache directory.
        path: PathBuf,
        /// Why.
        message: String,
    },
}
