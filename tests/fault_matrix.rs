//! The fault matrix (issue 19) against the real engine: each test injects one
//! fault and checks the outcome and kind the README promises, that every
//! record is complete, that nothing of the run is left on the engine, and
//! that no secret's value reaches a file of the run; then it checks its row
//! of docs/faults.md against what it saw (`REEVAL_BLESS=1` rewrites a row).
//! Faults that other suites inject (the runner's signals in
//! `tests/suite_binary.rs`, the judge's API in `tests/judge.rs`, the gateway's
//! upstreams in `tests/egress.rs`) are listed in the page below the table.

mod common;

use std::time::Duration;

use common::faults::{self, Row};
use reeval::prelude::*;
use reeval::sandbox::docker::EngineSpec;
use reeval::{Eval, FailKind, Outcome, RunReport};

/// A checks-only secret every row's eval reads in a check, so its value would
/// show in the record if redaction failed anywhere on the fault's path.
const SECRET: &str = "fault-matrix-secret-value-5b1e0c";

fn runner(tag: &str) -> reeval::Runner {
    let env_file = common::env_file(tag, &[("REEVAL_T_FAULT_SECRET", SECRET)]);
    common::runner_with(tag, |c| c.settings.env_file = Some(env_file))
}

/// The environment of every row: the checks-only secret, plus `f`'s changes.
fn env(
    f: impl Fn(Environment) -> Environment + Send + Sync + 'static,
) -> impl Fn() -> Environment + Send + Sync + 'static {
    move || f(Environment::new().secret_for_checks("REEVAL_T_FAULT_SECRET"))
}

async fn run_one(tag: &str, eval: Eval) -> RunReport {
    runner(tag).run(vec![eval]).await.expect("preflight passes")
}

/// Checks the promises of one attempt's row and its line in the table.
async fn row(report: &RunReport, id: &str, fault: &str, at: &str, outcome: Outcome, says: &str) {
    let r = faults::only(report);
    faults::assert_outcome(r, outcome, says);
    faults::assert_complete_and_clean(report, Some(SECRET));
    let left = faults::leftovers(&report.run_id, Some(&report.run_dir)).await;
    assert_eq!(left, "nothing", "nothing of the run is left");
    let (outcome, kind) = faults::outcome_of(r);
    faults::check_row(&Row { id, fault, at, outcome, kind, says, left });
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn engine_unreachable_at_start() {
    require_docker!();
    let eval =
        Eval::new("never_runs", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }));
    let r = common::runner_with("f-engine-gone", |c| {
        c.settings.backend = reeval::sandbox::BackendConfig::Docker {
            engines: vec![EngineSpec {
                host: "unix:///nonexistent/reeval-fault/docker.sock".into(),
                slots: None,
            }],
        };
    });
    let run_id = "unused".to_string();
    let err = r.run(vec![eval]).await.expect_err("preflight stops the run");
    let message = err.to_string();
    let says = "failed preflight, nothing was started";
    assert!(message.contains(says) && message.contains("nonexistent/reeval-fault"), "{message}");
    faults::check_row(&Row {
        id: "engine-1-unreachable",
        fault: "the engine is unreachable",
        at: "start of the run",
        outcome: "(run stops)".into(),
        kind: "config".into(),
        says,
        left: faults::leftovers(&run_id, None).await,
    });
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn engine_answering_slowly() {
    require_docker!();
    let proxy = common::slow_engine::SlowEngine::start(Duration::from_millis(40)).await;
    let env_file = common::env_file("f-engine-slow", &[("REEVAL_T_FAULT_SECRET", SECRET)]);
    let runner = common::runner_with("f-engine-slow", |c| {
        c.settings.env_file = Some(env_file);
        c.settings.backend = reeval::sandbox::BackendConfig::Docker {
            engines: vec![EngineSpec { host: proxy.host(), slots: Some(1) }],
        };
    });
    let eval = Eval::new("slow_engine", |c| {
        Box::pin(async move {
            c.send("echo hi > out.txt").await?;
            expect(c.exec("cat out.txt; echo $REEVAL_T_FAULT_SECRET >/dev/null").await?)
                .to_succeed()
        })
    })
    .environment(env(|e| e));
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    assert!(
        proxy.calls() > 10,
        "the engine's calls went through the slow proxy ({})",
        proxy.calls()
    );
    row(
        &report,
        "engine-2-slow",
        "the engine answers every call 40 ms late",
        "every engine call",
        Outcome::Pass,
        "",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn setup_step_hangs() {
    require_docker!();
    let eval =
        Eval::new("setup_hangs", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .environment(env(|e| e.setup_with_timeout("sleep 300", Duration::from_secs(2))));
    let report = run_one("f-setup-hangs", eval).await;
    row(
        &report,
        "setup-1-hangs",
        "a setup step hangs",
        "setup",
        Outcome::InfraError,
        "timed out after 2s",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn setup_step_exits_non_zero() {
    require_docker!();
    let eval =
        Eval::new("setup_fails", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .environment(env(|e| e.setup("echo about to fail; exit 3")));
    let report = run_one("f-setup-fails", eval).await;
    row(
        &report,
        "setup-2-exits-non-zero",
        "a setup step exits non-zero",
        "setup",
        Outcome::InfraError,
        "exited 3",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn oom_in_a_turn() {
    require_docker!();
    let eval = Eval::new("oom_turn", |c| {
        Box::pin(async move {
            c.send("python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'").await?;
            Ok(())
        })
    })
    .environment(env(|e| e.memory(64 << 20)));
    let report = run_one("f-oom-turn", eval).await;
    row(
        &report,
        "sandbox-1-oom-turn",
        "the agent's process is OOM-killed",
        "turn",
        Outcome::Fail(FailKind::Agent),
        "137",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn oom_in_a_check() {
    require_docker!();
    let eval = Eval::new("oom_check", |c| {
        Box::pin(async move {
            expect(c.exec("python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'").await?)
                .to_succeed()
        })
    })
    .environment(env(|e| e.memory(64 << 20)));
    let report = run_one("f-oom-check", eval).await;
    let r = faults::only(&report);
    assert!(r.checks[0].oom_killed, "the check is marked OOM-killed: {:?}", r.checks);
    row(
        &report,
        "sandbox-2-oom-check",
        "a check is OOM-killed",
        "check",
        Outcome::Fail(FailKind::Assertion),
        "137",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn pids_limit_in_a_turn() {
    require_docker!();
    let eval = Eval::new("pids_turn", |c| {
        Box::pin(async move {
            // 200 sleepers under a limit of 64: the shell's fork fails; the turn's exit says so.
            c.send("set -e; for i in $(seq 200); do sleep 30 & done; wait").await?;
            Ok(())
        })
    })
    .environment(env(|e| e.pids(64)));
    let report = run_one("f-pids-turn", eval).await;
    row(
        &report,
        "sandbox-3-pids-turn",
        "the pids limit is hit",
        "turn",
        Outcome::Fail(FailKind::Agent),
        "script exited",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_agent_killed_by_a_signal() {
    require_docker!();
    let eval = Eval::new("agent_signal", |c| {
        Box::pin(async move {
            c.send("echo started; kill -SEGV $$").await?;
            Ok(())
        })
    })
    .environment(env(|e| e));
    let report = run_one("f-agent-signal", eval).await;
    row(
        &report,
        "agent-1-signal",
        "the agent crashes with a signal (SIGSEGV)",
        "turn",
        Outcome::Fail(FailKind::Agent),
        "exited 139",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_agent_silent_until_the_timeout() {
    require_docker!();
    let eval = Eval::new("agent_silent", |c| {
        Box::pin(async move {
            c.send("sleep 300").await?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(3))
    .environment(env(|e| e));
    let report = run_one("f-agent-silent", eval).await;
    let r = faults::only(&report);
    assert_eq!(r.turns[0].status, reeval::TurnStatus::Aborted, "the turn is recorded as aborted");
    row(
        &report,
        "agent-2-silent",
        "the agent is silent until the budget runs out",
        "turn",
        Outcome::Fail(FailKind::Timeout),
        "timed out after",
    )
    .await;
}

/// A capture of `out` after the agent made it with `script`; checks that the
/// run directory holds no link and nothing large, whatever the capture did.
async fn capture_after(tag: &str, script: &'static str) -> RunReport {
    let eval = Eval::new("hostile_capture", move |c| {
        Box::pin(async move {
            c.send(script).await?;
            let cap = c.capture("out", Artifact::Dir("out".into())).await?;
            expect(cap.text.as_str()).to_contain("passwd-link -> /etc/passwd")?;
            // A hard link is listed as one, never resolved on the host.
            expect(cap.text.as_str())
                .to_match(r"(sub/a.txt \(5 bytes\)|sub/a.txt -> hardlink:)")?;
            expect(cap.text.as_str()).not().to_contain("root:x:0:0")?;
            Ok(())
        })
    })
    .environment(env(|e| e));
    let report = run_one(tag, eval).await;
    for p in faults::files_under(&report.run_dir) {
        let meta = std::fs::symlink_metadata(&p).expect("metadata");
        assert!(!meta.file_type().is_symlink(), "{} is a link", p.display());
        assert!(meta.len() < 64 << 20, "{} is {} bytes", p.display(), meta.len());
    }
    report
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_captured_directory_with_links_out_of_the_workspace() {
    require_docker!();
    // Links out of the workspace and a hard link: kept
    // as links or as the sandbox's own bytes, never followed on the host.
    let report = capture_after(
        "f-capture-links",
        "mkdir -p out/sub && echo kept > out/sub/a.txt && ln -s /etc/passwd out/passwd-link \
         && ln -s ../../.. out/up && ln out/sub/a.txt out/hard",
    )
    .await;
    row(
        &report,
        "capture-1-links-out",
        "a captured directory holding symlinks out of the workspace and a hard link",
        "capture",
        Outcome::Pass,
        "",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_captured_directory_with_a_10_gb_sparse_file() {
    require_docker!();
    let report = capture_after(
        "f-capture-sparse",
        "mkdir -p out/sub && echo kept > out/sub/a.txt && ln -s /etc/passwd out/passwd-link && truncate -s 10G out/sparse.bin",
    )
    .await;
    // The archive is refused at its cap, never read whole; the eval's capture fails as its own error.
    row(
        &report,
        "capture-2-sparse-10g",
        "a captured directory holding a 10 GB sparse file",
        "capture",
        Outcome::Fail(FailKind::Assertion),
        "is larger than 268435456 bytes",
    )
    .await;
}

/// A runner whose run id is known beforehand, so a fault can find the attempt's container.
fn runner_for(tag: &str) -> (reeval::Runner, String) {
    let env_file = common::env_file(tag, &[("REEVAL_T_FAULT_SECRET", SECRET)]);
    let run_id = format!("{tag}-{}", std::process::id());
    let id = run_id.clone();
    (
        common::runner_with(tag, |c| {
            c.settings.env_file = Some(env_file);
            c.settings.run_id = id;
        }),
        run_id,
    )
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_killed_during_a_turn() {
    require_docker!();
    use common::inject::{Fault, run_faulted};
    let (runner, run_id) = runner_for("f-killed-turn");
    let eval = Eval::new("killed_turn", |c| {
        Box::pin(async move {
            c.send("touch /tmp/in-turn; sleep 30").await?;
            expect(c.exec("echo $REEVAL_T_FAULT_SECRET >/dev/null").await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-turn", Fault::Kill).await;
    // "during turn 1", or the call, when a loaded engine kept the killed exec attached until the budget.
    let says = "stopped (exit 137, container not running) during";
    let what = "the sandbox is killed (docker kill)";
    row(&report, "sandbox-4-killed-turn", what, "turn", Outcome::InfraError, says).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_killed_during_a_check() {
    require_docker!();
    use common::inject::{Fault, run_faulted};
    let (runner, run_id) = runner_for("f-killed-check");
    let eval = Eval::new("killed_check", |c| {
        Box::pin(async move {
            let check = "echo $REEVAL_T_FAULT_SECRET >/dev/null; touch /tmp/in-check; sleep 30";
            expect(c.exec(check).await?).to_exit_with(137)
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-check", Fault::Kill).await;
    let says = "stopped (exit 137, container not running) during";
    let what = "the sandbox is killed (docker kill)";
    row(&report, "sandbox-5-killed-check", what, "check", Outcome::InfraError, says).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_paused_during_a_check() {
    require_docker!();
    use common::inject::{Fault, run_faulted};
    let (runner, run_id) = runner_for("f-paused-check");
    let eval = Eval::new("paused_check", |c| {
        Box::pin(async move {
            let check = "echo $REEVAL_T_FAULT_SECRET >/dev/null; touch /tmp/in-check; sleep 2";
            expect(c.exec(check).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(6))
    .environment(env(|e| e));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-check", Fault::Pause).await;
    let says = "was paused (container paused, nothing in it runs)";
    let what = "the sandbox is paused (docker pause); the budget ends the frozen check";
    row(&report, "sandbox-6-paused-check", what, "check", Outcome::InfraError, says).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_setup_step_that_leaves_a_process_running() {
    require_docker!();
    let nonce = format!("{}-{}", std::process::id(), reeval::runner::new_run_id());
    let env_file = common::env_file("f-setup-left", &[("REEVAL_T_FAULT_SECRET", SECRET)]);
    let runner = common::runner_with("f-setup-left", |c| {
        c.settings.env_file = Some(env_file);
        c.settings.setup_cache = true;
    });
    let eval = Eval::new("setup_leaves_a_process", |c| {
        Box::pin(async move {
            expect(c.exec("cat ready.txt; echo $REEVAL_T_FAULT_SECRET >/dev/null").await?)
                .to_succeed()
        })
    })
    .environment(env(move |e| {
        e.env("FAULT_NONCE", nonce.clone())
            .setup("echo ready > ready.txt && (sleep 600 >/dev/null 2>&1 &)")
    }));
    let report = run_with(runner, eval).await;
    // The run waited for its fill, which refused to commit a sandbox that never settled.
    let snapshot = report.records[0].phases.iter().find(|p| p.phase.as_str() == "snapshot");
    let detail = snapshot.map(|p| p.detail.as_str()).unwrap_or("");
    let digest = detail.split("setup cache miss, ").nth(1).and_then(|d| d.split(' ').next());
    let digest = digest.unwrap_or_else(|| panic!("the miss asked for a fill: {detail}"));
    let docker = reeval::sandbox::DockerBackend::connect().await.expect("the engine answers");
    let image = docker.image_id(&format!("reeval/setup:{digest}")).await.expect("inspect");
    assert!(image.is_none(), "a sandbox that never settled was not committed");
    let what = "a setup step leaves a process running (setup cache on)";
    row(&report, "setup-3-leaves-a-process", what, "setup", Outcome::Pass, "").await;
}

async fn run_with(runner: reeval::Runner, eval: Eval) -> RunReport {
    runner.run(vec![eval]).await.expect("preflight passes")
}
