//! The fault matrix's sandbox rows that `tests/fault_matrix.rs` has no room
//! for (docs/faults.md): the sandbox killed, paused or cut from its network
//! during a turn, a check or the final collection; an agent CLI printing
//! garbage; a hostile workspace at the final collection. Each test injects
//! the fault against the real engine, checks the outcome and kind, that the
//! record is complete, that nothing of the run is left on the engine and that
//! no secret's value reaches a file of the run, then checks its row of the
//! table (`REEVAL_BLESS=1` rewrites a row that differs; review the diff).

mod common;

use std::time::Duration;

use common::faults::{self, Row};
use common::inject::{Fault, container_of, docker, inject};
use reeval::prelude::*;
use reeval::{Eval, Outcome, Record, RunReport};

/// A checks-only secret every row's eval reads in a check, so its value would
/// show in the record if redaction failed anywhere on the fault's path.
const SECRET: &str = "fault-matrix-secret-value-7c2d41";

/// The environment of every row: the checks-only secret, plus `f`'s changes.
fn env(
    f: impl Fn(Environment) -> Environment + Send + Sync + 'static,
) -> impl Fn() -> Environment + Send + Sync + 'static {
    move || f(Environment::new().secret_for_checks("REEVAL_T_FAULT_SECRET"))
}

/// A runner whose run id is known beforehand, so a fault can find the attempt's container.
fn runner_for(tag: &str, vars: &[(&str, &str)]) -> (reeval::Runner, String) {
    let mut vars = vars.to_vec();
    vars.push(("REEVAL_T_FAULT_SECRET", SECRET));
    let env_file = common::env_file(tag, &vars);
    let run_id = format!("{tag}-{}", std::process::id());
    let id = run_id.clone();
    (
        common::runner_with(tag, |c| {
            c.env_file = Some(env_file);
            c.run_id = id;
        }),
        run_id,
    )
}

/// The check every row's eval runs: it reads the secret.
const READS_SECRET: &str = "echo $REEVAL_T_FAULT_SECRET >/dev/null";

/// Checks the promises of one attempt's row and its line in the table. `says`
/// is in the record's message, or (for an attempt graded before the fault) in
/// one of its events.
async fn row(report: &RunReport, id: &str, fault: &str, at: &str, outcome: Outcome, says: &str) {
    let r = faults::only(report);
    let message = r.message.as_deref().unwrap_or("");
    assert_eq!(r.outcome, outcome, "{message}\n  events: {:?}", events(r));
    assert!(
        message.contains(says) || events(r).iter().any(|e| e.contains(says)),
        "the record says {says:?}: {message}\n  events: {:?}",
        events(r)
    );
    faults::assert_complete_and_clean(report, Some(SECRET));
    let left = faults::leftovers(&report.run_id, Some(&report.run_dir)).await;
    assert_eq!(left, "nothing", "nothing of the run is left");
    let (outcome, kind) = faults::outcome_of(r);
    faults::check_row(&Row { id, fault, at, outcome, kind, says, left });
}

fn events(r: &Record) -> Vec<&str> {
    r.events.iter().map(|e| e.message.as_str()).collect()
}

/// An eval whose turn writes `work.txt` (so the workspace is listed, and the
/// final collection asks the in-sandbox helper), whose check passes, and
/// which then applies `fault` to its own container: the final collection meets it.
fn faults_itself_at_the_end(name: &'static str, run_id: String, fault: Fault) -> Eval {
    Eval::new(name, move |c| {
        let run_id = run_id.clone();
        Box::pin(async move {
            c.send("echo work > work.txt").await?;
            expect(c.exec(format!("cat work.txt; {READS_SECRET}")).await?).to_succeed()?;
            let docker = docker().await;
            let attempt = format!("{name}.shell.t1.try1");
            let id = container_of(&docker, &run_id, &attempt).await.expect("its container");
            fault.apply(&docker, &id).await;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e))
}

/// The agent's work is in the record although its sandbox was lost before
/// the final collection, and the record says how it was read; the collection
/// noticed the loss at once (a paused sandbox's helper never answers).
fn assert_collected_through_the_archive(report: &RunReport, state: &str) {
    let r = faults::only(report);
    eprintln!("collected {}, events {:?}", r.workspace_collected, events(r));
    assert!(r.workspace_collected, "{:?}", events(r));
    assert_eq!(r.final_diff.as_ref().expect("the final diff").paths(), ["work.txt"]);
    assert!(events(r).iter().any(|e| e.contains(state)), "{:?}", events(r));
    let teardown = r.phases.iter().find(|p| p.phase.as_str() == "teardown").expect("teardown");
    assert!(teardown.duration_ms < 30_000, "teardown took {} ms", teardown.duration_ms);
}

#[tokio::test]
async fn the_sandbox_killed_at_the_final_collection() {
    require_docker!();
    let (runner, run_id) = runner_for("f-killed-collect", &[]);
    let eval = faults_itself_at_the_end("killed_collect", run_id, Fault::Kill);
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    assert_collected_through_the_archive(&report, "stopped (exit 137, container not running)");
    let says = "during teardown: the final workspace was read through the engine's archive";
    let what = "the sandbox is killed (docker kill) after the last check";
    row(&report, "sandbox-7-killed-collection", what, "final collection", Outcome::Pass, says)
        .await;
}

#[tokio::test]
async fn the_sandbox_paused_at_the_final_collection() {
    require_docker!();
    let (runner, run_id) = runner_for("f-paused-collect", &[]);
    let eval = faults_itself_at_the_end("paused_collect", run_id, Fault::Pause);
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    assert_collected_through_the_archive(&report, "was paused");
    let says = "during teardown: the final workspace was read through the engine's archive";
    let what = "the sandbox is paused (docker pause) after the last check";
    row(&report, "sandbox-8-paused-collection", what, "final collection", Outcome::Pass, says)
        .await;
}

#[tokio::test]
async fn the_sandbox_paused_during_a_turn() {
    require_docker!();
    let (runner, run_id) = runner_for("f-paused-turn", &[]);
    let eval = Eval::new("paused_turn", |c| {
        Box::pin(async move {
            c.send("touch /tmp/in-turn; sleep 2; echo done > done.txt").await?;
            expect(c.exec(READS_SECRET).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(6))
    .environment(env(|e| e));
    let at = "paused_turn.shell.t1.try1".to_string();
    let fault = inject(run_id, at, "/tmp/in-turn", Duration::ZERO, Fault::Pause);
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    fault.await.unwrap();
    let says = "was paused (container paused, nothing in it runs)";
    let what = "the sandbox is paused (docker pause); the budget ends the frozen turn";
    row(&report, "sandbox-9-paused-turn", what, "turn", Outcome::InfraError, says).await;
}
