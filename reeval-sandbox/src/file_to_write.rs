//! A file written into a sandbox: the one shape every writer of files
//! (the files phase, skills, a CLI's config home, the gateway's CA, a
//! Harbor task's files) hands to the tar it uploads.

/// A regular file to write: where, its bytes and its mode bits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileToWrite {
    /// Its path: relative to where the tar is unpacked, or absolute.
    pub path: String,
    /// Its content.
    pub bytes: Vec<u8>,
    /// Its permission bits (`0o644`, `0o755`, …).
    pub mode: u32,
}

impl FileToWrite {
    /// A file at `path` holding `bytes`, with `mode`.
    pub fn new(path: impl Into<String>, bytes: impl Into<Vec<u8>>, mode: u32) -> Self {
        Self { path: path.into(), bytes: bytes.into(), mode }
    }

    /// The same file with its path relative to `/`: for a tar unpacked at the root.
    pub fn relative_to_root(mut self) -> Self {
        let relative = self.path.trim_start_matches('/');
        if relative.len() != self.path.len() {
            self.path = relative.to_string();
        }
        self
    }
}
