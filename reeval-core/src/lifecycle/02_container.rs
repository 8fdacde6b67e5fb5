//! The container phase: a fresh sandbox with the environment's limits and no
//! network of its own. The attempt keeps it from creation on, so teardown
//! destroys it whatever happens after.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::diff::HostHelper;
use crate::sandbox::{
    Backend, FileToWrite, LABEL_ATTEMPT, LABEL_RUN, Limits, Mount, NetworkSpec, Sandbox,
    SandboxError, SandboxHandle, SandboxSpec, ServiceStart,
};

/// The labels of everything an attempt creates on the engine.
pub(crate) fn labels(run_id: &str, attempt_id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_RUN.to_string(), run_id.to_string()),
        (LABEL_ATTEMPT.to_string(), attempt_id.to_string()),
    ])
}

/// What the sandbox is created from (no services, mounts or image user: the caller adds them).
pub(crate) fn spec(
    image: &str,
    workspace: &str,
    run_id: &str,
    attempt_id: &str,
    limits: &Limits,
    network: NetworkSpec,
    main_process: Option<Vec<String>>,
) -> SandboxSpec {
    SandboxSpec {
        image: image.to_string(),
        labels: labels(run_id, attempt_id),
        workdir: workspace.into(),
        limits: limits.clone(),
        network,
        main_process,
        ..Default::default()
    }
}

/// `spec` completed as an attempt's sandbox is made, whether in its container
/// phase or ahead of its slot (`--prestart`): its services and mounts, the
/// image's own user, and on an engine of this host the diff helper mounted
/// read-only (held, with the directory it is mounted from, while the
/// attempt may list its workspace).
pub(crate) fn complete(
    mut spec: SandboxSpec,
    backend: &dyn Backend,
    services: Vec<ServiceStart>,
    mounts: Vec<Mount>,
    user: Option<String>,
) -> (SandboxSpec, Option<Arc<HostHelper>>) {
    spec.services = services;
    spec.mounts = mounts;
    let helper = match backend.capabilities().gateway_socket {
        true => HostHelper::shared(),
        false => None,
    };
    spec.mounts.extend(helper.as_ref().map(|h| h.mount()));
    // The first snapshot's session, started by the gateway's relay with the
    // sandbox and waiting on its stdin: reached by an attach, not an exec.
    if helper.is_some() && backend.capabilities().main_stdin {
        let session = crate::diff::Snapshot::main_session_argv(&spec.workdir);
        if let Some(main) = spec
            .main_process
            .as_deref()
            .and_then(|main| reeval_gateway::relay::supervise_with_session(main, &session))
        {
            spec.main_process = Some(main);
            spec.main_stdin = true;
        }
    }
    spec.user = user;
    (spec, helper)
}

/// Starts a created sandbox. Where nothing is mounted, the gateway's files
/// (the relay and the CA) go in first, at their paths from `/`.
///
/// # Errors
/// [`SandboxError`] when the upload or the start fails.
///
/// # Cancel safety
/// A cancelled call may leave the sandbox created, or started; its owner destroys it.
pub(crate) async fn start(
    sandbox: &dyn Sandbox,
    files: Vec<FileToWrite>,
) -> Result<(), SandboxError> {
    if !files.is_empty() {
        let relative: Vec<_> = files.into_iter().map(FileToWrite::relative_to_root).collect();
        sandbox.upload("/", crate::sandbox::archive::tar_of(&relative)?).await?;
    }
    sandbox.start().await
}

/// The handle of an attempt's sandbox: where the diff helper was mounted
/// (`complete` returned it), the handle runs it from its mount.
pub(crate) fn handle(
    sandbox: Arc<dyn Sandbox>,
    workspace: &str,
    variables: Vec<(String, String)>,
    helper_mounted: bool,
) -> SandboxHandle {
    let handle = SandboxHandle::new(sandbox, workspace, variables);
    match helper_mounted {
        true => handle.with_helpers_dir(crate::diff::HELPER_MOUNTED_AT),
        false => handle,
    }
}

/// The phase's detail: `f4b7c5e2f350 from reeval/base:latest, no network`.
pub(crate) fn detail(sandbox: &dyn Sandbox, image: &str, gateway: bool) -> String {
    let short_id: String = sandbox.id().chars().take(12).collect();
    let network = if gateway { "network policy gateway · only way out" } else { "no network" };
    format!("{short_id} from {image}, {network}")
}

/// `, services db (healthy), web (port 80) in its network namespace`, or nothing.
pub(crate) fn services_detail(services: &[crate::sandbox::ServiceStart]) -> String {
    if services.is_empty() {
        return String::new();
    }
    let names: Vec<String> = services
        .iter()
        .map(|s| match (&s.service.healthcheck, s.service.ports.as_slice()) {
            (Some(_), _) => format!("{} (healthy)", s.service.name),
            (None, []) => s.service.name.clone(),
            (None, ports) => format!(
                "{} (port {})",
                s.service.name,
                ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            ),
        })
        .collect();
    let noun = if names.len() == 1 { "service" } else { "services" };
    format!(", {noun} {} in its network namespace", names.join(", "))
}
