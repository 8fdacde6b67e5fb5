//! Five quick evals for the cargo-nextest test of `tests/runner_outputs.rs`:
//! one process per eval records into one run, and `flaky_once` fails the
//! first time it runs (a marker file under `REEVAL_FIXTURE_STATE` remembers)
//! so that `--retries 1` runs it again. Not a tutorial: see `quickstart.rs`.

use reeval::prelude::*;

#[reeval::eval(timeout = "1m")]
async fn one(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("true").await?).to_succeed()
}

#[reeval::eval(timeout = "1m")]
async fn two(c: &mut Ctx) -> reeval::Result<()> {
    c.send("echo two > two.txt").await?;
    expect(c.read_file("two.txt").await?).to_contain("two")
}

#[reeval::eval(timeout = "1m")]
async fn three(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("echo three").await?).to_contain("three")
}

#[reeval::eval(timeout = "1m")]
async fn four(_c: &mut Ctx) -> reeval::Result<()> {
    expect(2 + 2).to_equal(4)
}

#[reeval::eval(timeout = "1m")]
async fn flaky_once(c: &mut Ctx) -> reeval::Result<()> {
    let state = std::env::var("REEVAL_FIXTURE_STATE").unwrap_or_else(|_| "/tmp".into());
    let marker = std::path::Path::new(&state).join("flaky_once.ran");
    let first = !marker.exists();
    std::fs::write(&marker, "").map_err(|e| reeval::Error::other(e.to_string()))?;
    expect(c.exec(if first { "exit 1" } else { "true" }).await?).to_succeed()
}

reeval::main!();
