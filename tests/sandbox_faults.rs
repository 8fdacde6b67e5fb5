//! Faults of the sandbox from outside (issue 19): a container killed or
//! paused while a turn or a check runs is the platform's failure, retried with
//! a fresh sandbox, never the agent's or the eval's. Each test finds its
//! attempt's container by the run's labels and acts on it from here, as a
//! careless operator or a dying engine would.

mod common;

use std::time::{Duration, Instant};

use common::inject::{Fault, container_of, docker, inject};
use reeval::prelude::*;
use reeval::{Eval, Outcome, Record};

fn run_id(tag: &str) -> String {
    format!("faults-{tag}-{}", std::process::id())
}

/// The run's records of `eval`, first try first.
fn tries<'a>(records: &'a [Record], eval: &str) -> Vec<&'a Record> {
    let mut tries: Vec<&Record> = records.iter().filter(|r| r.eval == eval).collect();
    tries.sort_by_key(|r| r.try_);
    tries
}

/// The first try is an infra error whose message says the sandbox stopped
/// during `during`; the second passed; the run exits 0; nothing is left.
///
/// On a loaded engine the exec of a killed container can stay attached (the
/// engine keeps reporting it running): the step then ends with the budget,
/// and the attempt's end names the lost sandbox and the call instead.
async fn assert_retried_after_the_fault(report: &reeval::RunReport, eval: &str, during: &str) {
    let tries = tries(&report.records, eval);
    assert_eq!(
        tries.len(),
        2,
        "one retry: {:?}",
        tries.iter().map(|r| &r.message).collect::<Vec<_>>()
    );
    let first = tries[0];
    assert_eq!(first.outcome, Outcome::InfraError, "{:?}", first.message);
    let message = first.message.as_deref().unwrap_or("");
    eprintln!(
        "{eval}, try 1: {message}\n  events: {:?}",
        first.events.iter().map(|e| &e.message).collect::<Vec<_>>()
    );
    let named = message.contains(during)
        || message.starts_with("failed to finish the attempt: the sandbox");
    assert!(message.contains("the sandbox") && named, "{message}");
    assert_eq!(tries[1].outcome, Outcome::Pass, "{:?}", tries[1].message);
    assert_eq!(report.exit_code(), 0);
    assert!(report.run_dir.join(first.file_name()).exists(), "the first try's record is written");
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "nothing is left");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_sandbox_killed_during_a_shell_turn_is_an_infra_error_and_retried() {
    require_docker!();
    let run_id = run_id("turn");
    let runner = common::runner_with("fault-turn", |c| {
        c.settings.run_id = run_id.clone();
        c.settings.infra_retries = 1;
    });
    let eval = Eval::new("killed_turn", |c| {
        Box::pin(async move {
            c.send("touch /tmp/in-turn; sleep 4; echo done > done.txt").await?;
            expect(c.read_file("done.txt").await?).to_equal("done\n")?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60));
    let killer = inject(
        run_id.clone(),
        "killed_turn.shell.t1.try1".into(),
        "/tmp/in-turn",
        Duration::ZERO,
        Fault::Kill,
    );
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let killed = killer.await.unwrap();
    assert_retried_after_the_fault(&report, "killed_turn", "during turn 1").await;
    let first = tries(&report.records, "killed_turn")[0];
    let message = first.message.as_deref().unwrap();
    assert!(message.contains(&killed[..12]), "names the sandbox: {message}");
    assert!(message.contains("not running"), "says what happened: {message}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_sandbox_killed_during_a_check_is_an_infra_error_and_retried() {
    require_docker!();
    let run_id = run_id("check");
    let runner = common::runner_with("fault-check", |c| {
        c.settings.run_id = run_id.clone();
        c.settings.infra_retries = 1;
    });
    // The eval would pass on a killed check's exit code (137 is not 0): the
    // check's result must never reach it.
    let eval = Eval::new("killed_check", |c| {
        Box::pin(async move {
            expect(c.exec("touch /tmp/in-check; sleep 4; exit 3").await?).to_exit_with(3)?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60));
    let killer = inject(
        run_id.clone(),
        "killed_check.shell.t1.try1".into(),
        "/tmp/in-check",
        Duration::ZERO,
        Fault::Kill,
    );
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    killer.await.unwrap();
    assert_retried_after_the_fault(&report, "killed_check", "during the check").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_sandbox_paused_during_a_check_is_an_infra_error_within_the_budget_and_removed() {
    require_docker!();
    let run_id = run_id("pause");
    let runner = common::runner_with("fault-pause", |c| {
        c.settings.run_id = run_id.clone();
        c.settings.infra_retries = 1;
    });
    let eval = Eval::new("paused_check", |c| {
        Box::pin(async move {
            expect(c.exec("touch /tmp/in-check; sleep 2").await?).to_succeed()?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(8));
    let pauser = inject(
        run_id.clone(),
        "paused_check.shell.t1.try1".into(),
        "/tmp/in-check",
        Duration::ZERO,
        Fault::Pause,
    );
    let began = Instant::now();
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    pauser.await.unwrap();
    // The frozen check ends with the budget (8 s), teardown with its own deadline.
    assert!(began.elapsed() < Duration::from_secs(90), "{:?}", began.elapsed());
    assert_retried_after_the_fault(&report, "paused_check", "paused").await;
}

/// An eval that passes, then applies `fault` to its own container (found by
/// the run's labels) before returning, so the final collection meets it.
fn faults_itself_at_the_end(name: &'static str, run_id: String, fault: Fault) -> Eval {
    Eval::new(name, move |c| {
        let run_id = run_id.clone();
        Box::pin(async move {
            // The agent's work (a check's writes are the check's, never in the final diff).
            c.send("echo work > work.txt").await?;
            expect(c.exec("cat work.txt").await?).to_succeed()?;
            let docker = docker().await;
            let attempt = format!("{name}.shell.t1.try1");
            let id = container_of(&docker, &run_id, &attempt).await.expect("its container");
            fault.apply(&docker, &id).await;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60))
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_sandbox_lost_before_the_final_collection_keeps_the_grade_and_the_record_says_so() {
    require_docker!();
    let run_id = run_id("collect");
    let runner = common::runner_with("fault-collect", |c| {
        c.settings.run_id = run_id.clone();
        c.settings.infra_retries = 1;
    });
    let evals = vec![
        faults_itself_at_the_end("killed_at_collection", run_id.clone(), Fault::Kill),
        faults_itself_at_the_end("paused_at_collection", run_id.clone(), Fault::Pause),
    ];
    let report = runner.run(evals).await.expect("preflight passes");
    for (eval, state) in
        [("killed_at_collection", "container not running"), ("paused_at_collection", "paused")]
    {
        let tries = tries(&report.records, eval);
        assert_eq!(tries.len(), 1, "graded on a live sandbox: not retried");
        let r = tries[0];
        // Every check ran in a live sandbox: the grade stands.
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
        let said = r.events.iter().map(|e| e.message.as_str()).collect::<Vec<_>>();
        let teardown: Vec<String> = r
            .phases
            .iter()
            .filter(|p| p.phase.as_str() == "teardown")
            .map(|p| format!("{} ms: {}", p.duration_ms, p.detail))
            .collect();
        eprintln!(
            "{eval}: collected {}, events {said:?}, teardown {teardown:?}",
            r.workspace_collected
        );
        if r.workspace_collected {
            // The engine still reads a stopped or paused container's files: the agent's work is there.
            assert_eq!(r.final_diff.as_ref().unwrap().paths(), ["work.txt"]);
        } else {
            // Not faked: the record says what happened to the sandbox.
            assert!(r.final_diff.is_none());
            assert!(
                said.iter()
                    .any(|e| e.starts_with("failed to collect the final workspace: the sandbox")
                        && e.contains(state)
                        && e.ends_with("during teardown")),
                "{said:?}"
            );
        }
    }
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "the paused one is removed too");
}

/// The claude-code stand-in (see `tests/harness_clis.rs`), installed where the CLI would be.
fn with_claude_stand_in() -> Environment {
    Environment::new()
        .image(reeval::Image::from("reeval/base:latest"))
        .file_with_mode("/usr/local/bin/claude", include_bytes!("standins/claude.py"), 0o755)
        .file_with_mode(
            "/usr/local/lib/reeval-standins/standin_common.py",
            include_bytes!("standins/standin_common.py"),
            0o644,
        )
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_sandbox_killed_during_a_cli_harness_turn_is_an_infra_error_and_retried() {
    require_docker!();
    let run_id = run_id("cli");
    let env_file =
        common::env_file("fault-cli-env", &[("ANTHROPIC_API_KEY", "sk-test-fault-0123456789")]);
    let runner = common::runner_with("fault-cli", |c| {
        c.settings.run_id = run_id.clone();
        c.settings.infra_retries = 1;
        c.settings.env_file = Some(env_file);
    });
    // The first try's agent reports an event, then works until its sandbox is killed
    // (a CLI killed after its first event would be the agent's failure by its exit
    // alone); the retry's agent answers.
    let eval = Eval::new("killed_cli_turn", |c| {
        Box::pin(async move {
            let prompt = if c.record().try_ == 1 { "SCENARIO:stall" } else { "SCENARIO:answer" };
            c.send(prompt).await?;
            Ok(())
        })
    })
    .harness("claude-code:sonnet")
    .environment(with_claude_stand_in)
    .timeout(Duration::from_secs(60));
    let killer = inject(
        run_id.clone(),
        "killed_cli_turn.claude-code_sonnet.t1.try1".into(),
        // Past its first event (the stand-in's session file is written before it).
        "proc:/usr/local/bin/claude",
        Duration::from_secs(2),
        Fault::Kill,
    );
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    killer.await.unwrap();
    assert_retried_after_the_fault(&report, "killed_cli_turn", "during turn 1").await;
    // The agent had started (it said something): by the CLI's exit alone, the agent's failure.
    let turn = &tries(&report.records, "killed_cli_turn")[0].turns[0];
    assert_eq!(turn.final_message.as_deref(), Some("Working on it..."), "{turn:?}");
}
