//! A task's declared `artifacts` (and a step's), as Harbor collects them
//! after the agent and before the verifier (`trial/artifact_handler.py`):
//! each path (absolute, or relative to the workdir), a directory without
//! what its `exclude` patterns match (tar's `--exclude`). reeval keeps each
//! as a capture (`artifact-<path>`); for a separate verifier they are also
//! copied across, with `/logs/artifacts`, to the same paths (`separate.rs`).

use super::eval::HarborTask;
use super::shell::quote;
use super::task::ArtifactEntry;
use reeval_core::Ctx;
use reeval_core::capture::Artifact;
use reeval_core::error::Result;
use reeval_core::exec::Command;

/// Harbor's convention directory, always collected.
pub(super) const CONVENTION: &str = "/logs/artifacts";

/// One artifact: its absolute path in `main` and what to leave out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Declared {
    pub(super) path: String,
    pub(super) exclude: Vec<String>,
}

/// The artifacts of the task, and of a step (`extra`), in order; a relative
/// path is in `workdir` (the agent's workspace).
pub(super) fn declared(task: &HarborTask, extra: &[ArtifactEntry], workdir: &str) -> Vec<Declared> {
    task.config
        .artifacts
        .iter()
        .chain(extra)
        .map(|entry| {
            let source = entry.source();
            let path = if source.starts_with('/') {
                source.to_string()
            } else {
                format!("{}/{source}", workdir.trim_end_matches('/'))
            };
            let exclude = match entry {
                ArtifactEntry::Config { exclude, .. } => exclude.clone(),
                ArtifactEntry::Path(_) => Vec::new(),
            };
            Declared { path, exclude }
        })
        .collect()
}

/// The declared artifacts, kept as captures (`<prefix>artifact-<path>`); a
/// path that does not exist, or a directory with no file left, is left out.
pub(super) async fn collect(
    c: &mut Ctx,
    task: &HarborTask,
    extra: &[ArtifactEntry],
    prefix: &str,
) -> Result<()> {
    let workdir = super::shell::workdir(c).await?;
    for Declared { path, exclude } in declared(task, extra, &workdir) {
        let kind = c
            .exec(
                Command::shell(format!(
                    "if [ -d {0} ]; then [ -n \"$(find {0} -type f -print -quit)\" ] && echo dir; \
                     elif [ -e {0} ]; then echo file; fi; true",
                    quote(&path)
                ))
                .user("0")
                .step(format!("look for the artifact {path}")),
            )
            .await?;
        let name: String = path
            .trim_matches('/')
            .chars()
            .map(|ch| if ch.is_ascii_alphanumeric() || ".-_".contains(ch) { ch } else { '-' })
            .collect();
        let what = match kind.stdout.trim() {
            "dir" => Artifact::dir(path.clone()).excluding(exclude),
            "file" => Artifact::file(path.clone()),
            _ => continue,
        };
        match c.capture(&format!("{prefix}artifact-{name}"), what).await {
            Ok(_) => {}
            // Every file of it excluded: nothing to keep, as Harbor keeps an empty directory.
            Err(e) if e.to_string().contains("holds no file") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
