//! The egress gateway on Kubernetes: one gateway pod per run, and one
//! `reeval-gateway` process in it per attempt.
//!
//! - The run's **Secret** holds the gateway's credentials: the per-run CA
//!   (certificate and key) and the real values of every secret the run
//!   brokers (preflight collects them). They reach the gateway pod only, as
//!   environment variables of its container (`secretKeyRef`: a Secret volume
//!   would do as well, but the test cluster's kubelet cannot share its mounts),
//!   and the Secret is deleted with the pod at the end of the run. Each
//!   gateway process writes the CA into its own root-only directory with
//!   `printf`, a shell builtin: the key is never an argument of a process.
//! - The run's **gateway pod** runs from the gateway image and sleeps; it has
//!   no policy of its own (it needs the way out the sandboxes lack).
//! - Per attempt, the runner starts a gateway process in that pod through an
//!   exec that stays attached, listening on a port of its own, with its own
//!   policy and bindings: policies go down its stdin, egress records and the
//!   relay's isolation report come up its stdout (as with a remote Docker
//!   engine's gateway container, see `sandbox::gateway_stream`). A **Service**
//!   per attempt selects the gateway pod on that port, and the attempt pod's
//!   NetworkPolicy lets it reach the gateway pods on that port and nothing
//!   else. The relay connects to the Service's ClusterIP, or to the gateway
//!   pod's IP (`gateway_address = "pod-ip"`) where no service proxy runs.
//!
//! Everything carries the run's label and the runner's owner annotation, so
//! the end-of-run sweep (and a later run's orphan sweep) deletes it.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, Node, Pod, Secret, SecretKeySelector, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, PostParams};
use reeval_gateway::EgressEntry;
use reeval_gateway::relay::RelayReport;
use secrecy::{ExposeSecret, SecretString};

use super::cluster::Cluster;
use super::exec::{self, ExecSpec};
use super::pod;
use super::sandbox::KubeSandbox;
use crate::gateway_stream::GatewayStream;
use crate::shell_exec::PID_WRAPPER;
use crate::{FileToWrite, GatewayAddress, KubernetesConfig};
use crate::{
    GatewayContainer, GatewayRequest, LABEL_ATTEMPT, Limits, NetworkSpec, Sandbox, SandboxError,
    SandboxSpec, SandboxState, Signal, archive,
};

/// Label on the run's gateway pod (its name), which Services and attempts' policies select.
pub(super) const LABEL_GATEWAY: &str = "dev.reeval.gateway";
/// Where attempts' configurations go in the gateway pod.
const DIR: &str = "/etc/reeval-gateway";
/// The gateway pod's variables that hold the run's CA (from its Secret).
const CA_CERT_ENV: &str = "REEVAL_GW_CA_CERT";
const CA_KEY_ENV: &str = "REEVAL_GW_CA_KEY";
/// Writes the CA from those variables into the directory `$0` (root only), then runs the gateway.
const WRITE_CA: &str = r#"umask 077 && printf '%s\n' "$REEVAL_GW_CA_CERT" > "$0/ca.pem" && printf '%s\n' "$REEVAL_GW_CA_KEY" > "$0/ca.key" && exec "$@""#;
/// Where the binary is, or is copied to.
pub(super) const BINARY: &str = "/usr/local/bin/reeval-gateway";
/// The port of the first attempt's gateway process; each next attempt takes the next one.
const FIRST_PORT: u16 = 20_000;
/// The kubelet's port when the node does not say.
const KUBELET_PORT: u16 = 10_250;

/// The run's gateway pod, shared by its attempts.
#[derive(Debug)]
pub(super) struct RunGateway {
    pod: KubeSandbox,
    pod_ip: IpAddr,
    /// Addresses no sandbox may reach: the API server, the node's kubelet, the cluster DNS.
    probes: Vec<SocketAddr>,
    /// The variables its container has from the Secret (names, not values).
    credentials: Vec<String>,
    next_port: AtomicU16,
}

impl RunGateway {
    /// Whether its pod still runs (or the API cannot tell: it is not replaced on a blip).
    pub(super) async fn alive(&self) -> bool {
        matches!(self.pod.state().await, SandboxState::Running | SandboxState::Unknown)
    }
}

/// Everything of the run's gateway but the pod: its name, Secret and labels.
pub(super) fn run_labels(request: &GatewayRequest, name: &str) -> BTreeMap<String, String> {
    let mut labels = request.labels.clone();
    labels.remove(LABEL_ATTEMPT);
    labels.insert(LABEL_GATEWAY.into(), name.into());
    labels
}

/// The run's Secret: the CA's two PEMs and one key per brokered secret, each
/// under the name of the gateway pod's variable that gets it.
pub(super) fn secret(
    name: &str,
    labels: &BTreeMap<String, String>,
    owner: &str,
    ca: (&[u8], &[u8]),
    credentials: &BTreeMap<String, SecretString>,
) -> Secret {
    let mut data = BTreeMap::from([
        (CA_CERT_ENV.to_string(), ByteString(ca.0.to_vec())),
        (CA_KEY_ENV.to_string(), ByteString(ca.1.to_vec())),
    ]);
    for (env, value) in credentials {
        data.insert(env.clone(), ByteString(value.expose_secret().as_bytes().to_vec()));
    }
    Secret {
        metadata: pod::metadata(name, labels, owner),
        data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

/// The run's gateway pod: a sandbox-like pod (unprivileged, capabilities
/// dropped) that sleeps, with the Secret's values as its variables.
pub(super) fn gateway_pod(
    name: &str,
    image: &str,
    labels: &BTreeMap<String, String>,
    owner: &str,
    config: &KubernetesConfig,
    credentials: &[String],
) -> Pod {
    let spec = SandboxSpec {
        image: image.into(),
        labels: labels.clone(),
        workdir: "/".into(),
        limits: Limits { memory_bytes: 512 << 20, nano_cpus: 1_000_000_000, pids: 1024 },
        network: NetworkSpec::None,
        main_process: Some(vec!["sleep".into(), "infinity".into()]),
        ..Default::default()
    };
    let mut manifest = pod::manifest(name, &spec, config, owner);
    let from_secret = |env: &str| EnvVar {
        name: env.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: name.into(),
                key: env.into(),
                optional: None,
            }),
            ..Default::default()
        }),
        value: None,
    };
    let container = &mut manifest.spec.as_mut().expect("a pod spec").containers[0];
    container.env = Some(
        [CA_CERT_ENV, CA_KEY_ENV]
            .into_iter()
            .chain(credentials.iter().map(String::as_str))
            .map(from_secret)
            .collect(),
    );
    manifest
}

/// The attempt's Service: the gateway pod's `port`, under the attempt's labels.
pub(super) fn service(
    name: &str,
    gateway: &str,
    labels: &BTreeMap<String, String>,
    owner: &str,
    port: u16,
) -> Service {
    Service {
        metadata: pod::metadata(name, labels, owner),
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([(LABEL_GATEWAY.to_string(), gateway.to_string())])),
            ports: Some(vec![ServicePort {
                name: Some("proxy".into()),
                port: port.into(),
                target_port: Some(IntOrString::Int(port.into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            type_: Some("ClusterIP".into()),
            ..Default::default()
        }),
        status: None,
    }
}

/// Starts the run's gateway: its Secret, then its pod; waits until it works.
pub(super) async fn start_run(
    cluster: &Cluster,
    request: &GatewayRequest,
    credentials: &BTreeMap<String, SecretString>,
    image: &str,
    binary_in_image: bool,
) -> Result<RunGateway, SandboxError> {
    let name = format!("reeval-gw-{}", &pod::new_name()["reeval-".len()..]);
    let labels = run_labels(request, &name);
    let owner = crate::docker::owner_label();
    let file = |suffix: &str| {
        request.files.iter().find(|f| f.path.ends_with(suffix)).map(|f| f.bytes.as_slice())
    };
    let (Some(cert), Some(key)) = (file("/ca.pem"), file("/ca.key")) else {
        return Err(SandboxError::EngineConfig {
            message: "failed to start the gateway pod: the request holds no CA".into(),
        });
    };
    let secret = secret(&name, &labels, &owner, (cert, key), credentials);
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .map_err(|e| SandboxError::engine(format!("create the gateway's Secret {name}"), e))?;
    let names: Vec<String> = credentials.keys().cloned().collect();
    let manifest = gateway_pod(&name, image, &labels, &owner, &cluster.config, &names);
    let sandbox =
        KubeSandbox::new(cluster.pods(), cluster.policies(), name.clone(), cluster.ready_within())
            .with_room(cluster.room(&manifest));
    let started = async {
        cluster.pods().create(&PostParams::default(), &manifest).await.map_err(|e| {
            SandboxError::engine(format!("create the gateway pod {name} from {image}"), e)
        })?;
        sandbox.start().await?;
        if !binary_in_image {
            let tar = archive::tar_of(&[FileToWrite::new(
                BINARY.trim_start_matches('/'),
                request.binary.to_vec(),
                0o755,
            )])?;
            sandbox.upload("/", tar).await?;
        }
        let found = cluster
            .pods()
            .get_status(&name)
            .await
            .map_err(|e| SandboxError::engine(format!("read the status of pod {name}"), e))?;
        let node = found.spec.and_then(|s| s.node_name);
        let status = found.status.unwrap_or_default();
        let pod_ip =
            status.pod_ip.as_deref().and_then(|ip| ip.parse::<IpAddr>().ok()).ok_or_else(|| {
                SandboxError::engine_says(format!("start the gateway pod {name}"), "it has no IP")
            })?;
        let host_ip = status.host_ip.as_deref().and_then(|ip| ip.parse::<IpAddr>().ok());
        Ok::<_, SandboxError>((pod_ip, host_ip, node))
    }
    .await;
    let (pod_ip, host_ip, node) = match started {
        Ok(found) => found,
        Err(e) => {
            let _ = sandbox.destroy().await;
            let _ = secrets.delete(&name, &DeleteParams::default()).await;
            return Err(e);
        }
    };
    let probes = probes(cluster, host_ip, node.as_deref()).await;
    Ok(RunGateway {
        pod: sandbox,
        pod_ip,
        probes,
        credentials: names,
        next_port: AtomicU16::new(FIRST_PORT),
    })
}

/// What a sandbox must not reach besides the outside: the API server, the
/// kubelet of its node, the cluster DNS. What cannot be read (RBAC) is left out.
async fn probes(cluster: &Cluster, host_ip: Option<IpAddr>, node: Option<&str>) -> Vec<SocketAddr> {
    let mut found = Vec::new();
    if let Some((host, port)) = host_and_port(&cluster.server)
        && let Ok(addrs) = tokio::net::lookup_host((host.as_str(), port)).await
    {
        found.extend(addrs.filter(SocketAddr::is_ipv4).take(1));
    }
    if let Some(ip) = host_ip {
        // The gateway pod's node: the sandboxes' nodes are alike, or the same.
        let port = match node {
            Some(node) => Api::<Node>::all(cluster.client.clone())
                .get(node)
                .await
                .ok()
                .and_then(|n| n.status?.daemon_endpoints?.kubelet_endpoint)
                .and_then(|e| u16::try_from(e.port).ok())
                .unwrap_or(KUBELET_PORT),
            None => KUBELET_PORT,
        };
        found.push(SocketAddr::new(ip, port));
    }
    let dns = Api::<Service>::namespaced(cluster.client.clone(), "kube-system");
    if let Ok(service) = dns.get("kube-dns").await
        && let Some(ip) = service.spec.and_then(|s| s.cluster_ip).and_then(|ip| ip.parse().ok())
    {
        found.push(SocketAddr::new(ip, 53));
    }
    found.dedup();
    found
}

/// `host` and `port` of the API server's URL (`https://host:port/…`).
fn host_and_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let default = if scheme == "http" { 80 } else { 443 };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None => default,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((authority.to_string(), default)),
    }
}

/// One attempt's gateway process in the run's gateway pod, attached.
#[derive(Debug)]
pub(super) struct KubeGateway {
    run: Arc<RunGateway>,
    services: Api<Service>,
    service: String,
    upstream: SocketAddr,
    port: u16,
    pid_file: String,
    dir: String,
    stream: GatewayStream,
    /// The tail of the process's stderr, once it started.
    stderr: std::sync::Mutex<Option<Arc<std::sync::Mutex<crate::exec::BoundedBuffer>>>>,
    unenforced: Option<String>,
}

impl KubeGateway {
    /// Starts the attempt's gateway process and its Service.
    pub(super) async fn start(
        cluster: &Cluster,
        run: Arc<RunGateway>,
        request: &GatewayRequest,
    ) -> Result<Self, SandboxError> {
        if let Some((env, _)) = request.env.iter().find(|(env, _)| !run.credentials.contains(env)) {
            return Err(SandboxError::EngineConfig {
                message: format!(
                    "failed to start the attempt's gateway: {} was not among the credentials of the run's gateway pod (preflight collects them from every eval's brokers)",
                    env.trim_start_matches("REEVAL_GW_SECRET_")
                ),
            });
        }
        let port = run.next_port.fetch_add(1, Ordering::SeqCst);
        let dir = format!("{DIR}/{port}");
        let owner = crate::docker::owner_label();
        let gateway_name = run.pod.name().to_string();
        let service_name = format!("{gateway_name}-{port}");
        let services: Api<Service> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
        let service = service(&service_name, &gateway_name, &request.labels, &owner, port);
        let created = services.create(&PostParams::default(), &service).await.map_err(|e| {
            SandboxError::engine(format!("create the gateway's Service {service_name}"), e)
        })?;
        let upstream_ip = match cluster.config.gateway_address {
            GatewayAddress::PodIp => Some(run.pod_ip),
            GatewayAddress::Service => {
                created.spec.and_then(|s| s.cluster_ip).and_then(|ip| ip.parse::<IpAddr>().ok())
            }
        };
        let unenforced = cluster.config.host_network.then(|| {
            "its pods run on the node's network (host_network = true), where no NetworkPolicy applies".to_string()
        });
        let mut gateway = Self {
            run: run.clone(),
            services,
            service: service_name.clone(),
            upstream: SocketAddr::new(run.pod_ip, port),
            port,
            pid_file: run.pod.pid_file(),
            dir: dir.clone(),
            stream: GatewayStream::default(),
            stderr: std::sync::Mutex::new(None),
            unenforced,
        };
        let Some(ip) = upstream_ip else {
            gateway.close().await;
            return Err(SandboxError::engine_says(
                format!("create the gateway's Service {service_name}"),
                "it got no ClusterIP",
            ));
        };
        gateway.upstream = SocketAddr::new(ip, port);
        if let Err(e) = gateway.launch(request).await {
            gateway.close().await;
            return Err(e);
        }
        Ok(gateway)
    }

    /// Its configuration in its own directory, then the process, attached.
    async fn launch(&self, request: &GatewayRequest) -> Result<(), SandboxError> {
        let mut files = Vec::new();
        let mut config = None;
        for FileToWrite { path, bytes, .. } in &request.files {
            let Some(file) = path.rsplit('/').next() else { continue };
            match file {
                "ca.pem" | "ca.key" => {}
                "config.json" => config = Some(bytes),
                _ => files.push(FileToWrite::new(
                    format!("{}/{file}", self.dir),
                    bytes.clone(),
                    0o600,
                )),
            }
        }
        let Some(config) = config else {
            return Err(SandboxError::EngineConfig {
                message:
                    "failed to start the attempt's gateway: the request holds no configuration"
                        .into(),
            });
        };
        let config = self.config(config)?;
        let config_path = format!("{}/config.json", self.dir);
        files.push(FileToWrite::new(config_path.clone(), config, 0o600));
        let relative: Vec<_> = files.into_iter().map(FileToWrite::relative_to_root).collect();
        self.run.pod.upload("/", archive::tar_of(&relative)?).await?;
        let argv = vec![
            "/bin/sh".into(),
            "-c".into(),
            PID_WRAPPER.into(),
            self.pid_file.clone(),
            "/bin/sh".into(),
            "-c".into(),
            WRITE_CA.into(),
            self.dir.clone(),
            BINARY.into(),
            "--config".into(),
            config_path,
        ];
        let opened = exec::open(
            self.run.pod.pods(),
            self.run.pod.name(),
            ExecSpec { argv, ..Default::default() },
        )
        .await?;
        self.stream.attach(opened.input, opened.stdout).await;
        *self.stderr.lock().expect("stderr lock") = Some(opened.stderr);
        Ok(())
    }

    /// The configuration the runner made, on this attempt's port, with the run's CA and its own files.
    fn config(&self, made: &[u8]) -> Result<Vec<u8>, SandboxError> {
        let bad = |e: &dyn std::fmt::Display| SandboxError::EngineConfig {
            message: format!("failed to read the gateway's configuration: {e}"),
        };
        let mut config: serde_json::Value = serde_json::from_slice(made).map_err(|e| bad(&e))?;
        config["listen"] = format!("tcp:0.0.0.0:{}", self.port).into();
        config["ca"] = serde_json::json!({
            "certFile": format!("{}/ca.pem", self.dir),
            "keyFile": format!("{}/ca.key", self.dir),
        });
        if let Some(roots) = config.get_mut("extraRootFiles").and_then(|r| r.as_array_mut()) {
            for root in roots {
                if let Some(file) = root.as_str().and_then(|p| p.rsplit('/').next()) {
                    *root = format!("{}/{file}", self.dir).into();
                }
            }
        }
        serde_json::to_vec(&config).map_err(|e| bad(&e))
    }
}

#[async_trait]
impl GatewayContainer for KubeGateway {
    fn network(&self) -> NetworkSpec {
        let name = self.run.pod.name().to_string();
        NetworkSpec::PodGateway {
            pod_labels: BTreeMap::from([(LABEL_GATEWAY.to_string(), name)]),
            port: self.port,
        }
    }

    fn upstream(&self) -> String {
        format!("tcp:{}", self.upstream)
    }

    fn probes(&self) -> Vec<SocketAddr> {
        self.run.probes.clone()
    }

    fn place(&self) -> &'static str {
        "a process in the run's gateway pod"
    }

    fn unenforced(&self) -> Option<String> {
        self.unenforced.clone()
    }

    async fn set_policy(&self, policy: &str) -> Result<(), SandboxError> {
        self.stream.set_policy(policy).await
    }

    async fn isolation(&self, within: Duration) -> Result<RelayReport, SandboxError> {
        self.stream.isolation(within).await.map_err(|e| {
            // What the gateway process said, if anything: why it is not there to hear the relay.
            let said = self
                .stderr
                .lock()
                .expect("stderr lock")
                .as_ref()
                .map(|tail| {
                    let mut tail = tail.lock().expect("stderr lock");
                    std::mem::replace(&mut *tail, crate::exec::BoundedBuffer::new(0)).into_string()
                })
                .unwrap_or_default();
            if said.trim().is_empty() {
                e
            } else {
                SandboxError::engine_says(
                    "verify the sandbox's isolation",
                    format!("{e}; the gateway process said: {}", said.trim()),
                )
            }
        })
    }

    async fn close(&self) -> Vec<EgressEntry> {
        // SIGTERM: the process closes its connections and prints what they completed.
        let _ = self.run.pod.kill_matching(&self.pid_file, Signal::Term).await;
        let entries = self.stream.finish(Duration::from_secs(10)).await;
        let _ = self.services.delete(&self.service, &DeleteParams::default()).await;
        let rm = crate::exec::Command::new("rm").arg("-rf").arg(&self.dir);
        let _ = self.run.pod.exec(crate::ExecRequest::plain(&rm, &[])).await;
        entries
    }
}
