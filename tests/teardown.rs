//! Teardown off the critical path, against the real Docker engine: an
//! attempt's slot is freed once its record is final, while its container is
//! destroyed in the background; the run waits for every destroy; an
//! interrupted run (what Ctrl-C and SIGTERM do) still leaves no container.
//!
//! Destroys are made slow on purpose by a backend that wraps the Docker one
//! and waits before each real removal.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reeval::prelude::*;
use reeval::sandbox::{
    Capabilities, DockerBackend, EngineInfo, ExecRequest, ExecStream, ReadyImage, SandboxSpec,
    Signal, Sweep,
};
use reeval::{Backend, Eval, ImageSpec, Outcome, Sandbox, SandboxError};

/// What happened to the sandboxes, and when.
#[derive(Debug, Default)]
struct Log {
    created: Vec<(String, Instant)>,
    destroy_began: Vec<(String, Instant)>,
    destroyed: Vec<(String, Instant)>,
}

#[derive(Debug, Clone)]
struct SlowDestroy {
    inner: Arc<DockerBackend>,
    delay: Duration,
    log: Arc<Mutex<Log>>,
}

#[reeval::async_trait]
impl Backend for SlowDestroy {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn ping(&self) -> Result<EngineInfo, SandboxError> {
        self.inner.ping().await
    }
    async fn ensure_image(
        &self,
        spec: &ImageSpec,
        extra: &str,
    ) -> Result<ReadyImage, SandboxError> {
        self.inner.ensure_image(spec, extra).await
    }
    async fn create(&self, spec: &SandboxSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let inner = self.inner.create(spec).await?;
        self.log.lock().unwrap().created.push((inner.id().to_string(), Instant::now()));
        Ok(Arc::new(SlowSandbox { inner, delay: self.delay, log: self.log.clone() }))
    }
    async fn sweep(&self, scope: Sweep<'_>) -> Result<usize, SandboxError> {
        self.inner.sweep(scope).await
    }
}

#[derive(Debug)]
struct SlowSandbox {
    inner: Arc<dyn Sandbox>,
    delay: Duration,
    log: Arc<Mutex<Log>>,
}

#[reeval::async_trait]
impl Sandbox for SlowSandbox {
    fn id(&self) -> &str {
        self.inner.id()
    }
    async fn start(&self) -> Result<(), SandboxError> {
        self.inner.start().await
    }
    async fn exec(&self, request: ExecRequest<'_>) -> Result<reeval::ExecOutput, SandboxError> {
        self.inner.exec(request).await
    }
    async fn kill(&self, signal: Signal) -> Result<(), SandboxError> {
        self.inner.kill(signal).await
    }
    async fn upload(&self, dir: &str, tar: bytes::Bytes) -> Result<(), SandboxError> {
        self.inner.upload(dir, tar).await
    }
    async fn download(&self, path: &str, limit: u64) -> Result<bytes::Bytes, SandboxError> {
        self.inner.download(path, limit).await
    }
    async fn open_stream(&self, argv: Vec<String>) -> Result<ExecStream, SandboxError> {
        self.inner.open_stream(argv).await
    }
    async fn attach_main(&self) -> Result<ExecStream, SandboxError> {
        self.inner.attach_main().await
    }
    async fn destroy(&self) -> Result<(), SandboxError> {
        self.log.lock().unwrap().destroy_began.push((self.id().to_string(), Instant::now()));
        tokio::time::sleep(self.delay).await;
        let r = self.inner.destroy().await;
        self.log.lock().unwrap().destroyed.push((self.id().to_string(), Instant::now()));
        r
    }
}

async fn slow_backend(delay: Duration) -> SlowDestroy {
    let inner = DockerBackend::connect().await.expect("the engine answers");
    SlowDestroy { inner: Arc::new(inner), delay, log: Arc::default() }
}

fn touches_the_sandbox(name: &str) -> Eval {
    Eval::new(name, |c| {
        Box::pin(async move {
            expect(c.exec("echo hi > out.txt").await?).to_succeed()?;
            Ok(())
        })
    })
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_slot_is_freed_before_destroy_ends_and_the_run_waits_for_every_destroy() {
    require_docker!();
    let backend = slow_backend(Duration::from_secs(3)).await;
    let log = backend.log.clone();
    let runner = common::runner_with("teardown-slot", |c| {
        c.settings.test_threads = 1;
        c.settings.trials = Some(3);
    })
    .with_backend(Arc::new(backend));
    let report = runner.run(vec![touches_the_sandbox("slot_freed")]).await.expect("preflight");
    let returned = Instant::now();
    assert_eq!(report.records.len(), 3);
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
        // The record is final before the destroy: the workspace was collected.
        assert!(r.workspace_collected);
    }
    {
        let log = log.lock().unwrap();
        assert_eq!(log.created.len(), 3);
        // One slot: the next attempt's sandbox was created while the last one was still being destroyed.
        for pair in log.created.windows(2) {
            let (first, second) = (&pair[0], &pair[1]);
            let destroyed = log.destroyed.iter().find(|(id, _)| *id == first.0).expect("destroyed");
            assert!(
                second.1 < destroyed.1,
                "the slot waited for the destroy: sandbox {} was created {:?} after {} was gone",
                second.0,
                second.1 - destroyed.1,
                first.0
            );
        }
        // The run returned only after every destroy ended, and nothing is left.
        assert_eq!(log.destroyed.len(), 3, "every sandbox was destroyed before the run returned");
        assert!(log.destroyed.iter().all(|(_, at)| *at <= returned));
    }
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_interruption_during_a_background_destroy_leaves_no_container() {
    require_docker!();
    let backend = slow_backend(Duration::from_secs(3)).await;
    let log = backend.log.clone();
    let run_id = format!("teardown-interrupt-{}", std::process::id());
    let runner = common::runner_with("teardown-interrupt", |c| {
        c.settings.test_threads = 1;
        c.settings.trials = Some(3);
        c.settings.run_id = run_id.clone();
    })
    .with_backend(Arc::new(backend));
    // What the suite's SIGTERM and Ctrl-C handler does: cancel the run's shutdown token.
    let shutdown = runner.shutdown_token();
    let watcher = {
        let log = log.clone();
        tokio::spawn(async move {
            loop {
                if !log.lock().unwrap().destroy_began.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // A destroy is under way in the background (its container still exists).
            let live = common::containers_of_run(&run_id).await;
            shutdown.cancel();
            live
        })
    };
    let report = runner.run(vec![touches_the_sandbox("interrupted")]).await.expect("preflight");
    let live_when_interrupted = watcher.await.unwrap();
    assert!(live_when_interrupted >= 1, "the interruption came during a background destroy");
    {
        let log = log.lock().unwrap();
        assert!(!log.destroyed.is_empty());
        assert_eq!(log.destroyed.len(), log.created.len(), "every sandbox created was destroyed");
    }
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "nothing is left behind");
}

/// Containers of this attempt (any state), by the attempt label.
async fn containers_of_attempt(run_id: &str, attempt: &str) -> usize {
    let docker =
        bollard::Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap();
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

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigterm_to_the_suite_during_a_background_destroy_leaves_no_container() {
    require_docker!();
    let dir = common::temp_dir("teardown-sigterm");
    let run_id = format!("teardown-sigterm-{}", std::process::id());
    let mut child = std::process::Command::new(common::example_bin("fixture_suite"))
        .args(["passes", "--exact", "--trials", "8", "--test-threads", "1", "--record-dir"])
        .arg(&dir)
        .env("NEXTEST_RUN_ID", &run_id)
        .env_remove("NEXTEST")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // As soon as a trial's record is written its sandbox is destroyed in the
    // background: catch one whose container still exists, and SIGTERM then.
    let began = Instant::now();
    let mut caught = None;
    'trials: for trial in 1..=8 {
        let attempt = format!("passes.shell.t{trial}.try1");
        let record = dir.join(&run_id).join(format!("{attempt}.json"));
        while !record.exists() {
            assert!(began.elapsed() < Duration::from_secs(120), "no record of trial {trial}");
            if child.try_wait().unwrap().is_some() {
                break 'trials;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if containers_of_attempt(&run_id, &attempt).await > 0 {
            let pid = child.id().to_string();
            assert!(
                std::process::Command::new("kill")
                    .args(["-TERM", &pid])
                    .status()
                    .unwrap()
                    .success()
            );
            caught = Some(attempt);
            break;
        }
    }
    let status = child.wait().unwrap();
    let attempt =
        caught.expect("SIGTERM came while a recorded attempt's sandbox was still being destroyed");
    assert_eq!(status.code(), Some(130), "the run was interrupted");
    assert_eq!(containers_of_attempt(&run_id, &attempt).await, 0);
    assert_eq!(common::containers_of_run(&run_id).await, 0, "SIGTERM left nothing behind");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_create_dropped_on_its_way_is_removed_by_the_end_sweep() {
    // Before the fix: a create whose caller was dropped (an attempt interrupted while its
    // sandbox was being made) ended on the engine after the run's end sweep had listed the
    // run's containers, leaving one in the created state (~2 in 10 runs of the SIGTERM test above).
    require_docker!();
    let backend = DockerBackend::connect().await.expect("the engine answers");
    let run_id = format!("teardown-dropped-create-{}", std::process::id());
    let spec = SandboxSpec {
        image: "reeval/base:latest".into(),
        labels: std::collections::BTreeMap::from([
            ("dev.reeval.run".to_string(), run_id.clone()),
            ("dev.reeval.attempt".to_string(), "dropped.shell.t1.try1".to_string()),
        ]),
        workdir: "/workspace".into(),
        limits: reeval::sandbox::Limits::default(),
        network: reeval::sandbox::NetworkSpec::None,
        ..Default::default()
    };
    // Dropped at different points of the request's way to the engine.
    for ms in [1, 2, 4, 8, 16, 32] {
        let _ = tokio::time::timeout(Duration::from_millis(ms), backend.create(&spec)).await;
    }
    backend.sweep(Sweep::OwnRun(&run_id)).await.expect("sweep");
    // A container the engine was still making when the sweep listed would show now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = common::containers_of_run(&run_id).await;
    if left > 0 {
        // Leave nothing for the next test either way.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let _ = backend.sweep(Sweep::OwnRun(&run_id)).await;
    }
    assert_eq!(left, 0, "a dropped create left its container after the end sweep");
}
