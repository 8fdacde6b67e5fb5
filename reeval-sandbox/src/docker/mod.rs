//! The Docker backend, on bollard: the local engine, or a remote one named by
//! `DOCKER_HOST` (`tcp://` with `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`,
//! `https://`). Works against API 1.41 (Docker 20.10).

mod container;
pub mod engines;
mod gateway;
pub mod image;
mod services;
pub mod setup_cache;
mod volumes;

// The Kubernetes backend builds the gateway image here too, to push it.
#[cfg(feature = "kubernetes")]
pub(crate) use gateway::ensure_image as ensure_gateway_image;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};

pub use container::DockerSandbox;
pub use engines::EngineSpec;

use super::{
    Backend, Capabilities, EngineInfo, FoundSetup, HELPER_TOOLS, LABEL_OWNER, LABEL_RUN,
    NetworkSpec, ReadyImage, Sandbox, SandboxError, SandboxSpec, Sweep,
};
use crate::ImageSpec;

/// What the engine says of an image: its id and the defaults its config sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// The engine's image id.
    pub id: String,
    /// Its `WORKDIR`, when set.
    pub workdir: Option<String>,
    /// Its `USER`, when set.
    pub user: Option<String>,
}

/// Label on a container started as root in place of its image's own user,
/// naming that user: a commit of it as a cached setup gives the image that
/// user back (`setup_cache::commit`).
pub(crate) const LABEL_IMAGE_USER: &str = "dev.reeval.image-user";

/// An image whose own user is not root: the container starts as root and that
/// user is named on each command that names none (see `SandboxSpec::user`).
/// That user, and the container's labels, which name it.
fn image_user(
    spec: &SandboxSpec,
    labels: &HashMap<String, String>,
) -> (Option<String>, HashMap<String, String>) {
    let user = spec.user.clone().filter(|u| !crate::exec::is_root_user(u));
    let mut labels = labels.clone();
    if let Some(user) = &user {
        labels.insert(LABEL_IMAGE_USER.into(), user.clone());
    }
    (user, labels)
}

/// A Docker engine, shared by every sandbox of a run.
#[derive(Debug, Clone)]
pub struct DockerBackend {
    docker: Docker,
    /// Where the engine is, as `DOCKER_HOST` named it.
    host: String,
    /// Which engine speaks the Docker API there.
    flavor: Flavor,
    /// Container creates under way (see [`InFlight`]).
    creating: Arc<tokio::sync::watch::Sender<usize>>,
}

/// One container create under way, counted while it lasts. A create is run
/// to its end even when its caller is dropped (an attempt interrupted while
/// its sandbox was being made): the engine makes the container anyway, and
/// the run's end sweep, which waits for the count to reach zero, then sees
/// and removes it, where it would otherwise have listed the run's containers
/// before the engine had made it and left it behind (in the created state).
struct InFlight(Arc<tokio::sync::watch::Sender<usize>>);

impl InFlight {
    fn new(count: &Arc<tokio::sync::watch::Sender<usize>>) -> Self {
        count.send_modify(|n| *n += 1);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// How long the end sweep waits for creates under way, and a removal for one under way.
const CREATES_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The engine behind the Docker API: Podman differs in ways the backend absorbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Docker Engine.
    Docker,
    /// Podman's Docker-compatible service (`podman system service`).
    Podman,
}

fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(err, bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })
}

/// The engine bollard talks to when `DOCKER_HOST` is not set.
const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

impl DockerBackend {
    /// Connects to the engine `DOCKER_HOST` names (with `DOCKER_TLS_VERIFY` and
    /// `DOCKER_CERT_PATH` for TLS), or the local socket, and negotiates the API version.
    ///
    /// # Errors
    /// [`SandboxError::EngineConfig`] for a `DOCKER_HOST` that cannot be used,
    /// [`SandboxError::EngineUnreachable`] when the engine does not answer.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn connect() -> Result<Self, SandboxError> {
        Self::connect_to(std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()).as_deref())
            .await
    }

    /// Connects to `host` (a `DOCKER_HOST` value), or the local socket when `None`.
    ///
    /// # Errors
    /// As [`DockerBackend::connect`].
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn connect_to(host: Option<&str>) -> Result<Self, SandboxError> {
        let named = host.unwrap_or(DEFAULT_HOST).to_string();
        let docker = match host {
            Some(h) => Docker::connect_with_host(h),
            None => Docker::connect_with_local_defaults(),
        }
        .map_err(|e| SandboxError::EngineConfig {
            message: format!("DOCKER_HOST={named} cannot be used: {e}"),
        })?;
        // An engine that does not answer cannot say what it is: its address may.
        let docker =
            docker.negotiate_version().await.map_err(|e| SandboxError::EngineUnreachable {
                engine: match named.to_lowercase().contains("podman") {
                    true => "the Podman engine".into(),
                    false => "the Docker engine".into(),
                },
                message: format!("{named}: {e}"),
            })?;
        let flavor = match docker.version().await {
            Ok(v)
                if v.components
                    .iter()
                    .flatten()
                    .any(|c| c.name.to_lowercase().contains("podman")) =>
            {
                Flavor::Podman
            }
            _ => Flavor::Docker,
        };
        let creating = Arc::new(tokio::sync::watch::Sender::new(0));
        Ok(Self { docker, host: named, flavor, creating })
    }

    /// The bollard client, for callers that need the raw API.
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// Whether `image` is present on the engine.
    ///
    /// # Errors
    /// An engine error other than "not found".
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn image_id(&self, image: &str) -> Result<Option<String>, SandboxError> {
        Ok(self.image_facts(image).await?.map(|f| f.id))
    }

    /// The image's id, `WORKDIR` and `USER`; `None` when the engine has no such image.
    ///
    /// # Errors
    /// An engine error other than "no such image".
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn image_facts(&self, image: &str) -> Result<Option<ImageFacts>, SandboxError> {
        match self.docker.inspect_image(image).await {
            Ok(info) => {
                let config = info.config.unwrap_or_default();
                let set = |v: Option<String>| v.filter(|v| !v.is_empty());
                Ok(info.id.map(|id| ImageFacts {
                    id,
                    workdir: set(config.working_dir),
                    user: set(config.user),
                }))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(SandboxError::engine(format!("inspect image {image}"), e)),
        }
    }

    /// Containers labelled with `label=value` (all states).
    ///
    /// # Errors
    /// An engine error.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn containers_labelled(
        &self,
        label: &str,
        value: Option<&str>,
    ) -> Result<Vec<(String, HashMap<String, String>)>, SandboxError> {
        let filter = match value {
            Some(v) => format!("{label}={v}"),
            None => label.to_string(),
        };
        let filters = HashMap::from([("label", vec![filter])]);
        let list = self
            .docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default().all(true).filters(&filters).build(),
            ))
            .await
            .map_err(|e| SandboxError::engine("list containers", e))?;
        Ok(list.into_iter().filter_map(|c| Some((c.id?, c.labels.unwrap_or_default()))).collect())
    }

    /// Force-removes a container and its anonymous volumes. Missing is fine.
    ///
    /// # Errors
    /// An engine error.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn remove(&self, id: &str) -> Result<(), SandboxError> {
        remove_container(&self.docker, id).await
    }
}

#[async_trait]
impl Backend for DockerBackend {
    fn name(&self) -> &str {
        "docker"
    }

    fn capabilities(&self) -> Capabilities {
        // A unix socket on this host can be mounted only into a container of this host.
        let local = self.host.starts_with("unix://");
        Capabilities {
            gateway_socket: local,
            oom_kills: true,
            helper_tools: HELPER_TOOLS,
            // Podman's attach to a container's stdin is not relied on.
            main_stdin: self.flavor == Flavor::Docker,
        }
    }

    fn runs_services(&self, _services: &[crate::Service]) -> Result<(), String> {
        Ok(())
    }

    fn mounts(&self, mounts: &[crate::Mount]) -> Result<(), String> {
        // A host path is on this host: an engine elsewhere would mount its own.
        match mounts.iter().find(|m| matches!(m.source, crate::MountSource::Host(_))) {
            Some(m) if !self.host.starts_with("unix://") => Err(format!(
                "the engine at {} is not on this host, so it cannot mount a path of it ({})",
                self.host,
                m.describe()
            )),
            _ => Ok(()),
        }
    }

    async fn ping(&self) -> Result<EngineInfo, SandboxError> {
        let v = self.docker.version().await.map_err(|e| SandboxError::EngineUnreachable {
            engine: match self.flavor {
                Flavor::Podman => "the Podman engine".into(),
                Flavor::Docker => "the Docker engine".into(),
            },
            message: format!("{}: {e}", self.host),
        })?;
        // The host's CPUs and memory: a sandbox asking more cannot be created there.
        let capacity = self.docker.info().await.ok().and_then(|i| {
            Some(crate::Capacity { nano_cpus: i.ncpu? * 1_000_000_000, memory_bytes: i.mem_total? })
        });
        Ok(EngineInfo {
            name: match self.flavor {
                Flavor::Podman => "Podman".into(),
                Flavor::Docker => "Docker Engine".into(),
            },
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
            host: self.host.clone(),
            capacity,
        })
    }

    async fn ensure_image(
        &self,
        spec: &ImageSpec,
        extra: &str,
    ) -> Result<ReadyImage, SandboxError> {
        image::ensure(self, spec, extra).await
    }

    fn caches_setups(&self) -> bool {
        true
    }

    async fn find_setup(&self, digest: &str) -> Result<Option<FoundSetup>, SandboxError> {
        let found = setup_cache::find(self.client(), digest).await?;
        Ok(found.map(|snapshot| FoundSetup { reference: setup_cache::reference(digest), snapshot }))
    }

    async fn forget_setup(&self, digest: &str) -> Result<(), SandboxError> {
        setup_cache::forget(self.client(), digest).await
    }

    async fn commit_setup(
        &self,
        sandbox_id: &str,
        digest: &str,
        labels: &BTreeMap<String, String>,
        max_bytes: u64,
    ) -> Result<(), SandboxError> {
        setup_cache::commit(self.client(), sandbox_id, digest, labels, max_bytes).await
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let mut labels: HashMap<String, String> = spec.labels.clone().into_iter().collect();
        labels.insert(LABEL_OWNER.into(), owner_label());
        let (binds, network_mode) = match &spec.network {
            NetworkSpec::None => (None, "none".to_string()),
            NetworkSpec::GatewaySocket { host_dir, sandbox_dir } => {
                (Some(vec![format!("{}:{sandbox_dir}:ro", host_dir.display())]), "none".to_string())
            }
            NetworkSpec::Internal { network } => (None, network.clone()),
            NetworkSpec::PodGateway { .. } => {
                return Err(SandboxError::EngineConfig {
                    message: "failed to create a container: a Kubernetes gateway policy was asked of the Docker backend".into(),
                });
            }
        };
        // Its volumes and copies first, labelled as it is (see `volumes.rs`).
        let all: Vec<&crate::Mount> = spec
            .mounts
            .iter()
            .chain(spec.services.iter().flat_map(|s| &s.service.mounts))
            .collect();
        let made = volumes::make(&self.docker, &all, &labels).await?;
        let (user, own_labels) = image_user(spec, &labels);
        // The main process's stdin, for a session it starts (`Sandbox::attach_main`):
        // closed when the one attach ends; its output is for that attach, not a log.
        let main_stdin = spec.main_stdin && self.capabilities().main_stdin;
        let body = ContainerCreateBody {
            open_stdin: main_stdin.then_some(true),
            stdin_once: main_stdin.then_some(true),
            image: Some(spec.image.clone()),
            user: user.is_some().then(|| "0".to_string()),
            cmd: Some(
                spec.main_process
                    .clone()
                    .unwrap_or_else(|| vec!["sleep".into(), "infinity".into()]),
            ),
            labels: Some(own_labels),
            working_dir: Some(spec.workdir.clone()),
            network_disabled: None,
            host_config: Some(HostConfig {
                // No network of its own: the gateway (its socket, or its container on an
                // internal network) is the only way out.
                network_mode: Some(network_mode),
                binds,
                mounts: made.engine_mounts(&spec.mounts),
                // Its services share its network namespace: their names are 127.0.0.1.
                extra_hosts: (!spec.services.is_empty()).then(|| services::hosts(&spec.services)),
                log_config: main_stdin.then(|| bollard::models::HostConfigLogConfig {
                    typ: Some("none".into()),
                    config: None,
                }),
                ..confined(&spec.limits, self.flavor)
            }),
            ..Default::default()
        };
        // Its own task: it runs to its end if this future is dropped (see `InFlight`).
        let (docker, counted) = (self.docker.clone(), InFlight::new(&self.creating));
        let create = tokio::spawn(async move {
            let created = docker
                .create_container(Some(CreateContainerOptionsBuilder::default().build()), body)
                .await;
            drop(counted);
            created
        });
        let created = match create.await {
            Ok(created) => created.map_err(|e| {
                if is_not_found(&e) {
                    SandboxError::ImageMissing {
                        image: spec.image.clone(),
                        hint: "build it first (scripts/build-base-image.sh builds reeval/base)"
                            .into(),
                    }
                } else {
                    SandboxError::engine(format!("create a container from {}", spec.image), e)
                }
            }),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: the runtime is shutting down under it.
            Err(e) => Err(SandboxError::engine("create a container", e)),
        };
        let created = match created {
            Ok(created) => created,
            Err(e) => {
                made.remove(&self.docker).await;
                return Err(e);
            }
        };
        // Its services, in its network namespace (see `services.rs`).
        let services = match spec.services.is_empty() {
            true => None,
            false => {
                match services::create(self, &spec.services, &labels, &created.id, &made).await {
                    Ok(services) => Some(services),
                    Err(e) => {
                        let _ = remove_container(&self.docker, &created.id).await;
                        made.remove(&self.docker).await;
                        return Err(e);
                    }
                }
            }
        };
        let network = match &spec.network {
            NetworkSpec::Internal { network } => Some(network.clone()),
            _ => None,
        };
        let sandbox =
            DockerSandbox::new(self.docker.clone(), created.id, self.flavor, network, user)
                .with_main_stdin(main_stdin);
        Ok(Arc::new(sandbox.with_services(services).with_volumes(made)))
    }

    async fn start_gateway(
        &self,
        request: &super::GatewayRequest,
    ) -> Result<Box<dyn super::GatewayContainer>, SandboxError> {
        gateway::start(self, request).await
    }

    async fn sweep(&self, scope: Sweep<'_>) -> Result<usize, SandboxError> {
        let mut removed = 0;
        match scope {
            // Containers left by runners that are gone: those whose owner label names a process of this host that no longer runs.
            Sweep::Orphans => {
                for (id, labels) in services_first(self.containers_labelled(LABEL_RUN, None).await?)
                {
                    let owner = labels.get(LABEL_OWNER).map(String::as_str).unwrap_or("");
                    if owner_is_gone(owner) && self.remove(&id).await.is_ok() {
                        removed += 1;
                    }
                }
            }
            // Containers of this run owned by this process whose attempt lost track of them.
            Sweep::OwnRun(run_id) => {
                // A create of this run still under way makes its container after a listing now.
                let mut creating = self.creating.subscribe();
                let _ = tokio::time::timeout(CREATES_LIMIT, creating.wait_for(|n| *n == 0)).await;
                let me = owner_label();
                let listed = self.containers_labelled(LABEL_RUN, Some(run_id)).await?;
                for (id, labels) in services_first(listed) {
                    if labels.get(LABEL_OWNER) == Some(&me) && self.remove(&id).await.is_ok() {
                        removed += 1;
                    }
                }
            }
        }
        // Gateway networks and volumes go the same way, once their containers are gone.
        removed += gateway::sweep_networks(self, scope).await;
        removed += volumes::sweep(self, scope).await;
        Ok(removed)
    }
}

/// Services' containers before the sandboxes whose network namespace they
/// share (Podman refuses to remove those first).
fn services_first(
    mut list: Vec<(String, HashMap<String, String>)>,
) -> Vec<(String, HashMap<String, String>)> {
    list.sort_by_key(|(_, labels)| !labels.contains_key(super::LABEL_SERVICE));
    list
}

/// What every container reeval runs for an attempt (the sandbox, its services)
/// is held to: its limits, an init, every capability dropped but what ordinary
/// tools (package installs, chown in build scripts, kill) need as root inside,
/// no new privileges. Podman sets rlimits of its own that an unprivileged
/// container may not raise; explicit ones within this host's limits always start.
pub(super) fn confined(limits: &crate::Limits, flavor: Flavor) -> HostConfig {
    HostConfig {
        memory: Some(limits.memory_bytes),
        memory_swap: Some(limits.memory_bytes),
        nano_cpus: Some(limits.nano_cpus),
        pids_limit: Some(limits.pids),
        init: Some(true),
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(
            ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"]
                .map(String::from)
                .to_vec(),
        ),
        security_opt: Some(vec!["no-new-privileges".into()]),
        ulimits: (flavor == Flavor::Podman).then(ulimits),
        ..Default::default()
    }
}

/// Open files and processes, capped by this process's own hard limits (read
/// from `/proc/self/limits`: a local Podman service runs under the same ones).
fn ulimits() -> Vec<bollard::models::ResourcesUlimits> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let hard = |name: &str, fallback: i64| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l[name.len()..].split_whitespace().nth(1).map(str::to_string))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(fallback)
    };
    let limit = |name: &str, value: i64| bollard::models::ResourcesUlimits {
        name: Some(name.into()),
        soft: Some(value),
        hard: Some(value),
    };
    vec![
        limit("nofile", hard("Max open files", 1024).min(65_536)),
        // Podman's runtime may not set a high nproc even below the hard limit; 4096 always starts.
        limit("nproc", hard("Max processes", 4096).min(4096)),
    ]
}

async fn remove_container(docker: &Docker, id: &str) -> Result<(), SandboxError> {
    match docker
        .remove_container(
            id,
            Some(RemoveContainerOptionsBuilder::default().force(true).v(true).build()),
        )
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        // 409: removal already in progress (an earlier try the engine went on with, or a
        // sweep): done once it is gone, so a run never ends with its container still listed.
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 409, .. }) => {
            gone(docker, id).await
        }
        Err(e) => Err(SandboxError::engine(format!("remove container {}", short(id)), e)),
    }
}

/// Waits until a container whose removal is under way is gone.
async fn gone(docker: &Docker, id: &str) -> Result<(), SandboxError> {
    let began = std::time::Instant::now();
    while began.elapsed() < CREATES_LIMIT {
        match docker.inspect_container(id, None).await {
            Err(e) if is_not_found(&e) => return Ok(()),
            _ => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
    Err(SandboxError::engine_says(
        format!("remove container {}", short(id)),
        format!("its removal was still under way after {}s", CREATES_LIMIT.as_secs()),
    ))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `(start ticks)` of a process, from field 22 of `/proc/<pid>/stat`.
fn start_ticks(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after ')' are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

/// `<host>:<pid>:<start ticks>` of this process.
pub(super) fn owner_label() -> String {
    let pid = std::process::id().to_string();
    format!("{}:{}:{}", hostname(), pid, start_ticks(&pid).unwrap_or_default())
}

/// Whether the runner named by an owner label is gone. Containers of other
/// hosts, or with no owner, are never touched.
pub(super) fn owner_is_gone(owner: &str) -> bool {
    let mut parts = owner.splitn(3, ':');
    let (Some(host), Some(pid), Some(ticks)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if host != hostname() || pid.is_empty() {
        return false;
    }
    start_ticks(pid).as_deref() != Some(ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_docker_host_is_honoured_and_an_unusable_one_is_named() {
        let e = DockerBackend::connect_to(Some("ftp://example")).await.unwrap_err();
        assert!(matches!(e, SandboxError::EngineConfig { .. }), "{e}");
        assert!(e.to_string().contains("DOCKER_HOST=ftp://example"), "{e}");
        // A TCP engine that is not there is not silently replaced by the local socket.
        let e = DockerBackend::connect_to(Some("tcp://127.0.0.1:9")).await.unwrap_err();
        assert!(matches!(e, SandboxError::EngineUnreachable { .. }), "{e}");
        assert!(e.to_string().contains("tcp://127.0.0.1:9"), "{e}");
        assert!(e.to_string().starts_with("failed to reach the Docker engine: "), "{e}");
        // A Podman socket that does not answer (its listener gone, the file left) is named as Podman's.
        let dir = std::env::temp_dir().join(format!("reeval-podman-gone-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("podman.sock");
        let _ = std::fs::remove_file(&socket);
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        let gone = format!("unix://{}", socket.display());
        let e = DockerBackend::connect_to(Some(&gone)).await.unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.to_string().starts_with("failed to reach the Podman engine: "), "{e}");
        assert!(e.to_string().contains(&gone), "{e}");
    }

    #[test]
    fn own_process_is_not_gone_and_dead_pid_is() {
        assert!(!owner_is_gone(&owner_label()));
        assert!(owner_is_gone(&format!("{}:999999999:1", hostname())));
        assert!(!owner_is_gone("other-host:1:1"));
        assert!(!owner_is_gone(""));
    }
}
