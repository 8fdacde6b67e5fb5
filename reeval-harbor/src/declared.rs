//! What a task's declared `artifacts` are, read when the task is read and
//! by Harbor's job output: the service one names, the capture name it is
//! kept under, and what they may not ask (`artifacts.rs` collects them).

use super::compose::Compose;
use super::error::HarborError;
use super::task::{ArtifactEntry, TaskConfig, VerifierMode};

/// The service an artifact entry names, when it is not `main`.
pub(crate) fn service_of(entry: &ArtifactEntry) -> Option<&str> {
    match entry {
        ArtifactEntry::Config { service: Some(s), .. } if s != super::compose::MAIN => Some(s),
        _ => None,
    }
}

/// The capture name of a declared artifact at `path` (`artifact-srv-log-x.txt`),
/// which Harbor's job output reads back ([`crate::job`]).
pub(crate) fn capture_name(path: &str) -> String {
    let name: String = path
        .trim_matches('/')
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() || ".-_".contains(ch) { ch } else { '-' })
        .collect();
    format!("artifact-{name}")
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
