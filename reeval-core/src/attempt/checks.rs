//! What a check changed in the workspace is the check's, not the agent's: a
//! check that imports a Python module writes `__pycache__`, a formatter
//! rewrites files, and none of that may show as the agent's work in a
//! turn's diff, `Ctx::diff` or the final diff.
//!
//! After each check the workspace is listed again (through the diff
//! helper's session: no exec once it runs), what changed since the listing
//! before the check is kept on the check's record, and the snapshot the
//! agent's diffs start from is moved past it (`Snapshot::absorb`). A path
//! the agent had changed keeps the agent's change visible; a path the agent
//! changes after the check shows as a change from the check's version.
//! An oracle's solution calling `exec` is doing the agent's work: its
//! changes stay in the turn's diff.

use super::{Attempt, Oracle, SandboxState};
use crate::diff::{Diff, Snapshot};
use crate::sandbox::SandboxHandle;

impl Attempt {
    /// Before a check: the eval's own writes since the last listing
    /// (`write_file`) are listed now, so they are not taken for the check's.
    /// Costs nothing when the eval wrote nothing.
    pub(super) async fn before_check(&mut self, handle: &SandboxHandle) {
        // The oracle's solution writing and then running a script is all the turn's work.
        if !self.ready().eval_wrote || matches!(self.oracle, Oracle::Solving) {
            return;
        }
        let before = self.ready().latest();
        match self.phases.diff(async { Ok(before.refresh(handle).await?) }).await {
            Ok(now) => {
                let ready = self.ready();
                ready.last = Some(now);
                ready.eval_wrote = false;
            }
            Err(e) => {
                self.phases.log.event(format!("failed to list the workspace before a check: {e}"))
            }
        }
    }

    /// After a check: what it changed since the listing before it, moved out
    /// of the agent's diffs; `None` when it changed nothing (or the workspace
    /// could not be read: then an event says so, and the agent's diffs are as
    /// they were).
    pub(super) async fn after_check(
        &mut self,
        handle: &SandboxHandle,
        check: &str,
    ) -> Option<Diff> {
        let SandboxState::Ready(ready) = &self.sandbox else { return None };
        // The oracle's solution acting through checks is doing the turn's work.
        if matches!(self.oracle, Oracle::Solving) {
            return None;
        }
        let before = ready.latest();
        let now = match self.phases.diff(read(handle, &before)).await {
            Ok(now) => now,
            Err(e) => {
                self.phases
                    .log
                    .event(format!("failed to list the workspace after check `{check}`: {e}"));
                return None;
            }
        };
        let changes = before.diff(&now);
        let ready = self.ready();
        if !changes.is_empty() {
            ready.baseline = ready.baseline.absorb(&before, &now, &changes);
        }
        ready.last = Some(now);
        (!changes.is_empty()).then_some(changes)
    }
}

/// The workspace now, read from `before`. A workspace never listed (empty at
/// the start, no turn or diff since: an eval of checks alone) is read as one
/// archive, as teardown reads it: no helper to put in place for it.
async fn read(handle: &SandboxHandle, before: &Snapshot) -> crate::error::Result<Snapshot> {
    if !before.is_listed()
        && let Ok(now) = Snapshot::download(handle).await
    {
        return Ok(now);
    }
    Ok(before.refresh(handle).await?)
}
