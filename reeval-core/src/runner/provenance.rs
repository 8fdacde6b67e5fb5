//! Where a run ran, for its summary: the suite's git state (cargo runs a
//! suite in its package's directory, so that is the repository asked).

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::record::{GitState, Provenance};

/// The provenance of a run that started at `started` and ends now.
pub(crate) fn of_run(
    started: SystemTime,
    engine: Option<String>,
    harness_versions: BTreeMap<String, String>,
) -> Provenance {
    let now = SystemTime::now();
    Provenance {
        started_at: Some(humantime::format_rfc3339_millis(started).to_string()),
        ended_at: Some(humantime::format_rfc3339_millis(now).to_string()),
        duration_ms: Some(now.duration_since(started).map(|d| d.as_millis() as u64).unwrap_or(0)),
        command: std::env::args().collect(),
        commands: Vec::new(),
        git: git_state(),
        reeval_version: env!("CARGO_PKG_VERSION").to_string(),
        engine,
        harness_versions,
    }
}

/// The commit checked out in the current directory and whether the work
/// tree has changes; `None` outside a git repository or without git.
pub(crate) fn git_state() -> Option<GitState> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|changes| !changes.is_empty());
    Some(GitState { commit, dirty })
}
