//! A registry task's directory on this machine: a local `path`, or the
//! task's `path` in its `git_url` at its `git_commit_id`, fetched with the
//! system `git` into a cache (by default `<REEVAL_CACHE_DIR>/harbor-tasks`).
//!
//! Each repository is one bare repository in the cache; a commit is fetched
//! once (`git fetch --depth 1 URL COMMIT`, as Harbor fetches it) and each
//! task is unpacked from `git archive` into a directory of its own, keyed by
//! URL, commit and path and named as the task's directory, so its name is
//! what Harbor's would be. A task whose commit is already there is taken from
//! the cache without the network.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::error::DatasetError;
use super::registry::RegistryTask;

/// Where fetched tasks are kept.
#[derive(Debug, Clone)]
pub struct TaskCache {
    root: PathBuf,
}

impl TaskCache {
    /// A cache at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        TaskCache { root: root.into() }
    }

    /// `harbor-tasks` under reeval's cache directory (`REEVAL_CACHE_DIR`,
    /// else `<temp>/reeval-cache`).
    pub fn default_root() -> PathBuf {
        reeval_core::settings::cache_dir().join("harbor-tasks")
    }

    /// The cache's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of `task`: its local path (relative ones under `base`
    /// first, then the current directory, as Harbor looks), else its
    /// repository's `path` at its commit, fetched unless cached.
    ///
    /// # Errors
    /// [`DatasetError::Git`] when git cannot fetch the commit,
    /// [`DatasetError::MissingTask`] when the path is not a task there, and
    /// [`DatasetError::Cache`] when the cache cannot be written.
    pub fn task_dir(
        &self,
        task: &RegistryTask,
        base: Option<&Path>,
    ) -> Result<PathBuf, DatasetError> {
        let Some(url) = &task.git_url else {
            return local_dir(task, base);
        };
        let commit = task.git_commit_id.as_deref().filter(|c| !c.trim().is_empty());
        if let Some(c) = commit.filter(|c| is_full_id(c)) {
            let dir = self.checkout_dir(url, c, &task.path);
            if dir.join("task.toml").is_file() {
                return Ok(dir);
            }
        }
        let repo = self.repository(url)?;
        let resolved = fetch_commit(&repo, url, commit).map_err(|message| DatasetError::Git {
            task: task.name.clone(),
            url: url.clone(),
            commit: commit.unwrap_or("HEAD").to_string(),
            message,
        })?;
        let dir = self.checkout_dir(url, &resolved, &task.path);
        if !dir.join("task.toml").is_file() {
            self.unpack(&repo, &resolved, task, &dir)?;
        }
        if !dir.join("task.toml").is_file() {
            return Err(DatasetError::MissingTask {
                task: task.name.clone(),
                message: format!(
                    "{} at commit {resolved} of {url} has no task.toml",
                    task.path.display()
                ),
            });
        }
        Ok(dir)
    }

    /// The bare repository of `url` in the cache, made if missing.
    fn repository(&self, url: &str) -> Result<PathBuf, DatasetError> {
        let repo = self.root.join("repos").join(format!("{}.git", short_hash(&[url])));
        if !repo.join("HEAD").is_file() {
            std::fs::create_dir_all(&repo).map_err(|e| self.cache_error(&e))?;
            git(&repo, &["init", "--quiet", "--bare"])
                .map_err(|message| DatasetError::Cache { path: repo.clone(), message })?;
        }
        Ok(repo)
    }

    /// `<root>/<hash of url, commit, path>/<the path's last part>`.
    fn checkout_dir(&self, url: &str, commit: &str, path: &Path) -> PathBuf {
        let path_text = path.to_string_lossy();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.filter(|n| !n.is_empty()).unwrap_or_else(|| "task".into());
        self.root.join(short_hash(&[url, commit, &path_text])).join(name)
    }

    /// `task.path` at `commit` unpacked into `dir` (through a staging
    /// directory beside it, renamed into place: a reader never sees half a task).
    fn unpack(
        &self,
        repo: &Path,
        commit: &str,
        task: &RegistryTask,
        dir: &Path,
    ) -> Result<(), DatasetError> {
        let missing =
            |message: String| DatasetError::MissingTask { task: task.name.clone(), message };
        let path = task.path.to_string_lossy().trim_matches('/').to_string();
        if path.is_empty()
            || task.path.components().any(|c| {
                !matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir)
            })
        {
            return Err(missing(format!(
                "its path {} is not a path inside the repository",
                task.path.display()
            )));
        }
        let tar = git_output(repo, &["archive", "--format=tar", commit, "--", &path])
            .map_err(|e| missing(format!("{path} at commit {commit}: {e}")))?;
        let parent = dir.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(parent).map_err(|e| self.cache_error(&e))?;
        let staging = parent.join(format!(".staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        tar::Archive::new(tar.as_slice()).unpack(&staging).map_err(|e| self.cache_error(&e))?;
        let unpacked = staging.join(&path);
        let placed = match std::fs::rename(&unpacked, dir) {
            Ok(()) => Ok(()),
            // Another process placed it first: theirs is as good.
            Err(_) if dir.join("task.toml").is_file() => Ok(()),
            Err(e) => Err(self.cache_error(&e)),
        };
        let _ = std::fs::remove_dir_all(&staging);
        placed
    }

    fn cache_error(&self, e: &std::io::Error) -> DatasetError {
        DatasetError::Cache { path: self.root.clone(), message: e.to_string() }
    }
}

/// A local registry task: an absolute path, else relative to the registry's
/// directory, else to the current directory.
fn local_dir(task: &RegistryTask, base: Option<&Path>) -> Result<PathBuf, DatasetError> {
    let candidates: Vec<PathBuf> = if task.path.is_absolute() {
        vec![task.path.clone()]
    } else {
        base.map(|b| b.join(&task.path)).into_iter().chain([task.path.clone()]).collect()
    };
    candidates.iter().find(|c| c.join("task.toml").is_file()).cloned().ok_or_else(|| {
        let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
        DatasetError::MissingTask {
            task: task.name.clone(),
            message: format!("no task.toml at {}", looked.join(" nor ")),
        }
    })
}

/// Whether `id` is a whole commit id (SHA-1 or SHA-256), which alone can be
/// looked up in the cache without asking the repository.
fn is_full_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit `commit` (else HEAD) of `url` in `repo`: fetched unless
/// already there; its whole id.
fn fetch_commit(repo: &Path, url: &str, commit: Option<&str>) -> Result<String, String> {
    if let Some(c) = commit.filter(|c| is_full_id(c))
        && git(repo, &["cat-file", "-e", &format!("{c}^{{commit}}")]).is_ok()
    {
        return Ok(c.to_ascii_lowercase());
    }
    let wanted = commit.unwrap_or("HEAD");
    git(repo, &["fetch", "--quiet", "--depth", "1", "--no-tags", url, wanted])?;
    let id = git_output(repo, &["rev-parse", "FETCH_HEAD^{commit}"])?;
    Ok(String::from_utf8_lossy(&id).trim().to_string())
}

/// `git -C repo ARGS`, never prompting; its last lines of stderr as the error.
fn git(repo: &Path, args: &[&str]) -> Result<(), String> {
    git_output(repo, args).map(drop)
}

fn git_output(repo: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("failed to run git: {e}"))?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(3)..].join("; ");
    Err(format!("git {} exited {}: {tail}", args.first().unwrap_or(&""), out.status))
}

/// 16 hex digits of the SHA-256 of `parts` (each ended by a NUL).
fn short_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}
