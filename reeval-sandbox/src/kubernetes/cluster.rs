//! The cluster a backend talks to: its client, the namespace attempts run in,
//! the settings and the API server, and the APIs and waits every part of the
//! backend (the engine, the run's gateway) asks it for.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::Api;

use super::room;
use super::sandbox::Room;
use crate::KubernetesConfig;

/// A Kubernetes cluster and the namespace attempts run in.
#[derive(Clone)]
pub(super) struct Cluster {
    pub(super) client: kube::Client,
    pub(super) namespace: String,
    pub(super) config: Arc<KubernetesConfig>,
    /// Where the API server is, for preflight and the record.
    pub(super) server: String,
}

impl Cluster {
    pub(super) fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub(super) fn policies(&self) -> Api<NetworkPolicy> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub(super) fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub(super) fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// How a pod of `manifest` waits for room on the cluster.
    pub(super) fn room(&self, manifest: &Pod) -> Room {
        Room {
            manifest: manifest.clone(),
            nodes: Api::all(self.client.clone()),
            within: self
                .config
                .room_timeout_secs
                .map_or(room::DEFAULT_WITHIN, std::time::Duration::from_secs),
        }
    }

    pub(super) fn ready_within(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.config.ready_timeout_secs.unwrap_or(300))
    }
}
