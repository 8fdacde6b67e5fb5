//! Waiting for room on the cluster, against the fake API server: a pod its
//! node refuses for resources is created again until it fits, an
//! unschedulable one is left to the scheduler, a request no node could ever
//! fit fails at once, and a wait past `room_timeout_secs` fails naming the cause.

use std::time::Duration;

use super::*;
use crate::kubernetes::room::{Resources, quantity};

/// The pod as its node refused it at admission (a v1.20 kubelet's words).
fn refused() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "status": {"phase": "Failed", "reason": "OutOfcpu",
                      "message": "Pod Node didn't have enough resource: cpu, requested: 2000, used: 2000, capacity: 2000"}})
}

fn unschedulable() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                      "reason": "Unschedulable", "message": "0/3 nodes are available: 3 Insufficient cpu."}]}})
}

fn ready() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn gone() -> Value {
    json!({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "gone"})
}

/// Nodes allocating `cpu` and `memory` each.
fn nodes(allocatable: &[(&str, &str, &str)]) -> Value {
    let items: Vec<Value> = allocatable
        .iter()
        .map(|(name, cpu, memory)| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": memory}}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items})
}

/// A cluster whose pod reads go through `pod` (by how many pods were created so
/// far, and how many reads since), whose nodes are `nodes`, and whose execs succeed.
fn cluster_with(
    pod: impl Fn(usize, usize) -> Value + Send + Sync + 'static,
    nodes: Value,
) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    let counts = Mutex::new((0usize, 0usize, false));
    move |r: &Seen| {
        if r.target.contains("/exec?") {
            return Reply::Exec(Session { stdout: vec![], stderr: vec![], status: exited(0) });
        }
        let mut c = counts.lock().unwrap();
        match (r.method.as_str(), r.target.contains("/nodes")) {
            // One node by name, or the list.
            ("GET", true) => match r.target.split("/nodes/").nth(1) {
                Some(name) => {
                    let items = nodes["items"].as_array().into_iter().flatten();
                    let found = items.into_iter().find(|n| n["metadata"]["name"] == name);
                    found.map_or_else(|| Reply::Json(404, gone()), |n| Reply::Json(200, n.clone()))
                }
                None => Reply::Json(200, nodes.clone()),
            },
            ("POST", _) => {
                if r.target.contains("/pods") {
                    *c = (c.0 + 1, 0, false);
                }
                Reply::Json(201, r.body.clone())
            }
            ("DELETE", _) => {
                c.2 = true;
                Reply::Json(200, json!({"kind": "Status", "status": "Success"}))
            }
            // A deleted pod is gone until it is created again.
            (_, _) if c.2 => Reply::Json(404, gone()),
            _ => {
                c.1 += 1;
                Reply::Json(200, pod(c.0, c.1))
            }
        }
    }
}

fn asking(cpu: i64) -> SandboxSpec {
    SandboxSpec {
        limits: Limits { memory_bytes: 4 << 30, nano_cpus: cpu * 1_000_000_000, pids: 256 },
        ..spec()
    }
}

#[tokio::test]
async fn a_pod_its_node_refused_for_resources_is_created_again_until_it_fits() {
    // Refused twice, then the third pod runs.
    let api = FakeApi::start(cluster_with(
        |created, _| if created < 3 { refused() } else { ready() },
        nodes(&[("n1", "2", "8Gi")]),
    ))
    .await;
    let sandbox = api.backend(KubernetesConfig::default()).create(&asking(2)).await.unwrap();
    sandbox.start().await.expect("it waits for room, then starts");
    let creates = api.calls().iter().filter(|c| *c == "POST /api/v1/namespaces/evals/pods").count();
    assert_eq!(creates, 3, "{:?}", api.calls());
    let deletes = api.calls().iter().filter(|c| c.starts_with("DELETE /api/v1/")).count();
    assert_eq!(deletes, 2, "each refused pod deleted before it is created again");
    let note = sandbox.start_note().expect("the start says it waited");
    assert!(note.starts_with("waited ") && note.contains("for room on the cluster"), "{note}");
    assert!(note.contains("OutOfcpu: Pod Node didn't have enough resource: cpu"), "{note}");
}

#[tokio::test]
async fn an_unschedulable_pod_is_left_to_the_scheduler_until_it_runs() {
    let api = FakeApi::start(cluster_with(
        |_, reads| if reads < 4 { unschedulable() } else { ready() },
        nodes(&[("n1", "2", "8Gi"), ("n2", "4", "16Gi")]),
    ))
    .await;
    let sandbox = api.backend(KubernetesConfig::default()).create(&asking(2)).await.unwrap();
    sandbox.start().await.expect("it waits for room, then starts");
    let calls = api.calls();
    assert_eq!(calls.iter().filter(|c| c.contains("/pods") && c.starts_with("POST")).count(), 1);
    assert!(!calls.iter().any(|c| c.starts_with("DELETE")), "{calls:?}");
    let note = sandbox.start_note().expect("the start says it waited");
    assert!(note.contains("Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."), "{note}");
}

#[tokio::test]
async fn a_request_no_node_can_fit_fails_at_once_naming_it() {
    let api = FakeApi::start(cluster_with(
        |_, _| refused(),
        nodes(&[("n1", "2", "8Gi"), ("n2", "3500m", "16Gi")]),
    ))
    .await;
    let sandbox = api.backend(KubernetesConfig::default()).create(&asking(4)).await.unwrap();
    let began = std::time::Instant::now();
    let e = sandbox.start().await.unwrap_err();
    assert!(matches!(e, SandboxError::NoRoom { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "failed to place the sandbox: no node can fit 4 CPUs / 4 GiB: 2 nodes; the largest, n2, allocates 3.5 CPUs / 16 GiB (lower the environment's limits, or the requests in [kubernetes])"
    );
    assert!(began.elapsed() < Duration::from_secs(5), "at once: {:?}", began.elapsed());
    // A named node is the only candidate.
    let api = FakeApi::start(cluster_with(|_, _| refused(), nodes(&[("n9", "1", "2Gi")]))).await;
    let pinned = KubernetesConfig { node_name: Some("n9".into()), ..Default::default() };
    let e = api.backend(pinned).create(&asking(2)).await.unwrap().start().await.unwrap_err();
    assert!(e.to_string().contains("no node can fit 2 CPUs / 4 GiB: node n9 (node_name)"), "{e}");
    assert!(api.calls().contains(&"GET /api/v1/nodes/n9".to_string()), "{:?}", api.calls());
}

#[tokio::test]
async fn a_wait_past_the_room_timeout_fails_naming_the_cause() {
    let api = FakeApi::start(cluster_with(|_, _| refused(), nodes(&[("n1", "2", "8Gi")]))).await;
    let config = KubernetesConfig { room_timeout_secs: Some(1), ..Default::default() };
    let sandbox = api.backend(config).create(&asking(2)).await.unwrap();
    let e = sandbox.start().await.unwrap_err();
    assert!(matches!(e, SandboxError::NoRoom { .. }), "{e:?}");
    let e = e.to_string();
    assert!(
        e.starts_with(
            "failed to place the sandbox: no node had room for 2 CPUs / 4 GiB within 1s (room_timeout_secs in [kubernetes]): OutOfcpu: Pod Node didn't have enough resource"
        ),
        "{e}"
    );
}

#[tokio::test]
async fn nodes_that_cannot_be_read_leave_the_pod_waiting() {
    // RBAC denies reading nodes: no verdict on the request, the wait goes on.
    let answer =
        cluster_with(|created, _| if created < 2 { refused() } else { ready() }, json!({}));
    let api = FakeApi::start(move |r: &Seen| {
        if r.target.contains("/nodes") {
            return Reply::Json(403, json!({"kind": "Status", "status": "Failure", "code": 403, "reason": "Forbidden", "message": "nodes is forbidden"}));
        }
        answer(r)
    })
    .await;
    let sandbox = api.backend(KubernetesConfig::default()).create(&asking(64)).await.unwrap();
    sandbox.start().await.expect("it waited and started");
}

#[test]
fn quantities_and_resources_read_as_kubernetes_writes_them() {
    assert_eq!(quantity("2"), Some(2.0));
    assert_eq!(quantity("500m"), Some(0.5));
    assert_eq!(quantity("4Gi"), Some(4.0 * 1024.0 * 1024.0 * 1024.0));
    assert_eq!(quantity("24597460Ki"), Some(24_597_460.0 * 1024.0));
    assert_eq!(quantity("1.5G"), Some(1.5e9));
    assert_eq!(quantity("1e3"), Some(1000.0));
    assert_eq!(quantity("lots"), None);
    let r = |cpus: f64, memory: f64| Resources { cpus, memory }.to_string();
    assert_eq!(r(2.0, 4.0 * f64::from(1u32 << 30)), "2 CPUs / 4 GiB");
    assert_eq!(r(1.0, 1.5 * f64::from(1u32 << 30)), "1 CPU / 1.5 GiB");
    assert_eq!(r(0.25, 256.0 * f64::from(1u32 << 20)), "0.25 CPU / 256 MiB");
}
