//! The files of a Harbor task on the host: the directories uploaded into
//! the sandbox (`tests/`, `solution/`, a step's `workdir/`). (The image's
//! WORKDIR is the backend's to say: `WorkspaceDir::ImageWorkdir`.)

use std::path::{Path, PathBuf};

use super::error::HarborError;

/// The files of `dir` (recursively), as `(path under prefix, bytes, mode)`,
/// for upload; a missing dir has none.
///
/// # Errors
/// [`HarborError::Read`] when a file cannot be read.
pub fn files_under(
    task: &str,
    dir: &Path,
    prefix: &str,
) -> Result<Vec<(String, Vec<u8>, u32)>, HarborError> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let read = |path: &Path, e: std::io::Error| HarborError::Read {
        task: task.to_string(),
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut stack: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), prefix.to_string())];
    while let Some((at, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&at).map_err(|e| read(&at, e))? {
            let entry = entry.map_err(|e| read(&at, e))?;
            let path = entry.path();
            let name = format!("{rel}/{}", entry.file_name().to_string_lossy());
            let meta = std::fs::metadata(&path).map_err(|e| read(&path, e))?;
            if meta.is_dir() {
                stack.push((path, name));
            } else {
                let bytes = std::fs::read(&path).map_err(|e| read(&path, e))?;
                out.push((name, bytes, mode_of(&meta)));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(_: &std::fs::Metadata) -> u32 {
    0o644
}
