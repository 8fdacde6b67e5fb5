//! A suite of evals for the fault matrix's rows about the run around the
//! sandbox (`tests/fault_matrix_run.rs`): each one holds a phase open long
//! enough for a test to signal the runner there, or writes records for a
//! test to take the disk away from. Not a tutorial: see `quickstart.rs`.

use std::time::Duration;

use reeval::prelude::*;

/// A checks-only secret (the test sets its value in the suite's environment),
/// read by a check of every eval so its value would show if redaction failed.
fn with_secret() -> Environment {
    Environment::new().secret_for_checks("REEVAL_T_FAULT_SECRET")
}

fn slow_setup() -> Environment {
    with_secret().setup_with_timeout("touch /tmp/in-setup; sleep 1200", Duration::from_secs(1200))
}

/// Holds its setup step open until signalled (`--ignored in_setup --exact`).
#[reeval::eval(timeout = "20m", ignore, environment = slow_setup)]
async fn in_setup(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("echo $REEVAL_T_FAULT_SECRET >/dev/null").await?).to_succeed()
}

/// Holds its turn open until signalled (`--ignored in_turn --exact`).
#[reeval::eval(timeout = "20m", ignore, environment = with_secret)]
async fn in_turn(c: &mut Ctx) -> reeval::Result<()> {
    c.send("touch /tmp/in-turn; sleep 1200").await?;
    expect(c.exec("echo $REEVAL_T_FAULT_SECRET >/dev/null").await?).to_succeed()
}

/// Passes, leaving 3000 files outside the workspace: removing its container
/// takes a while, a window for a signal during teardown.
#[reeval::eval(timeout = "5m", environment = with_secret)]
async fn slow_to_remove(c: &mut Ctx) -> reeval::Result<()> {
    c.send("echo done > out.txt").await?;
    let many = "mkdir -p /tmp/many && cd /tmp/many && seq 1 3000 | xargs touch";
    expect(c.exec(format!("{many}; echo $REEVAL_T_FAULT_SECRET >/dev/null")).await?).to_succeed()
}

/// Passes quickly: a record per trial, for the record directory's rows.
#[reeval::eval(timeout = "2m", environment = with_secret)]
async fn records(c: &mut Ctx) -> reeval::Result<()> {
    c.send("echo done > out.txt").await?;
    expect(c.exec("cat out.txt; echo $REEVAL_T_FAULT_SECRET >/dev/null").await?).to_succeed()
}

/// Needs no sandbox: a next run that sweeps what a killed one left.
#[reeval::eval(timeout = "1m")]
async fn no_sandbox(_c: &mut Ctx) -> reeval::Result<()> {
    expect(1 + 1).to_equal(2)
}

reeval::main!();
