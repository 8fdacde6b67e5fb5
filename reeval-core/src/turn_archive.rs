//! The archive of the agent's work, turn by turn: after each turn, the files
//! the turn added or changed (bytes, modes, symlinks) and the paths it
//! deleted, kept beside the record in the attempt's directory as
//! `workspace/turn-N.tar` and `workspace/manifest.json`. From a fresh sandbox
//! of the same environment, applying them in order rebuilds the workspace
//! after every turn exactly: what regrade and the replay harness do
//! ([`crate::replay`]).
//!
//! The archive is complete only when every turn's diff was read; a turn whose
//! diff failed is marked, and a replay of it refuses rather than grade a
//! workspace that does not hold the agent's work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::diff::{Change, Diff, Snapshot};
use crate::sandbox::archive::{self, Entry};
use crate::sandbox::{SandboxError, SandboxHandle};

/// The directory of the archive inside an attempt's directory.
pub const DIR: &str = "workspace";
const MANIFEST: &str = "manifest.json";

/// What the archive holds, turn by turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Manifest {
    /// Every turn, in order.
    pub turns: Vec<TurnArchive>,
    /// The agent's commits, when the workspace was a repository and the agent
    /// moved its refs ([`crate::git_archive`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<Commits>,
}

/// What the manifest says of the agent's commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Commits {
    /// Commits not reachable from the refs the agent found.
    pub count: u64,
    /// What `HEAD` was: a ref (`refs/heads/main`) or a commit.
    pub head: String,
    /// The bundle's name in the archive's directory, when it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// Why it was not kept, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_kept: Option<String>,
}

/// One turn's changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TurnArchive {
    /// 1-based turn.
    pub turn: u32,
    /// The tar of the files added or changed, relative to the archive's directory.
    pub archive: String,
    /// Paths the turn deleted.
    pub deleted: Vec<String>,
    /// Why the turn's changes are not all here, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// An archive that cannot be written or read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// A file of the archive could not be read or written.
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The archive is not one reeval wrote, or does not hold every turn.
    #[error("failed to read the recorded workspace in {}: {message}", dir.display())]
    Incomplete {
        /// The archive's directory.
        dir: PathBuf,
        /// What is missing.
        message: String,
    },
    /// A tar could not be built or parsed.
    #[error(transparent)]
    Tar(#[from] SandboxError),
}

/// The changes of one turn: entries added or changed, and paths deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnChanges {
    /// Files and symlinks the turn added or changed, by path.
    pub written: BTreeMap<String, Entry>,
    /// Paths the turn deleted.
    pub deleted: Vec<String>,
    /// Paths the turn added or changed whose content was not read (a fifo,
    /// socket or device, or a file too large to read): a replay cannot
    /// rebuild them, so the turn is marked incomplete.
    pub unread: Vec<String>,
}

impl TurnChanges {
    /// The changes of `diff`, whose later side is `after`.
    pub fn of(diff: &Diff, after: &Snapshot) -> Self {
        let mut changes = TurnChanges::default();
        for file in &diff.files {
            match (file.change, after.entry(&file.path)) {
                (Change::Deleted, _) => changes.deleted.push(file.path.clone()),
                (_, Some(entry)) => {
                    changes.written.insert(file.path.clone(), entry.clone());
                }
                (_, None) if after.contains(&file.path) => changes.unread.push(file.path.clone()),
                (_, None) => changes.deleted.push(file.path.clone()),
            }
        }
        changes
    }
}

fn io<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> ArchiveError + 'a {
    move |source| ArchiveError::Io { action, path: path.to_path_buf(), source }
}

/// Adds turn `turn`'s changes to the archive under `attempt_dir`;
/// `failed` says why they could not be read (the turn's diff failed). A
/// file holding a secret's value is never written: the turn is marked
/// incomplete instead, so that a replay refuses.
///
/// # Errors
/// An [`ArchiveError`] when a file cannot be written.
pub fn record_turn(
    attempt_dir: &Path,
    turn: u32,
    changes: &TurnChanges,
    failed: Option<&str>,
    redactor: &crate::secrets::Redactor,
) -> Result<(), ArchiveError> {
    let mut failed = failed.map(|e| format!("the diff after turn {turn} failed: {e}"));
    let mut changes = changes.clone();
    if let Some(path) = changes.unread.first() {
        failed.get_or_insert(format!("{path} was not read (too large, or not a regular file)"));
    }
    for (path, entry) in &mut changes.written {
        if let Entry::File { bytes, .. } = entry
            && matches!(redactor.redact_bytes(bytes), std::borrow::Cow::Owned(_))
        {
            bytes.clear();
            failed.get_or_insert(format!("{path} holds a secret's value and was not archived"));
        }
    }
    let dir = attempt_dir.join(DIR);
    std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let mut manifest = load_manifest(&dir).unwrap_or_default();
    let name = format!("turn-{turn}.tar");
    let tar = archive::tar_of_tree(".", &changes.written)?;
    let path = dir.join(&name);
    std::fs::write(&path, &tar).map_err(io("write", &path))?;
    manifest.turns.retain(|t| t.turn != turn);
    manifest.turns.push(TurnArchive {
        turn,
        archive: name,
        deleted: changes.deleted.clone(),
        incomplete: failed,
    });
    let path = dir.join(MANIFEST);
    let text = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    std::fs::write(&path, text).map_err(io("write", &path))
}

/// Keeps `bytes` as `name` in the archive under `attempt_dir` (the agent's commits' bundle).
///
/// # Errors
/// An [`ArchiveError`] when it cannot be written.
pub(crate) fn keep_file(attempt_dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ArchiveError> {
    let dir = attempt_dir.join(DIR);
    std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let path = dir.join(name);
    std::fs::write(&path, bytes).map_err(io("write", &path))
}

/// Says in the manifest under `attempt_dir` what became of the agent's commits.
///
/// # Errors
/// An [`ArchiveError`] when the manifest cannot be written.
pub(crate) fn record_commits(attempt_dir: &Path, commits: Commits) -> Result<(), ArchiveError> {
    let dir = attempt_dir.join(DIR);
    std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let mut manifest = load_manifest(&dir).unwrap_or_default();
    manifest.commits = Some(commits);
    let path = dir.join(MANIFEST);
    let text = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    std::fs::write(&path, text).map_err(io("write", &path))
}

fn load_manifest(dir: &Path) -> Result<Manifest, ArchiveError> {
    let path = dir.join(MANIFEST);
    let bytes = std::fs::read(&path).map_err(io("read", &path))?;
    serde_json::from_slice(&bytes).map_err(|e| ArchiveError::Incomplete {
        dir: dir.to_path_buf(),
        message: format!("{MANIFEST} does not parse: {e}"),
    })
}

/// The archive recorded under `attempt_dir`, checked to hold all of `turns`
/// turns (the record's turn count).
///
/// # Errors
/// [`ArchiveError::Incomplete`] naming what is missing: no archive (a record
/// from before archives, or a write that failed), a turn not archived, or a
/// turn whose diff failed.
pub fn load(attempt_dir: &Path, turns: usize) -> Result<Manifest, ArchiveError> {
    let dir = attempt_dir.join(DIR);
    let incomplete = |message: String| ArchiveError::Incomplete { dir: dir.clone(), message };
    let manifest = match load_manifest(&dir) {
        Ok(m) => m,
        Err(ArchiveError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            if turns == 0 {
                return Ok(Manifest::default());
            }
            return Err(incomplete(format!(
                "no archive of the agent's {turns} turns (recorded before archives were kept, or not written)"
            )));
        }
        Err(e) => return Err(e),
    };
    for turn in 1..=turns as u32 {
        match manifest.turns.iter().find(|t| t.turn == turn) {
            None => return Err(incomplete(format!("turn {turn} was not archived"))),
            Some(TurnArchive { incomplete: Some(why), .. }) => return Err(incomplete(why.clone())),
            Some(t) if !dir.join(&t.archive).is_file() => {
                return Err(incomplete(format!("{} is missing", t.archive)));
            }
            Some(_) => {}
        }
    }
    Ok(manifest)
}

/// The changes of turn `turn` of the archive under `attempt_dir`.
///
/// # Errors
/// An [`ArchiveError`] when the turn is not archived or its tar does not read.
pub fn read_turn(
    attempt_dir: &Path,
    manifest: &Manifest,
    turn: u32,
) -> Result<TurnChanges, ArchiveError> {
    let dir = attempt_dir.join(DIR);
    let t =
        manifest.turns.iter().find(|t| t.turn == turn).ok_or_else(|| ArchiveError::Incomplete {
            dir: dir.clone(),
            message: format!("turn {turn} was not archived"),
        })?;
    let path = dir.join(&t.archive);
    let tar = std::fs::read(&path).map_err(io("read", &path))?;
    Ok(TurnChanges {
        written: archive::read_entries(&tar, false, |_| false)?,
        deleted: t.deleted.clone(),
        unread: Vec::new(),
    })
}

/// Applies `changes` to the workspace of `sandbox`: deletions first, then
/// every file byte for byte with its mode, and every symlink.
///
/// # Errors
/// [`SandboxError`] when the engine fails or a command in the sandbox does.
///
/// # Cancel safety
/// Not atomic: a cancelled apply leaves part of the changes applied.
pub async fn apply(sandbox: &SandboxHandle, changes: &TurnChanges) -> Result<(), SandboxError> {
    use crate::exec::Command;
    let run = |cmd: Command, what: String| async move {
        let out = sandbox.exec(cmd).await?;
        if out.success() { Ok(()) } else { Err(SandboxError::engine_says(what, out.stderr.trim())) }
    };
    if !changes.deleted.is_empty() {
        let rm = Command::new("rm").arg("-rf").arg("--").args(changes.deleted.iter().cloned());
        run(rm, "delete the turn's deleted files".into()).await?;
    }
    for (path, entry) in &changes.written {
        match entry {
            Entry::File { mode, bytes } => {
                // A path that was a symlink or a directory becomes the file.
                run(Command::new("rm").arg("-rf").arg("--").arg(path), format!("replace {path}"))
                    .await?;
                sandbox.write_file(path, bytes, *mode).await?;
            }
            Entry::Symlink(target) => {
                let parent = path.rsplit_once('/').map_or(".", |(d, _)| d).to_string();
                run(
                    Command::new("mkdir").arg("-p").arg(parent),
                    format!("create the directory of {path}"),
                )
                .await?;
                run(
                    Command::new("ln").arg("-sfn").arg("--").arg(target).arg(path),
                    format!("link {path}"),
                )
                .await?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("reeval-archive-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_turn_reads_back_byte_for_byte_with_modes_links_and_deletions() {
        let before = Snapshot::from_files([("gone.txt".to_string(), b"x".to_vec())]);
        let mut written = BTreeMap::new();
        written.insert("bin/blob".to_string(), Entry::File { mode: 0o755, bytes: vec![0, 255, 1] });
        written.insert("link".to_string(), Entry::Symlink("bin/blob".into()));
        let changes = TurnChanges { written, deleted: vec!["gone.txt".into()], unread: Vec::new() };
        let d = dir("roundtrip");
        record_turn(&d, 1, &changes, None, &crate::secrets::Redactor::none()).unwrap();
        let manifest = load(&d, 1).unwrap();
        assert_eq!(read_turn(&d, &manifest, 1).unwrap(), changes);
        // The diff of a snapshot pair yields the same kinds of change.
        let after = Snapshot::from_files([("new.txt".to_string(), b"y".to_vec())]);
        let of = TurnChanges::of(&before.diff(&after), &after);
        assert_eq!(of.deleted, ["gone.txt"]);
        assert!(of.written.contains_key("new.txt"));
    }

    #[test]
    fn an_incomplete_archive_is_refused_with_what_is_missing() {
        let d = dir("incomplete");
        let none = load(&d, 2).unwrap_err().to_string();
        assert!(none.contains("no archive of the agent's 2 turns"), "{none}");
        let redactor = crate::secrets::Redactor::new(["s3cret-value"]);
        record_turn(&d, 1, &TurnChanges::default(), Some("the listing failed"), &redactor).unwrap();
        let failed = load(&d, 1).unwrap_err().to_string();
        assert!(failed.contains("the diff after turn 1 failed: the listing failed"), "{failed}");
        let mut secret = TurnChanges::default();
        secret.written.insert(
            "key.txt".into(),
            Entry::File { mode: 0o644, bytes: b"token=s3cret-value".to_vec() },
        );
        record_turn(&d, 1, &secret, None, &redactor).unwrap();
        let refused = load(&d, 1).unwrap_err().to_string();
        assert!(refused.contains("key.txt holds a secret's value"), "{refused}");
        let tar = std::fs::read(d.join(DIR).join("turn-1.tar")).unwrap();
        assert!(
            !tar.windows(11).any(|w| w == b"s3cret-valu"),
            "the value never reaches the archive"
        );
        record_turn(&d, 1, &TurnChanges::default(), None, &redactor).unwrap();
        let missing = load(&d, 2).unwrap_err().to_string();
        assert!(missing.contains("turn 2 was not archived"), "{missing}");
    }
}
