//! Harbor tasks with a separate verifier environment, against the real
//! Docker engine: the tasks under `tests/harbor/separate/` (FROM
//! reeval/base, built offline). After the agent, a second sandbox of the
//! attempt: its own image (`tests/Dockerfile`, holding `/tests`) or a fresh
//! copy of the task's environment (`tests/` copied in, its public network
//! through its own gateway); the declared artifacts and `/logs/artifacts`
//! copied across, an artifact's `exclude` honoured; the verifier sees them
//! and nothing else of the agent's work. The oracle passes, a wrong answer
//! fails, a verifier past its limit fails, and nothing of the run is left.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reeval::{Outcome, Phase, Record};

fn tasks_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/separate")
}

async fn run(dir: &Path, harness: &str) -> (BTreeMap<String, Record>, String, PathBuf) {
    let runner = common::runner_with(&format!("harbor-separate-{harness}"), |c| {
        c.harnesses = vec![harness.to_string()];
        c.threads = 2;
    });
    let evals = reeval::harbor::tasks(dir).expect("the tasks load");
    let report = runner.run(evals).await.expect("preflight passes");
    let records = report.records.iter().map(|r| (r.eval.clone(), r.clone())).collect();
    (records, report.run_id, report.run_dir)
}

/// The tasks copied into a temp dir, `edit` applied to each task's directory.
fn tasks_copy(tag: &str, edit: impl Fn(&Path)) -> PathBuf {
    let to = common::temp_dir(tag);
    for task in ["own-image", "task-copy"] {
        copy(&tasks_dir().join(task), &to.join(task));
        edit(&to.join(task));
    }
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

fn reward(r: &Record) -> f64 {
    r.reward.as_ref().and_then(|r| r.get("reward")).copied().unwrap_or(-1.0)
}

/// The verifier's `test-stdout.txt`, from the `logs-verifier` capture.
fn test_stdout(run_dir: &Path, r: &Record) -> String {
    let Some(listed) = r.artifacts.iter().find(|a| a.contains("captures/logs-verifier")) else {
        return String::new();
    };
    let tar = std::fs::read(run_dir.join(r.artifacts_dir_name()).join(listed)).unwrap();
    let mut archive = tar::Archive::new(tar.as_slice());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().ends_with("test-stdout.txt") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            return text;
        }
    }
    String::new()
}

async fn nothing_left(run_id: &str) {
    assert_eq!(common::containers_of_run(run_id).await, 0, "no container of the run is left");
    assert_eq!(common::volumes_of_run(run_id).await, 0, "no volume of the run is left");
    assert_eq!(common::networks_of_run(run_id).await, 0, "no network of the run is left");
}

/// What every verifier's sandbox shows in the record.
fn graded_apart(r: &Record) {
    let theirs: Vec<Phase> = r
        .phases
        .iter()
        .filter(|p| p.detail.starts_with("sandbox verifier: "))
        .map(|p| p.phase)
        .collect();
    for phase in [Phase::Image, Phase::Container, Phase::Setup, Phase::Check] {
        assert!(
            theirs.contains(&phase),
            "{}: {phase:?} of the verifier's sandbox: {theirs:?}",
            r.eval
        );
    }
    let run = r
        .checks
        .iter()
        .find(|c| c.command.contains("/tests/test.sh"))
        .expect("the verifier's run is a check");
    assert_eq!(run.sandbox.as_deref(), Some("verifier"), "{}", r.eval);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_oracle_passes_in_a_verifier_that_sees_only_the_artifacts() {
    require_docker!();
    let (records, run_id, run_dir) = run(&tasks_dir(), "oracle").await;
    for r in records.values() {
        let said = test_stdout(&run_dir, r);
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}\n{said}", r.eval, r.message);
        assert_eq!(reward(r), 1.0, "{}: {said}", r.eval);
        assert!(!said.contains("FAILED"), "{}: {said}", r.eval);
        graded_apart(r);
    }
    let copy = &records["task-copy"];
    let gateway = copy
        .phases
        .iter()
        .find(|p| p.phase == Phase::Gateway && p.detail.starts_with("sandbox verifier: "))
        .expect("the verifier's own gateway");
    assert!(gateway.detail.contains("isolation verified"), "{}", gateway.detail);
    nothing_left(&run_id).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_agents_work_passes_and_a_wrong_answer_fails() {
    require_docker!();
    // The shell agent runs the instructions: the right answer first.
    let (records, run_id, run_dir) = run(&tasks_dir(), "shell").await;
    for r in records.values() {
        let said = test_stdout(&run_dir, r);
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}\n{said}", r.eval, r.message);
        // The agent's undeclared file was in its own sandbox, never in the verifier's.
        let diff = r.final_diff.as_ref().map(|d| d.paths().join(",")).unwrap_or_default();
        assert!(diff.contains("agent-only.txt"), "{}: {diff}", r.eval);
        assert!(said.contains("ok: no undeclared file of the agent"), "{}: {said}", r.eval);
        graded_apart(r);
    }
    nothing_left(&run_id).await;
    // A wrong answer: the verifier grades it in its sandbox, and the attempt fails.
    let wrong = tasks_copy("harbor-separate-wrong", |task| {
        let text = std::fs::read_to_string(task.join("instruction.md")).unwrap();
        std::fs::write(task.join("instruction.md"), text.replace("echo 42", "echo 41")).unwrap();
    });
    let (records, run_id, run_dir) = run(&wrong, "shell").await;
    for r in records.values() {
        let said = test_stdout(&run_dir, r);
        assert_eq!(r.outcome, Outcome::Fail(reeval::FailKind::Assertion), "{}: {said}", r.eval);
        assert_eq!(reward(r), 0.0, "{}", r.eval);
        assert!(said.contains("FAILED: the answer"), "{}: {said}", r.eval);
    }
    nothing_left(&run_id).await;
}

/// A multi-step task whose steps' verifiers differ: the first shared by its
/// own word over the task's `separate`, the second in a sandbox of its own
/// (`verifier-2`) from its step's `tests/Dockerfile`, seeing the task's and
/// the step's artifacts only. The oracle and the agent's work pass; a wrong
/// answer in the second step fails it there.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn each_step_is_graded_where_its_verifier_says() {
    require_docker!();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/separate-steps");
    let sandbox_of = |r: &Record, test: &str| {
        let check = r.checks.iter().find(|c| c.command.contains(test));
        check.map(|c| c.sandbox.clone().unwrap_or_else(|| "the agent's".into()))
    };
    for harness in ["oracle", "shell"] {
        let (records, run_id, run_dir) = run(&dir, harness).await;
        let r = &records["steps-apart"];
        let said = test_stdout(&run_dir, r);
        assert_eq!(r.outcome, Outcome::Pass, "{harness}: {:?}\n{said}", r.message);
        let rewards: Vec<_> =
            r.step_rewards.iter().map(|s| (s.step.as_str(), s.reward.clone())).collect();
        assert_eq!(rewards.len(), 2, "{harness}: {rewards:?}");
        for (step, reward) in &rewards {
            assert_eq!(
                reward.as_ref().and_then(|r| r.get("reward")),
                Some(&1.0),
                "{harness}: {step}"
            );
        }
        assert_eq!(sandbox_of(r, "/tests/test.sh").as_deref(), Some("the agent's"), "{harness}");
        let apart = r.checks.iter().filter(|c| c.sandbox.as_deref() == Some("verifier-2"));
        assert!(
            apart.clone().any(|c| c.command.contains("/tests/test.sh")),
            "{harness}: the second step's verifier ran in its own sandbox: {:?}",
            r.checks.iter().map(|c| (&c.command, &c.sandbox)).collect::<Vec<_>>()
        );
        nothing_left(&run_id).await;
    }
    // The second step's answer wrong: graded apart, it fails there.
    let wrong = common::temp_dir("harbor-separate-steps-wrong");
    copy(&dir, &wrong);
    let instruction = wrong.join("steps-apart/steps/apart/instruction.md");
    std::fs::write(&instruction, "echo three > /app/b.txt\n").unwrap();
    let (records, run_id, run_dir) = run(&wrong, "shell").await;
    let r = &records["steps-apart"];
    let said = test_stdout(&run_dir, r);
    assert_eq!(r.outcome, Outcome::Fail(reeval::FailKind::Assertion), "{:?}\n{said}", r.message);
    assert_eq!(r.step_rewards[1].reward.as_ref().and_then(|r| r.get("reward")), Some(&0.0));
    assert!(
        r.message.as_deref().unwrap_or_default().contains("FAILED: the step's artifact"),
        "the failure shows the second verifier's output: {:?}",
        r.message
    );
    nothing_left(&run_id).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_verifier_past_its_limit_or_an_image_that_fails_leaves_nothing() {
    require_docker!();
    let dir = tasks_copy("harbor-separate-faults", |task| {
        if task.ends_with("own-image") {
            // Its verifier runs past its limit.
            let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
            std::fs::write(
                task.join("task.toml"),
                toml.replace("timeout_sec = 60.0", "timeout_sec = 2.0"),
            )
            .unwrap();
            std::fs::write(task.join("tests/test.sh"), "#!/bin/bash\nsleep 30\n").unwrap();
        } else {
            // Its verifier's image does not build.
            std::fs::write(task.join("tests/Dockerfile"), "FROM reeval/base:latest\nRUN exit 7\n")
                .unwrap();
        }
    });
    let (records, run_id, _) = run(&dir, "oracle").await;
    let slow = &records["own-image"];
    assert_eq!(slow.outcome, Outcome::Fail(reeval::FailKind::Assertion), "{:?}", slow.message);
    assert!(
        slow.message.as_deref().unwrap_or_default().contains("timed out after 2s"),
        "{:?}",
        slow.message
    );
    let broken = &records["task-copy"];
    assert_eq!(broken.outcome, Outcome::InfraError, "{:?}", broken.message);
    let failed =
        broken.phases.iter().find(|p| p.phase == Phase::Image && p.detail.contains("RUN exit 7"));
    assert!(
        failed.is_some() || broken.message.as_deref().unwrap_or_default().contains("exit"),
        "{:?}",
        broken.message
    );
    nothing_left(&run_id).await;
}

/// The core of it on the engine: an extra sandbox (with a service and a
/// volume) that the eval leaves behind, by an error, its budget running out
/// while a check runs in it, or a panic, is removed at teardown.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn an_extra_sandbox_left_by_an_error_a_timeout_or_a_panic_is_removed() {
    require_docker!();
    use reeval::environment::{Environment, Image, Mount, Service};
    fn env() -> Environment {
        Environment::new().mount(Mount::volume("shared", "/shared")).service(
            Service::new("side", Image::from("reeval/base:latest"))
                .command(["sleep", "infinity"])
                .mount(Mount::volume("shared", "/out")),
        )
    }
    let error = reeval::Eval::new("error", |c| {
        Box::pin(async move {
            let s = c.start_sandbox("other", env()).await?;
            reeval::expect(c.in_sandbox(&s).exec("true").await?).to_succeed()?;
            Err(reeval::Error::other("mine"))
        })
    });
    let timeout = reeval::Eval::new("timeout", |c| {
        Box::pin(async move {
            let s = c.start_sandbox("other", env()).await?;
            c.in_sandbox(&s).exec("sleep 60").await?;
            Ok(())
        })
    })
    .timeout(std::time::Duration::from_secs(3));
    let panic = reeval::Eval::new("panic", |c| {
        Box::pin(async move {
            c.start_sandbox("other", env()).await?;
            panic!("boom");
        })
    });
    let runner = common::runner_with("extra-sandbox-teardown", |c| {
        c.harnesses = vec!["shell".into()];
        c.threads = 3;
    });
    let report = runner.run(vec![error, timeout, panic]).await.expect("preflight passes");
    let outcome = |n: &str| report.records.iter().find(|r| r.eval == n).expect("record").outcome;
    assert_eq!(outcome("error"), Outcome::Fail(reeval::FailKind::Assertion));
    assert_eq!(outcome("timeout"), Outcome::Fail(reeval::FailKind::Timeout));
    assert_eq!(outcome("panic"), Outcome::Fail(reeval::FailKind::Assertion));
    for r in &report.records {
        let container = r
            .phases
            .iter()
            .find(|p| p.detail.starts_with("sandbox other: ") && p.phase == Phase::Container)
            .unwrap_or_else(|| panic!("{}: {:?}", r.eval, r.message));
        assert!(container.detail.contains("service side"), "{}", container.detail);
        assert!(
            r.events.iter().any(|e| e.message.contains("sandbox other removed at teardown")),
            "{}: {:?}",
            r.eval,
            r.events
        );
    }
    nothing_left(&report.run_id).await;
}
