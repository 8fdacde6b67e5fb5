//! Other engines than the local one: a remote engine (a second dockerd over
//! TCP+TLS, started by `scripts/engines.sh`) with its gateway container, and a
//! pool of two engines, one of which stops mid-run. The engines come from
//! `REEVAL_TEST_ENGINE2` (an `https://` address, with `DOCKER_CERT_PATH`); without
//! them the tests skip, or fail under `REEVAL_REQUIRE_ENGINES=1`.

mod common;

use reeval::settings::Settings;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bollard::query_parameters::{ListContainersOptionsBuilder, ListNetworksOptionsBuilder};
use reeval::egress::{Egress, EgressSettings};
use reeval::prelude::*;
use reeval::sandbox::DockerBackend;
use reeval::sandbox::docker::EngineSpec;
use reeval::{Eval, Outcome, RunConfig, Runner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The tests share the second engine, and one of them stops it: one at a time.
static ENGINE2: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The second engine's address, or `None` (the test skips) when none was started.
fn engine2() -> Option<String> {
    match std::env::var("REEVAL_TEST_ENGINE2").ok().filter(|v| !v.is_empty()) {
        Some(url) => Some(url),
        None if std::env::var("REEVAL_REQUIRE_ENGINES").is_ok_and(|v| v == "1") => {
            panic!(
                "REEVAL_REQUIRE_ENGINES=1 but REEVAL_TEST_ENGINE2 is not set (start them with scripts/engines.sh start)"
            )
        }
        None => {
            eprintln!(
                "skipping: no second engine (eval \"$(scripts/engines.sh start)\" starts one)"
            );
            None
        }
    }
}

/// Containers and networks of `run_id` on the engine at `host`.
async fn leftovers(host: &str, run_id: &str) -> (usize, usize) {
    let backend = DockerBackend::connect_to(Some(host)).await.expect("the engine answers");
    let docker = backend.client();
    let filters = HashMap::from([("label", vec![format!("dev.reeval.run={run_id}")])]);
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default().all(true).filters(&filters).build(),
        ))
        .await
        .unwrap();
    let networks = docker
        .list_networks(Some(ListNetworksOptionsBuilder::default().filters(&filters).build()))
        .await
        .unwrap();
    (containers.len(), networks.len())
}

/// A plain HTTP server on every host address: what the gateway container reaches as `plain.test`.
async fn upstream() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 19\r\nconnection: close\r\n\r\nhello from upstream").await;
            });
        }
    });
    (port, hits)
}

#[cfg_attr(
    reeval_no_engines,
    ignore = "no second engine (eval \"$(scripts/engines.sh start)\"; REEVAL_REQUIRE_ENGINES=1 fails instead)"
)]
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_remote_sandbox_reaches_only_its_gateway_container() {
    require_docker!();
    let Some(url) = engine2() else { return };
    let _one_at_a_time = ENGINE2.lock().await;
    let backend = DockerBackend::connect_to(Some(&url)).await.expect("the second engine answers");
    // The engine's own addresses: its default bridge's, and the address we reach it at.
    let bridge = backend
        .client()
        .inspect_network("bridge", None::<bollard::query_parameters::InspectNetworkOptions>)
        .await
        .unwrap();
    // A freshly started dockerd leaves the gateway out of the default bridge's
    // IPAM config (it writes it only once it restarts on an existing bridge):
    // then it is the subnet's first address.
    let ipam = bridge.ipam.and_then(|i| i.config).unwrap_or_default();
    let bridge_gw = ipam
        .iter()
        .find_map(|c| c.gateway.clone())
        .or_else(|| {
            let subnet = ipam.iter().find_map(|c| c.subnet.clone())?;
            let net: std::net::Ipv4Addr = subnet.split_once('/')?.0.parse().ok()?;
            Some(std::net::Ipv4Addr::from(u32::from(net) + 1).to_string())
        })
        .expect("the bridge's gateway or subnet");
    let engine_ip = url
        .split_once("://")
        .map_or(url.as_str(), |(_, a)| a)
        .rsplit_once(':')
        .unwrap()
        .0
        .to_string();
    // The host as the engine's network sees it (the test's upstream listens there).
    let host_ip = "10.214.0.1";
    let (port, hits) = upstream().await;
    let targets = vec![
        format!("{bridge_gw}:2376"),
        format!("{engine_ip}:22"),
        format!("{host_ip}:{port}"),
        "1.1.1.1:443".to_string(),
    ];
    let eval = Eval::new("remote_isolated", move |c| {
        let targets = targets.clone();
        Box::pin(async move {
            for target in &targets {
                expect(
                    c.exec(format!("curl --noproxy '*' -s -m 3 http://{target}/ -o /dev/null"))
                        .await?,
                )
                .to_fail()?;
            }
            expect(
                c.exec("python3 -c \"import socket; socket.getaddrinfo('example.com', 443)\"")
                    .await?,
            )
            .to_fail()?;
            // Only the gateway answers: an allowed host through it, a refusal from it.
            expect(c.exec("curl -s -m 10 http://plain.test/hello").await?.stdout)
                .to_equal("hello from upstream")?;
            expect(c.exec("curl -s -m 10 http://elsewhere.test/").await?.stdout)
                .to_contain("not on this sandbox's allowlist")?;
            Ok(())
        })
    })
    .environment(|| Environment::new().check_network(Egress::allow(["plain.test"])));
    let egress = EgressSettings {
        resolve: vec![("plain.test".into(), format!("{host_ip}:{port}").parse().unwrap())],
        ..EgressSettings::default()
    };
    let config = RunConfig {
        egress,
        ..RunConfig::from(Settings {
            record_dir: common::temp_dir("remote"),
            infra_retries: 0,
            ..Settings::default()
        })
    };
    let runner = Runner::new(config, reeval::harness_registry()).with_backend(Arc::new(backend));
    let report = runner.run(vec![eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let gateway = r.phases.iter().find(|p| p.phase == "gateway").expect("a gateway phase");
    assert!(
        gateway.detail.contains("a container next to the sandbox")
            && gateway.detail.contains("isolation verified"),
        "{}",
        gateway.detail
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the upstream was reached once, through the gateway"
    );
    assert!(r.egress.iter().any(|e| e.host == "elsewhere.test" && !e.allowed), "{:?}", r.egress);
    assert_eq!(
        leftovers(&url, &report.run_id).await,
        (0, 0),
        "containers or networks left on the remote engine"
    );
}

#[cfg_attr(
    reeval_no_engines,
    ignore = "no second engine (eval \"$(scripts/engines.sh start)\"; REEVAL_REQUIRE_ENGINES=1 fails instead)"
)]
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_pool_spreads_attempts_and_survives_an_engine_that_stops() {
    require_docker!();
    let Some(url) = engine2() else { return };
    let _one_at_a_time = ENGINE2.lock().await;
    let pidfile = std::env::var("REEVAL_TEST_ENGINE2_PIDFILE")
        .expect("scripts/engines.sh exports the second engine's pid file");
    let local = "unix:///var/run/docker.sock".to_string();
    let eval = Eval::new("pooled", |c| {
        Box::pin(async move {
            c.send("sleep 4; echo done > done.txt").await?;
            expect(c.read_file("done.txt").await?).to_equal("done\n")?;
            Ok(())
        })
    })
    .trials(12);
    let config = RunConfig::from(Settings {
        record_dir: common::temp_dir("pool"),
        test_threads: 8,
        infra_retries: 2,
        backend: reeval::sandbox::BackendConfig::Docker {
            engines: vec![
                EngineSpec { host: local.clone(), slots: Some(4) },
                EngineSpec { host: url.clone(), slots: Some(4) },
            ],
        },
        ..Settings::default()
    });
    let runner = Runner::new(config, reeval::harness_registry());
    // Mid-run, the second engine goes away (its dockerd stopped by its PID), then comes back.
    let restarter = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_string();
        assert!(std::process::Command::new("kill").arg(&pid).status().unwrap().success());
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let started =
            std::process::Command::new("scripts/engines.sh").arg("start-dockerd").status().unwrap();
        assert!(started.success(), "the second engine restarts");
    });
    let report = runner.run(vec![eval]).await.expect("preflight");
    restarter.await.unwrap();
    let finals = report.final_records();
    assert_eq!(finals.len(), 12);
    for r in &finals {
        assert_eq!(
            r.outcome,
            Outcome::Pass,
            "trial {} on {:?}: {:?}",
            r.trial,
            r.engine,
            r.message
        );
        assert!(
            r.workspace_collected && r.phases.last().is_some_and(|p| p.phase == "teardown"),
            "trial {} is complete",
            r.trial
        );
    }
    let on =
        |host: &str| report.records.iter().filter(|r| r.engine.as_deref() == Some(host)).count();
    assert!(
        on(&local) > 0 && on(&url) > 0,
        "attempts landed on both engines: {} local, {} remote",
        on(&local),
        on(&url)
    );
    let retried: Vec<_> =
        report.records.iter().filter(|r| r.outcome == Outcome::InfraError).collect();
    assert!(!retried.is_empty(), "the stopped engine's attempts failed as infra errors");
    assert!(retried.iter().all(|r| r.engine.as_deref() == Some(url.as_str())));
    assert!(
        finals.iter().filter(|r| r.try_ > 1).all(|r| r.engine.as_deref() == Some(local.as_str())),
        "retries went to the engine that answers"
    );
    assert_eq!(
        leftovers(&local, &report.run_id).await,
        (0, 0),
        "containers left on the local engine"
    );
    assert_eq!(
        leftovers(&url, &report.run_id).await,
        (0, 0),
        "containers left on the second engine"
    );
}

/// A Harbor dataset on a pool of two engines: each task's image (its
/// Dockerfile, and the layer that gives its workdir to the agent) is built
/// on the engine that runs the attempt, through that engine's backend, and
/// once per engine however many of the task's attempts run there.
#[cfg_attr(
    reeval_no_engines,
    ignore = "no second engine here (scripts/engines.sh; REEVAL_REQUIRE_ENGINES=1 to fail instead)"
)]
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_pool_builds_each_harbor_image_once_per_engine_that_runs_it() {
    require_docker!();
    let Some(url) = engine2() else { return };
    let _one_at_a_time = ENGINE2.lock().await;
    let local = "unix:///var/run/docker.sock".to_string();
    // Four tasks, each a Dockerfile no engine has built yet (a nonce in it).
    let dir = common::temp_dir("pool-harbor");
    let nonce = format!("{}-{}", std::process::id(), reeval::runner::new_run_id());
    for n in 1..=4 {
        let t = dir.join(format!("task-{n}"));
        for (path, text) in [
            ("task.toml".to_string(), format!("[task]\nname = \"pool/task-{n}\"\n")),
            ("instruction.md".into(), "Write the answer.".into()),
            (
                "environment/Dockerfile".into(),
                format!(
                    "FROM reeval/base:latest\nWORKDIR /app\nRUN echo {nonce}-{n} > /app/built-for.txt\n"
                ),
            ),
            ("solution/solve.sh".into(), format!("#!/bin/bash\necho {n} > answer.txt\n")),
            (
                "tests/test.sh".into(),
                format!(
                    "#!/bin/bash\ngrep -qx {n} /app/answer.txt && grep -q {nonce}-{n} /app/built-for.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
                ),
            ),
        ] {
            std::fs::create_dir_all(t.join(&path).parent().unwrap()).unwrap();
            std::fs::write(t.join(&path), text).unwrap();
        }
    }
    let evals = reeval::harbor::tasks(&dir).expect("the tasks load");
    let config = RunConfig::from(Settings {
        record_dir: common::temp_dir("pool-harbor-runs"),
        test_threads: 4,
        trials: Some(3),
        harnesses: vec!["oracle".into()],
        backend: reeval::sandbox::BackendConfig::Docker {
            engines: vec![
                EngineSpec { host: local.clone(), slots: Some(2) },
                EngineSpec { host: url.clone(), slots: Some(2) },
            ],
        },
        ..Settings::default()
    });
    let report =
        Runner::new(config, reeval::harness_registry()).run(evals).await.expect("preflight");
    let finals = report.final_records();
    assert_eq!(finals.len(), 12);
    for r in &finals {
        assert_eq!(
            r.outcome,
            Outcome::Pass,
            "{} #{} on {:?}: {:?}",
            r.eval,
            r.trial,
            r.engine,
            r.message
        );
        assert_eq!(r.workspace_dir.as_deref(), Some("/app"), "the task's workdir is the workspace");
    }
    let on = |host: &str| finals.iter().filter(|r| r.engine.as_deref() == Some(host)).count();
    assert!(
        on(&local) > 0 && on(&url) > 0,
        "both engines ran tasks: {} and {}",
        on(&local),
        on(&url)
    );
    // Per engine and task: at most one attempt says its image was built (the others
    // found it), and the image is on every engine that ran the task.
    for host in [&local, &url] {
        let backend = DockerBackend::connect_to(Some(host)).await.expect("the engine answers");
        for n in 1..=4 {
            let eval = format!("task-{n}");
            let here: Vec<_> = report
                .records
                .iter()
                .filter(|r| r.eval == eval && r.engine.as_deref() == Some(host.as_str()))
                .collect();
            let built = here
                .iter()
                .filter(|r| {
                    r.phases.iter().any(|p| p.phase == "image" && p.detail.starts_with("built"))
                })
                .count();
            assert!(built <= 1, "{eval} built {built} times on {host}");
            if let Some(r) = here.first() {
                let image = r.image.clone().expect("the record names its image");
                assert!(
                    backend.image_id(&image).await.unwrap().is_some(),
                    "{image} of {eval} is on {host}, which ran it"
                );
            }
        }
    }
    for host in [&local, &url] {
        assert_eq!(leftovers(host, &report.run_id).await, (0, 0), "left on {host}");
    }
}
