//! The teardown phase: the session closed, what an unsettled turn left
//! running killed, the final workspace collected. It runs whatever happened
//! before, under its own deadline, never on the attempt's cancelled signal.
//! Destroying the sandbox ([`destroy`]) comes after the record is final, in
//! the background (`runner/teardown.rs`).

use std::time::Duration;

use crate::diff::Snapshot;
use crate::harness::Harness;
use crate::sandbox::{Sandbox, SandboxError, SandboxHandle, Signal};

/// Teardown's own deadline.
pub(crate) const TEARDOWN_DEADLINE: Duration = Duration::from_secs(120);
/// How long a harness gets to end its session.
const STOP_LIMIT: Duration = Duration::from_secs(15);

/// Ends the harness's session, best effort; a failure is an event.
pub(crate) async fn stop_harness(
    harness: &mut dyn Harness,
    agent: &SandboxHandle,
) -> Option<String> {
    match tokio::time::timeout(STOP_LIMIT, harness.stop(agent)).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("failed to stop the harness: {e}")),
        Err(_) => Some(format!("failed to stop the harness within {}s", STOP_LIMIT.as_secs())),
    }
}

/// Stops every process tree a turn may have left changing the workspace.
pub(crate) async fn kill_turns(sandbox: &dyn Sandbox) {
    let _ = sandbox.kill(Signal::Kill).await;
}

/// The final workspace (read incrementally from `last`). A workspace never
/// listed (empty at the start, and no turn or diff since) is read as one
/// archive: one engine call, no exec and no diff helper to put in place,
/// which a trivial attempt would pay for nothing. The helper reads it when
/// that fails (a file too large for an archive).
pub(crate) async fn collect(
    handle: &SandboxHandle,
    last: &Snapshot,
) -> Result<Snapshot, SandboxError> {
    match last.is_listed() {
        true => last.refresh(handle).await,
        false => match Snapshot::download(handle).await {
            Ok(now) => Ok(now),
            Err(_) => last.refresh(handle).await,
        },
    }
}

/// Destroys the sandbox, trying twice.
pub(crate) async fn destroy(sandbox: &dyn Sandbox) -> Result<(), SandboxError> {
    if sandbox.destroy().await.is_ok() {
        return Ok(());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    sandbox.destroy().await
}

/// Files a harness wrote to the top of the artifact directory that the record does not list yet.
pub(crate) fn harness_artifacts(artifacts_dir: &std::path::Path, listed: &[String]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(artifacts_dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !listed.contains(n))
        .collect();
    names.sort();
    names
}
