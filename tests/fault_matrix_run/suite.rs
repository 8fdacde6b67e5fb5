//! The fault suite (`examples/fault_suite.rs`) run as a subprocess, as cargo
//! test or cargo-nextest run a suite binary: spawned with a run id of the
//! test's choosing, signalled, and waited for with its output kept.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{SECRET, common};

/// A running suite binary, its output read as it comes (so it never blocks on a pipe).
pub struct Suite {
    pub child: Child,
    pub run_id: String,
    /// The run's directory.
    pub run_dir: PathBuf,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

/// How a suite binary ended.
#[derive(Debug)]
pub struct Ended {
    /// The exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// The fault suite's binary, built (or brought up to date) once per test
/// process: `cargo test --test fault_matrix_run` builds no example itself.
fn binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let built = Command::new(cargo)
                .args(["build", "--quiet", "--example", "fault_suite"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .is_ok_and(|s| s.success());
            assert!(built, "cargo build --example fault_suite");
            common::example_bin("fault_suite")
        })
        .clone()
}

impl Suite {
    /// Starts the suite with `args`, recording under `record_dir` as run `run_id`.
    pub fn spawn(args: &[&str], record_dir: &Path, run_id: &str) -> Suite {
        let mut child = Command::new(binary())
            .args(args)
            .args(["--format", "json", "--no-setup-cache", "--record-dir"])
            .arg(record_dir)
            .env("NEXTEST_RUN_ID", run_id)
            .env("REEVAL_T_FAULT_SECRET", SECRET)
            .env_remove("NEXTEST")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the fault suite");
        let out = drain(child.stdout.take().unwrap());
        let err = drain(child.stderr.take().unwrap());
        Suite { child, run_id: run_id.into(), run_dir: record_dir.join(run_id), out, err }
    }

    /// Sends `signal` (`TERM`, `INT`, `KILL`) to the suite.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args([&format!("-{signal}"), &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{signal} {pid}");
    }

    /// Whether it has ended.
    pub fn ended(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Waits for the end (killing it after `limit`), with its output.
    pub fn wait(mut self, limit: Duration) -> Ended {
        let began = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if began.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the suite did not end within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = self.child.wait().unwrap();
        let text = |h: std::thread::JoinHandle<Vec<u8>>| {
            String::from_utf8_lossy(&h.join().unwrap()).into_owned()
        };
        Ended { code: status.code(), stdout: text(self.out), stderr: text(self.err) }
    }
}

impl Ended {
    /// Asserts that `secret` is in neither stream.
    pub fn assert_says_no(&self, secret: &str) {
        assert!(!self.stdout.contains(secret), "stdout holds a secret's value");
        assert!(!self.stderr.contains(secret), "stderr holds a secret's value");
    }
}

/// Every JSON file of `run_dir` parses, and no temporary file is left: the
/// names of the JSON files, sorted.
pub fn assert_whole(run_dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for f in std::fs::read_dir(run_dir).into_iter().flatten().flatten() {
        let name = f.file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "{name} left behind");
        if name.ends_with(".json") {
            let bytes = std::fs::read(f.path()).unwrap();
            let parsed = serde_json::from_slice::<serde_json::Value>(&bytes);
            assert!(parsed.is_ok(), "{name} is not whole JSON");
            names.push(name);
        }
    }
    names.sort();
    names
}

/// Containers (any state) of one attempt.
pub async fn containers_of_attempt(run_id: &str, attempt: &str) -> usize {
    let docker = common::inject::docker().await;
    let filters = std::collections::HashMap::from([(
        "label",
        vec![format!("dev.reeval.run={run_id}"), format!("dev.reeval.attempt={attempt}")],
    )]);
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker.list_containers(Some(opts)).await.unwrap().len()
}

/// Waits until `attempt`'s running container holds `marker` (see `common::inject`).
pub async fn wait_for_marker(suite: &mut Suite, attempt: &str, marker: &str) {
    let docker = common::inject::docker().await;
    let began = Instant::now();
    loop {
        assert!(!suite.ended(), "the suite ended before {attempt} reached {marker}");
        assert!(began.elapsed() < Duration::from_secs(120), "{attempt} never reached {marker}");
        if let Some(id) = common::inject::container_of(&docker, &suite.run_id, attempt).await
            && common::inject::exists_in(&docker, &id, marker).await
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
