//! A workspace diff as records hold it: each changed file and the unified
//! patch. Taking snapshots and diffing them is `reeval_core::diff`'s.

use serde::{Deserialize, Serialize};

/// A file larger than this is named with its size and marked not captured.
pub const FILE_LIMIT: u64 = 99_999_999;
/// A patch longer than this is cut, with a notice.
pub const PATCH_LIMIT: usize = 512 * 1024;

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

/// What kind of entry a changed path is (its later version, or the earlier one when deleted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A regular file.
    #[default]
    File,
    /// A symbolic link (recorded, never followed).
    Symlink,
    /// A named pipe.
    Fifo,
    /// A unix socket.
    Socket,
    /// A block or character device.
    Device,
}

impl FileKind {
    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        *self == FileKind::File
    }

    /// Its name as a patch shows it (`file`, `symlink`, …).
    pub fn name(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Symlink => "symlink",
            FileKind::Fifo => "fifo",
            FileKind::Socket => "socket",
            FileKind::Device => "device",
        }
    }
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Path relative to the workspace (bytes that are not UTF-8 as `\xNN`).
    pub path: String,
    /// How it changed.
    pub change: Change,
    /// Whether either side is binary (named in the patch, not dumped).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    /// What it is, when not a regular file.
    #[serde(default, skip_serializing_if = "FileKind::is_file")]
    pub kind: FileKind,
    /// Its size in bytes, when it was too large to capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Whether its content was left out for its size (see [`FILE_LIMIT`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_captured: bool,
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
