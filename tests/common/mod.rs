//! Helpers shared by the integration tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use reeval::settings::Settings;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use reeval::{RunConfig, Runner};

/// Whether Docker tests must run (CI sets `REEVAL_REQUIRE_DOCKER=1`).
pub fn docker_required() -> bool {
    std::env::var("REEVAL_REQUIRE_DOCKER").is_ok_and(|v| v == "1")
}

/// Fails, saying why, when this test process was started ignoring `signal`
/// (`"INT"`, `"HUP"`, `"QUIT"`): a suite it starts inherits that and keeps
/// the signal ignored, as it should (a background `&` ignores SIGINT and
/// SIGQUIT, `nohup` SIGHUP), so a test that sends it could only time out.
pub fn assert_signal_not_ignored(signal: &str) {
    let number = match signal {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        _ => return,
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let ignored = status.lines().find_map(|l| l.strip_prefix("SigIgn:"));
    let ignored = ignored.and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).unwrap_or(0);
    assert!(
        ignored & (1 << (number - 1)) == 0,
        "SIG{signal} is ignored in this test process (started in the background with `&` or under \
         nohup?); the suite it starts would keep ignoring it, as it should: start the tests with \
         SIG{signal} at its default"
    );
}

/// True when the engine answers and the base image is present; otherwise the
/// test fails with what is missing. A machine without a Docker engine compiles
/// the Docker tests as ignored (see build.rs: `cfg(reeval_no_docker)`), so a
/// test reaching this point was meant to run, and a test that ran nothing must
/// not count as passed.
pub async fn docker_ready() -> bool {
    if let Err(problem) = reeval_core_backend().await {
        panic!(
            "{problem}; this test needs Docker (a machine without a Docker engine reports it as ignored)"
        );
    }
    true
}

async fn reeval_core_backend() -> Result<(), String> {
    let docker = bollard::Docker::connect_with_defaults()
        .map_err(|e| format!("the Docker engine is not reachable: {e}"))?;
    let docker = docker
        .negotiate_version()
        .await
        .map_err(|e| format!("the Docker engine does not answer: {e}"))?;
    docker.inspect_image("reeval/base:latest").await.map_err(|_| {
        "the image reeval/base:latest is missing (run scripts/build-base-image.sh)".to_string()
    })?;
    Ok(())
}

/// Fails the test when Docker is not ready (see [`docker_ready`]).
#[macro_export]
macro_rules! require_docker {
    () => {
        if !common::docker_ready().await {
            return;
        }
    };
}

/// A fresh directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "reeval-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// A runner recording into a temp dir, with no infra retries (tests want the first try).
pub fn runner(tag: &str) -> Runner {
    runner_with(tag, |_| {})
}

/// A runner recording into a temp dir, configured further by `f`.
pub fn runner_with(tag: &str, f: impl FnOnce(&mut RunConfig)) -> Runner {
    // No setup cache unless a test asks for it: a test's setup images must not outlive it.
    let mut config = RunConfig::from(Settings {
        record_dir: temp_dir(tag),
        infra_retries: 0,
        setup_cache: false,
        ..Settings::default()
    });
    f(&mut config);
    Runner::new(config, reeval::harness_registry())
}

/// The label filter that selects what run `run_id` made.
fn of_run(run_id: &str) -> std::collections::HashMap<&'static str, Vec<String>> {
    std::collections::HashMap::from([("label", vec![format!("dev.reeval.run={run_id}")])])
}

/// Networks labelled with this run id.
pub async fn networks_of_run(run_id: &str) -> usize {
    let filters = of_run(run_id);
    let opts =
        bollard::query_parameters::ListNetworksOptionsBuilder::default().filters(&filters).build();
    inject::docker().await.list_networks(Some(opts)).await.expect("list networks").len()
}

/// Containers (any state) labelled with this run id.
pub async fn containers_of_run(run_id: &str) -> usize {
    let filters = of_run(run_id);
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    inject::docker().await.list_containers(Some(opts)).await.expect("list containers").len()
}

/// Volumes labelled with this run id.
pub async fn volumes_of_run(run_id: &str) -> usize {
    let filters = of_run(run_id);
    let opts =
        bollard::query_parameters::ListVolumesOptionsBuilder::default().filters(&filters).build();
    let listed = inject::docker().await.list_volumes(Some(opts)).await.expect("list volumes");
    listed.volumes.unwrap_or_default().len()
}

/// The path of an example binary built by `cargo test` (examples are built with the tests).
pub fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test>-<hash> → target/<profile>/examples/<name>
    let profile_dir = exe.parent().and_then(|p| p.parent()).expect("target profile dir");
    let bin = profile_dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --example {name}` (cargo test builds examples)",
        bin.display()
    );
    bin
}

/// The local engine reached over TCP (a proxy to its socket): to reeval, a
/// remote engine, where a sandbox with egress gets a gateway container of
/// its own on an internal network.
pub async fn engine_over_tcp() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut engine) = tokio::net::UnixStream::connect("/var/run/docker.sock").await
                else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut client, &mut engine).await;
            });
        }
    });
    format!("tcp://127.0.0.1:{port}")
}

/// A `.env`-style file of `vars` in a fresh temp dir, for `RunConfig::env_file`
/// (tests never change the process environment).
pub fn env_file(tag: &str, vars: &[(&str, &str)]) -> PathBuf {
    let path = temp_dir(tag).join("test.env");
    let text: String = vars.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&path, text).expect("write the env file");
    path
}

/// A JSON file, parsed (panics naming the file).
pub fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// The attempt records of a run directory (every `.json` but the summary), by file name.
pub fn records(run: &std::path::Path) -> Vec<serde_json::Value> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(run)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".json") && !n.starts_with("summary")
        })
        .collect();
    paths.sort();
    paths.iter().map(|p| json(p)).collect()
}

/// Every byte of every file under `dir`, as text (to look for what must not be written).
pub fn all_files_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.push_str(&all_files_text(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
        }
    }
    out
}

pub mod atif;
pub mod faults;
pub mod inject;
pub mod load;
pub mod slow_engine;

/// Seconds since 1970, less one: a `since` for [`engine_events`] that takes
/// in everything from now on.
pub fn events_since_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        - 1
}

/// The engine's events of one kind (`exec_create`, `attach`, `archive-path`)
/// of the run's containers since `since` (unix seconds), in order, each
/// formatted with `format` (`{{json .Action}}`, `{{.Actor.ID}}`).
pub fn engine_events(run_id: &str, since: u64, event: &str, format: &str) -> Vec<String> {
    let until = events_since_now() + 2;
    let out = std::process::Command::new("docker")
        .args(["events", "--since", &since.to_string(), "--until", &until.to_string()])
        .args(["--filter", &format!("label=dev.reeval.run={run_id}")])
        .args(["--filter", &format!("event={event}"), "--format", format])
        .output()
        .expect("docker events");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// The engine's events of one kind (`exec_create`, `attach`) of the run's
/// containers since `since` (unix seconds), in order: each one's action.
pub fn engine_actions(run_id: &str, since: u64, event: &str) -> Vec<String> {
    // One line per event: a command's script may hold newlines.
    engine_events(run_id, since, event, "{{json .Action}}")
        .iter()
        .map(|l| serde_json::from_str::<String>(l).expect("a JSON string"))
        .collect()
}

/// The commands of the run's execs since `since` (unix seconds), in order.
pub fn execs_of_run(run_id: &str, since: u64) -> Vec<String> {
    engine_actions(run_id, since, "exec_create")
        .into_iter()
        .map(|l| l.strip_prefix("exec_create: ").unwrap_or(&l).to_string())
        .collect()
}
