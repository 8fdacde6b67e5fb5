//! The Kubernetes backend against a real API server and kubelet (v1.20,
//! dockershim on a second dockerd), which `scripts/kube.sh start` brings up:
//! the lifecycle tests the backend can honour, exec over the real v4 exec
//! protocol, preflight's RBAC check with a user that has no role, the fault
//! rows (`faults.rs`), the quickstart suite (`quickstart.rs`), a sandbox's
//! services (`services.rs`), a Harbor task with compose sidecars and a
//! shared volume (`harbor.rs`), an image whose own user is not root
//! (`image_user.rs`), and built images and egress (`images_egress.rs`).
//!
//! Skipped unless `REEVAL_TEST_KUBECONFIG` is set (`eval "$(scripts/kube.sh
//! start)"`); `REEVAL_REQUIRE_KUBE=1` makes that a failure. `KUBECONFIG` must
//! name the same file, so these tests never run against another cluster.
//! Run with `cargo test --features kubernetes --test kubernetes`.

mod common;
#[path = "kubernetes/faults.rs"]
mod faults;
#[path = "kubernetes/harbor.rs"]
mod harbor;
#[path = "kubernetes/image_user.rs"]
mod image_user;
#[path = "kubernetes/images_egress.rs"]
mod images_egress;
#[path = "kubernetes/load.rs"]
mod load;
#[path = "kubernetes/quickstart.rs"]
mod quickstart;
/// The quickstart suite's evals, registered in this binary (its `main` unused).
#[path = "../examples/quickstart.rs"]
#[allow(dead_code)]
mod quickstart_suite;
#[path = "kubernetes/services.rs"]
mod services;
#[path = "../reeval-gateway/tests/common/mod.rs"]
#[allow(unused_imports)]
mod upstreams;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reeval::prelude::*;
use reeval::sandbox::KubernetesConfig;
use reeval::sandbox::kubernetes::KubeBackend;
use reeval::sandbox::{ExecRequest, Limits, NetworkSpec, SandboxSpec, archive};
use reeval::{Backend, Eval, FailKind, Outcome, Record, TurnStatus};

/// The test cluster's pods share the node's network, so two sandboxes' relays
/// would share 127.0.0.1:3128: a runner lets one such pod live at a time, and
/// the tests that run egress evals (each with a runner of its own) take turns.
static HOST_NETWORK_EGRESS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The test cluster's kubeconfig, or `None` (and a note) when it is not up.
fn cluster() -> Option<String> {
    let Some(path) = std::env::var("REEVAL_TEST_KUBECONFIG").ok().filter(|p| !p.is_empty()) else {
        if std::env::var("REEVAL_REQUIRE_KUBE").is_ok_and(|v| v == "1") {
            panic!(
                "REEVAL_REQUIRE_KUBE=1 but REEVAL_TEST_KUBECONFIG is not set: run eval \"$(scripts/kube.sh start)\""
            );
        }
        eprintln!(
            "skipping: no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
        );
        return None;
    };
    assert_eq!(
        std::env::var("KUBECONFIG").ok().as_deref(),
        Some(path.as_str()),
        "run with KUBECONFIG=$REEVAL_TEST_KUBECONFIG, so that the backend finds the test cluster and no other"
    );
    Some(path)
}

/// What the test cluster needs: no scheduler (the node is named), no CNI (the
/// node's network; pods are NOT isolated there), small requests, images already on the node.
fn config() -> KubernetesConfig {
    KubernetesConfig {
        namespace: Some("default".into()),
        node_name: Some(
            std::env::var("REEVAL_TEST_KUBE_NODE").unwrap_or_else(|_| "reeval-node".into()),
        ),
        host_network: true,
        image_pull_policy: Some("Never".into()),
        requests: BTreeMap::from([("cpu".into(), "10m".into()), ("memory".into(), "32Mi".into())]),
        ready_timeout_secs: Some(120),
        ..Default::default()
    }
}

/// Tests share the cluster; one that takes its API server down for a moment
/// (a row of the fault matrix) has it to itself.
static CLUSTER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The test cluster (see [`cluster`]) shared with the other tests, or `None`.
async fn shared() -> Option<tokio::sync::RwLockReadGuard<'static, ()>> {
    cluster()?;
    Some(CLUSTER.read().await)
}

async fn backend() -> KubeBackend {
    KubeBackend::connect(config()).await.expect("the test cluster's kubeconfig")
}

fn runner(tag: &str) -> reeval::Runner {
    common::runner_with(tag, |c| {
        c.settings.backend = reeval::sandbox::BackendConfig::Kubernetes(Box::new(config()))
    })
}

fn phases(r: &Record) -> Vec<&str> {
    r.phases.iter().map(|p| p.phase.as_str()).collect()
}

async fn no_pod_left(run_id: &str) {
    let left = backend().await.pods_of_run(run_id).await.expect("list pods");
    assert!(left.is_empty(), "pods left behind: {left:?}");
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn phases_run_in_order_and_a_turn_has_its_diff() {
    let Some(_cluster) = shared().await else { return };
    let eval = Eval::new("kube_phase_order", |c| {
        Box::pin(async move {
            c.send("echo hi > out.txt").await?;
            expect(c.exec("cat out.txt").await?).to_succeed()?;
            Ok(())
        })
    })
    .environment(|| Environment::new().file("given.txt", "x").rules("be nice").setup("echo setup"));
    let report = runner("kube-order").run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(
        phases(r),
        [
            "preflight",
            "image",
            "container",
            "env",
            "files",
            "setup",
            "snapshot",
            "harness",
            "turn",
            "check",
            "teardown"
        ]
    );
    assert!(r.phases.windows(2).all(|w| w[0].start_ms <= w[1].start_ms), "{:?}", r.phases);
    assert_eq!(r.turns[0].diff.paths(), ["out.txt"]);
    assert_eq!(r.final_diff.as_ref().expect("final diff").paths(), ["out.txt"]);
    assert_eq!(r.checks[0].stdout_tail, "hi\n");
    assert!(r.workspace_collected);
    no_pod_left(&report.run_id).await;
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_turn_that_overruns_the_budget_is_aborted_and_its_work_kept() {
    let Some(_cluster) = shared().await else { return };
    let eval = Eval::new("kube_overrun", |c| {
        Box::pin(async move {
            c.send("echo partial > progress.txt; sleep 60; echo never > done.txt").await?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(3));
    let report = runner("kube-abort").run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Timeout), "{:?}", r.message);
    assert_eq!(r.turns[0].status, TurnStatus::Aborted);
    assert_eq!(r.turns[0].diff.paths(), ["progress.txt"]);
    assert!(
        r.turns[0].duration_ms < 10_000,
        "stopped within the grace: {}",
        r.turns[0].duration_ms
    );
    assert!(r.workspace_collected);
    assert_eq!(r.final_diff.as_ref().unwrap().paths(), ["progress.txt"]);
    no_pod_left(&report.run_id).await;
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn teardown_after_a_panic_leaves_no_pod() {
    let Some(_cluster) = shared().await else { return };
    let eval = Eval::new("kube_panics", |c| {
        Box::pin(async move {
            c.exec("touch made.txt").await?;
            panic!("boom in a pod");
        })
    });
    let report = runner("kube-panic").run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Assertion));
    assert!(r.message.as_deref().unwrap_or("").contains("boom in a pod"), "{:?}", r.message);
    assert_eq!(phases(r).last(), Some(&"teardown"));
    assert!(r.container.is_some(), "a pod was started");
    assert!(r.workspace_collected);
    no_pod_left(&report.run_id).await;
}

const CHECK_SECRET: &str = "sk-kube-check-5e4d3c2b1a-never-in-argv";

/// A checks-only secret reaches the check's environment only: not the exec
/// request (the API server's URL and logs), not `/proc/*/cmdline`, which a
/// process the agent left running reads while checks run, and not the agent.
#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_checks_only_secret_is_seen_by_the_check_and_by_nothing_the_agent_can_read() {
    let Some(_cluster) = shared().await else { return };
    let eval = Eval::new("kube_check_secret", |c| {
        Box::pin(async move {
            c.send("env > agent_env.txt").await?;
            let agent_env = c.read_file("agent_env.txt").await?;
            expect(agent_env.as_str()).to_contain("GREETING=hi")?;
            expect(agent_env.as_str()).not().to_contain("REEVAL_T_CHECK_SECRET")?;
            // A daemon of the agent's reads every command line and environment it can.
            c.send(
                "nohup sh -c 'while true; do for p in /proc/[0-9]*; do tr \"\\000\" \" \" < $p/cmdline; echo; cat $p/environ; done >> /tmp/seen.txt 2>/dev/null; sleep 0.05; done' >/dev/null 2>&1 &",
            )
            .await?;
            // Checks that hold the secret for a while: one plain, one with stdin (a
            // pipeline, so the prologue's shell lives beside the command).
            let digest = c.exec("sleep 1.5; printf %s \"$REEVAL_T_CHECK_SECRET\" | sha256sum | cut -c1-64").await?;
            expect(digest.stdout.trim()).to_equal(sha256_hex(CHECK_SECRET).as_str())?;
            let piped = Command::new("sh")
                .arg("-c")
                .arg("cat >/dev/null; sleep 1.5; test -n \"$REEVAL_T_CHECK_SECRET\"")
                .stdin(vec![b'x'; 1000]);
            expect(c.exec(piped).await?).to_succeed()?;
            let seen = c.exec("cat /tmp/seen.txt").await?.stdout;
            // It saw the checks' command lines (which name the variable) and environments it may read.
            expect(seen.as_str()).to_contain("sleep 1.5")?;
            expect(seen.as_str()).to_contain("GREETING=hi")?;
            expect(seen.as_str()).not().to_contain("REEVAL_T_CHECK_SECRET=")?;
            expect(seen.as_str()).not().to_contain(CHECK_SECRET)?;
            expect(seen.as_str()).not().to_contain("[redacted]")?;
            Ok(())
        })
    })
    .environment(|| {
        Environment::new().secret_for_checks("REEVAL_T_CHECK_SECRET").env("GREETING", "hi")
    });
    let file = common::env_file("kube-secret", &[("REEVAL_T_CHECK_SECRET", CHECK_SECRET)]);
    let records = common::temp_dir("kube-secret-runs");
    let runner = common::runner_with("kube-secret", |c| {
        c.settings.backend = reeval::sandbox::BackendConfig::Kubernetes(Box::new(config()));
        c.settings.env_file = Some(file);
        c.settings.record_dir = records.clone();
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let written = common::all_files_text(&records);
    assert!(
        !written.contains(CHECK_SECRET),
        "the secret reached a file under the record directory"
    );
    no_pod_left(&report.run_id).await;
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn exec_and_files_over_the_real_exec_protocol() {
    let Some(_cluster) = shared().await else { return };
    let backend = backend().await;
    let spec = SandboxSpec {
        image: "reeval/base:latest".into(),
        labels: BTreeMap::from([("dev.reeval.run".to_string(), "kube-direct".to_string())]),
        workdir: "/workspace".into(),
        limits: Limits { memory_bytes: 256 << 20, nano_cpus: 500_000_000, pids: 256 },
        network: NetworkSpec::None,
        ..Default::default()
    };
    let sandbox = backend.create(&spec).await.expect("create");
    let result = async {
        sandbox.start().await.expect("ready");
        // Exit codes and both streams, from the Status on channel 3.
        let cmd = Command::new("sh").arg("-c").arg("echo out; echo err >&2; exit 3");
        let out = sandbox.exec(ExecRequest::plain(&cmd, &[])).await.unwrap();
        assert_eq!(
            (out.exit_code, out.stdout.as_str(), out.stderr.as_str()),
            (3, "out\n", "err\n")
        );
        // Stdin of several 1 MiB chunks, length-delimited: no EOF needed on v4.
        let input = vec![b'x'; 3 * (1 << 20) + 7];
        let cmd = Command::new("wc").arg("-c").stdin(input.clone());
        let out = sandbox.exec(ExecRequest::plain(&cmd, &[])).await.unwrap();
        assert_eq!(out.stdout.trim(), input.len().to_string());
        // The agent's uid, directory and environment, which the exec API has no fields for.
        let cmd = Command::new("sh")
            .arg("-c")
            .arg("echo $(id -u) $PWD $GREETING")
            .user("1000:1000")
            .workdir("/tmp");
        let env = [("GREETING".to_string(), "hi".to_string())];
        let out = sandbox.exec(ExecRequest::plain(&cmd, &env)).await.unwrap();
        assert_eq!(out.stdout, "1000 /tmp hi\n");
        // A large output is captured bounded, its size counted.
        let cmd = Command::new("sh").arg("-c").arg("head -c 5000000 /dev/zero | tr '\\0' a");
        let out = sandbox.exec(ExecRequest::plain(&cmd, &[])).await.unwrap();
        assert_eq!(out.stdout_bytes, 5_000_000);
        // Files in and out as tar over exec.
        let tar = archive::tar_owned_by(
            &[reeval::sandbox::FileToWrite::new("a.txt", b"hello\n", 0o640)],
            1000,
        )
        .unwrap();
        sandbox.upload("/workspace", tar).await.unwrap();
        let cmd = Command::new("stat").arg("-c").arg("%u %a").arg("/workspace/a.txt");
        assert_eq!(sandbox.exec(ExecRequest::plain(&cmd, &[])).await.unwrap().stdout, "1000 640\n");
        let down = sandbox.download("/workspace/a.txt", 1 << 20).await.unwrap();
        assert_eq!(archive::single_file(&down, "a.txt").unwrap(), b"hello\n");
        assert!(matches!(
            sandbox.download("/workspace/none", 1 << 20).await,
            Err(reeval::SandboxError::NotFound { .. })
        ));
        assert!(matches!(
            sandbox.upload("/nowhere", archive::tar_of(&[]).unwrap()).await,
            Err(reeval::SandboxError::NotFound { .. })
        ));
    };
    // Teardown whatever the assertions did.
    let outcome = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(result)).await;
    sandbox.destroy().await.expect("destroy");
    assert!(backend.pods_of_run("kube-direct").await.unwrap().is_empty());
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    let _: Arc<dyn reeval::Sandbox> = sandbox;
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn preflight_names_what_rbac_does_not_allow() {
    let Some(_cluster) = shared().await else { return };
    let admin = backend().await.preflight().await;
    assert!(admin.missing.is_empty(), "{admin:?}");
    let path =
        std::env::var("REEVAL_TEST_KUBECONFIG_LIMITED").expect("scripts/kube.sh env sets it");
    let kubeconfig =
        reeval::sandbox::kubernetes::kubeconfig_from(&path).await.expect("limited kubeconfig");
    let limited = KubeBackend::with_config(kubeconfig, config()).unwrap().preflight().await;
    assert_eq!(limited.missing.len(), 1, "{limited:?}");
    let m = &limited.missing[0];
    for what in [
        "create pods",
        "create pods/exec",
        "create pods/portforward",
        "create networkpolicies",
        "create secrets",
        "create services",
    ] {
        assert!(m.contains(what), "{what} in {m}");
    }
}
