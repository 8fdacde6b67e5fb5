//! Workspace snapshots and the diffs between them (unified, via `similar`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use similar::TextDiff;

use crate::sandbox::archive::{self, Entry};
use crate::sandbox::{SandboxError, SandboxHandle};

/// The largest workspace archive a snapshot reads.
pub const SNAPSHOT_LIMIT: u64 = 2 << 30;
/// A patch longer than this is cut, with a notice.
pub const PATCH_LIMIT: usize = 512 * 1024;

/// Lists the workspace's files and symlinks with what identifies a version of
/// each (type, mode, size, mtime, ctime), NUL-separated, `.git` left out.
const LIST: &str =
    r"find . -path ./.git -prune -o \( -type f -o -type l \) -printf '%P\0%y %m %s %T@ %C@\0'";

/// The workspace's files at one moment, `.git` internals excluded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Shared entries: a refresh reuses unchanged files without copying them.
    files: BTreeMap<String, Arc<Entry>>,
    /// Per path, the listing's identity of its version; empty when taken without a listing.
    stats: BTreeMap<String, String>,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// New since the earlier snapshot.
    Added,
    /// Content, mode or link target changed.
    Modified,
    /// Gone since the earlier snapshot.
    Deleted,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Path relative to the workspace.
    pub path: String,
    /// How it changed.
    pub change: Change,
    /// Whether either side is binary (named in the patch, not dumped).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

/// A workspace diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// Changed files, sorted by path.
    pub files: Vec<FileChange>,
    /// The unified diff.
    pub patch: String,
    /// Whether the patch was cut at [`PATCH_LIMIT`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl Diff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Paths of changed files.
    pub fn paths(&self) -> Vec<&str> {
        self.files.iter().map(|f| f.path.as_str()).collect()
    }
}

fn is_git_internal(path: &str) -> bool {
    path == ".git" || path.starts_with(".git/")
}

impl Snapshot {
    /// Reads the workspace of `sandbox`.
    ///
    /// # Errors
    /// [`SandboxError`] when the workspace cannot be read.
    ///
    /// # Cancel safety
    /// Safe: nothing changes in the sandbox.
    pub async fn take(sandbox: &SandboxHandle) -> Result<Self, SandboxError> {
        Snapshot::default().refresh(sandbox).await
    }

    /// The workspace now, reading only the files whose version changed since
    /// `self` (a listing, then one archive of the changed files), so a diff on
    /// a large workspace with a few changes stays fast. Falls back to reading
    /// everything when the image has no GNU `find` and `tar`.
    ///
    /// # Errors
    /// [`SandboxError`] when the workspace cannot be read.
    ///
    /// # Cancel safety
    /// Safe: nothing changes in the sandbox.
    pub async fn refresh(&self, sandbox: &SandboxHandle) -> Result<Self, SandboxError> {
        let listing = sandbox.exec(crate::exec::Command::shell(LIST)).await?;
        if !listing.success() || listing.stdout_bytes as usize != listing.stdout.len() {
            let tar = sandbox.sandbox().download(sandbox.workspace(), SNAPSHOT_LIMIT).await?;
            return Self::from_tar(&tar);
        }
        let mut stats = BTreeMap::new();
        let mut fields = listing.stdout.split('\0');
        while let (Some(path), Some(stat)) = (fields.next(), fields.next()) {
            if !path.is_empty() {
                stats.insert(path.to_string(), stat.to_string());
            }
        }
        let changed: Vec<&String> = stats
            .iter()
            .filter(|(p, st)| self.stats.get(*p) != Some(*st) || !self.files.contains_key(*p))
            .map(|(p, _)| p)
            .collect();
        let mut files: BTreeMap<String, Arc<Entry>> = stats
            .keys()
            .filter_map(|p| self.files.get(p).map(|e| (p.clone(), Arc::clone(e))))
            .collect();
        if !changed.is_empty() {
            // Sizes come from the listing: refuse before reading, not after.
            let bytes: u64 = changed
                .iter()
                .filter_map(|p| stats[*p].split(' ').nth(2)?.parse::<u64>().ok())
                .sum();
            if bytes > SNAPSHOT_LIMIT {
                return Err(SandboxError::Archive {
                    message: format!(
                        "the workspace's changed files hold {bytes} bytes, more than the {SNAPSHOT_LIMIT} a snapshot reads"
                    ),
                });
            }
            let names: Vec<u8> =
                changed.iter().flat_map(|p| p.bytes().chain(std::iter::once(0))).collect();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let cmd = crate::exec::Command::new("tar")
                .args(["--null", "--no-recursion", "-cf", "-", "-T", "-"])
                .stdin(names);
            let out = sandbox.exec_streaming(cmd, tx).await?;
            let mut tar = Vec::new();
            while let Ok(chunk) = rx.try_recv() {
                tar.extend_from_slice(&chunk);
            }
            if out.exit_code > 1 {
                // tar exits 1 when a file vanished while it was read; anything worse means no usable tar.
                let tar = sandbox.sandbox().download(sandbox.workspace(), SNAPSHOT_LIMIT).await?;
                return Self::from_tar(&tar);
            }
            for (path, entry) in archive::read_entries(&tar, false, is_git_internal)? {
                files.insert(path, Arc::new(entry));
            }
            // A file listed but gone before tar read it is gone.
            files.retain(|p, _| stats.contains_key(p));
            stats.retain(|p, _| files.contains_key(p));
        }
        Ok(Self { files, stats })
    }

    /// Parses a `download` of the workspace directory.
    ///
    /// # Errors
    /// [`SandboxError::Archive`] for an unreadable or unsafe archive.
    pub fn from_tar(tar: &[u8]) -> Result<Self, SandboxError> {
        let files = archive::read_tree(tar, is_git_internal)?
            .into_iter()
            .map(|(p, e)| (p, Arc::new(e)))
            .collect();
        Ok(Self { files, stats: BTreeMap::new() })
    }

    /// A snapshot of these files (for tests and in-memory workspaces).
    pub fn from_files<I: IntoIterator<Item = (String, Vec<u8>)>>(files: I) -> Self {
        Self {
            files: files
                .into_iter()
                .map(|(p, b)| (p, Arc::new(Entry::File { mode: 0o644, bytes: b })))
                .collect(),
            stats: BTreeMap::new(),
        }
    }

    /// Whether `self` and `other` hold the same files (listings aside).
    pub fn same_files(&self, other: &Snapshot) -> bool {
        self.files == other.files
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the workspace is empty.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The file (mode and bytes) or symlink at `path`, if any.
    pub fn entry(&self, path: &str) -> Option<&Entry> {
        self.files.get(path).map(Arc::as_ref)
    }

    /// Paths of the files, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// The diff from `self` (earlier) to `later`.
    pub fn diff(&self, later: &Snapshot) -> Diff {
        let mut diff = Diff::default();
        let mut patch = String::new();
        let mut paths: Vec<&String> = self.files.keys().chain(later.files.keys()).collect();
        paths.sort();
        paths.dedup();
        for path in paths {
            let (old, new) = (self.files.get(path), later.files.get(path));
            let change = match (old, new) {
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Deleted,
                (Some(a), Some(b)) if a != b => Change::Modified,
                _ => continue,
            };
            let (old, new) = (old.map(Arc::as_ref), new.map(Arc::as_ref));
            let binary = old.is_some_and(is_binary) || new.is_some_and(is_binary);
            if patch.len() < PATCH_LIMIT {
                patch.push_str(&file_patch(path, old, new, binary));
            } else {
                diff.truncated = true;
            }
            diff.files.push(FileChange { path: path.clone(), change, binary });
        }
        if patch.len() > PATCH_LIMIT {
            let mut cut = PATCH_LIMIT;
            while !patch.is_char_boundary(cut) {
                cut -= 1;
            }
            patch.truncate(cut);
            diff.truncated = true;
        }
        if diff.truncated {
            patch.push_str(&format!(
                "\n[patch truncated at {PATCH_LIMIT} bytes; {} files changed in all]\n",
                diff.files.len()
            ));
        }
        diff.patch = patch;
        diff
    }
}

fn is_binary(entry: &Entry) -> bool {
    match entry {
        Entry::File { bytes, .. } => {
            bytes[..bytes.len().min(8000)].contains(&0) || std::str::from_utf8(bytes).is_err()
        }
        Entry::Symlink(_) => false,
    }
}

fn text_of(entry: Option<&Entry>) -> String {
    match entry {
        None => String::new(),
        Some(Entry::File { bytes, .. }) => String::from_utf8_lossy(bytes).into_owned(),
        Some(Entry::Symlink(target)) => format!("-> {target}\n"),
    }
}

fn file_patch(path: &str, old: Option<&Entry>, new: Option<&Entry>, binary: bool) -> String {
    let a = if old.is_some() { format!("a/{path}") } else { "/dev/null".into() };
    let b = if new.is_some() { format!("b/{path}") } else { "/dev/null".into() };
    let mut out = format!("diff --git a/{path} b/{path}\n");
    if let (Some(Entry::File { mode: m1, .. }), Some(Entry::File { mode: m2, .. })) = (old, new)
        && m1 != m2
    {
        out.push_str(&format!("old mode {:o}\nnew mode {:o}\n", m1, m2));
    }
    if binary {
        out.push_str(&format!("Binary files {a} and {b} differ\n"));
        return out;
    }
    let (old_text, new_text) = (text_of(old), text_of(new));
    if old_text == new_text {
        return out;
    }
    let text = TextDiff::from_lines(&old_text, &new_text);
    out.push_str(&text.unified_diff().context_radius(3).header(&a, &b).to_string());
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(files: &[(&str, &[u8])]) -> Snapshot {
        Snapshot::from_files(files.iter().map(|(p, b)| (p.to_string(), b.to_vec())))
    }

    #[test]
    fn added_modified_deleted_and_binary() {
        let before =
            snap(&[("a.txt", b"one\ntwo\n"), ("gone.txt", b"x\n"), ("img.bin", b"\0\x01")]);
        let after = snap(&[("a.txt", b"one\n2\n"), ("new.txt", b"hi\n"), ("img.bin", b"\0\x02")]);
        let d = before.diff(&after);
        let summary: Vec<_> =
            d.files.iter().map(|f| (f.path.as_str(), f.change, f.binary)).collect();
        assert_eq!(
            summary,
            vec![
                ("a.txt", Change::Modified, false),
                ("gone.txt", Change::Deleted, false),
                ("img.bin", Change::Modified, true),
                ("new.txt", Change::Added, false),
            ]
        );
        assert!(d.patch.contains("-two\n+2\n"), "{}", d.patch);
        assert!(d.patch.contains("+++ b/new.txt"), "{}", d.patch);
        assert!(d.patch.contains("--- /dev/null"), "{}", d.patch);
        assert!(d.patch.contains("Binary files a/img.bin and b/img.bin differ"), "{}", d.patch);
    }

    #[test]
    fn huge_patches_are_truncated_visibly() {
        let big = "x\n".repeat(PATCH_LIMIT);
        let d = snap(&[]).diff(&snap(&[("big.txt", big.as_bytes())]));
        assert!(d.truncated);
        assert!(d.patch.len() < PATCH_LIMIT + 200);
        assert!(d.patch.contains("[patch truncated"));
    }

    #[test]
    fn identical_snapshots_have_empty_diff() {
        let s = snap(&[("a", b"1")]);
        assert!(s.diff(&s.clone()).is_empty());
    }
}
