//! A suite of evals with known outcomes, run by the project's own tests
//! (`tests/suite_binary.rs`) to check exit codes, records and the
//! cargo-nextest protocol. Not a tutorial: see `quickstart.rs` for that.

use reeval::prelude::*;

#[reeval::eval(timeout = "1m")]
async fn passes(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("true").await?).to_succeed()
}

#[reeval::eval(timeout = "1m")]
async fn fails(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("echo 'not what you wanted'; exit 4").await?).to_succeed()
}

fn broken_setup() -> Environment {
    Environment::new().setup("echo setting up; echo 'cannot install' >&2; exit 7")
}

#[reeval::eval(timeout = "1m", environment = broken_setup)]
async fn infra(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("true").await?).to_succeed()
}

fn two_secrets() -> Environment {
    Environment::new()
        .secret("REEVAL_FIXTURE_MISSING_A")
        .secret_for_checks("REEVAL_FIXTURE_MISSING_B")
}

#[reeval::eval(timeout = "1m", environment = two_secrets)]
async fn needs_secrets(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("true").await?).to_succeed()
}

#[reeval::eval(timeout = "1m", ignore)]
async fn ignored_one(_c: &mut Ctx) -> reeval::Result<()> {
    Ok(())
}

/// Runs until killed: for the signal tests (`--ignored hangs --exact`).
#[reeval::eval(timeout = "20m", ignore)]
async fn hangs(c: &mut Ctx) -> reeval::Result<()> {
    c.send("echo started > started.txt; sleep 1200").await?;
    Ok(())
}

mod nested {
    use reeval::prelude::*;

    #[reeval::eval(timeout = "1m", tags = ["fast"])]
    async fn no_sandbox(_c: &mut Ctx) -> reeval::Result<()> {
        expect(1 + 1).to_equal(2)
    }
}

reeval::main!();
