//! A task's declared `artifacts` (and a step's), as Harbor collects them
//! after the agent and before the verifier (`trial/artifact_handler.py`):
//! each path (absolute, or relative to the workdir), a directory without
//! what its `exclude` patterns match (tar's `--exclude`); `main`'s first,
//! then those of the compose services (`service`, an absolute path in that
//! service's container). As in Harbor, every service's land in one flat
//! place: a path already kept is skipped, the first keeps it. reeval keeps
//! each as a capture (`artifact-<path>`); for a separate verifier `main`'s
//! are also copied across, with `/logs/artifacts`, to the same paths
//! (`separate.rs`).

use super::declared::{capture_name, service_of};
use super::eval::HarborTask;
use super::shell::quote;
use super::task::ArtifactEntry;
use reeval_core::Ctx;
use reeval_core::capture::Artifact;
use reeval_core::error::Result;
use reeval_core::exec::Command;

/// Harbor's convention directory, always collected.
pub(super) const CONVENTION: &str = "/logs/artifacts";

/// One artifact: its absolute path, what to leave out of it, and the
/// compose service it is in (`None`: `main`, the sandbox).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Declared {
    pub(super) path: String,
    pub(super) exclude: Vec<String>,
    pub(super) service: Option<String>,
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
            Declared { path, exclude, service: service_of(entry).map(str::to_string) }
        })
        .collect()
}

/// Those of `declared` in `main`, the sandbox (what a separate verifier gets copied).
pub(super) fn in_main(declared: Vec<Declared>) -> impl Iterator<Item = Declared> {
    declared.into_iter().filter(|d| d.service.is_none())
}

/// The declared artifacts, kept as captures (`<prefix>artifact-<path>`); a
/// path that does not exist, or a directory with no file left, is left out,
/// and so is a path that an artifact before it named (Harbor keeps the first).
pub(super) async fn collect(
    c: &mut Ctx,
    task: &HarborTask,
    extra: &[ArtifactEntry],
    prefix: &str,
) -> Result<()> {
    let workdir = super::shell::workdir(c).await?;
    let mut declared = declared(task, extra, &workdir);
    // `main`'s first, then the services', as Harbor's two passes.
    declared.sort_by_key(|d| d.service.is_some());
    // A path is claimed by the first artifact naming it, kept or not (Harbor's `_claimed_targets`).
    let mut claimed: Vec<String> = Vec::new();
    for Declared { path, exclude, service } in declared {
        let name = capture_name(&path);
        if claimed.contains(&name) {
            continue;
        }
        claimed.push(name.clone());
        let look = Command::shell(format!(
            "if [ -d {0} ]; then [ -n \"$(find {0} -type f -print -quit)\" ] && echo dir; \
             elif [ -e {0} ]; then echo file; fi; true",
            quote(&path)
        ))
        .user("0")
        .step(format!("look for the artifact {path}"));
        let kind = match &service {
            Some(service) => c.exec_in_service(service, look).await?,
            None => c.exec(look).await?,
        };
        let what = match kind.stdout.trim() {
            "dir" => Artifact::dir(path.clone()).excluding(exclude),
            "file" => Artifact::file(path.clone()),
            _ => continue,
        };
        let what = match service {
            Some(service) => what.in_service(service),
            None => what,
        };
        match c.capture(&format!("{prefix}{name}"), what).await {
            Ok(_) => {}
            // Every file of it excluded: nothing to keep, as Harbor keeps an empty directory.
            Err(e) if e.to_string().contains("holds no file") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
