//! The agent's commits, kept so that a replay has them as commits. The turn
//! archive ([`crate::turn_archive`]) holds files, `.git` left out, so a check
//! on `git log` of a replayed attempt would see none of the agent's commits
//! and a regrade would count a false regression.
//!
//! When the workspace is a git repository as the agent finds it, its refs are
//! noted then (in the same exec that hands the workspace to the agent user,
//! outside the workspace: `/var/lib/reeval-git/base`). At teardown, when its refs are no
//! longer what was noted, the repository's history goes into
//! `workspace/commits.bundle` beside the turn archive (a `git bundle` of every
//! ref: a setup's own commits differ by their dates from one sandbox to the
//! next, so the agent's could not be replayed on top of them), and the
//! manifest says which ref `HEAD` was. A replay, after applying the last
//! turn's files, fetches the bundle's refs into the fresh workspace and points
//! `HEAD` there, its index reset to it.
//!
//! Limits: a repository the agent created itself is not kept (no refs were
//! noted); checks between turns of a replay see the commits only after the
//! last turn; what the agent staged and did not commit is replayed unstaged.

use std::path::Path;

use crate::exec::Command;
use crate::sandbox::{SandboxError, SandboxHandle};
use crate::turn_archive::Commits;
use crate::turn_archive::{self, ArchiveError};

/// Where the refs of the workspace's repository are noted when the agent finds it.
const BASE: &str = "/var/lib/reeval-git/base";
/// The bundle's name in the archive's directory.
pub const BUNDLE: &str = "commits.bundle";
/// A bundle larger than this is not kept (the manifest says so).
pub const BUNDLE_LIMIT: u64 = 64 << 20;

/// The refs and `HEAD` of the repository in the working directory, one per line.
const REFS: &str = "{ git for-each-ref --format='%(objectname) %(refname)'; git rev-parse -q --verify HEAD; git symbolic-ref -q HEAD; } 2>/dev/null";

/// A shell fragment for the exec that prepares the agent user (as root, in the
/// workspace): notes the repository's refs when the workspace is one.
pub(crate) fn note_base() -> String {
    format!(
        "{{ rm -f {BASE}; if [ -d .git ] && command -v git >/dev/null 2>&1; then mkdir -p -m 700 {d}; {REFS} > {BASE}; fi; true; }}",
        d = BASE.rsplit_once('/').expect("a directory").0
    )
}

/// Compares the refs with the noted ones; when they moved, bundles every ref
/// (to `$1`) and prints `head <ref or commit>` and `commits <n>` (the commits
/// not reachable from the noted refs).
fn capture_script() -> String {
    format!(
        r#"[ -f {BASE} ] && [ -d .git ] || exit 0
now=$({REFS})
[ "$now" = "$(cat {BASE})" ] && exit 0
base=$(awk '$1 ~ /^[0-9a-f]+$/ && length($1) >= 40 {{ print "^" $1 }}' {BASE} | sort -u)
echo "commits $(git rev-list --count --all $base 2>/dev/null || echo 0)"
echo "head $(git symbolic-ref -q HEAD || git rev-parse -q --verify HEAD)"
git bundle create "$1" --all >/dev/null 2>&1 || {{ echo "failed: git bundle create failed"; exit 0; }}
echo "bundle $(wc -c < "$1")""#
    )
}

/// Fetches every ref of the bundle `$1` into the workspace's repository (made
/// if there is none), points `HEAD` at `$2` and resets the index to it.
const APPLY: &str = r#"set -e
[ -d .git ] || git init -q
git fetch -q --update-head-ok "$1" '+refs/*:refs/*'
case "$2" in
  refs/*) git symbolic-ref HEAD "$2" ;;
  *) git update-ref --no-deref HEAD "$2" ;;
esac
git reset -q
rm -f "$1""#;

/// At teardown: when the repository's refs moved since the agent found it,
/// keeps its history under `attempt_dir` and says so in the manifest.
/// Returns an event to log when something could not be kept.
///
/// # Cancel safety
/// Safe: the workspace is only read; a cancelled capture may leave a bundle
/// in the sandbox's `/tmp`, which goes with the sandbox.
pub(crate) async fn capture(handle: &SandboxHandle, attempt_dir: &Path) -> Option<String> {
    const TMP: &str = "/tmp/.reeval-commits.bundle";
    // As root, whatever the image's user: the repository is the agent's.
    let cmd = Command::new("sh").args(["-c", &capture_script(), "sh", TMP]).user("0");
    let out = match handle.exec(cmd).await {
        Ok(out) if out.success() => out,
        Ok(out) => {
            return Some(format!("failed to read the agent's commits: {}", out.stderr.trim()));
        }
        Err(e) => return Some(format!("failed to read the agent's commits: {e}")),
    };
    let field = |name: &str| {
        out.stdout.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let (Some(count), Some(head)) = (field("commits "), field("head ")) else {
        return None; // not a repository, or its refs did not move
    };
    let mut commits = Commits {
        count: count.parse().unwrap_or(0),
        head,
        bundle: None,
        not_kept: field("failed: "),
    };
    match field("bundle ").and_then(|n| n.parse::<u64>().ok()) {
        Some(size) if size > BUNDLE_LIMIT => {
            commits.not_kept =
                Some(format!("the repository's bundle is {size} bytes, over {BUNDLE_LIMIT}"));
        }
        Some(_) => match handle.read_file(TMP).await {
            Ok(bytes) => match turn_archive::keep_file(attempt_dir, BUNDLE, &bytes) {
                Ok(()) => commits.bundle = Some(BUNDLE.to_string()),
                Err(e) => commits.not_kept = Some(e.to_string()),
            },
            Err(e) => commits.not_kept = Some(format!("failed to read the bundle: {e}")),
        },
        None => {}
    }
    let event = commits
        .not_kept
        .as_ref()
        .map(|why| format!("the agent's {} commits were not kept: {why}", commits.count));
    match turn_archive::record_commits(attempt_dir, commits) {
        Ok(()) => event,
        Err(e) => Some(format!("failed to record the agent's commits: {e}")),
    }
}

/// In a replay, after the last turn's files: the recorded commits, as commits.
///
/// # Errors
/// [`ArchiveError`] when the bundle cannot be read, or applying it fails.
///
/// # Cancel safety
/// Not atomic: a cancelled apply may leave some refs fetched.
pub async fn apply(
    sandbox: &SandboxHandle,
    attempt_dir: &Path,
    commits: &Commits,
) -> Result<(), ArchiveError> {
    const TMP: &str = "/tmp/.reeval-replay.bundle";
    let Some(name) = &commits.bundle else { return Ok(()) };
    let path = attempt_dir.join(turn_archive::DIR).join(name);
    let bytes = std::fs::read(&path).map_err(|source| ArchiveError::Io {
        action: "read",
        path: path.clone(),
        source,
    })?;
    sandbox.write_file(TMP, &bytes, 0o644).await?;
    let out = sandbox
        .exec(Command::new("sh").args(["-c", APPLY, "sh", TMP, commits.head.as_str()]))
        .await?;
    if !out.success() {
        return Err(
            SandboxError::engine_says("replay the agent's commits", out.stderr.trim()).into()
        );
    }
    Ok(())
}
