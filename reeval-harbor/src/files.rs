//! The files of a Harbor task on the host: the directories uploaded into
//! the sandbox (`tests/`, `solution/`, a step's `workdir/`). (The image's
//! WORKDIR is the backend's to say: `WorkspaceDir::ImageWorkdir`.)

use reeval_core::sandbox::FileToWrite;
use std::path::Path;

use super::error::HarborError;

/// The name of Harbor's ignore files (gitignore syntax; `.gitignore` is not read).
pub const HARBORIGNORE: &str = ".harborignore";

/// The files of the task's `sub` directory (`tests`, `solution`, a step's
/// `workdir`…) for upload, each path under `prefix`. Under
/// `tests/`, `solution/`, `steps/*/tests/` and `steps/*/solution/`, the
/// `.harborignore` files there (gitignore syntax, each for its directory and
/// below, as Harbor 0.26's `TaskFileFilter`) leave files out, and are left
/// out themselves.
///
/// # Errors
/// [`HarborError::Read`] when a file cannot be read, or when an ignore file
/// leaves out the script Harbor runs (`tests/test.sh`, `solution/solve.sh`).
pub fn task_files(
    task: &str,
    task_dir: &Path,
    sub: &str,
    prefix: &str,
) -> Result<Vec<FileToWrite>, HarborError> {
    let parts: Vec<&str> = sub.split('/').collect();
    let scoped =
        matches!(parts.as_slice(), ["tests" | "solution"] | ["steps", _, "tests" | "solution"]);
    let dir = task_dir.join(sub);
    let files = walk(task, &dir, prefix, scoped)?;
    for script in ["test.sh", "solve.sh"] {
        let wanted = format!("{prefix}/{script}");
        if scoped && dir.join(script).is_file() && !files.iter().any(|f| f.path == wanted) {
            return Err(HarborError::Read {
                task: task.to_string(),
                path: dir.join(script),
                message: format!("a {HARBORIGNORE} leaves it out, and Harbor runs it"),
            });
        }
    }
    Ok(files)
}

/// The files of `dir` (recursively), each path under `prefix`,
/// for upload; a missing dir has none.
///
/// # Errors
/// [`HarborError::Read`] when a file cannot be read.
pub fn files_under(task: &str, dir: &Path, prefix: &str) -> Result<Vec<FileToWrite>, HarborError> {
    walk(task, dir, prefix, false)
}

/// Every file under `dir`, symlinks followed; with `harborignore`, less what
/// the ignore files under `dir` leave out.
fn walk(
    task: &str,
    dir: &Path,
    prefix: &str,
    harborignore: bool,
) -> Result<Vec<FileToWrite>, HarborError> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let read = |path: &Path, message: String| HarborError::Read {
        task: task.to_string(),
        path: path.to_path_buf(),
        message,
    };
    let mut walker = ignore::WalkBuilder::new(dir);
    walker.standard_filters(false).parents(false).follow_links(true);
    if harborignore {
        walker.add_custom_ignore_filename(HARBORIGNORE);
    }
    for entry in walker.build() {
        let entry = entry.map_err(|e| read(dir, e.to_string()))?;
        let path = entry.path();
        let meta = std::fs::metadata(path).map_err(|e| read(path, e.to_string()))?;
        if meta.is_dir() || (harborignore && entry.file_name() == HARBORIGNORE) {
            continue;
        }
        let rel = path.strip_prefix(dir).unwrap_or(path).to_string_lossy().replace('\\', "/");
        let bytes = std::fs::read(path).map_err(|e| read(path, e.to_string()))?;
        out.push(FileToWrite::new(format!("{prefix}/{rel}"), bytes, mode_of(&meta)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harborignore_files_leave_files_out_of_tests_and_solution_only() {
        let task = std::env::temp_dir().join(format!("reeval-harborignore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&task);
        for (path, text) in [
            ("tests/test.sh", "true"),
            ("tests/.harborignore", "*.log\n/big/\n!keep.log\n"),
            ("tests/run.log", "x"),
            ("tests/keep.log", "x"),
            ("tests/big/data.bin", "x"),
            ("tests/sub/big/data.bin", "x"),
            ("tests/sub/.harborignore", "notes.md\n"),
            ("tests/sub/notes.md", "x"),
            ("tests/notes.md", "x"),
            ("steps/one/workdir/.harborignore", "*\n"),
            ("steps/one/workdir/setup.sh", "x"),
            ("solution/solve.sh", "x"),
            ("solution/.harborignore", "solve.sh\n"),
        ] {
            std::fs::create_dir_all(task.join(path).parent().unwrap()).unwrap();
            std::fs::write(task.join(path), text).unwrap();
        }
        let names = |sub: &str, prefix: &str| -> Vec<String> {
            task_files("t", &task, sub, prefix).unwrap().into_iter().map(|f| f.path).collect()
        };
        assert_eq!(
            names("tests", "tests"),
            ["tests/keep.log", "tests/notes.md", "tests/sub/big/data.bin", "tests/test.sh"]
        );
        // Not a scope of Harbor's ignore files: every file, the ignore file too.
        assert_eq!(names("steps/one/workdir", "."), ["./.harborignore", "./setup.sh"]);
        let e = task_files("t", &task, "solution", "solution").unwrap_err().to_string();
        assert!(e.contains("solve.sh") && e.contains("a .harborignore leaves it out"), "{e}");
        let _ = std::fs::remove_dir_all(&task);
    }
}
