//! The judge phase: one verdict per criterion, each its own phase. An agentic
//! judge's commands run in a throwaway copy of the workspace; should one
//! reach the workspace anyway, the record says so.

use super::Phases;
use crate::diff::Snapshot;
use crate::error::Result;
use crate::judge::{Prepared, prompt::Evidence};
use crate::phase::Phase;
use crate::record::Verdict;
use crate::sandbox::SandboxHandle;

/// The verdict on one criterion, as one `judge` phase.
pub(crate) async fn verdict(
    phases: &mut Phases,
    prepared: &Prepared,
    criterion: &str,
    evidence: &Evidence,
    sandbox: Option<&SandboxHandle>,
) -> Result<Verdict> {
    phases
        .run(
            Phase::Judge,
            async { Ok(prepared.verdict(criterion, evidence, sandbox).await) },
            |v| crate::judge::detail(criterion, v),
        )
        .await
}

/// What an agentic judge changed in the workspace outside its throwaway copy, as an event.
pub(crate) async fn changes_outside_its_copy(
    handle: &SandboxHandle,
    before: &Snapshot,
) -> Option<String> {
    match before.refresh(handle).await {
        Ok(after) => {
            let changed = before.diff(&after);
            (!changed.is_empty()).then(|| {
                format!(
                    "the agentic judge changed the workspace outside its throwaway copy: {}",
                    changed.paths().join(", ")
                )
            })
        }
        Err(e) => {
            Some(format!("failed to check that the agentic judge left the workspace alone: {e}"))
        }
    }
}
