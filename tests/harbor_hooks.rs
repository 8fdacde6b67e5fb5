//! The rest of Harbor's task format on the real Docker engine, with the task
//! under `tests/harbor/format/hooks/` (FROM reeval/base, built offline):
//! `[environment.healthcheck]` waited for before the agent (a failing one is
//! an infra error), `[[verifier.collect]]` hooks in `main` and in a sidecar
//! before the artifacts, an artifact's `exclude`, and `tests/.harborignore`.

mod common;

use std::path::{Path, PathBuf};

use reeval::{Outcome, Phase, Record};

fn task_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/format/hooks")
}

async fn run(dir: &Path, harness: &str) -> (Record, String, PathBuf) {
    let runner = common::runner_with(&format!("harbor-hooks-{harness}"), |c| {
        c.settings.harnesses = vec![harness.to_string()];
    });
    let report = runner.run(reeval::harbor::tasks(dir).expect("the task loads")).await.unwrap();
    (report.records[0].clone(), report.run_id, report.run_dir)
}

/// The paths in a capture's tar.
fn capture_paths(run_dir: &Path, r: &Record, name: &str) -> Vec<String> {
    let Some(listed) = r.artifacts.iter().find(|a| a.contains(&format!("captures/{name}"))) else {
        return Vec::new();
    };
    let tar = std::fs::read(run_dir.join(r.artifacts_dir_name()).join(listed)).unwrap();
    let mut archive = tar::Archive::new(tar.as_slice());
    archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect()
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
async fn healthcheck_collect_hooks_exclude_and_harborignore_as_harbor() {
    require_docker!();
    for harness in ["oracle", "shell"] {
        let (r, run_id, run_dir) = run(&task_dir(), harness).await;
        assert_eq!(r.outcome, Outcome::Pass, "{harness}: {:?} {:?}", r.message, r.checks);
        // The healthcheck ran as the one setup step (the log directories are in the image's layer).
        let setup = r.phases.iter().find(|p| p.phase == Phase::Setup).expect("setup");
        assert_eq!(setup.detail, "1 steps ok", "{harness}");
        // The sidecar's hook is a check naming its service.
        let hook = r.checks.iter().find(|c| c.service.as_deref() == Some("counter"));
        assert!(hook.is_some_and(|c| c.exit_code == 0), "{harness}: {:?}", r.checks);
        // The artifact's exclude: the log is left out of its capture.
        let out = capture_paths(&run_dir, &r, "artifact-app-out");
        assert!(out.iter().any(|p| p.ends_with("out/result.txt")), "{harness}: {out:?}");
        assert!(!out.iter().any(|p| p.ends_with(".log")), "{harness}: {out:?}");
        nothing_left(&run_id).await;
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_healthcheck_that_never_passes_is_an_infra_error_before_the_agent() {
    require_docker!();
    let dir = common::temp_dir("harbor-hooks-unhealthy").join("hooks");
    copy(&task_dir(), &dir);
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    let never = "command = \"echo not yet >&2; false\"";
    let toml =
        toml.replace("command = \"test -f /tmp/ready || { touch /tmp/ready; false; }\"", never);
    std::fs::write(dir.join("task.toml"), toml).unwrap();
    let (r, run_id, _) = run(&dir, "shell").await;
    assert_eq!(r.outcome, Outcome::InfraError, "{:?}", r.message);
    let message = r.message.clone().unwrap_or_default();
    assert!(message.contains("healthcheck failed after 3 consecutive retries"), "{message}");
    assert!(r.turns.is_empty(), "the agent never ran");
    nothing_left(&run_id).await;
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
