//! Harbor tasks with compose services (`environment/docker-compose.yaml`),
//! against the real Docker engine: the tasks under `tests/harbor/services/`
//! (FROM reeval/base, built offline), run with the oracle and with the
//! scripted shell agent. Their services are built as the sandbox's image is,
//! started beside it in its network namespace, reached by name (through
//! `NO_PROXY` when the sandbox has a way out), waited for (a healthcheck, a
//! one-shot job, a slow port), reach nothing the sandbox does not, and are
//! gone after the run, also when a service fails to start.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use reeval::{Outcome, Phase, Record};

fn tasks_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/services")
}

/// Runs the tasks at `dir` with `harness`; the records by eval name, the run id and dir.
async fn run(dir: PathBuf, harness: &str) -> (BTreeMap<String, Record>, String, PathBuf) {
    run_evals(reeval::harbor::tasks(dir).expect("the tasks load"), harness).await
}

async fn run_evals(
    evals: Vec<reeval::Eval>,
    harness: &str,
) -> (BTreeMap<String, Record>, String, PathBuf) {
    let runner = common::runner_with(&format!("harbor-services-{harness}"), |c| {
        c.settings.harnesses = vec![harness.to_string()];
        c.settings.test_threads = 2;
    });
    let report = runner.run(evals).await.expect("preflight passes");
    let records = report.records.iter().map(|r| (r.eval.clone(), r.clone())).collect();
    (records, report.run_id, report.run_dir)
}

/// A file of the `logs-agent` capture (a tar under the attempt's `captures/`).
/// A one-step task `name` in a fresh temp dir: an instruction the shell
/// agent runs (`true`), a verifier that rewards 1, the base image, and `compose`
/// as its `environment/docker-compose.yaml`.
fn one_step_task(tag: &str, name: &str, compose: &str) -> PathBuf {
    let dir = common::temp_dir(tag).join(name);
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("task.toml"), format!("[task]\nname = \"t/{name}\"\n")).unwrap();
    std::fs::write(dir.join("instruction.md"), "true\n").unwrap();
    std::fs::write(dir.join("tests/test.sh"), "echo 1 > /logs/verifier/reward.txt\n").unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM reeval/base:latest\n").unwrap();
    std::fs::write(dir.join("environment/docker-compose.yaml"), compose).unwrap();
    dir
}

fn agent_log(run_dir: &std::path::Path, r: &Record, file: &str) -> Option<String> {
    captured(run_dir, r, "captures/logs-agent", file)
}

/// `file` in the directory capture whose path holds `capture`.
fn captured(run_dir: &std::path::Path, r: &Record, capture: &str, file: &str) -> Option<String> {
    let listed = r.artifacts.iter().find(|a| a.contains(capture))?;
    let tar = std::fs::read(run_dir.join(r.artifacts_dir_name()).join(listed)).ok()?;
    let mut archive = tar::Archive::new(tar.as_slice());
    for entry in archive.entries().ok()? {
        let mut entry = entry.ok()?;
        let path = entry.path().ok()?.to_string_lossy().into_owned();
        if path.ends_with(&format!("/{file}")) || path == file {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).ok()?;
            return Some(text);
        }
    }
    None
}

/// Containers and networks of the run still on the engine.
async fn left_behind(run_id: &str) -> (usize, usize) {
    (common::containers_of_run(run_id).await, common::networks_of_run(run_id).await)
}

/// The engine's host on its default bridge.
async fn bridge_gateway() -> String {
    let docker = bollard::Docker::connect_with_defaults().expect("docker");
    let bridge = docker
        .inspect_network("bridge", None::<bollard::query_parameters::InspectNetworkOptions>)
        .await
        .expect("the default bridge");
    let ipam = bridge.ipam.and_then(|i| i.config).unwrap_or_default();
    ipam.iter().find_map(|c| c.gateway.clone()).unwrap_or_else(|| "172.17.0.1".into())
}

fn detail(r: &Record, phase: Phase) -> String {
    r.phases.iter().find(|p| p.phase == phase).map(|p| p.detail.clone()).unwrap_or_default()
}

fn reward(r: &Record) -> f64 {
    r.reward.as_ref().and_then(|r| r.get("reward")).copied().unwrap_or(-1.0)
}

/// What both harnesses must show: the services reached, waited for, and gone.
async fn check(records: &BTreeMap<String, Record>, run_id: &str) {
    assert_eq!(records.len(), 2, "{:?}", records.keys());
    for r in records.values() {
        let ms = |phase| r.phases.iter().find(|p| p.phase == phase).map_or(0, |p| p.duration_ms);
        eprintln!(
            "{} {}: image {} ms, container (services started and waited for) {} ms",
            r.eval,
            r.harness,
            ms(Phase::Image),
            ms(Phase::Container)
        );
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?} {:?}", r.eval, r.message, r.events);
        assert_eq!(reward(r), 1.0, "{}", r.eval);
    }
    let web = &records["web-service"];
    // The service's artifact, read out of its own container.
    let log = web.artifacts.iter().find(|a| a.ends_with("captures/artifact-srv-log.tar"));
    assert!(log.is_some(), "the api service's artifact: {:?}", web.artifacts);
    let container = detail(web, Phase::Container);
    assert!(
        container.contains("services api (healthy), seed in its network namespace"),
        "{container}"
    );
    assert!(detail(web, Phase::Gateway).contains("isolation verified"), "{web:?}");
    let image = detail(web, Phase::Image);
    assert!(image.contains("service api:") && image.contains("service seed:"), "{image}");
    let offline = &records["offline-service"];
    assert!(
        detail(offline, Phase::Container)
            .contains("service echo (port 7000) in its network namespace"),
        "{}",
        detail(offline, Phase::Container)
    );
    assert_eq!(left_behind(run_id).await, (0, 0), "no container or network of the run is left");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_oracle_reaches_the_services_by_name_and_nothing_is_left() {
    require_docker!();
    let (records, run_id, _) = run(tasks_dir(), "oracle").await;
    check(&records, &run_id).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_shell_agent_reaches_the_services_by_name_and_they_have_no_way_out() {
    require_docker!();
    // A listener on the engine's host (its default bridge's address), which the
    // web task's service tries to reach (the compose file takes it from the host's
    // environment, here from the lookup the tasks are read with).
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok(_conn) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let probe = format!("{}:{port}", bridge_gateway().await);
    let lookup = |var: &str| (var == "REEVAL_HARBOR_TEST_HOST_PROBE").then(|| probe.clone());
    let evals = ["web-service", "offline-service"]
        .map(|t| {
            reeval::harbor::HarborTask::read(&tasks_dir().join(t), &lookup).unwrap().into_eval()
        })
        .to_vec();
    let (records, run_id, run_dir) = run_evals(evals, "shell").await;
    check(&records, &run_id).await;
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "the service reached the host");
    // The control: a container on the engine's default bridge does reach it.
    let control = std::process::Command::new("docker")
        .args(["run", "--rm", "reeval/base:latest", "python3", "-c"])
        .arg(format!(
            "import socket; socket.create_connection(('{}', {port}), 5)",
            bridge_gateway().await
        ))
        .output()
        .expect("docker run");
    assert!(control.status.success(), "{}", String::from_utf8_lossy(&control.stderr));
    assert!(hits.load(std::sync::atomic::Ordering::SeqCst) > 0, "the control reached the listener");
    let web = &records["web-service"];
    // The agent's curl went to the service directly, not out through the gateway.
    assert!(web.egress.iter().all(|e| !e.host.contains("api")), "{:?}", web.egress);
    assert!(web.turns[0].diff.files.iter().any(|f| f.path == "word.txt"), "{:?}", web.turns[0]);
    assert_eq!(agent_log(&run_dir, web, "api-url.txt").as_deref(), Some("http://api:8000\n"));
    // The service's own log, kept from its container: the agent's request is in it.
    let requests = captured(&run_dir, web, "captures/artifact-srv-log", "requests.txt");
    assert!(requests.as_deref().unwrap_or_default().contains("/word\n"), "{requests:?}");
    assert_eq!(
        agent_log(&run_dir, web, "service-reach.txt").as_deref(),
        Some("reached nothing"),
        "a service has no way out of its own"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_service_that_fails_to_start_is_an_infra_error_with_its_log_and_nothing_is_left() {
    require_docker!();
    let dir = one_step_task(
        "harbor-broken-service",
        "broken",
        r#"
services:
  db:
    image: reeval/base:latest
    command: ["sh", "-c", "echo 'broken config' >&2; exit 3"]
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
"#,
    );
    let (records, run_id, _) = run(dir, "shell").await;
    let r = &records["broken"];
    assert_eq!(r.outcome, Outcome::InfraError, "{:?}", r.message);
    let message = r.message.clone().unwrap_or_default();
    assert!(message.contains("start service db") && message.contains("exited with 3"), "{message}");
    assert!(message.contains("broken config"), "the service's log is told: {message}");
    assert!(r.turns.is_empty(), "the agent never ran");
    assert_eq!(left_behind(&run_id).await, (0, 0), "no container or network of the run is left");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn services_an_attempt_lost_track_of_are_removed_by_the_end_sweep() {
    require_docker!();
    use reeval::environment::{Image, Service};
    use reeval::sandbox::{Backend, DockerBackend, SandboxSpec, ServiceStart, Sweep};
    let backend = DockerBackend::connect().await.expect("the engine answers");
    let run_id = format!("services-sweep-{}", std::process::id());
    let service = Service::new("db", Image::from("reeval/base:latest"))
        .command(["python3", "-m", "http.server", "5432"])
        .port(5432);
    let spec = SandboxSpec {
        image: "reeval/base:latest".into(),
        labels: BTreeMap::from([
            ("dev.reeval.run".to_string(), run_id.clone()),
            ("dev.reeval.attempt".to_string(), "lost.shell.t1.try1".to_string()),
        ]),
        workdir: "/workspace".into(),
        limits: reeval::sandbox::Limits::default(),
        network: reeval::sandbox::NetworkSpec::None,
        services: vec![ServiceStart { service, image: "reeval/base:latest".into() }],
        ..Default::default()
    };
    // One started (the service waited for by its port), then forgotten; creates dropped on their way.
    let sandbox = backend.create(&spec).await.expect("create");
    sandbox.start().await.expect("the sandbox and its service start");
    drop(sandbox);
    for ms in [2, 8, 32, 128] {
        let _ =
            tokio::time::timeout(std::time::Duration::from_millis(ms), backend.create(&spec)).await;
    }
    assert!(left_behind(&run_id).await.0 >= 2, "the sandbox and its service are there");
    let removed = backend.sweep(Sweep::OwnRun(&run_id)).await.expect("sweep");
    assert!(removed >= 2, "{removed}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(left_behind(&run_id).await, (0, 0), "the sweep found every service by its labels");
}

/// Two services declaring one port (`expose`, the container side of `ports`):
/// they would share the sandbox's network namespace, where the second fails
/// to bind it (`Address already in use`) or is shadowed by the first. A
/// Harbor task so is refused when it loads, an eval's environment so in
/// preflight, each naming both services and the port; nothing starts.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn services_declaring_one_port_are_refused_naming_both() {
    require_docker!();
    let dir = one_step_task(
        "harbor-port-clash",
        "clash",
        r#"
services:
  web:
    image: reeval/base:latest
    command: ["python3", "-m", "http.server", "8000"]
    expose: ["8000"]
  api:
    image: reeval/base:latest
    command: ["python3", "-m", "http.server", "8000"]
    ports: ["18000:8000"]
"#,
    );
    let e = reeval::harbor::load(&dir).expect_err("the task is refused").to_string();
    assert!(
        e.contains(
            "failed to place services api and web beside the sandbox: both declare port 8000"
        ),
        "{e}"
    );

    // The same two services on an eval of the library's: refused in preflight.
    let server = |name: &str| {
        reeval::environment::Service::new(name, reeval::Image::from("reeval/base:latest"))
            .command(["python3", "-m", "http.server", "8000"])
            .port(8000)
    };
    let eval = reeval::Eval::new("clash", |_| Box::pin(async { Ok(()) })).environment(move || {
        reeval::Environment::new().service(server("web")).service(server("api"))
    });
    let run_id = format!("port-clash-{}", std::process::id());
    let runner = common::runner_with("harbor-port-clash", |c| {
        c.settings.harnesses = vec!["shell".into()];
        c.settings.run_id = run_id.clone();
    });
    let e = runner.run(vec![eval]).await.expect_err("preflight refuses the eval").to_string();
    assert!(
        e.contains(
            "failed to place services web and api beside the sandbox: both declare port 8000"
        ),
        "{e}"
    );
    assert_eq!(left_behind(&run_id).await, (0, 0), "nothing was started");

    // A service on the gateway relay's port, in a sandbox with a way out: refused too.
    let eval = reeval::Eval::new("relay_port", |_| Box::pin(async { Ok(()) })).environment(|| {
        reeval::Environment::new().allow_egress("example.com").service(
            reeval::environment::Service::new("squid", reeval::Image::from("reeval/base:latest"))
                .port(3128),
        )
    });
    let runner =
        common::runner_with("harbor-relay-port", |c| c.settings.harnesses = vec!["shell".into()]);
    let e = runner.run(vec![eval]).await.expect_err("preflight refuses the eval").to_string();
    assert!(
        e.contains("failed to place service squid beside the sandbox: it declares port 3128"),
        "{e}"
    );
}
