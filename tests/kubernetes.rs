//! The Kubernetes backend against a real API server and kubelet (v1.20,
//! dockershim on a second dockerd), which `scripts/kube.sh start` brings up:
//! the lifecycle tests the backend can honour, exec over the real v4 exec
//! protocol, preflight's RBAC check with a user that has no role, the fault
//! rows (`faults.rs`), the quickstart suite (`quickstart.rs`), a sandbox's
//! services (`services.rs`), a Harbor task with compose sidecars and a
//! shared volume (`harbor.rs`), and an image whose own user is not root
//! (`image_user.rs`).
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

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn built_images_and_egress_stop_the_run_in_preflight_saying_what_to_do() {
    let Some(_cluster) = shared().await else { return };
    let built = Eval::new("kube_built_image", |c| {
        Box::pin(async move { c.exec("true").await.map(|_| ()) })
    })
    .environment(|| {
        Environment::new().image(reeval::Image::install("reeval/base:latest", ["true"]))
    });
    let egress =
        Eval::new("kube_egress", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .environment(|| Environment::new().allow_egress("pypi.org"));
    let e = runner("kube-preflight").run(vec![built, egress]).await.unwrap_err();
    assert_eq!(e.missing.len(), 2, "{e}");
    assert!(
        e.missing[0].contains("kube_built_image") && e.missing[0].contains("Image::from"),
        "{e}"
    );
    // Egress needs isolation the host network cannot give: refused unless a test cluster says so.
    assert!(
        e.missing[1].contains("kube_egress") && e.missing[1].contains("unisolated_egress"),
        "{e}"
    );
}

/// A port on 127.0.0.1 of the test cluster's network namespace (where its
/// pods live, on the node's network) forwarded to `to` on this host's
/// loopback: socat in the netns to a unix socket, socat here from it to `to`.
/// So an upstream of the test's is reachable from the gateway pod. Ended on drop.
struct NetnsBridge {
    addr: std::net::SocketAddr,
    children: Vec<std::process::Child>,
    socket: std::path::PathBuf,
}

impl NetnsBridge {
    fn to(to: std::net::SocketAddr) -> Self {
        // A port free here is almost surely free in the netns, which has only lo.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let socket = common::temp_dir("kube-bridge").join("upstream.sock");
        let spawn = |argv: &[String]| {
            std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .spawn()
                .expect("socat (apt-get install socat)")
        };
        let host = spawn(&[
            "socat".into(),
            format!("UNIX-LISTEN:{},fork", socket.display()),
            format!("TCP:{to}"),
        ]);
        let netns = spawn(&[
            "ip".into(),
            "netns".into(),
            "exec".into(),
            "reeval-kube".into(),
            "socat".into(),
            format!("TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr"),
            format!("UNIX-CONNECT:{}", socket.display()),
        ]);
        let bridge = Self {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            children: vec![host, netns],
            socket,
        };
        let listening = || {
            std::process::Command::new("ip")
                .args(["netns", "exec", "reeval-kube", "ss", "-Hltn", &format!("sport = :{port}")])
                .output()
                .is_ok_and(|o| !o.stdout.is_empty())
        };
        let began = std::time::Instant::now();
        while !(listening() && bridge.socket.exists()) {
            assert!(began.elapsed() < Duration::from_secs(10), "the bridge did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        bridge
    }
}

impl Drop for NetnsBridge {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The test cluster's pods share the node's network, so two sandboxes' relays
/// would share 127.0.0.1:3128: a runner lets one such pod live at a time, and
/// the tests that run egress evals (each with a runner of its own) take turns.
static HOST_NETWORK_EGRESS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const GATEWAY_KEY: &str = "sk-ant-kube-REAL-0123456789abcdef";
const GATEWAY_PLACEHOLDER: &str = "reeval-placeholder-ANTHROPIC_API_KEY";

/// Egress through the run's gateway pod: an allowed host reached, a brokered
/// placeholder swapped for the real key on the bound host only (TLS
/// intercepted with the run's CA), a host off the allowlist refused, every
/// request in the record, and the gateway's pod, Services and Secret gone
/// after the run. The test cluster's pods share the node's network, so
/// isolation is not enforced there (`unisolated_egress`): the gateway phase says so.
#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn egress_goes_through_the_runs_gateway_pod_with_a_brokered_key() {
    let Some(_cluster) = shared().await else { return };
    let _turn = HOST_NETWORK_EGRESS.lock().await;
    use reeval::egress::{Broker, EgressSettings};
    use upstreams::{Behaviour, TestPki, upstream};
    let pki = TestPki::new();
    let plain = upstream(None, Behaviour::Echo).await;
    let api = upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::Echo).await;
    let (plain_in_netns, api_in_netns) = (NetnsBridge::to(plain.addr), NetnsBridge::to(api.addr));
    let agent = r#"
        curl -s -m 10 http://plain.test/plain -H "x-api-key: $ANTHROPIC_API_KEY" > plain.txt
        curl -s -m 10 https://api.anthropic.com/v1/messages -H "x-api-key: $ANTHROPIC_API_KEY" > api.txt
        curl -s -m 10 http://refused.test/refused > refused.txt
        env > /tmp/agent-env.txt
        true
    "#;
    // `server: 'https://127.0.0.1:PORT'` of the test kubeconfig.
    let kubeconfig = std::fs::read_to_string(cluster().unwrap()).unwrap();
    let api_server = kubeconfig
        .split("https://")
        .nth(1)
        .and_then(|rest| rest.split(['\'', '"', ' ', ',', '}']).next())
        .expect("the API server in the kubeconfig")
        .to_string();
    let eval = Eval::new("kube_egress_gateway", move |c| {
        let api_server = api_server.clone();
        Box::pin(async move {
            c.send(agent).await?;
            expect(c.read_file("plain.txt").await?).to_equal("hello from upstream")?;
            expect(c.read_file("api.txt").await?).to_equal("hello from upstream")?;
            expect(c.read_file("refused.txt").await?)
                .to_contain("not on this sandbox's allowlist")?;
            let env = c.read_file("/tmp/agent-env.txt").await?;
            expect(env.as_str()).to_contain(GATEWAY_PLACEHOLDER)?;
            expect(env.as_str()).not().to_contain(GATEWAY_KEY)?;
            // The relay (the pod's main process) probed the API server, the node's kubelet
            // (its port from the node's status), outside addresses and DNS.
            let relay = c.exec("tr '\\0' ' ' < /proc/1/cmdline").await?.stdout;
            for probe in [api_server.as_str(), ":20250", "1.1.1.1:443", "8.8.8.8:53", "--dns"] {
                expect(relay.as_str()).to_contain(probe)?;
            }
            Ok(())
        })
    })
    .environment(|| {
        Environment::new()
            .secret("ANTHROPIC_API_KEY")
            .broker("ANTHROPIC_API_KEY", Broker::header("api.anthropic.com", "x-api-key"))
            .allow_egress("api.anthropic.com")
            .allow_egress("plain.test")
    });
    let file = common::env_file("kube-egress", &[("ANTHROPIC_API_KEY", GATEWAY_KEY)]);
    let records = common::temp_dir("kube-egress-runs");
    let egress = EgressSettings {
        extra_roots_pem: vec![pki.ca_pem.clone()],
        resolve: vec![
            ("plain.test".to_string(), plain_in_netns.addr),
            ("refused.test".to_string(), plain_in_netns.addr),
            ("api.anthropic.com".to_string(), api_in_netns.addr),
        ],
        ..EgressSettings::default()
    };
    let runner = common::runner_with("kube-egress", |c| {
        c.settings.backend =
            reeval::sandbox::BackendConfig::Kubernetes(Box::new(KubernetesConfig {
                unisolated_egress: true,
                // No kube-proxy here: ClusterIPs do not route, the pod's IP does.
                gateway_address: reeval::sandbox::GatewayAddress::PodIp,
                ..config()
            }));
        c.settings.env_file = Some(file);
        c.settings.record_dir = records.clone();
        c.egress = egress;
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}\negress: {:#?}", r.message, r.egress);
    let gateway = r.phases.iter().find(|p| p.phase == "gateway").expect("a gateway phase");
    let detail = &gateway.detail;
    assert!(detail.contains("gateway pod") && detail.contains("NOT enforced"), "{detail}");

    // The real key went to the bound host only; the placeholder elsewhere.
    let header = |seen: &[upstreams::Seen], name: &str| {
        seen.iter().find_map(|s| s.headers.get(name)?.to_str().ok().map(str::to_string))
    };
    assert_eq!(header(&api.seen(), "x-api-key").as_deref(), Some(GATEWAY_KEY));
    assert_eq!(header(&plain.seen(), "x-api-key").as_deref(), Some(GATEWAY_PLACEHOLDER));
    assert!(plain.seen().iter().all(|s| !s.uri.contains("refused")), "a refusal is never dialled");

    // Every request is in the record, the refusal too.
    let route = |host: &str| {
        r.egress.iter().find(|e| e.host == host).map(|e| (e.route.as_str(), e.allowed, e.status))
    };
    assert_eq!(route("plain.test"), Some(("http", true, 200)));
    assert_eq!(route("api.anthropic.com"), Some(("intercept", true, 200)));
    assert_eq!(route("refused.test"), Some(("http", false, 403)));
    let written = common::all_files_text(&records);
    assert!(!written.contains(GATEWAY_KEY), "the key reached a file the run wrote");

    // The gateway pod, its Secret and the attempt's Service went with the run.
    let left = backend().await.leftovers_of_run(&report.run_id).await.expect("list");
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Images reeval builds go to the registry the cluster pulls from: built on
/// the local engine, pushed (the gateway's image too), pulled by the node
/// (which has neither image of its own), and not pushed again when the
/// registry has the tag. `scripts/kube.sh start` runs the registry.
#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn built_images_are_pushed_to_the_registry_and_pulled_by_the_node() {
    let Some(_cluster) = shared().await else { return };
    let _turn = HOST_NETWORK_EGRESS.lock().await;
    let registry = std::env::var("REEVAL_TEST_KUBE_REGISTRY").expect("scripts/kube.sh env sets it");
    // A step whose output is in the image only: the pod can only have it by pulling that image.
    let stamp = format!("built-{}", std::process::id());
    let install =
        reeval::Image::install("reeval/base:latest", [format!("echo {stamp} > /built.txt")]);
    let built = {
        let (stamp, install) = (stamp.clone(), install.clone());
        move || {
            let stamp = stamp.clone();
            Eval::new("kube_built_image_pushed", move |c| {
                let stamp = stamp.clone();
                Box::pin(async move {
                    expect(c.exec("cat /built.txt").await?.stdout)
                        .to_equal(format!("{stamp}\n"))?;
                    Ok(())
                })
            })
            .environment({
                let install = install.clone();
                move || Environment::new().image(install.clone())
            })
        }
    };
    // An eval with egress: its run's gateway pod runs from the pushed gateway image.
    let egress = Eval::new("kube_gateway_image_pushed", |c| {
        Box::pin(async move {
            // The gateway answers (checks have no egress of their own): it is up, from that image.
            let refused = c.exec("curl -s -m 10 http://refused.test/").await?;
            expect(refused.stdout).to_contain("reeval egress gateway: host refused.test")?;
            Ok(())
        })
    })
    .environment(|| Environment::new().allow_egress("allowed.test"));
    let with_registry = |c: &mut reeval::RunConfig| {
        c.settings.backend =
            reeval::sandbox::BackendConfig::Kubernetes(Box::new(KubernetesConfig {
                registry: Some(registry.clone()),
                // The node pulls what it does not have.
                image_pull_policy: None,
                unisolated_egress: true,
                gateway_address: reeval::sandbox::GatewayAddress::PodIp,
                ..config()
            }))
    };
    let report = common::runner_with("kube-registry", with_registry)
        .run(vec![built(), egress])
        .await
        .expect("preflight passes with a registry");
    let image_detail = |r: &Record| {
        r.phases.iter().find(|p| p.phase == "image").map(|p| p.detail.clone()).unwrap_or_default()
    };
    let find = |records: &[Record], name: &str| {
        records.iter().find(|r| r.eval == name).cloned().expect("a record")
    };
    let r = find(&report.records, "kube_built_image_pushed");
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let detail = image_detail(&r);
    assert!(detail.contains(&format!("pushed in {registry} as {registry}/")), "{detail}");
    let g = find(&report.records, "kube_gateway_image_pushed");
    assert_eq!(g.outcome, Outcome::Pass, "{:?}", g.message);
    assert!(backend().await.leftovers_of_run(&report.run_id).await.unwrap().is_empty());

    // The registry has both: the environment's image and the gateway's.
    let catalog = reqwest::get(format!("http://{registry}/v2/_catalog"))
        .await
        .and_then(reqwest::Response::error_for_status)
        .expect("the registry answers")
        .text()
        .await
        .unwrap();
    assert!(catalog.contains("reeval/gateway"), "{catalog}");
    let pushed =
        detail.rsplit(" as ").next().and_then(|s| s.split(' ').next()).unwrap().to_string();
    let repo =
        pushed.trim_start_matches(&format!("{registry}/")).rsplit_once(':').unwrap().0.to_string();
    assert!(catalog.contains(&repo), "{repo} in {catalog}");

    // A second run finds the tag there and pushes nothing.
    let again = common::runner_with("kube-registry-again", with_registry)
        .run(vec![built()])
        .await
        .expect("preflight");
    let r = &again.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert!(image_detail(r).contains(&format!("already in {registry}")), "{}", image_detail(r));

    // The local engine keeps its build cache, not the registry's tags of it.
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    let filters =
        std::collections::HashMap::from([("reference", vec![format!("{registry}/reeval/*")])]);
    let tagged = docker
        .list_images(Some(
            bollard::query_parameters::ListImagesOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap();
    // Nor this test's own image, built for its stamp (the gateway image is a cache like any other).
    let local = pushed.trim_start_matches(&format!("{registry}/")).to_string();
    for tag in tagged
        .iter()
        .flat_map(|i| i.repo_tags.iter())
        .filter(|t| t.starts_with(&registry))
        .chain([&local])
    {
        let _ = docker
            .remove_image(tag, None::<bollard::query_parameters::RemoveImageOptions>, None)
            .await;
    }
}
