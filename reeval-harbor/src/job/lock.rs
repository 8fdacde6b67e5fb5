//! Harbor's `lock.json`s: a trial's resolved inputs (`TrialLock`: the task
//! by its content digest, and the agent, environment and verifier its
//! config asked for) and the job's (`JobLock`: every trial's, the
//! concurrency and the retries). Harbor's viewer reads a trial's before it
//! shows the trial from a jobs folder, and its uploader needs both.

use std::path::Path;
use std::time::SystemTime;

use reeval_core::sandbox::FileToWrite;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{JobTask, rfc3339};
use crate::dataset::TaskId;
use crate::files::{HARBORIGNORE, files_under, task_files};
use crate::task::VerifierMode;

/// A trial's `lock.json`, from the trial's `config.json` (`config`) and
/// its task's [`content_digest`].
pub(super) fn trial_lock(task: &JobTask, config: &Value, digest: &str) -> Value {
    let dir = &task.task.dir;
    let (kind, path, git_url, git_commit_id) = match &task.id {
        TaskId::Local(_) => ("local", json!(super::absolute(dir)), Value::Null, Value::Null),
        TaskId::Git { url, commit, path } => ("git", json!(path), json!(url), json!(commit)),
    };
    let name = match &task.id {
        TaskId::Git { path, .. } => Path::new(path).file_name().map(|n| n.to_string_lossy()),
        TaskId::Local(_) => dir.file_name().map(|n| n.to_string_lossy()),
    };
    let mut verifier = config["verifier"].clone();
    // Harbor's: the task's mode for one step, none for steps (resolved per step).
    verifier["environment_mode"] = match (&task.task.config.steps, task.task.config.verifier_mode())
    {
        (Some(_), _) => Value::Null,
        (None, VerifierMode::Shared) => json!("shared"),
        (None, VerifierMode::Separate) => json!("separate"),
    };
    json!({
        "schema_version": 2,
        "task": {
            "name": name.unwrap_or_default(),
            "version": null,
            "type": kind,
            "digest": format!("sha256:{digest}"),
            "source": task.source,
            "path": path,
            "git_url": git_url,
            "git_commit_id": git_commit_id,
        },
        "timeout_multiplier": config["timeout_multiplier"],
        "agent_timeout_multiplier": config["agent_timeout_multiplier"],
        "verifier_timeout_multiplier": config["verifier_timeout_multiplier"],
        "agent": config["agent"],
        "environment": config["environment"],
        "verifier": verifier,
        "artifacts": [],
    })
}

/// The job's `lock.json`: `trials` are the trials' own locks.
pub(super) fn job_lock(
    created: SystemTime,
    n_concurrent: usize,
    max_retries: u32,
    trials: Vec<Value>,
) -> Value {
    json!({
        "schema_version": 3,
        "created_at": rfc3339(created),
        // Harbor's own version and commit: none, reeval wrote it.
        "harbor": {"version": null, "git_commit_hash": null, "is_editable": null},
        "n_concurrent_trials": n_concurrent.max(1),
        "retry": {"max_retries": max_retries},
        "trials": trials,
    })
}

/// Harbor's content hash of a task (`Packager.compute_content_hash`): over
/// its files in path order, `path\0sha256(file)\n`. The files are
/// `task.toml`, `instruction.md`, `README.md`, `trajectory.json` and what is
/// under `environment/`, `tests/`, `solution/` and `steps/`, less what the
/// `.harborignore` files leave out (and themselves) and Harbor's default
/// ignores. A task with a `.gitignore` of its own has Harbor apply that
/// instead of the defaults, which this does not: its digest differs from
/// Harbor's, and still changes when the task does.
pub(super) fn content_digest(task: &str, dir: &Path) -> String {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for single in ["task.toml", "instruction.md", "README.md", "trajectory.json"] {
        if let Ok(bytes) = std::fs::read(dir.join(single)) {
            files.push((single.to_string(), bytes));
        }
    }
    let mut subs: Vec<String> = ["environment", "tests", "solution"].map(String::from).to_vec();
    for step in std::fs::read_dir(dir.join("steps")).into_iter().flatten().flatten() {
        for inner in std::fs::read_dir(step.path()).into_iter().flatten().flatten() {
            let (step, inner) = (step.file_name(), inner.file_name());
            subs.push(format!("steps/{}/{}", step.to_string_lossy(), inner.to_string_lossy()));
        }
    }
    for sub in subs {
        let at = dir.join(&sub);
        if at.is_file() {
            files.extend(std::fs::read(&at).ok().map(|bytes| (sub.clone(), bytes)));
            continue;
        }
        // The ignore files' scopes, as `task_files` reads them; elsewhere every file.
        let listed = task_files(task, dir, &sub, &sub).or_else(|_| files_under(task, &at, &sub));
        for FileToWrite { path, bytes, .. } in listed.unwrap_or_default() {
            files.push((path, bytes));
        }
    }
    files.retain(|(path, _)| !ignored(path));
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut outer = Sha256::new();
    for (path, bytes) in files {
        outer.update(format!("{path}\0{}\n", hex(&Sha256::digest(&bytes))));
    }
    hex(&outer.finalize())
}

/// Harbor's `DEFAULT_IGNORES` (`__pycache__/`, `*.pyc`, `.DS_Store`, `*.swp`,
/// `*.swo`, `*~`), and `.harborignore` files wherever they are.
fn ignored(path: &str) -> bool {
    let mut parts = path.split('/');
    let name = parts.next_back().unwrap_or_default();
    parts.any(|p| p == "__pycache__")
        || name == HARBORIGNORE
        || name == ".DS_Store"
        || [".pyc", ".swp", ".swo", "~"].iter().any(|s| name.ends_with(s))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
