//! The fault matrix's rows on the cluster (docs/faults.md, ids `kube-*`): a
//! pod deleted or evicted mid-turn, a pod no node can take, pods that wait
//! for room, the run's gateway pod deleted, the API server down for a few
//! seconds, an image the cluster cannot pull. Each injects the fault on the
//! test cluster, checks the outcome and kind (and the retry) the row says,
//! that every record is complete on disk, that nothing of the run is left on
//! the cluster (pods, policies, Services, Secrets) and that no file of the
//! run holds a checks-only secret's value; then checks its row of the table.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use common::faults::{self, Row};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use reeval::RunReport;
use reeval::sandbox::kubernetes::kube;

use super::*;

/// A checks-only secret every row's eval reads in a check.
const SECRET: &str = "kube-fault-matrix-secret-3b9e17";

/// A runner on the test cluster (`kubernetes` as given), its run id known
/// beforehand so a fault finds the run's pods, `retries` infra retries,
/// `threads` attempts at once.
fn runner_for(
    tag: &str,
    kubernetes: KubernetesConfig,
    retries: u32,
    threads: usize,
) -> (reeval::Runner, String) {
    let env_file = common::env_file(tag, &[("REEVAL_T_KUBE_FAULT_SECRET", SECRET)]);
    let run_id = format!("{tag}-{}", std::process::id());
    let id = run_id.clone();
    let runner = common::runner_with(tag, |c| {
        c.settings.env_file = Some(env_file);
        c.settings.run_id = id;
        c.settings.backend = reeval::sandbox::BackendConfig::Kubernetes(Box::new(kubernetes));
        c.settings.infra_retries = retries;
        c.settings.test_threads = threads;
    });
    (runner, run_id)
}

fn env() -> Environment {
    Environment::new().secret_for_checks("REEVAL_T_KUBE_FAULT_SECRET")
}

const READS_SECRET: &str = "echo $REEVAL_T_KUBE_FAULT_SECRET >/dev/null";

/// The pods API of the test cluster's namespace, untyped.
pub(super) async fn pods() -> Api<DynamicObject> {
    let config = reeval::sandbox::kubernetes::kubeconfig_from(&cluster().unwrap()).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let pod = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
    Api::namespaced_with(client, "default", &pod)
}

/// The names of the run's pods whose name starts with `prefix`, once one runs.
async fn running_pods(run_id: &str, prefix: &str) -> Vec<String> {
    let api = pods().await;
    let list = ListParams::default().labels(&format!("dev.reeval.run={run_id}"));
    let began = Instant::now();
    loop {
        let found: Vec<String> = api
            .list(&list)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.data["status"]["phase"] == "Running")
            .filter_map(|p| p.metadata.name)
            .filter(|n| n.starts_with(prefix))
            .collect();
        if !found.is_empty() {
            return found;
        }
        assert!(began.elapsed() < Duration::from_secs(60), "no running pod of {run_id}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What of the run is left on the cluster: "nothing", or what.
pub(super) async fn left_on_the_cluster(run_id: &str) -> String {
    let left = backend().await.leftovers_of_run(run_id).await.expect("list");
    if left.is_empty() { "nothing".into() } else { left.join(", ") }
}

/// A row whose fault is injected on try 1 only: try 1 has `outcome` saying
/// `says`; `retried` says whether the runner tried again (and that try passed).
async fn row(
    report: &RunReport,
    id: &str,
    fault: &str,
    at: &str,
    outcome: Outcome,
    says: &str,
    retried: bool,
) {
    let first = report.records.iter().find(|r| r.try_ == 1).expect("try 1");
    let message = first.message.as_deref().unwrap_or("");
    assert_eq!(first.outcome, outcome, "{message}");
    assert!(message.contains(says), "the record says {says:?}: {message}");
    let tries = report.records.len();
    if retried {
        assert_eq!(tries, 2, "retried once: {:?}", messages(report));
        let second = report.records.iter().find(|r| r.try_ == 2).unwrap();
        assert_eq!(second.outcome, Outcome::Pass, "the retry passes: {:?}", second.message);
    } else {
        assert_eq!(tries, 1, "not retried: {:?}", messages(report));
    }
    faults::assert_complete_and_clean(report, Some(SECRET));
    let left = left_on_the_cluster(&report.run_id).await;
    assert_eq!(left, "nothing", "nothing of the run is left on the cluster");
    let (mut outcome, kind) = faults::outcome_of(first);
    match (retried, first.outcome) {
        (true, _) => outcome.push_str(", retried: pass"),
        (false, o) if o.is_infra() => outcome.push_str(", not retried"),
        _ => {}
    }
    faults::check_row(&Row { id, fault, at, outcome, kind, says, left });
}

fn messages(report: &RunReport) -> Vec<String> {
    report.records.iter().map(|r| format!("try {}: {:?}", r.try_, r.message)).collect()
}

/// An eval whose second turn works for 5 s while `fault` is done to its run
/// once, on try 1, 1.5 s into that turn; then a check reads the secret.
fn faulted_turn<F, Fut>(name: &'static str, run_id: String, fault: F) -> Eval
where
    F: Fn(String) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let once = Arc::new(AtomicBool::new(false));
    Eval::new(name, move |c| {
        let (run_id, fault, once) = (run_id.clone(), fault.clone(), once.clone());
        Box::pin(async move {
            // The sandbox and the harness's session started first (turn 1): the
            // fault meets a turn, not the start (on a busy node the session's
            // start can take longer than 1.5 s).
            c.send("true").await?;
            if !once.swap(true, Ordering::SeqCst) {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    fault(run_id).await;
                });
            }
            c.send("sleep 5; echo done > out.txt").await?;
            expect(c.exec(format!("cat out.txt; {READS_SECRET}")).await?).to_succeed()?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(90))
    .environment(env)
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_pod_deleted_mid_turn() {
    let Some(_cluster) = shared().await else { return };
    let (runner, run_id) = runner_for("kube-deleted", config(), 1, 2);
    let eval = faulted_turn("kube_pod_deleted", run_id, |run_id| async move {
        for name in running_pods(&run_id, "reeval-").await {
            pods().await.delete(&name, &DeleteParams::default().grace_period(0)).await.unwrap();
        }
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    row(
        &report,
        "kube-1-pod-deleted-turn",
        "the attempt's pod is deleted (grace 0)",
        "turn",
        Outcome::InfraError,
        "was removed (container gone) during turn 2",
        true,
    )
    .await;
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_pod_evicted_mid_turn() {
    let Some(_cluster) = shared().await else { return };
    let (runner, run_id) = runner_for("kube-evicted", config(), 1, 2);
    let eval = faulted_turn("kube_pod_evicted", run_id, |run_id| async move {
        for name in running_pods(&run_id, "reeval-").await {
            evict(&name).await;
        }
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    row(
        &report,
        "kube-2-pod-evicted-turn",
        "the attempt's pod is evicted (the Eviction API, as a node drain does)",
        "turn",
        Outcome::InfraError,
        "was removed (its pod is being deleted: deleted or evicted from outside) during turn 2",
        true,
    )
    .await;
}

/// Evicts pod `name` through the Eviction API (policy/v1beta1 on v1.20).
async fn evict(name: &str) {
    let config = reeval::sandbox::kubernetes::kubeconfig_from(&cluster().unwrap()).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let body = serde_json::json!({
        "apiVersion": "policy/v1beta1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"}
    });
    let request = http::Request::post(format!("/api/v1/namespaces/default/pods/{name}/eviction"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let _: serde_json::Value = client.request(request).await.expect("the eviction is accepted");
}

/// The test cluster's settings with requests equal to the limits (the default).
fn requests_as_limits() -> KubernetesConfig {
    KubernetesConfig { requests: BTreeMap::new(), ..config() }
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_pod_no_node_can_take() {
    let Some(_cluster) = shared().await else { return };
    // Retries allowed: a pod no node can take is never retried all the same.
    let (runner, _) = runner_for("kube-no-node", requests_as_limits(), 2, 2);
    let eval = Eval::new("kube_no_node", |c| {
        Box::pin(async move {
            c.exec(READS_SECRET).await?;
            Ok(())
        })
    })
    .environment(|| env().cpus(64.0).memory(4 << 30));
    let began = Instant::now();
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    assert!(began.elapsed() < Duration::from_secs(60), "at once: {:?}", began.elapsed());
    let r = &report.records[0];
    // It failed in its container phase: nothing ran in a pod.
    assert_eq!(phases(r), ["preflight", "image", "container", "teardown"]);
    row(
        &report,
        "kube-3-no-node-fits",
        "the environment asks more than any node has (64 CPUs on a 2-CPU node)",
        "container",
        Outcome::Config,
        "failed to place the sandbox: no node can fit 64 CPUs / 4 GiB: node reeval-node (node_name) allocates 2 CPUs",
        false,
    )
    .await;
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn pods_wait_for_room_on_a_full_node() {
    let Some(_cluster) = shared().await else { return };
    // Three attempts of 1.5 CPUs each at once on a 2-CPU node: one fits at a time.
    let (runner, _) = runner_for("kube-room", requests_as_limits(), 0, 3);
    let eval = Eval::new("kube_room", |c| {
        Box::pin(async move {
            c.send("sleep 2; echo done > out.txt").await?;
            expect(c.exec(format!("cat out.txt; {READS_SECRET}")).await?).to_succeed()?;
            Ok(())
        })
    })
    .trials(3)
    .environment(|| env().cpus(1.5).memory(256 << 20));
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let waited: Vec<String> = report
        .records
        .iter()
        .filter_map(|r| r.phases.iter().find(|p| p.phase == "container"))
        .map(|p| p.detail.clone())
        .filter(|d| d.contains("for room on the cluster"))
        .collect();
    assert!(!waited.is_empty(), "some attempt waited for room");
    let says = "for room on the cluster (OutOfcpu: Pod Node didn't have enough resource: cpu";
    assert!(waited.iter().all(|d| d.contains(says)), "{waited:?}");
    // One row for the three: each passed on its first try.
    for r in &report.records {
        assert_eq!((r.outcome, r.try_), (Outcome::Pass, 1), "{:?}", r.message);
    }
    faults::assert_complete_and_clean(&report, Some(SECRET));
    let left = left_on_the_cluster(&report.run_id).await;
    assert_eq!(left, "nothing");
    faults::check_row(&Row {
        id: "kube-4-no-room-yet",
        fault: "three attempts of 1.5 CPUs each at once on a 2-CPU node (its kubelet refuses the pods that do not fit: OutOfcpu)",
        at: "container",
        outcome: "pass".into(),
        kind: String::new(),
        says: "(container phase) waited …s for room on the cluster (OutOfcpu: Pod Node didn't have enough resource: cpu …)",
        left,
    });
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn an_image_the_cluster_cannot_pull() {
    let Some(_cluster) = shared().await else { return };
    // The node pulls what it lacks (IfNotPresent), and no registry is reachable from it.
    let pulls = KubernetesConfig { image_pull_policy: None, ..config() };
    let (runner, _) = runner_for("kube-pull", pulls, 2, 2);
    let eval = Eval::new("kube_unpullable", |c| {
        Box::pin(async move {
            c.exec(READS_SECRET).await?;
            Ok(())
        })
    })
    .environment(|| env().image(reeval::Image::from("reeval-test/not-anywhere:1")));
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    row(
        &report,
        "kube-7-image-unpullable",
        "the image is in no registry the node can pull from",
        "container",
        Outcome::InfraError,
        "failed to find image reeval-test/not-anywhere:1: the cluster cannot pull it (",
        false,
    )
    .await;
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn the_runs_gateway_pod_deleted_mid_turn() {
    let Some(_cluster) = shared().await else { return };
    let _turn = HOST_NETWORK_EGRESS.lock().await;
    let egress = KubernetesConfig {
        unisolated_egress: true,
        gateway_address: reeval::sandbox::GatewayAddress::PodIp,
        ..config()
    };
    let (runner, run_id) = runner_for("kube-gateway", egress, 1, 2);
    let once = Arc::new(AtomicBool::new(false));
    let eval = Eval::new("kube_gateway_deleted", move |c| {
        let (run_id, once) = (run_id.clone(), once.clone());
        Box::pin(async move {
            if !once.swap(true, Ordering::SeqCst) {
                tokio::spawn(async move {
                    // Once the attempt's own pod runs, its turn is under way.
                    let sandbox = |n: &String| !n.starts_with("reeval-gw-");
                    while !running_pods(&run_id, "reeval-").await.iter().any(sandbox) {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    for name in running_pods(&run_id, "reeval-gw-").await {
                        let now = DeleteParams::default().grace_period(0);
                        pods().await.delete(&name, &now).await.unwrap();
                    }
                });
            }
            // The gateway answers for a host off the allowlist: it is up.
            c.send("sleep 4; curl -s -m 10 http://refused.test/ > refused.txt").await?;
            expect(c.read_file("refused.txt").await?)
                .to_contain("reeval egress gateway: host refused.test")?;
            expect(c.exec(READS_SECRET).await?).to_succeed()?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(90))
    .environment(|| env().allow_egress("allowed.test"));
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    row(
        &report,
        "kube-5-gateway-pod-deleted",
        "the run's gateway pod is deleted (grace 0)",
        "turn",
        Outcome::InfraError,
        "lost its gateway (the run's gateway pod reeval-gw-",
        true,
    )
    .await;
}

/// The test cluster's directory (`scripts/kube.sh`'s `REEVAL_KUBE_DIR`): its kubeconfig's.
fn kube_dir() -> std::path::PathBuf {
    std::path::Path::new(&cluster().unwrap()).parent().unwrap().to_path_buf()
}

/// Kills the API server of `scripts/kube.sh` by its PID, waits `down`, and
/// starts it again (`scripts/kube.sh start` starts what is not running).
async fn restart_the_api_server(down: Duration) {
    let dir = kube_dir();
    // The pid file names the `unshare` it runs under; the server is its child.
    let pid = std::fs::read_to_string(dir.join("apiserver.pid")).expect("the API server's pid");
    let pid = pid.trim();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    let server = children.split_whitespace().next().expect("the API server under unshare");
    // SIGKILL, as a crash: every connection it held breaks at once (on SIGTERM it
    // would let the streams it serves finish).
    let status = std::process::Command::new("kill").args(["-9", server, pid]).status().unwrap();
    assert!(status.success(), "kill the API server");
    tokio::time::sleep(down).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kube.sh");
    let out = tokio::process::Command::new(script)
        .arg("start")
        .env("REEVAL_KUBE_DIR", &dir)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn the_api_server_down_for_a_few_seconds_mid_turn() {
    if cluster().is_none() {
        return;
    }
    // The cluster to itself: no other test's call meets the outage.
    let _alone = CLUSTER.write().await;
    let (runner, run_id) = runner_for("kube-apiserver", config(), 1, 2);
    let eval = faulted_turn("kube_api_down", run_id, |run_id| async move {
        let _ = run_id;
        restart_the_api_server(Duration::from_secs(3)).await;
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    row(
        &report,
        "kube-6-api-server-down",
        "the API server is down for about 8 s (killed by its PID with SIGKILL, started again) while a turn runs",
        "turn",
        Outcome::InfraError,
        "the exec connection closed without a status, so the command's outcome is unknown",
        true,
    )
    .await;
}
