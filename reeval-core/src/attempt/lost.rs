//! Whose failure a failed step is: a turn or a check whose sandbox was lost
//! meanwhile (removed, stopped, paused or restarted from outside) is the
//! platform's, whatever its command returned, so it becomes an infra error
//! (retried with a fresh sandbox) instead of the agent's or the eval's fail.
//! The engine is asked only after a step failed: a passing attempt pays nothing.
//! An OOM kill during a turn or a check is told as an event (`saw_oom_kill`).

use super::Attempt;
use crate::error::Error;
use crate::outcome::Ended;
use crate::sandbox::{Lost, SandboxError, SandboxHandle, SandboxState};

/// The error a failed step ends with when the sandbox was lost, or `None`
/// when it runs (or its engine cannot tell): the step's own result stands.
/// `action` reads as "failed to …", `during` names the step. A step that
/// looks `killed` (a signal's exit code, a broken exec) may end a moment
/// before the engine notices its container stopped: the engine is asked
/// again for up to 0.7 s before the sandbox is taken to be running.
pub(crate) async fn lost(
    handle: &SandboxHandle,
    action: &str,
    during: &str,
    killed: bool,
) -> Option<Error> {
    let state = match killed {
        true => crate::sandbox::settled_state(handle.sandbox().as_ref()).await,
        false => handle.sandbox().state().await,
    };
    state.is_lost().then(|| lost_error(handle, action, during, state))
}

/// The error of a step that failed to `action` because its sandbox was found `state`.
pub(crate) fn lost_error(
    handle: &SandboxHandle,
    action: &str,
    during: &str,
    state: SandboxState,
) -> Error {
    Error::Sandbox(SandboxError::Lost(Box::new(Lost {
        action: action.to_string(),
        sandbox: short_id(handle),
        state,
        during: during.to_string(),
    })))
}

/// The sandbox's short id, as the record names it.
pub(crate) fn short_id(handle: &SandboxHandle) -> String {
    let id = handle.sandbox().id();
    id[..id.len().min(12)].to_string()
}

/// Whether `err` already says the sandbox was lost.
pub(crate) fn says_lost(err: &Error) -> bool {
    matches!(err.root(), Error::Sandbox(SandboxError::Lost(_)))
}

/// Whether an exit code is a signal's (128 + n), or none at all (-1: the exec broke).
pub(crate) fn looks_killed(exit_code: i64) -> bool {
    !(0..128).contains(&exit_code)
}

impl Attempt {
    /// An attempt that did not pass and whose sandbox was lost meanwhile (a
    /// check frozen by a pause until the budget ran out, an eval that gave up
    /// on a dead sandbox's error) ends as the platform's failure.
    pub(super) async fn blame_lost_sandbox(&self, ended: Ended) -> Ended {
        // A sandbox that never started was never lost: its start's error names what
        // happened (a pod no node had room for, an image the cluster cannot pull).
        let never_started = matches!(self.sandbox, super::SandboxState::Failed { .. });
        // Nor one whose start the eval dropped (its own timeout around a first
        // call): never the eval's, it may be created and not started, which
        // the engine tells as stopped.
        if matches!(self.sandbox, super::SandboxState::Starting { .. }) {
            return ended;
        }
        let settled = match &ended {
            Ended::Returned(Ok(Ok(()))) | Ended::Interrupted => true,
            Ended::Returned(Ok(Err(e))) => says_lost(e) || never_started,
            _ => false,
        };
        let Some(handle) = self.handle().filter(|_| !settled) else { return ended };
        let during = match self.calls.in_flight.or(self.calls.failed) {
            Some(call) => call.to_string(),
            None => "the attempt".to_string(),
        };
        match lost(handle, "finish the attempt", &during, false).await {
            Some(e) => Ended::Returned(Ok(Err(e))),
            None => ended,
        }
    }

    /// Whether the OOM killer struck since it was last looked at; if so, says so as an event.
    pub(super) async fn saw_oom_kill(&mut self, handle: &SandboxHandle, during: &str) -> bool {
        let Ok(Some(kills)) = handle.oom_kills().await else { return false };
        if kills <= self.oom_kills_seen {
            return false;
        }
        self.oom_kills_seen = kills;
        let limit = self.given.env.limits.memory_bytes;
        self.phases.log.event(format!(
            "OOM kill: the sandbox ran out of memory (limit {} MiB) during {during}",
            limit >> 20
        ));
        true
    }
}
