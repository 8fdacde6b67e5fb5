//! Room on the cluster for an attempt's pod: a pod the scheduler cannot place
//! yet (Pending, `Unschedulable`) or that its node refused at admission for
//! resources (Failed, `OutOfcpu`, `OutOfmemory`, …) waits for room (the
//! refused one deleted and created again) within `room_timeout_secs`, which
//! is not the eval's budget; a request no node could ever fit (more than every
//! node allocates) fails at once, named as the eval's configuration fault.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};

use crate::SandboxError;

/// How long a pod may wait for room by default (`room_timeout_secs`).
pub(super) const DEFAULT_WITHIN: Duration = Duration::from_secs(600);

/// Why a pod has no room yet, as its status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NoRoom {
    /// Its node refused it at admission (the pod failed): it must be created again.
    Refused(String),
    /// The scheduler finds no node for it yet: it places it once one has room.
    Unschedulable(String),
}

impl NoRoom {
    /// What the cluster said.
    pub(super) fn says(&self) -> &str {
        match self {
            NoRoom::Refused(s) | NoRoom::Unschedulable(s) => s,
        }
    }
}

/// Whether the pod's status says it has no room (see [`NoRoom`]).
pub(super) fn no_room(pod: &Pod) -> Option<NoRoom> {
    let status = pod.status.as_ref()?;
    let reason = status.reason.as_deref().unwrap_or("");
    let message = status.message.as_deref().unwrap_or("");
    // The kubelet's admission: `OutOfcpu`, `OutOfmemory`, `OutOfpods`, `OutOfephemeral-storage`.
    if status.phase.as_deref() == Some("Failed") && reason.starts_with("OutOf") {
        return Some(NoRoom::Refused(format!("{reason}: {message}")));
    }
    if status.phase.as_deref() != Some("Pending") {
        return None;
    }
    let unschedulable = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })?;
    Some(NoRoom::Unschedulable(format!(
        "Unschedulable: {}",
        unschedulable.message.as_deref().unwrap_or("no message")
    )))
}

/// CPUs and bytes of memory a pod requests (or a node allocates).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Resources {
    pub(super) cpus: f64,
    pub(super) memory: f64,
}

impl Resources {
    fn from_map(map: Option<&BTreeMap<String, Quantity>>) -> Self {
        let get = |k: &str| map.and_then(|m| m.get(k)).and_then(|q| quantity(&q.0)).unwrap_or(0.0);
        Self { cpus: get("cpu"), memory: get("memory") }
    }

    /// What the pod requests, as the scheduler counts: its containers' sum,
    /// or the most one init container asks, whichever is more (they run one at a time, before).
    pub(super) fn requested_by(pod: &Pod) -> Self {
        let of = |c: &k8s_openapi::api::core::v1::Container| {
            Self::from_map(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
        };
        let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
        let sum = containers.fold(Self::default(), |sum, c| {
            let r = of(c);
            Self { cpus: sum.cpus + r.cpus, memory: sum.memory + r.memory }
        });
        let init = pod.spec.iter().flat_map(|s| s.init_containers.iter().flatten());
        init.fold(sum, |most, c| {
            let r = of(c);
            Self { cpus: most.cpus.max(r.cpus), memory: most.memory.max(r.memory) }
        })
    }

    fn fits_in(&self, node: &Self) -> bool {
        self.cpus <= node.cpus && self.memory <= node.memory
    }
}

impl std::fmt::Display for Resources {
    /// `2 CPUs / 4 GiB`, `0.5 CPU / 256 MiB`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpus = trimmed(self.cpus);
        let unit = if self.cpus > 1.0 { "CPUs" } else { "CPU" };
        let gib = self.memory / f64::from(1u32 << 30);
        if gib >= 1.0 {
            write!(f, "{cpus} {unit} / {} GiB", trimmed(gib))
        } else {
            write!(f, "{cpus} {unit} / {} MiB", trimmed(self.memory / f64::from(1u32 << 20)))
        }
    }
}

/// A number with at most two decimals, and none when it is whole.
fn trimmed(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A Kubernetes quantity (`2`, `500m`, `4Gi`, `24597460Ki`, `1e3`, `1.5G`) in
/// base units (cores, bytes); `None` when it cannot be read.
pub(super) fn quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'));
    let (number, suffix) = q.split_at(split.unwrap_or(q.len()));
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * factor)
}

/// Where the pod may go, as it says (a node named, a node selector), else anywhere.
fn candidates(pod: &Pod) -> (Option<String>, ListParams) {
    let spec = pod.spec.as_ref();
    let selector = spec
        .and_then(|s| s.node_selector.as_ref())
        .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
        .filter(|s| !s.is_empty());
    let mut list = ListParams::default();
    if let Some(selector) = selector {
        list = list.labels(&selector);
    }
    (spec.and_then(|s| s.node_name.clone()), list)
}

/// The error of a pod that no node the cluster has could ever take: its
/// requests exceed every candidate node's allocatable resources. `None` when
/// some node could, or when the nodes cannot be read (RBAC) or there are none
/// (a cluster that adds nodes as needed): then the pod waits.
pub(super) async fn never_fits(nodes: &Api<Node>, pod: &Pod) -> Option<SandboxError> {
    let want = Resources::requested_by(pod);
    let (named, list) = candidates(pod);
    let found: Vec<Node> = match &named {
        Some(name) => vec![nodes.get_opt(name).await.ok()??],
        None => nodes.list(&list).await.ok()?.items,
    };
    let allocatable: Vec<(String, Resources)> = found
        .iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            (name, Resources::from_map(n.status.as_ref().and_then(|s| s.allocatable.as_ref())))
        })
        .collect();
    if allocatable.is_empty() || allocatable.iter().any(|(_, a)| want.fits_in(a)) {
        return None;
    }
    let largest = allocatable
        .iter()
        .max_by(|a, b| (a.1.cpus, a.1.memory).partial_cmp(&(b.1.cpus, b.1.memory)).unwrap())
        .expect("not empty");
    let which = match (&named, allocatable.len()) {
        (Some(name), _) => format!("node {name} (node_name)"),
        (None, 1) => format!("the cluster's one node, {}", largest.0),
        (None, n) => format!("{n} nodes; the largest, {},", largest.0),
    };
    Some(SandboxError::NoRoom {
        message: format!(
            "no node can fit {want}: {which} allocates {} (lower the environment's limits, or the requests in [kubernetes])",
            largest.1
        ),
    })
}

/// The error of a pod that found no room within `within`.
pub(super) fn timed_out(pod: &Pod, within: Duration, why: &NoRoom) -> SandboxError {
    SandboxError::NoRoom {
        message: format!(
            "no node had room for {} within {}s (room_timeout_secs in [kubernetes]): {}",
            Resources::requested_by(pod),
            within.as_secs(),
            why.says()
        ),
    }
}
