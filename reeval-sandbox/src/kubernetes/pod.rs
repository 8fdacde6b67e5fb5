//! The attempt's pod and its deny-all NetworkPolicy, as manifests, and the
//! waits around them: Ready, then a working `exec true` (exec may fail just
//! after Ready), and gone after deletion.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Capabilities, Container, Pod, PodSecurityContext, PodSpec, SeccompProfile, SecurityContext,
    Toleration,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::Api;

use super::names::{CONTAINER, resources};
use super::patience::patiently;
use super::room::{NoRoom, no_room};
use super::services;
use super::services_up::Parts;
use super::user;
use super::volumes::PodVolumes;
use crate::KubernetesConfig;
use crate::{LABEL_OWNER, NetworkSpec, SandboxError, SandboxSpec};

/// Label naming the pod, which its NetworkPolicy selects.
pub(super) const LABEL_POD: &str = "dev.reeval.pod";
/// Capabilities root keeps inside the sandbox: as on Docker, what ordinary
/// tools (package installs, chown, kill) and the switch to the agent user need.
pub(super) const KEPT_CAPABILITIES: [&str; 7] =
    ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"];

/// `reeval-<12 hex digits>`: a pod name no other attempt has.
pub(super) fn new_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("reeval-{:012x}", h.finish() & 0xffff_ffff_ffff)
}

/// A label value Kubernetes accepts (at most 63 of `[A-Za-z0-9._-]`,
/// alphanumeric at both ends); the exact value is kept in an annotation.
pub(crate) fn label_value(value: &str) -> String {
    let mapped: String = value
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .take(63)
        .collect();
    mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string()
}

/// Name, labels (valid label values, and the object's own name under
/// [`LABEL_POD`]) and annotations (the exact values, and the owner) of
/// anything the backend creates.
pub(super) fn metadata(name: &str, labels: &BTreeMap<String, String>, owner: &str) -> ObjectMeta {
    // Exact values (a run id or owner with `:`), for the sweep.
    let mut annotations = labels.clone();
    let mut labels: BTreeMap<String, String> =
        labels.iter().map(|(k, v)| (k.clone(), label_value(v))).collect();
    labels.insert(LABEL_POD.into(), name.into());
    annotations.insert(LABEL_OWNER.into(), owner.into());
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(labels),
        annotations: Some(annotations),
        ..Default::default()
    }
}

/// The attempt's pod: bare, never restarted, no service account token,
/// unprivileged, capabilities dropped as on Docker, limits from the
/// environment; its services' containers beside the sandbox's
/// (`services.rs`), its volumes `emptyDir`s (`volumes.rs`).
pub(super) fn manifest(
    name: &str,
    spec: &SandboxSpec,
    config: &KubernetesConfig,
    owner: &str,
) -> Pod {
    let volumes = PodVolumes::of(spec);
    let mut container = Container {
        name: CONTAINER.into(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(
            config.image_pull_policy.clone().unwrap_or_else(|| "IfNotPresent".into()),
        ),
        command: Some(match (&spec.main_process, &spec.network) {
            (Some(main), NetworkSpec::PodGateway { .. }) => waiting_for(main),
            (Some(main), _) => main.clone(),
            (None, _) => vec!["sleep".into(), "infinity".into()],
        }),
        working_dir: Some(spec.workdir.clone()),
        resources: Some(resources(&spec.limits, config)),
        // Root inside, as on Docker: checks and setup run as root (or as the image's
        // user, which `exec` switches to, the container itself root: `user.rs`); the
        // agent's commands switch to uid 1000 (see `exec`), and can never gain more.
        security_context: Some(SecurityContext {
            run_as_user: user::of(spec).map(|_| 0),
            privileged: Some(false),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: Some(KEPT_CAPABILITIES.map(String::from).to_vec()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    container.volume_mounts = volumes.mounts_of(&spec.mounts);
    // Volumes filled first, then the one-shot jobs; the services after the sandbox.
    let (jobs, beside) = services::containers(&spec.services, config, &volumes, &container);
    let init: Vec<Container> =
        volumes.fills(&container).into_iter().map(|(c, _)| c).chain(jobs).collect();
    let containers: Vec<Container> = std::iter::once(container).chain(beside).collect();
    let tolerations = config
        .tolerations
        .iter()
        .map(|t| Toleration {
            key: t.get("key").cloned(),
            operator: t.get("operator").cloned(),
            value: t.get("value").cloned(),
            effect: t.get("effect").cloned(),
            toleration_seconds: t.get("tolerationSeconds").and_then(|s| s.parse().ok()),
        })
        .collect::<Vec<_>>();
    Pod {
        metadata: metadata(name, &spec.labels, owner),
        spec: Some(PodSpec {
            init_containers: (!init.is_empty()).then_some(init),
            containers,
            volumes: volumes.volumes(),
            host_aliases: services::host_aliases(&spec.services),
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(1),
            runtime_class_name: config.runtime_class.clone(),
            node_selector: (!config.node_selector.is_empty()).then(|| config.node_selector.clone()),
            tolerations: (!tolerations.is_empty()).then_some(tolerations),
            host_network: config.host_network.then_some(true),
            node_name: config.node_name.clone(),
            security_context: Some(PodSecurityContext {
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// A NetworkPolicy that selects only this pod and allows nothing in, and
/// nothing out but, with a gateway, TCP to the gateway pods on the attempt's port.
pub(super) fn policy(name: &str, spec: &SandboxSpec, owner: &str) -> NetworkPolicy {
    let egress = match &spec.network {
        NetworkSpec::PodGateway { pod_labels, port } => Some(vec![NetworkPolicyEgressRule {
            to: Some(vec![NetworkPolicyPeer {
                pod_selector: Some(LabelSelector {
                    match_labels: Some(pod_labels.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ports: Some(vec![NetworkPolicyPort {
                protocol: Some("TCP".into()),
                port: Some(IntOrString::Int((*port).into())),
                ..Default::default()
            }]),
        }]),
        _ => None,
    };
    NetworkPolicy {
        metadata: metadata(name, &spec.labels, owner),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(LABEL_POD.to_string(), name.to_string())])),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: None,
            egress,
        }),
    }
}

/// The main process of a sandbox whose relay is copied in after the pod
/// started (nothing can be mounted from this host): wait until it runs (a
/// file still being written cannot be executed: 126), then become it. The
/// relay comes last in the archive, after the CA it installs.
pub(super) fn waiting_for(main_process: &[String]) -> Vec<String> {
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        r#"while :; do if [ -x "$0" ]; then "$0" >/dev/null 2>&1; [ $? -lt 126 ] && break; fi; sleep 0.1; done; exec "$0" "$@""#.into(),
    ];
    argv.extend(main_process.iter().cloned());
    argv
}

/// Why a pod will never become Ready, if its status says so.
fn never_ready(pod: &Pod) -> Option<SandboxError> {
    let status = pod.status.as_ref()?;
    if let Some(phase @ ("Failed" | "Succeeded")) = status.phase.as_deref() {
        return Some(SandboxError::engine_says(
            "start the pod",
            format!(
                "it ended ({phase}) before it was ready: {}",
                status.message.as_deref().unwrap_or("no message")
            ),
        ));
    }
    let spec = pod.spec.as_ref();
    let all = spec.iter().flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
    let image_of = |name: &str| {
        all.clone().find(|c| c.name == name).and_then(|c| c.image.clone()).unwrap_or_default()
    };
    let statuses = status.init_container_statuses.iter().flatten();
    for c in statuses.chain(status.container_statuses.iter().flatten()) {
        let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) else { continue };
        let reason = waiting.reason.as_deref().unwrap_or("");
        let message = waiting.message.as_deref().unwrap_or("");
        match reason {
            "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull" | "InvalidImageName" => {
                return Some(SandboxError::ImageMissing {
                    image: image_of(&c.name),
                    hint: format!(
                        "the cluster cannot pull it ({reason}: {message}); push it to a registry the cluster can pull from, or set image_pull_policy in [kubernetes]"
                    ),
                });
            }
            "CreateContainerConfigError" | "CreateContainerError" | "RunContainerError" => {
                return Some(SandboxError::engine_says(
                    "start the pod",
                    format!("{reason}: {message}"),
                ));
            }
            _ => {}
        }
    }
    None
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// How a wait for Ready ended.
pub(super) enum Waited {
    /// The pod is Ready.
    Ready,
    /// It has no room on the cluster yet: unschedulable, or refused by its node.
    NoRoom(NoRoom),
}

/// Waits until the pod is Ready, or has no room (the caller decides how to
/// wait for room), or says why it never will be.
pub(super) async fn wait_ready(
    pods: &Api<Pod>,
    name: &str,
    within: Duration,
    parts: &Parts,
) -> Result<Waited, SandboxError> {
    let began = Instant::now();
    let mut every = Duration::from_millis(100);
    loop {
        let pod = patiently(|| pods.get(name))
            .await
            .map_err(|e| SandboxError::engine(format!("read the status of pod {name}"), e))?;
        if is_ready(&pod) {
            return Ok(Waited::Ready);
        }
        if let Some(why) = no_room(&pod) {
            return Ok(Waited::NoRoom(why));
        }
        // A service (or a volume's copy) that failed, named, with its log.
        if let Some((part, why)) = parts.failure(&pod) {
            return Err(parts.failed(pods, name, part, &why).await);
        }
        if let Some(e) = never_ready(&pod) {
            return Err(e);
        }
        if began.elapsed() > within {
            let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
            return Err(SandboxError::engine_says(
                format!("start pod {name}"),
                format!("it was not ready within {}s (phase {phase})", within.as_secs()),
            ));
        }
        tokio::time::sleep(every).await;
        every = (every * 2).min(Duration::from_secs(1));
    }
}

/// Deletes nothing; polls until the pod is gone (404), up to `within`.
pub(super) async fn wait_gone(
    pods: &Api<Pod>,
    name: &str,
    within: Duration,
) -> Result<(), SandboxError> {
    let began = Instant::now();
    loop {
        match patiently(|| pods.get_opt(name)).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) if began.elapsed() < within => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Ok(Some(_)) => {
                return Err(SandboxError::engine_says(
                    format!("delete pod {name}"),
                    format!("it was still there after {}s", within.as_secs()),
                ));
            }
            Err(e) => {
                return Err(SandboxError::engine(format!("wait for pod {name} to be gone"), e));
            }
        }
    }
}
