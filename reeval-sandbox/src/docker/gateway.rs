//! The gateway container of a remote engine. A socket of this host cannot be
//! mounted into a sandbox on another host, so there the sandbox joins an
//! internal network of its own (`--internal`, and `inhibit_ipv4` so that the
//! bridge has no address of the host's: on Docker 20.10 a plain internal
//! network still reaches the host), and the gateway runs as a container on
//! that network and on the engine's default bridge, with IP forwarding off,
//! from an image of `reeval-gateway` built on that engine. The attempt's
//! credentials reach this container only. The runner talks to it through one
//! attached stream: policies down its stdin (each acknowledged), egress
//! records and the sandbox's isolation report up its stdout.

use crate::FileToWrite;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use bollard::container::LogOutput;
use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, NetworkConnectRequest, NetworkCreateRequest,
};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, KillContainerOptionsBuilder,
    ListNetworksOptionsBuilder,
};
use futures_util::StreamExt;
use reeval_gateway::EgressEntry;
use reeval_gateway::relay::RelayReport;
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use super::{DockerBackend, LABEL_OWNER, LABEL_RUN, owner_is_gone, owner_label, remove_container};
use crate::gateway_stream::GatewayStream;
use crate::{GatewayContainer, GatewayRequest, NetworkSpec, SandboxError, Sweep, archive};

/// The name the sandbox finds its gateway by on their network.
pub(super) const GATEWAY_ALIAS: &str = "reeval-gateway";
/// Ports of the engine's host a sandbox is probed against (something usually listens on some).
const HOST_PORTS: [u16; 4] = [22, 80, 2375, 2376];

/// Starts the gateway container and its network.
pub(super) async fn start(
    backend: &DockerBackend,
    request: &GatewayRequest,
) -> Result<Box<dyn GatewayContainer>, SandboxError> {
    let docker = backend.client().clone();
    let image = ensure_image(backend, request).await?;
    let mut labels: HashMap<String, String> = request.labels.clone().into_iter().collect();
    labels.insert(LABEL_OWNER.into(), owner_label());

    let name = format!(
        "reeval-net-{:08x}",
        short_hash(&[
            owner_label().as_bytes(),
            format!("{:?}", std::time::SystemTime::now()).as_bytes()
        ])
    );
    let network = docker
        .create_network(NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            internal: Some(true),
            options: Some(HashMap::from([(
                "com.docker.network.bridge.inhibit_ipv4".to_string(),
                "true".to_string(),
            )])),
            labels: Some(labels.clone()),
            ..Default::default()
        })
        .await
        .map_err(|e| SandboxError::engine("create the sandbox's internal network", e))?;
    let network_id = network.id;
    let fail = |e| async {
        let _ = docker.remove_network(&network_id).await;
        e
    };

    let env: Vec<String> =
        request.env.iter().map(|(k, v)| format!("{k}={}", v.expose_secret())).collect();
    let body = ContainerCreateBody {
        image: Some(image),
        cmd: Some(request.command.clone()),
        env: Some(env),
        labels: Some(labels),
        open_stdin: Some(true),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        stdin_once: Some(false),
        host_config: Some(HostConfig {
            network_mode: Some("bridge".into()),
            // It must never route for the sandbox: it proxies, nothing else.
            sysctls: Some(HashMap::from([("net.ipv4.ip_forward".to_string(), "0".to_string())])),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            init: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = match docker
        .create_container(Some(CreateContainerOptionsBuilder::default().build()), body)
        .await
    {
        Ok(c) => c,
        Err(e) => return Err(fail(SandboxError::engine("create the gateway container", e)).await),
    };
    let id = created.id;
    let gateway = DockerGateway::new(docker.clone(), id.clone(), network_id.clone(), name.clone());
    if let Err(e) = gateway.prepare(request).await {
        gateway.close().await;
        return Err(e);
    }
    Ok(Box::new(gateway))
}

/// `reeval/gateway:<digest>`, built on this engine from the binary and its base image.
pub(crate) async fn ensure_image(
    backend: &DockerBackend,
    request: &GatewayRequest,
) -> Result<String, SandboxError> {
    let base_id = backend.image_id(&request.base_image).await?.ok_or_else(|| SandboxError::ImageMissing {
        image: request.base_image.clone(),
        hint: "the gateway container is built on it; load it into this engine first (docker save | docker load)".into(),
    })?;
    let tag = format!("reeval/gateway:{:016x}", short_hash(&[&request.binary, base_id.as_bytes()]));
    if backend.image_id(&tag).await?.is_some() {
        return Ok(tag);
    }
    let dockerfile = format!(
        "FROM {}\nCOPY reeval-gateway /usr/local/bin/reeval-gateway\nLABEL dev.reeval.gateway=1\n",
        request.base_image
    );
    let context = archive::tar_of(&[
        FileToWrite::new("Dockerfile", dockerfile.into_bytes(), 0o644),
        FileToWrite::new("reeval-gateway", request.binary.to_vec(), 0o755),
    ])?;
    super::image::build_context(backend, &tag, context.to_vec(), "Dockerfile").await?;
    Ok(tag)
}

fn short_hash(parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    u64::from_be_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

/// A gateway container, attached.
struct DockerGateway {
    docker: bollard::Docker,
    id: String,
    network_id: String,
    network_name: String,
    ip: Mutex<Option<IpAddr>>,
    probes: Mutex<Vec<SocketAddr>>,
    stream: GatewayStream,
}

impl std::fmt::Debug for DockerGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerGateway")
            .field("id", &self.id)
            .field("network", &self.network_name)
            .finish_non_exhaustive()
    }
}

impl DockerGateway {
    fn new(docker: bollard::Docker, id: String, network_id: String, network_name: String) -> Self {
        Self {
            docker,
            id,
            network_id,
            network_name,
            ip: Mutex::new(None),
            probes: Mutex::new(Vec::new()),
            stream: GatewayStream::default(),
        }
    }

    /// Its files, its network, its start, the attached stream, its address.
    async fn prepare(&self, request: &GatewayRequest) -> Result<(), SandboxError> {
        let files: Vec<FileToWrite> =
            request.files.iter().cloned().map(FileToWrite::relative_to_root).collect();
        self.docker
            .upload_to_container(
                &self.id,
                Some(
                    bollard::query_parameters::UploadToContainerOptionsBuilder::default()
                        .path("/")
                        .build(),
                ),
                bollard::body_full(archive::tar_of(&files)?),
            )
            .await
            .map_err(|e| SandboxError::engine("upload the gateway's configuration", e))?;
        let endpoint =
            EndpointSettings { aliases: Some(vec![GATEWAY_ALIAS.into()]), ..Default::default() };
        self.docker
            .connect_network(
                &self.network_id,
                NetworkConnectRequest {
                    container: self.id.clone(),
                    endpoint_config: Some(endpoint),
                },
            )
            .await
            .map_err(|e| SandboxError::engine("connect the gateway to the sandbox's network", e))?;
        let attached = self
            .docker
            .attach_container(
                &self.id,
                Some(
                    AttachContainerOptionsBuilder::default()
                        .stdin(true)
                        .stdout(true)
                        .stderr(true)
                        .stream(true)
                        .build(),
                ),
            )
            .await
            .map_err(|e| SandboxError::engine("attach to the gateway", e))?;
        // Only its stdout carries lines for us.
        let stdout = attached
            .output
            .take_while(|chunk| std::future::ready(chunk.is_ok()))
            .filter_map(|chunk| {
                std::future::ready(match chunk {
                    Ok(LogOutput::StdOut { message }) => Some(message),
                    _ => None,
                })
            })
            .boxed();
        self.stream.attach(attached.input, stdout).await;
        self.docker
            .start_container(&self.id, None)
            .await
            .map_err(|e| SandboxError::engine("start the gateway container", e))?;
        let inspected = self
            .docker
            .inspect_container(&self.id, None::<bollard::query_parameters::InspectContainerOptions>)
            .await
            .map_err(|e| SandboxError::engine("inspect the gateway container", e))?;
        let networks = inspected.network_settings.and_then(|n| n.networks).unwrap_or_default();
        let ip = networks
            .get(&self.network_name)
            .and_then(|n| n.ip_address.clone())
            .and_then(|ip| ip.parse::<IpAddr>().ok())
            .ok_or_else(|| {
                SandboxError::engine_says(
                    "find the gateway's address",
                    format!("it has none on {}", self.network_name),
                )
            })?;
        *self.ip.lock().expect("ip lock") = Some(ip);
        // The engine's host, by every bridge it has: none of them must be reachable.
        let mut probes = Vec::new();
        for (_, settings) in networks.iter().filter(|(name, _)| **name != self.network_name) {
            if let Some(gw) = settings.gateway.as_deref().and_then(|g| g.parse::<IpAddr>().ok()) {
                probes.extend(HOST_PORTS.iter().map(|p| SocketAddr::new(gw, *p)));
            }
        }
        *self.probes.lock().expect("probes lock") = probes;
        Ok(())
    }
}

#[async_trait]
impl GatewayContainer for DockerGateway {
    fn network(&self) -> NetworkSpec {
        NetworkSpec::Internal { network: self.network_name.clone() }
    }

    fn upstream(&self) -> String {
        let ip = self.ip.lock().expect("ip lock").expect("started");
        format!(
            "tcp:{}",
            SocketAddr::new(
                ip,
                reeval_gateway::relay::SANDBOX_PROXY_ADDR
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(3128)
            )
        )
    }

    fn probes(&self) -> Vec<SocketAddr> {
        self.probes.lock().expect("probes lock").clone()
    }

    async fn set_policy(&self, policy: &str) -> Result<(), SandboxError> {
        self.stream.set_policy(policy).await
    }

    async fn isolation(&self, within: Duration) -> Result<RelayReport, SandboxError> {
        self.stream.isolation(within).await
    }

    async fn close(&self) -> Vec<EgressEntry> {
        // SIGTERM: the gateway closes its connections and prints what they completed.
        let term = KillContainerOptionsBuilder::default().signal("SIGTERM").build();
        let _ = self.docker.kill_container(&self.id, Some(term)).await;
        let entries = self.stream.finish(Duration::from_secs(10)).await;
        let _ = remove_container(&self.docker, &self.id).await;
        let _ = self.docker.remove_network(&self.network_id).await;
        entries
    }
}

/// Removes gateway networks left behind: of gone runners, or of this run.
pub(super) async fn sweep_networks(backend: &DockerBackend, scope: Sweep<'_>) -> usize {
    let filter = match scope {
        Sweep::Orphans => LABEL_RUN.to_string(),
        Sweep::OwnRun(run) => format!("{LABEL_RUN}={run}"),
    };
    let filters = HashMap::from([("label", vec![filter])]);
    let Ok(networks) = backend
        .client()
        .list_networks(Some(ListNetworksOptionsBuilder::default().filters(&filters).build()))
        .await
    else {
        return 0;
    };
    let me = owner_label();
    let mut removed = 0;
    for n in networks {
        let owner = n.labels.as_ref().and_then(|l| l.get(LABEL_OWNER)).cloned().unwrap_or_default();
        let ours = match scope {
            Sweep::Orphans => owner_is_gone(&owner),
            Sweep::OwnRun(_) => owner == me,
        };
        if ours
            && let Some(id) = n.id.as_deref()
            && backend.client().remove_network(id).await.is_ok()
        {
            removed += 1;
        }
    }
    removed
}
