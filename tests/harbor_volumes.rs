//! Harbor tasks whose `docker-compose.yaml` mounts volumes, against the real
//! Docker engine: the task under `tests/harbor/volumes/` (FROM reeval/base,
//! built offline). A sidecar writes its log into a named volume that `main`
//! (the agent's sandbox) mounts read-only, so the agent cannot forge it; the
//! task's own files are bind mounts, read-only and writable (a copy: the
//! task's directory never changes). The volume is made per attempt, labelled
//! with the run, and gone after it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reeval::{Outcome, Record};

/// The task copied into a fresh temp dir (its scratch directory writable by
/// the agent's user), so the test can see that its files do not change.
fn task_copy(tag: &str) -> PathBuf {
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/volumes/sidecar-log");
    let to = common::temp_dir(tag).join("sidecar-log");
    copy(&from, &to);
    let scratch = to.join("environment/scratch");
    std::fs::set_permissions(&scratch, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .unwrap();
    to
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

async fn run(dir: &Path, harness: &str) -> (BTreeMap<String, Record>, String) {
    let runner = common::runner_with(&format!("harbor-volumes-{harness}"), |c| {
        c.settings.harnesses = vec![harness.to_string()];
    });
    let evals = reeval::harbor::tasks(dir).expect("the task loads");
    let report = runner.run(evals).await.expect("preflight passes");
    (report.records.iter().map(|r| (r.eval.clone(), r.clone())).collect(), report.run_id)
}

/// The text of the final diff (the files the agent wrote).
fn patch(r: &Record) -> String {
    r.final_diff.as_ref().map(|d| d.patch.clone()).unwrap_or_default()
}

/// The lines the agent's file `name` holds, from the final diff (it added the file).
fn added(r: &Record, name: &str) -> String {
    let patch = patch(r);
    let Some(at) = patch.find(&format!("+++ b/{name}\n")) else { return String::new() };
    patch[at..]
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with("diff --git"))
        .filter_map(|l| l.strip_prefix('+'))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn nothing_left(run_id: &str) {
    assert_eq!(common::containers_of_run(run_id).await, 0, "no container of the run is left");
    assert_eq!(common::volumes_of_run(run_id).await, 0, "no volume of the run is left");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_agent_cannot_forge_the_sidecars_log_in_a_read_only_volume() {
    require_docker!();
    let dir = task_copy("harbor-volumes-shell");
    let (records, run_id) = run(&dir, "shell").await;
    let r = &records["sidecar-log"];
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.events);
    let diff = patch(r);
    // The agent read the sidecar's log through the volume, and could not write
    // it (the log is world-writable: only the read-only mount stops it).
    assert_eq!(added(r, "seen-log.txt"), "tool: started\ntool: 2 requests served", "{diff}");
    assert_eq!(added(r, "forge.txt"), "refused", "the forged line was refused: {diff}");
    assert!(
        added(r, "forge-error.txt").ends_with("/var/log/tool/tool.log: Read-only file system"),
        "writing the log failed with EROFS: {diff}"
    );
    // The read-only bind mount of the task's fixture: read, not written.
    assert_eq!(added(r, "fixture-copy.txt"), "fixture v1", "{diff}");
    assert!(
        added(r, "fixture-error.txt").ends_with("/opt/fixtures/data.txt: Read-only file system"),
        "{diff}"
    );
    // The writable bind mount was the attempt's copy: the task's files are as they were.
    let scratch: Vec<_> = std::fs::read_dir(dir.join("environment/scratch"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(scratch, ["keep.txt"], "the agent's write did not reach the task's directory");
    assert_eq!(
        std::fs::read_to_string(dir.join("environment/fixtures/data.txt")).unwrap(),
        "fixture v1\n"
    );
    nothing_left(&run_id).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_oracle_passes_with_the_sidecars_log_and_nothing_is_left() {
    require_docker!();
    let dir = task_copy("harbor-volumes-oracle");
    let (records, run_id) = run(&dir, "oracle").await;
    let r = &records["sidecar-log"];
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.events);
    assert_eq!(r.reward.as_ref().and_then(|r| r.get("reward")).copied(), Some(1.0));
    nothing_left(&run_id).await;
}

/// A sandbox with a volume that its attempt lost track of (a killed runner):
/// the run's end sweep removes the volume with the containers, by its labels.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn volumes_an_attempt_lost_track_of_are_removed_by_the_end_sweep() {
    require_docker!();
    use reeval::environment::{Image, Mount, Service};
    use reeval::sandbox::{Backend, DockerBackend, SandboxSpec, ServiceStart, Sweep};
    let backend = DockerBackend::connect().await.expect("the engine answers");
    let run_id = format!("volumes-sweep-{}", std::process::id());
    let service = Service::new("tool", Image::from("reeval/base:latest"))
        .command(["sh", "-c", "echo hi > /out/log; exec sleep infinity"])
        .mount(Mount::volume("logs", "/out"));
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
        mounts: vec![Mount::volume("logs", "/logs").read_only()],
        ..Default::default()
    };
    let sandbox = backend.create(&spec).await.expect("create");
    sandbox.start().await.expect("the sandbox and its service start");
    // The sidecar's write, read through the sandbox's read-only mount of the same volume.
    let handle = reeval::sandbox::SandboxHandle::new(sandbox.clone(), "/workspace", Vec::new());
    let mut seen = String::new();
    for _ in 0..40 {
        seen = String::from_utf8_lossy(&handle.read_file("/logs/log").await.unwrap_or_default())
            .into_owned();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, "hi\n", "the volume is shared by the service and the sandbox");
    drop((sandbox, handle));
    assert_eq!(common::volumes_of_run(&run_id).await, 1, "one volume, labelled with the run");
    let removed = backend.sweep(Sweep::OwnRun(&run_id)).await.expect("sweep");
    assert!(removed >= 3, "the sandbox, its service and the volume: {removed}");
    nothing_left(&run_id).await;
}
