//! The Kubernetes backend's settings (`[kubernetes]` in `reeval.toml`), read
//! by the runner's config file whether or not the backend is built.

use serde::Deserialize;

/// How the Kubernetes backend places and shapes the attempts' pods
/// (`[kubernetes]` in `reeval.toml`; `namespace` is a top-level key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesConfig {
    /// The namespace; filled from the top-level `namespace` key (or
    /// `REEVAL_KUBE_NAMESPACE`); `None`: the kubeconfig's, else `default`.
    #[serde(skip)]
    pub namespace: Option<String>,
    /// `runtimeClassName` of every pod (`gvisor`, `kata`).
    pub runtime_class: Option<String>,
    /// `nodeSelector` of every pod.
    #[serde(default)]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// `tolerations` of every pod, as Kubernetes spells them (`key`, `operator`, `value`, `effect`).
    #[serde(default)]
    pub tolerations: Vec<std::collections::BTreeMap<String, String>>,
    /// `imagePullPolicy` of the sandbox container: `IfNotPresent` (default), `Always` or `Never`.
    pub image_pull_policy: Option<String>,
    /// A registry the cluster pulls from (`host[:port][/path]`), for images reeval
    /// builds (`Image::dockerfile`, `Image::install`, harness images, the gateway
    /// image): built on the local Docker engine, tagged `<registry>/reeval/…:<digest>`
    /// and pushed there (skipped when the registry has that tag), with the Docker
    /// config's credentials. Without it, such images fail preflight saying what to do.
    pub registry: Option<String>,
    /// Resource requests, when they should be below the limits (`cpu = "100m"`, `memory = "256Mi"`).
    #[serde(default)]
    pub requests: std::collections::BTreeMap<String, String>,
    /// `nodeName` of every pod: for clusters without a scheduler (tests), or to pin a node.
    pub node_name: Option<String>,
    /// How long a pod may take to be Ready once it has room, in seconds (default 300).
    pub ready_timeout_secs: Option<u64>,
    /// How long a pod may wait for room on the cluster, in seconds (default
    /// 600): one the scheduler cannot place yet (Unschedulable), or that its
    /// node refused for resources (`OutOfcpu`; it is created again), waits this
    /// long, spending none of the eval's budget, then fails as the eval's
    /// configuration fault. A request no node could ever fit fails at once.
    pub room_timeout_secs: Option<u64>,
    /// Test clusters only: run pods on the node's network (`hostNetwork`), where
    /// no CNI works. Such a pod is NOT isolated; attempts that need egress refuse to
    /// start unless `unisolated_egress` is set too.
    #[serde(default)]
    pub host_network: bool,
    /// Test clusters only, with `host_network`: run attempts that need egress
    /// although nothing isolates their pods (no NetworkPolicy applies to a pod on
    /// the node's network). The relay's probes still run; what they reach is
    /// reported in the gateway phase instead of failing the attempt, and preflight warns.
    #[serde(default)]
    pub unisolated_egress: bool,
    /// How a sandbox's relay reaches the run's gateway pod: through the
    /// attempt's Service (`service`, the default), or at the gateway pod's own
    /// address (`pod-ip`), for clusters where no service proxy routes ClusterIPs.
    #[serde(default)]
    pub gateway_address: GatewayAddress,
    /// The image of the run's gateway pod, which must hold a C library for the
    /// `reeval-gateway` binary. Default: with a `registry`, the gateway image
    /// reeval builds and pushes there; without one, `reeval/base:latest`, into
    /// which the binary is copied when the pod starts.
    pub gateway_image: Option<String>,
}

/// How a sandbox on Kubernetes reaches its gateway (see [`KubernetesConfig::gateway_address`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GatewayAddress {
    /// The ClusterIP of the attempt's Service.
    #[default]
    Service,
    /// The gateway pod's IP.
    PodIp,
}
