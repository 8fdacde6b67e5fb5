//! The verifier in a sandbox of its own (`verifier_env.rs`), as Harbor's
//! `_run_separate_verifier`: the agent's logs captured where they are, the
//! verifier's sandbox started, the declared artifacts and `/logs/artifacts`
//! copied across (to the same paths, without what `exclude` leaves out),
//! the verifier run there and its reward read, the sandbox removed.

use super::artifacts::{CONVENTION, Declared, declared, in_main};
use super::eval::{HarborTask, LOG_DIRS};
use super::place::Place;
use super::run::{Verified, Verifier, capture_logs, verify_at};
use super::task::ArtifactEntry;
use super::verifier_env::{SANDBOX, SeparateVerifier};
use reeval_core::Ctx;
use reeval_core::error::Result;
use reeval_core::exec::Command;

/// A verifier's own sandbox: how it is made, its name in the record, and
/// the artifacts copied into it beside the task's (a step's own).
pub(super) struct Apart<'a> {
    pub separate: &'a SeparateVerifier,
    pub name: &'a str,
    pub artifacts: &'a [ArtifactEntry],
}

impl<'a> Apart<'a> {
    /// A single-step task's: named `verifier`, the task's artifacts.
    pub(super) fn of_task(separate: &'a SeparateVerifier) -> Self {
        Apart { separate, name: SANDBOX, artifacts: &[] }
    }
}

/// Grades the attempt (or a step of it) in the verifier's own sandbox.
pub(super) async fn verify(
    c: &mut Ctx,
    task: &HarborTask,
    apart: &Apart<'_>,
    v: &Verifier,
) -> Result<Verified> {
    let separate = apart.separate;
    // The agent's logs stay in its sandbox: kept from there.
    let listing = format!(
        "for d in {}; do [ -n \"$(find \"$d\" -type f -print -quit 2>/dev/null)\" ] && echo \"$d\"; done; true",
        LOG_DIRS.join(" ")
    );
    let listing = Command::shell(listing).user("0").step("list the agent's logs");
    let present = c.exec(listing).await?;
    let agents: String =
        present.stdout.lines().filter(|d| *d != "/logs/verifier").collect::<Vec<_>>().join("\n");
    capture_logs(c, Place::Shared, &v.prefix, &agents).await?;
    let sandbox = c.start_sandbox(apart.name, separate.environment.clone()).await?;
    let convention = Declared { path: CONVENTION.to_string(), exclude: Vec::new(), service: None };
    let agents_workdir = super::shell::workdir(c).await?;
    for artifact in
        std::iter::once(convention).chain(in_main(declared(task, apart.artifacts, &agents_workdir)))
    {
        c.copy_to_sandbox(&sandbox, &artifact.path, &artifact.exclude).await?;
    }
    let workdir = c.in_sandbox(&sandbox).handle()?.workspace().to_string();
    let place = Place::Separate {
        sandbox: &sandbox,
        workdir: &workdir,
        bundled_tests: separate.bundled_tests,
    };
    let graded = verify_at(c, v, place).await;
    // Removed now, as Harbor stops it; teardown would otherwise.
    c.stop_sandbox(sandbox).await?;
    graded
}
