//! The Kubernetes backend, on kube-rs (its engine behind the feature `kubernetes`;
//! its settings, `config.rs`, are read whether or not it is built): one bare pod per
//! attempt in a namespace of the cluster the kubeconfig (or the in-cluster
//! service account) names, with a deny-all NetworkPolicy of its own. Commands
//! run through the websocket exec API (`exec.rs`), files go as tar over exec,
//! `Ctx::serve` uses the port-forward API; egress goes through the run's
//! gateway pod (`gateway.rs`). Selected with
//! `REEVAL_BACKEND=kubernetes`, or `backend = "kubernetes"` in `reeval.toml`.
//!
//! - `pod.rs`: the pod and its NetworkPolicy, the waits for Ready and for a working exec, deletion.
//! - `services.rs`: the sandbox's services as containers of its pod (jobs as init containers, in
//!   their start order, held until healthy where others wait for that), its hostAliases.
//! - `services_up.rs`: those containers once the pod runs: what failed, each service ready, exec in one.
//! - `volumes.rs`: the sandbox's volumes as the pod's `emptyDir`s, filled from the first mounter's image.
//! - `patience.rs`: calls that wait out an API server that refuses connections for a moment, or
//!   closes a kept-alive connection under a call (made again; a create's conflict then is its own).
//! - `room.rs`: a pod with no room on the cluster yet waits for it; one no node could ever fit is named.
//! - `exec.rs`: one command over the exec websocket: streams, bounded capture, the exit code from `Status`;
//!   its prologue's user switch is `user_switch.sh`.
//! - `user.rs`: an image whose own user is not root: the pod runs as root, commands as that user.
//! - `sandbox.rs`: the `Sandbox` of one pod (exec, kill, files, port-forward, destroy).
//!   Its start (`sandbox/start.rs`): room, Ready, a working exec, the image's user learned.
//! - `preflight.rs`: the API answers, the namespace exists, RBAC allows what the backend does.
//! - `gateway.rs`: the run's gateway pod, its Secret, and each attempt's gateway process and Service.
//! - `registry.rs`: images reeval builds, pushed from the local Docker engine to `registry`.
//! - `config.rs`: [`KubernetesConfig`], `[kubernetes]` in `reeval.toml`.
//! - `cluster.rs`: the cluster the backend talks to (client, namespace, settings), its APIs and waits.
//! - `backend.rs`: the engine (connect, ping, images, create, sweep, preflight).

mod config;
pub use config::{GatewayAddress, KubernetesConfig};

#[cfg(feature = "kubernetes")]
mod backend;
#[cfg(feature = "kubernetes")]
mod cluster;
#[cfg(feature = "kubernetes")]
mod exec;
#[cfg(feature = "kubernetes")]
mod gateway;
#[cfg(feature = "kubernetes")]
mod names;
#[cfg(feature = "kubernetes")]
mod patience;
#[cfg(feature = "kubernetes")]
mod pod;
#[cfg(feature = "kubernetes")]
mod preflight;
#[cfg(feature = "kubernetes")]
mod registry;
#[cfg(feature = "kubernetes")]
mod room;
#[cfg(feature = "kubernetes")]
mod sandbox;
#[cfg(feature = "kubernetes")]
mod services;
#[cfg(feature = "kubernetes")]
mod services_up;
#[cfg(all(test, feature = "kubernetes"))]
mod tests;
#[cfg(feature = "kubernetes")]
mod user;
#[cfg(feature = "kubernetes")]
mod volumes;

/// What preflight found (the backend's own checks).
pub use super::Preflight;
#[cfg(feature = "kubernetes")]
pub use backend::{KubeBackend, kubeconfig_from};
/// kube-rs, whose `Config` [`KubeBackend::with_config`] takes.
#[cfg(feature = "kubernetes")]
pub use kube;
#[cfg(feature = "kubernetes")]
pub use sandbox::KubeSandbox;

use super::Connected;

/// Connects to the cluster the kubeconfig names: the run's one engine.
///
/// # Errors
/// What stops the run: no usable configuration, or reeval built without its
/// `kubernetes` feature.
///
/// # Cancel safety
/// Safe: nothing is created.
pub(crate) async fn connect(config: &KubernetesConfig) -> Result<Vec<Connected>, Vec<String>> {
    #[cfg(feature = "kubernetes")]
    {
        use super::Backend;
        let backend =
            KubeBackend::connect(config.clone()).await.map_err(|e| vec![e.to_string()])?;
        let name = backend.ping().await.map(|i| i.host).unwrap_or_default();
        Ok(vec![Connected { name, backend: std::sync::Arc::new(backend), slots: None }])
    }
    #[cfg(not(feature = "kubernetes"))]
    {
        let _ = config;
        Err(vec![
            "backend = \"kubernetes\" (or REEVAL_BACKEND=kubernetes) needs reeval built with its `kubernetes` feature: reeval = { version = \"…\", features = [\"kubernetes\"] } for a suite, cargo install reeval-cli --features kubernetes for the reeval tool".into(),
        ])
    }
}
