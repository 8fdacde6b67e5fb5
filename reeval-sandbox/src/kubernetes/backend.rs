//! The Kubernetes backend's engine: [`KubeBackend`] (connect, ping, images,
//! create, sweep, the run's gateway pod, its own preflight).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kube::api::{DeleteParams, ListParams};
use secrecy::SecretString;

use super::cluster::Cluster;
use super::patience::create_patiently;
use super::sandbox::KubeSandbox;
use super::services_up::Parts;
use super::{gateway, pod, preflight, registry, services, volumes};
use crate::Preflight;
use crate::docker::{owner_is_gone, owner_label};
use crate::{
    Backend, Capabilities, EngineInfo, GatewayContainer, GatewayRequest, HELPER_TOOLS, LABEL_OWNER,
    LABEL_RUN, NetworkSpec, ReadyImage, RunNeeds, Sandbox, SandboxError, SandboxSpec, Sweep,
};
use crate::{ImageSpec, KubernetesConfig};

/// A Kubernetes cluster and the namespace attempts run in, shared by every sandbox of a run.
#[derive(Clone)]
pub struct KubeBackend {
    /// The cluster: its client, the namespace, the settings, the API server.
    pub(super) cluster: Cluster,
    /// Real values of the secrets the run brokers, by the gateway's variable
    /// name (`REEVAL_GW_SECRET_<NAME>`): they go into the run's gateway Secret.
    /// Set by preflight ([`Backend::check_run`]) or [`KubeBackend::set_gateway_credentials`].
    pub(super) credentials: Arc<std::sync::RwLock<BTreeMap<String, SecretString>>>,
    /// The gateway pod of each run, started by its first attempt that needs egress.
    gateways: Arc<tokio::sync::Mutex<BTreeMap<String, Arc<gateway::RunGateway>>>>,
    /// The local Docker engine that builds and pushes images (with a `registry`), once needed.
    local: Arc<tokio::sync::OnceCell<crate::DockerBackend>>,
    /// On the node's network (`host_network`) every sandbox's relay would listen on the
    /// same 127.0.0.1:3128: one pod with a relay at a time there, until it is gone.
    host_network_egress: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("server", &self.cluster.server)
            .field("namespace", &self.cluster.namespace)
            .finish_non_exhaustive()
    }
}

impl KubeBackend {
    /// Connects with the kubeconfig (`KUBECONFIG`, `~/.kube/config`) or the
    /// in-cluster service account, as `kubectl` finds them. The namespace is
    /// `config.namespace`, else the kubeconfig context's, else `default`.
    ///
    /// # Errors
    /// [`SandboxError::EngineConfig`] when no usable configuration is found.
    ///
    /// # Cancel safety
    /// Safe: nothing is created.
    pub async fn connect(config: KubernetesConfig) -> Result<Self, SandboxError> {
        let kube_config = kube::Config::infer().await.map_err(|e| SandboxError::EngineConfig {
            message: format!(
                "failed to find a Kubernetes configuration (KUBECONFIG, ~/.kube/config or the in-cluster service account): {e}"
            ),
        })?;
        Self::with_config(kube_config, config)
    }

    /// Connects with an explicit client configuration (tests, embedders).
    ///
    /// # Errors
    /// [`SandboxError::EngineConfig`] when the client cannot be built from it.
    pub fn with_config(
        kube_config: kube::Config,
        config: KubernetesConfig,
    ) -> Result<Self, SandboxError> {
        let server = kube_config.cluster_url.to_string();
        let namespace =
            config.namespace.clone().unwrap_or_else(|| kube_config.default_namespace.clone());
        let client =
            kube::Client::try_from(kube_config).map_err(|e| SandboxError::EngineConfig {
                message: format!("failed to build a Kubernetes client for {server}: {e}"),
            })?;
        Ok(Self {
            cluster: Cluster { client, namespace, config: Arc::new(config), server },
            credentials: Arc::default(),
            gateways: Arc::default(),
            local: Arc::default(),
            host_network_egress: Arc::new(tokio::sync::Semaphore::new(1)),
        })
    }

    /// The real values of the secrets this run brokers, by the gateway's
    /// variable name: the run's gateway pod gets them from its Secret (preflight sets them).
    pub fn set_gateway_credentials(&mut self, credentials: BTreeMap<String, SecretString>) {
        self.credentials = Arc::new(std::sync::RwLock::new(credentials));
    }

    /// The namespace attempts run in.
    pub fn namespace(&self) -> &str {
        &self.cluster.namespace
    }

    /// Names of the pods of run `run_id` in the namespace (any owner, any state).
    ///
    /// # Errors
    /// An API error.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn pods_of_run(&self, run_id: &str) -> Result<Vec<String>, SandboxError> {
        let list =
            ListParams::default().labels(&format!("{LABEL_RUN}={}", pod::label_value(run_id)));
        let pods = self
            .cluster
            .pods()
            .list(&list)
            .await
            .map_err(|e| SandboxError::engine("list pods", e))?;
        Ok(pods.items.into_iter().filter_map(|p| p.metadata.name).collect())
    }

    /// Everything of run `run_id` left in the namespace (any owner, any
    /// state), as `kind/name`: pods, NetworkPolicies, Services, Secrets.
    ///
    /// # Errors
    /// An API error.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn leftovers_of_run(&self, run_id: &str) -> Result<Vec<String>, SandboxError> {
        let list =
            ListParams::default().labels(&format!("{LABEL_RUN}={}", pod::label_value(run_id)));
        let fail = |what: &str, e| SandboxError::engine(format!("list {what}"), e);
        let names = |kind: &str, metas: Vec<Option<String>>| {
            metas.into_iter().flatten().map(|n| format!("{kind}/{n}")).collect::<Vec<_>>()
        };
        let mut found = self
            .pods_of_run(run_id)
            .await?
            .into_iter()
            .map(|n| format!("pod/{n}"))
            .collect::<Vec<_>>();
        let policies =
            self.cluster.policies().list(&list).await.map_err(|e| fail("NetworkPolicies", e))?;
        found.extend(names(
            "networkpolicy",
            policies.items.into_iter().map(|p| p.metadata.name).collect(),
        ));
        let services =
            self.cluster.services().list(&list).await.map_err(|e| fail("Services", e))?;
        found.extend(names(
            "service",
            services.items.into_iter().map(|p| p.metadata.name).collect(),
        ));
        let secrets = self.cluster.secrets().list(&list).await.map_err(|e| fail("Secrets", e))?;
        found.extend(names("secret", secrets.items.into_iter().map(|p| p.metadata.name).collect()));
        Ok(found)
    }

    /// The gateway pod of the run `request` belongs to, started on first use.
    async fn run_gateway(
        &self,
        request: &GatewayRequest,
    ) -> Result<Arc<gateway::RunGateway>, SandboxError> {
        let run = request.labels.get(LABEL_RUN).cloned().unwrap_or_default();
        // Held while the first attempt starts it: the others wait for the same pod.
        let mut gateways = self.gateways.lock().await;
        if let Some(found) = gateways.get(&run) {
            if found.alive().await {
                return Ok(found.clone());
            }
            // Deleted or evicted from outside: a new one (the old one's Secret
            // and Services go with the run's sweep).
            gateways.remove(&run);
        }
        // Its variables: every secret the run brokers, and this attempt's (an embedder's run).
        let mut credentials = self.credentials.read().expect("credentials lock").clone();
        for (env, value) in &request.env {
            credentials.entry(env.clone()).or_insert_with(|| value.clone());
        }
        // The gateway image: the configured one, else built and pushed, else the base with the binary copied in.
        let (image, binary_in_image) =
            match (&self.cluster.config.gateway_image, &self.cluster.config.registry) {
                (Some(image), _) => (image.clone(), false),
                (None, Some(registry)) => {
                    let local = self.local().await?;
                    let built = crate::docker::ensure_gateway_image(local, request).await?;
                    (registry::push(local.client(), registry, &built).await?.0, true)
                }
                (None, None) => (request.base_image.clone(), false),
            };
        let started = Arc::new(
            gateway::start_run(&self.cluster, request, &credentials, &image, binary_in_image)
                .await?,
        );
        gateways.insert(run, started.clone());
        Ok(started)
    }

    /// Checks that the API answers, the namespace exists and RBAC allows what
    /// the backend does; lists every miss, and warnings that do not stop a run.
    ///
    /// # Errors
    /// None: misses are in the returned [`Preflight`].
    ///
    /// # Cancel safety
    /// Safe: it only reads (a `SelfSubjectAccessReview` creates nothing).
    pub async fn preflight(&self) -> Preflight {
        preflight::check(&self.cluster.client, &self.cluster.namespace).await
    }
}

#[async_trait]
impl Backend for KubeBackend {
    fn name(&self) -> &str {
        "kubernetes"
    }

    fn capabilities(&self) -> Capabilities {
        // No host directory can be mounted into a pod, and the kernel's OOM count is the node's.
        Capabilities {
            gateway_socket: false,
            oom_kills: false,
            helper_tools: HELPER_TOOLS,
            main_stdin: false,
        }
    }

    /// Services are containers of the sandbox's pod (`services.rs`): all but
    /// what a pod cannot hold.
    fn runs_services(&self, services: &[crate::Service]) -> Result<(), String> {
        match services::problems(services) {
            problems if problems.is_empty() => Ok(()),
            problems => Err(problems.join("; ")),
        }
    }

    /// Volumes are the pod's `emptyDir`s (`volumes.rs`); a path of this host cannot be mounted.
    fn mounts(&self, mounts: &[crate::Mount]) -> Result<(), String> {
        volumes::refused(mounts)
    }

    async fn ping(&self) -> Result<EngineInfo, SandboxError> {
        let v = self.cluster.client.apiserver_version().await.map_err(|e| {
            SandboxError::EngineUnreachable {
                engine: "the Kubernetes API server".into(),
                message: format!("{}: {e}", self.cluster.server),
            }
        })?;
        Ok(EngineInfo {
            name: "Kubernetes".into(),
            version: v.git_version,
            api_version: format!("{}.{}", v.major, v.minor),
            host: format!("{} namespace {}", self.cluster.server, self.cluster.namespace),
            // Nodes come and go; what a pod may ask is the scheduler's to say.
            capacity: None,
        })
    }

    async fn ensure_image(
        &self,
        spec: &ImageSpec,
        extra: &str,
    ) -> Result<ReadyImage, SandboxError> {
        if let ImageSpec::From(reference) = spec {
            // The cluster pulls it (imagePullPolicy from the config); a pull that fails shows at start.
            return Ok(ReadyImage {
                reference: reference.clone(),
                id: reference.clone(),
                detail: format!(
                    "{reference}, left to the cluster (imagePullPolicy {})",
                    self.cluster.config.image_pull_policy.as_deref().unwrap_or("IfNotPresent")
                ),
                // Not known before a pod runs it: the cluster pulls it.
                workdir: None,
                user: None,
            });
        }
        self.check_image(spec)?;
        let registry = self.cluster.config.registry.as_deref().expect("checked: a registry is set");
        // Built on the local engine as on the Docker backend, then pushed where the cluster pulls.
        let began = std::time::Instant::now();
        let local = self.local().await?;
        let built = local.ensure_image(spec, extra).await?;
        let (name, pushed) = registry::push(local.client(), registry, &built.reference).await?;
        let how = if pushed { "pushed" } else { "already" };
        Ok(ReadyImage {
            detail: format!(
                "{}; {how} in {registry} as {name} ({}ms)",
                built.detail,
                began.elapsed().as_millis()
            ),
            reference: name,
            id: built.id,
            workdir: built.workdir,
            user: built.user,
        })
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        if !matches!(spec.network, NetworkSpec::None | NetworkSpec::PodGateway { .. }) {
            return Err(SandboxError::EngineConfig {
                message: "failed to create a pod: the Kubernetes backend gives a sandbox no network but its own policy, which lets it reach the run's gateway pod at most".into(),
            });
        }
        let services: Vec<crate::Service> =
            spec.services.iter().map(|s| s.service.clone()).collect();
        if let Err(why) = self.runs_services(&services) {
            return Err(SandboxError::EngineConfig {
                message: format!("failed to create a pod: {why}"),
            });
        }
        let mounts: Vec<crate::Mount> =
            spec.mounts.iter().chain(services.iter().flat_map(|s| &s.mounts)).cloned().collect();
        if let Err(why) = self.mounts(&mounts) {
            return Err(SandboxError::EngineConfig {
                message: format!("failed to create a pod: {why}"),
            });
        }
        let name = pod::new_name();
        let owner = owner_label();
        // The policy first: the pod is never up without it.
        let policy = pod::policy(&name, spec, &owner);
        let (policies, post) = (self.cluster.policies(), kube::api::PostParams::default());
        if let Err(e) = create_patiently(|| policies.create(&post, &policy)).await {
            // A try whose connection broke may have created it: not left to the run's end sweep.
            let _ = policies.delete(&name, &DeleteParams::default()).await;
            return Err(SandboxError::engine(format!("create the NetworkPolicy of pod {name}"), e));
        }
        let manifest = pod::manifest(&name, spec, &self.cluster.config, &owner);
        let gateway = match &spec.network {
            NetworkSpec::PodGateway { pod_labels, .. } => {
                pod_labels.get(gateway::LABEL_GATEWAY).cloned()
            }
            _ => None,
        };
        let mut sandbox = KubeSandbox::new(
            self.cluster.pods(),
            self.cluster.policies(),
            name.clone(),
            self.cluster.ready_within(),
        )
        .with_room(self.cluster.room(&manifest))
        .with_parts(Parts::of(spec))
        .through_gateway(gateway)
        .running_as(super::user::of(spec));
        if self.cluster.config.host_network
            && matches!(spec.network, NetworkSpec::PodGateway { .. })
        {
            let slot = self.host_network_egress.clone().acquire_owned().await.map_err(|e| {
                SandboxError::engine("wait for the node network's one relay port", e)
            })?;
            sandbox.hold_until_gone(slot);
        }
        let pods = self.cluster.pods();
        if let Err(e) = create_patiently(|| pods.create(&post, &manifest)).await {
            let _ = sandbox.destroy().await;
            return Err(SandboxError::engine(format!("create pod {name} from {}", spec.image), e));
        }
        Ok(Arc::new(sandbox))
    }

    async fn start_gateway(
        &self,
        request: &GatewayRequest,
    ) -> Result<Box<dyn GatewayContainer>, SandboxError> {
        let run = self.run_gateway(request).await?;
        Ok(Box::new(gateway::KubeGateway::start(&self.cluster, run, request).await?))
    }

    /// The API, the namespace and RBAC (see [`KubeBackend::preflight`]); what
    /// the cluster cannot run (images reeval builds, without a registry;
    /// egress from pods on the host network, unless a test cluster says so);
    /// and the secrets the run brokers, which its gateway pod gets.
    async fn check_run(&self, run: &RunNeeds) -> Preflight {
        let mut found = self.preflight().await;
        let config = &self.cluster.config;
        let mut push = |line: String| {
            if !found.missing.contains(&line) {
                found.missing.push(line);
            }
        };
        let mut credentials = BTreeMap::new();
        let mut unisolated = false;
        for cell in &run.cells {
            for spec in &cell.images {
                if let Err(e) = self.check_image(spec) {
                    push(format!("environment of eval {}: {e}", cell.eval));
                }
            }
            if cell.egress && config.host_network && !config.unisolated_egress {
                push(format!(
                    "eval {} needs egress, and its pods would run on the node's network (host_network = true), where no NetworkPolicy applies, so the gateway could not be their only way out; run it on a cluster without host_network (test clusters only: unisolated_egress = true runs it anyway, isolation not enforced)",
                    cell.eval
                ));
            }
            unisolated |= cell.egress && config.host_network && config.unisolated_egress;
            credentials.extend(cell.brokered.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if unisolated {
            found.warnings.push(
                "unisolated_egress = true: attempts that need egress run on the node's network, where nothing keeps them from reaching anything but the gateway; for test clusters only".into(),
            );
        }
        *self.credentials.write().expect("credentials lock") = credentials;
        found
    }

    async fn sweep(&self, scope: Sweep<'_>) -> Result<usize, SandboxError> {
        let selector = match scope {
            Sweep::Orphans => LABEL_RUN.to_string(),
            Sweep::OwnRun(run) => format!("{LABEL_RUN}={}", pod::label_value(run)),
        };
        let me = owner_label();
        let ours = |annotations: Option<&std::collections::BTreeMap<String, String>>| {
            let owner =
                annotations.and_then(|a| a.get(LABEL_OWNER)).map(String::as_str).unwrap_or("");
            match scope {
                Sweep::Orphans => owner_is_gone(owner),
                Sweep::OwnRun(_) => owner == me,
            }
        };
        let list = ListParams::default().labels(&selector);
        let pods = self
            .cluster
            .pods()
            .list(&list)
            .await
            .map_err(|e| SandboxError::engine("list pods", e))?;
        let mut removed = 0;
        for p in pods.items.iter().filter(|p| ours(p.metadata.annotations.as_ref())) {
            let Some(name) = p.metadata.name.as_deref() else { continue };
            if self
                .cluster
                .pods()
                .delete(name, &DeleteParams::default().grace_period(0))
                .await
                .is_ok()
            {
                removed += 1;
            }
        }
        // Policies go with their pods; a policy without a pod holds nothing, but is removed
        // too, as are gateways' Services and Secrets (credentials: they must not outlive the run).
        if let Ok(policies) = self.cluster.policies().list(&list).await {
            for p in policies.items.iter().filter(|p| ours(p.metadata.annotations.as_ref())) {
                if let Some(name) = p.metadata.name.as_deref() {
                    let _ = self.cluster.policies().delete(name, &DeleteParams::default()).await;
                }
            }
        }
        if let Ok(services) = self.cluster.services().list(&list).await {
            for s in services.items.iter().filter(|s| ours(s.metadata.annotations.as_ref())) {
                if let Some(name) = s.metadata.name.as_deref() {
                    let _ = self.cluster.services().delete(name, &DeleteParams::default()).await;
                }
            }
        }
        if let Ok(secrets) = self.cluster.secrets().list(&list).await {
            for s in secrets.items.iter().filter(|s| ours(s.metadata.annotations.as_ref())) {
                if let Some(name) = s.metadata.name.as_deref() {
                    let _ = self.cluster.secrets().delete(name, &DeleteParams::default()).await;
                }
            }
        }
        if let Sweep::OwnRun(run) = scope {
            self.gateways.lock().await.remove(run);
        }
        Ok(removed)
    }
}

impl KubeBackend {
    /// Whether the cluster can get `spec`'s image: one reeval builds needs a
    /// `registry` to be pushed to. Nothing is built (preflight asks this).
    ///
    /// # Errors
    /// [`SandboxError::ImageMissing`] saying what to configure.
    pub fn check_image(&self, spec: &ImageSpec) -> Result<(), SandboxError> {
        if matches!(spec, ImageSpec::From(_)) || self.cluster.config.registry.is_some() {
            return Ok(());
        }
        Err(SandboxError::ImageMissing {
            image: match spec {
                ImageSpec::Dockerfile(path) | ImageSpec::DockerfileText { path, .. } => {
                    path.display().to_string()
                }
                ImageSpec::Install { base, .. } => format!("{base} with install steps"),
                ImageSpec::From(reference) => reference.clone(),
                ImageSpec::Layered { .. } => "an image with build steps".into(),
            },
            hint: needs_registry_hint(),
        })
    }

    /// The local Docker engine that builds and pushes images.
    async fn local(&self) -> Result<&crate::DockerBackend, SandboxError> {
        self.local.get_or_try_init(crate::DockerBackend::connect).await
    }
}

/// The client configuration of a kubeconfig file (its current context).
///
/// # Errors
/// [`SandboxError::EngineConfig`] when it cannot be read or used.
///
/// # Cancel safety
/// Safe.
pub async fn kubeconfig_from(path: &str) -> Result<kube::Config, SandboxError> {
    let fail = |e: &dyn std::fmt::Display| SandboxError::EngineConfig {
        message: format!("failed to use the kubeconfig {path}: {e}"),
    };
    let file = kube::config::Kubeconfig::read_from(path).map_err(|e| fail(&e))?;
    kube::Config::from_custom_kubeconfig(file, &Default::default()).await.map_err(|e| fail(&e))
}

/// What to do about an image reeval would build, on a cluster that must pull it.
pub(crate) fn needs_registry_hint() -> String {
    "reeval builds this image, and a Kubernetes cluster can only pull images from a registry: set `registry = \"HOST[:PORT][/PATH]\"` in [kubernetes] of reeval.toml (reeval builds it on the local Docker engine and pushes it there, with the credentials of `docker login`), or build and push it yourself (docker build -t REGISTRY/NAME:TAG . && docker push REGISTRY/NAME:TAG) and use Image::from(\"REGISTRY/NAME:TAG\")".into()
}
