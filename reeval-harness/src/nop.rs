//! The `nop` harness: every turn does nothing and completes (Harbor's `nop`
//! agent). With it, a task's checks run against the untouched workspace: a
//! canary for checks that pass without any work.

use async_trait::async_trait;
use reeval_core::harness::{Harness, HarnessError, TurnContext};
use reeval_core::sandbox::SandboxHandle;
use reeval_core::turn::{TurnReport, TurnStatus};

/// The `nop` harness's name.
pub const NOP: &str = "nop";

/// Answers every turn at once, touching nothing.
#[derive(Debug, Default)]
pub struct NopHarness;

#[async_trait]
impl Harness for NopHarness {
    fn name(&self) -> &str {
        NOP
    }

    fn reads_context_summary(&self) -> bool {
        false
    }

    async fn turn(
        &mut self,
        _sandbox: &SandboxHandle,
        _prompt: &str,
        _turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        Ok(TurnReport {
            status: TurnStatus::Completed,
            final_message: Some("nop: did nothing".to_string()),
            // One event: the turn ran (a harness that never produced one is an infra error).
            events: 1,
            ..TurnReport::default()
        })
    }
}
