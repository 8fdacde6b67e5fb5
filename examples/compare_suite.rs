//! A suite for the project's own comparison and oracle tests
//! (`tests/compare.rs`), with the `shell` harness and outcomes known in
//! advance. Not a tutorial: see docs/compare.md.

use reeval::prelude::*;

/// Adds the file that `needs_the_skill` looks for: with it the eval passes, without it it fails.
#[reeval::variant]
fn with_skill(env: Environment) -> Environment {
    env.file("SKILL.md", "Write used.txt with the word skill.\n")
}

/// An arm whose platform fails now and then (`infra_in_one_arm` ends its even trials in infra errors).
#[reeval::variant]
fn flaky_platform(env: Environment) -> Environment {
    env.env("FIXTURE_FLAKY", "1")
}

/// Passes only when the workspace holds `SKILL.md`.
#[reeval::eval(timeout = "2m", trials = 5, harness = "shell", tags = ["compare"])]
async fn needs_the_skill(c: &mut Ctx) -> reeval::Result<()> {
    c.send("if [ -f SKILL.md ]; then echo skill > used.txt; fi").await?;
    expect(c.exec("cat used.txt").await?).to_succeed()
}

/// Passes in either arm.
#[reeval::eval(timeout = "2m", trials = 5, harness = "shell", tags = ["compare"])]
async fn unchanged(c: &mut Ctx) -> reeval::Result<()> {
    c.send("echo hi > hi.txt").await?;
    expect(c.exec("cat hi.txt").await?).to_succeed()
}

/// Passes, except that the `flaky_platform` arm's even trials end in infra errors.
#[reeval::eval(timeout = "2m", trials = 4, harness = "shell", tags = ["infra"])]
async fn infra_in_one_arm(c: &mut Ctx) -> reeval::Result<()> {
    let r = c.record();
    if r.arm.as_deref() == Some("flaky_platform") && r.trial.is_multiple_of(2) {
        return Err(reeval::Error::infra("reach the fixture's service", "it is down on purpose"));
    }
    expect(c.exec("true").await?).to_succeed()
}

/// The reference solution of the two oracle evals.
async fn write_greeting(c: &mut Ctx) -> reeval::Result<()> {
    c.write_file("greeting.txt", "hello\n").await?;
    Ok(())
}

/// The oracle solves it.
#[reeval::eval(timeout = "2m", harness = "shell", oracle = write_greeting, tags = ["oracle"])]
async fn writes_a_greeting(c: &mut Ctx) -> reeval::Result<()> {
    c.send("Write greeting.txt saying hello").await?;
    expect(c.exec("grep -q hello greeting.txt").await?).to_succeed()
}

/// Its check asks for what the task never asked: even the oracle fails it.
#[reeval::eval(timeout = "2m", harness = "shell", oracle = write_greeting, tags = ["oracle"])]
async fn impossible_check(c: &mut Ctx) -> reeval::Result<()> {
    c.send("Write greeting.txt saying hello").await?;
    expect(c.exec("grep -q goodbye greeting.txt").await?).to_succeed()
}

/// Two turns: a text file, a binary file, an executable script, a file in a
/// directory and a timestamp; then an append, a binary append, a deletion and
/// a symlink. `FIXTURE_STRICT` adds a check the work does not meet (a regrade
/// with a changed check).
#[reeval::eval(timeout = "2m", harness = "shell", tags = ["replay"])]
async fn two_turns(c: &mut Ctx) -> reeval::Result<()> {
    c.send(concat!(
        "printf 'one\\n' > notes.txt; printf '\\000\\001\\377\\376' > blob.bin; ",
        "printf '#!/bin/sh\\necho ran\\n' > run.sh; chmod 755 run.sh; ",
        "mkdir -p sub; echo gone > sub/old.txt; date +%s%N > stamp.txt"
    ))
    .await?;
    c.send("printf 'two\\n' >> notes.txt; printf '\\000\\002' >> blob.bin; rm sub/old.txt; ln -s notes.txt link")
        .await?;
    expect(
        c.exec("./run.sh && stat -c '%a %n' run.sh && sha256sum blob.bin notes.txt stamp.txt && test -L link")
            .await?,
    )
    .to_succeed()?;
    if std::env::var_os("FIXTURE_STRICT").is_some() {
        expect(c.exec("grep -q three notes.txt").await?).to_succeed()?;
    }
    Ok(())
}

/// The shell harness in an image of its own (with a marker file), so that a
/// replay can be seen to run in the recorded harness's image.
#[derive(Debug, Default)]
struct ShellInOwnImage(reeval::harnesses::ShellHarness);

#[reeval::async_trait]
impl reeval::Harness for ShellInOwnImage {
    fn name(&self) -> &str {
        "shell-own-image"
    }

    fn reads_context_summary(&self) -> bool {
        false
    }

    fn image(&self) -> Option<reeval::ImageSpec> {
        Some(Image::install("reeval/base:latest", ["echo built > /opt/own-image-marker"]))
    }

    async fn turn(
        &mut self,
        sandbox: &reeval::SandboxHandle,
        prompt: &str,
        turn: &reeval::TurnContext,
    ) -> Result<reeval::TurnReport, reeval::HarnessError> {
        self.0.turn(sandbox, prompt, turn).await
    }
}

reeval::register_harness!("shell-own-image", |_| Box::new(ShellInOwnImage::default()));

/// Passes only in the harness's own image: a replay in the default image fails it.
#[reeval::eval(timeout = "2m", harness = "shell-own-image", tags = ["replay-image"])]
async fn in_the_harness_image(c: &mut Ctx) -> reeval::Result<()> {
    c.send("echo hi > out.txt").await?;
    expect(c.exec("test -f /opt/own-image-marker && grep -q hi out.txt").await?).to_succeed()
}

reeval::main!();
