//! The files phase: the environment's files written byte for byte, the rules
//! to the harness's rules file, and `CONTEXT.md` when asked for.

use crate::environment::{Environment, Workspace};
use crate::error::{Error, Result};
use crate::sandbox::FileToWrite;
use crate::sandbox::{SandboxHandle, archive};

/// What the files phase writes, with the rules file under `rules_file`.
pub(crate) fn planned(env: &Environment, rules_file: &str) -> Vec<FileToWrite> {
    let mut files = env.files.clone();
    if let Some(rules) = &env.rules {
        files.push(FileToWrite::new(rules_file, rules.clone(), 0o644));
    }
    if env.context_summary {
        files.push(FileToWrite::new("CONTEXT.md", context_summary(env), 0o644));
    }
    files
}

/// Writes the files; the phase's detail.
pub(crate) async fn write(
    handle: &SandboxHandle,
    files: &[FileToWrite],
    rules_file: Option<&str>,
) -> Result<String> {
    let (relative, absolute): (Vec<_>, Vec<_>) =
        files.iter().cloned().partition(|f| !f.path.starts_with('/'));
    if !relative.is_empty() {
        let cleaned: Vec<_> = relative
            .into_iter()
            .map(|f| FileToWrite { path: f.path.trim_start_matches("./").to_string(), ..f })
            .collect();
        if cleaned.iter().any(|f| f.path.split('/').any(|c| c == "..")) {
            return Err(Error::Config(
                "failed to write the environment's files: a path uses `..`".into(),
            ));
        }
        handle.sandbox().upload(handle.workspace(), archive::tar_of(&cleaned)?).await?;
    }
    for FileToWrite { path, bytes, mode } in absolute {
        handle.write_file(&path, &bytes, mode).await?;
    }
    let rules = rules_file.map(|f| format!(", rules in {f}")).unwrap_or_default();
    Ok(format!("{} files{rules}", files.len()))
}

/// The `CONTEXT.md` text: what the attempt was given.
pub(crate) fn context_summary(env: &Environment) -> String {
    let mut s = String::from("# What this task comes with\n\n");
    match &env.workspace {
        Some(Workspace::Git { url, rev, .. }) => s.push_str(&format!(
            "- The workspace is the repository {} at {rev}.\n",
            without_credentials(url)
        )),
        Some(Workspace::Dir { path, .. }) => s.push_str(&format!(
            "- The workspace holds the files of {}.\n",
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        )),
        None => s.push_str("- The workspace starts empty.\n"),
    }
    for file in &env.files {
        s.push_str(&format!("- File: {}\n", file.path));
    }
    if env.rules.is_some() {
        s.push_str("- Rules for you are in the rules file.\n");
    }
    for step in &env.setup {
        s.push_str(&format!("- Setup ran: `{}`\n", step.command));
    }
    s
}

/// `https://user:token@host/x` → `https://host/x`: the agent reads the summary.
fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme && !url[scheme + 3..at].contains('/') => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_the_summary() {
        assert_eq!(
            without_credentials("https://user:tok@github.com/a/b"),
            "https://github.com/a/b"
        );
        assert_eq!(
            without_credentials("https://github.com/a/b@main"),
            "https://github.com/a/b@main"
        );
    }
}
