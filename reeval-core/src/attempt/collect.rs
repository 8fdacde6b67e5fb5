//! The final collection, also of a sandbox lost at the end: a paused
//! sandbox's helper session never answers, and a stopped one's exec fails.
//! Both are noticed (the engine is asked every second once the collection
//! has taken one), said in the record's events, and the workspace is read
//! through the engine's archive API instead, which reads a stopped or paused
//! container's files: the agent's work is kept whenever the engine has it.

use std::time::Duration;

use crate::diff::Snapshot;
use crate::lifecycle;
use crate::sandbox::{SandboxHandle, SandboxState};

use super::lost;

/// How often a collection that takes a while asks the engine about its sandbox.
const PROBE: Duration = Duration::from_secs(1);
/// How long the engine may take to answer that question: one that cannot
/// (a container it is busy with) is asked again, and the collection waits on.
const PROBE_LIMIT: Duration = Duration::from_secs(10);
/// How long reading a lost sandbox through the engine's archive may take. An
/// engine that cannot read a frozen container's files must not hold teardown
/// until its deadline and leave the record without a word on why.
const ARCHIVE_LIMIT: Duration = Duration::from_secs(60);

/// The final workspace, when it could be read, and what the record's
/// events must say about the collection (nothing when it went as usual).
pub(crate) async fn collect_final(
    handle: &SandboxHandle,
    latest: &Snapshot,
) -> (Option<Snapshot>, Option<String>) {
    let read = lifecycle::teardown::collect(handle, latest);
    let state = match watched(handle, read).await {
        Ok(Ok(now)) => return (Some(now), None),
        Ok(Err(e)) => match handle.sandbox().state().await {
            state if state.is_lost() => state,
            _ => return (None, Some(format!("failed to collect the final workspace: {e}"))),
        },
        Err(state) => state,
    };
    match tokio::time::timeout(ARCHIVE_LIMIT, Snapshot::download(handle)).await {
        Ok(Ok(now)) => {
            let sandbox = lost::short_id(handle);
            let said = format!(
                "the sandbox {sandbox} {state} during teardown: the final workspace was read \
                 through the engine's archive instead of the in-sandbox helper"
            );
            (Some(now), Some(said))
        }
        Ok(Err(_)) => {
            let e = lost::lost_error(handle, "collect the final workspace", "teardown", state);
            (None, Some(e.to_string()))
        }
        Err(_) => {
            let e = lost::lost_error(handle, "collect the final workspace", "teardown", state);
            let limit = ARCHIVE_LIMIT.as_secs();
            (None, Some(format!("{e} (the engine's archive read gave nothing within {limit}s)")))
        }
    }
}

/// `work`'s result, or the sandbox's state once nothing runs in it any more.
async fn watched<T>(
    handle: &SandboxHandle,
    work: impl Future<Output = T>,
) -> Result<T, SandboxState> {
    let mut work = std::pin::pin!(work);
    let mut probe = tokio::time::interval_at(tokio::time::Instant::now() + PROBE, PROBE);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            done = &mut work => return Ok(done),
            _ = probe.tick() => {
                // Only a sandbox where nothing runs leaves its helper without an answer.
                let Ok(state) = tokio::time::timeout(PROBE_LIMIT, handle.sandbox().state()).await
                else {
                    continue;
                };
                if matches!(
                    state,
                    SandboxState::Paused | SandboxState::Gone | SandboxState::Stopped { .. }
                ) {
                    return Err(state);
                }
            }
        }
    }
}
