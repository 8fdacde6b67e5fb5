//! The files of a Harbor task on the host: the directories uploaded into
//! the sandbox (`tests/`, `solution/`, a step's `workdir/`), and the WORKDIR
//! its Dockerfile sets.

use std::path::{Path, PathBuf};

use super::error::HarborError;

/// The WORKDIR a Dockerfile's final stage sets, when it sets one: `Ok(Some)`;
/// `Ok(None)` with the stage's base image when it inherits its base's.
pub fn dockerfile_workdir(text: &str) -> (Option<String>, Option<String>) {
    // (alias, workdir, base image) per stage.
    let mut stages: Vec<(Option<String>, Option<String>, Option<String>)> = Vec::new();
    let mut joined = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            joined.push_str(head);
            joined.push(' ');
            continue;
        }
        joined.push_str(line);
        let full = std::mem::take(&mut joined);
        let mut words = full.split_whitespace();
        let Some(instruction) = words.next() else { continue };
        let args: Vec<&str> = words.collect();
        if instruction.eq_ignore_ascii_case("FROM") {
            let args: Vec<&str> = args.into_iter().filter(|a| !a.starts_with("--")).collect();
            let image = args.first().map(|s| s.to_string());
            let alias = match args.as_slice() {
                [_, as_, alias] if as_.eq_ignore_ascii_case("as") => Some(alias.to_string()),
                _ => None,
            };
            // FROM an earlier stage inherits that stage's workdir and base.
            let earlier =
                stages.iter().find(|(a, _, _)| a.is_some() && a.as_ref() == image.as_ref());
            let (workdir, base) = match earlier {
                Some((_, w, b)) => (w.clone(), b.clone()),
                None => (None, image),
            };
            stages.push((alias, workdir, base));
        } else if instruction.eq_ignore_ascii_case("WORKDIR")
            && let (Some(stage), Some(dir)) = (stages.last_mut(), args.first())
        {
            let dir = dir.trim_matches('"');
            stage.1 = Some(if dir.starts_with('/') {
                dir.to_string()
            } else {
                let parent = stage.1.clone().unwrap_or_else(|| "/".into());
                format!("{}/{dir}", parent.trim_end_matches('/'))
            });
        }
    }
    match stages.pop() {
        Some((_, workdir, base)) => (workdir, base),
        None => (None, None),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerfile_workdir_follows_the_final_stage() {
        let text = "FROM a AS build\nWORKDIR /src\nFROM build\nWORKDIR sub\n";
        assert_eq!(dockerfile_workdir(text), (Some("/src/sub".into()), Some("a".into())));
        let text = "FROM a AS build\nWORKDIR /src\nFROM reeval/base:latest\nRUN x \\\n  && y\n";
        assert_eq!(dockerfile_workdir(text), (None, Some("reeval/base:latest".into())));
        let text = "# c\nfrom --platform=linux/amd64 img\nworkdir \"/app\"\n";
        assert_eq!(dockerfile_workdir(text), (Some("/app".into()), Some("img".into())));
    }
}
