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

use super::compose::Compose;
use super::error::HarborError;
use super::eval::HarborTask;
use super::shell::quote;
use super::task::{ArtifactEntry, TaskConfig, VerifierMode};
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

/// The service an artifact entry names, when it is not `main`.
pub(super) fn service_of(entry: &ArtifactEntry) -> Option<&str> {
    match entry {
        ArtifactEntry::Config { service: Some(s), .. } if s != super::compose::MAIN => Some(s),
        _ => None,
    }
}

/// What a task's artifacts (and its steps') may not ask, refused when the
/// task is read: a source with `..`; a service that
/// `environment/docker-compose.yaml` does not define; a relative path in a
/// service (Harbor needs an absolute one there); a service's artifact with
/// a separate verifier (its files are not copied into that sandbox).
///
/// # Errors
/// [`HarborError`] naming the task and the artifact.
pub(super) fn check(task: &str, config: &TaskConfig, compose: &Compose) -> Result<(), HarborError> {
    let parse = |message: String| HarborError::Parse { task: task.to_string(), message };
    let steps = config.steps.iter().flatten();
    let separate = config.verifier_mode() == VerifierMode::Separate
        || steps.clone().any(|s| config.step_verifier_mode(s) == VerifierMode::Separate);
    for entry in config.artifacts.iter().chain(steps.flat_map(|s| &s.artifacts)) {
        let source = entry.source();
        if source.split('/').any(|c| c == "..") {
            return Err(parse("an artifact's source must not use `..`".into()));
        }
        let Some(service) = service_of(entry) else { continue };
        if !compose.services.iter().any(|s| s.name == service) {
            return Err(parse(format!(
                "the artifact {source} names the service `{service}`, which environment/docker-compose.yaml does not define"
            )));
        }
        if !source.starts_with('/') {
            return Err(parse(format!(
                "the artifact {source} of service `{service}` must be an absolute path"
            )));
        }
        if separate {
            return Err(HarborError::Unsupported {
                task: task.to_string(),
                what: format!(
                    "an artifact of a compose service (`{service}`: {source}) with a separate verifier"
                ),
            });
        }
    }
    Ok(())
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
        let name = super::run::artifact_capture_name(&path);
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

#[cfg(test)]
mod tests {
    use super::*;
    use reeval_core::environment::{Image, Service};

    fn checked(toml: &str) -> Result<(), String> {
        let config = TaskConfig::parse("org/t", toml).map_err(|e| e.to_string())?;
        let compose = Compose {
            services: vec![Service::new("log", Image::from("reeval/base:latest"))],
            ..Default::default()
        };
        check("org/t", &config, &compose).map_err(|e| e.to_string())
    }

    #[test]
    fn a_services_artifacts_are_refused_by_name_when_they_cannot_be_kept() {
        checked("artifacts = [{ source = \"/srv/log\", service = \"log\" }, \"out.txt\"]").unwrap();
        let e = checked("artifacts = [{ source = \"/srv/log\", service = \"db\" }]").unwrap_err();
        assert!(
            e.contains("org/t") && e.contains("`db`, which environment/docker-compose.yaml"),
            "{e}"
        );
        let e = checked("artifacts = [{ source = \"srv/log\", service = \"log\" }]").unwrap_err();
        assert!(e.contains("srv/log of service `log` must be an absolute path"), "{e}");
        let e = checked("[[steps]]\nname = \"s\"\nartifacts = [\"../up\"]").unwrap_err();
        assert!(e.contains("must not use `..`"), "a step's too: {e}");
        let separate = "artifacts = [{ source = \"/srv/log\", service = \"log\" }]\n\
                        [verifier]\nenvironment_mode = \"separate\"";
        let e = checked(separate).unwrap_err();
        assert!(e.contains("with a separate verifier") && e.contains("not supported"), "{e}");
    }
}
