//! Where a run ran, for its summary: the suite's git state (cargo runs a
//! suite in its package's directory, so that is the repository asked).

use crate::record::GitState;

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
