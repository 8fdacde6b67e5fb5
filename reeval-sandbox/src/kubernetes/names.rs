//! Names and sizes of a pod's parts, shared by the pod's manifest
//! (`pod.rs`), its services (`services.rs`), its volumes (`volumes.rs`) and
//! exec: a leaf, so that none of those needs another for a name.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::{KubernetesConfig, Service};

/// The container of the pod that commands run in.
pub(super) const CONTAINER: &str = "sandbox";

/// `<prefix>-<name>` as a DNS label (what a pod's container and volume
/// names must be), at most `max` long: unique by its prefix, readable by the rest.
pub(super) fn dns_label(prefix: &str, name: &str, max: usize) -> String {
    let mapped: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    let mut label = format!("{prefix}-{}", mapped.trim_matches('-'));
    label.truncate(max);
    label.trim_end_matches('-').to_string()
}

/// The container name of the `i`th service of the spec.
pub(super) fn container_name(i: usize, service: &Service) -> String {
    dns_label(&format!("svc-{i}"), &service.name, 63)
}

/// Limits from `limits`; requests the same (a guaranteed pod), but those the config sets lower.
pub(super) fn resources(limits: &crate::Limits, config: &KubernetesConfig) -> ResourceRequirements {
    let limits = BTreeMap::from([
        ("memory".to_string(), Quantity(limits.memory_bytes.to_string())),
        ("cpu".to_string(), Quantity(format!("{}m", limits.nano_cpus / 1_000_000))),
    ]);
    let mut requests = limits.clone();
    for (k, v) in &config.requests {
        requests.insert(k.clone(), Quantity(v.clone()));
    }
    ResourceRequirements { limits: Some(limits), requests: Some(requests), ..Default::default() }
}
