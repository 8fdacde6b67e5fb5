//! The oracle: an eval's reference solution (`#[reeval::eval(oracle = solve)]`)
//! run in place of an agent by `--harness oracle`. It is the eval's own
//! canary: an oracle cell below 100 % means the eval or its environment is
//! broken, and the summary says so ([`broken_evals`]).
//!
//! The solution runs at the eval's first `send`, acting in the sandbox through
//! the same `Ctx`; that turn's diff is the solution's work, and every turn is
//! answered by [`OracleHarness`], which does nothing more.

use async_trait::async_trait;

use crate::harness::{Harness, HarnessError, TurnContext};
use crate::record::CellSummary;
use crate::sandbox::SandboxHandle;
use crate::turn::{TurnReport, TurnStatus};

/// The oracle harness's name.
pub const ORACLE: &str = "oracle";

/// Whether `spec` names the oracle harness.
pub fn is_oracle(spec: &str) -> bool {
    crate::harness::split_spec(spec).0 == ORACLE
}

/// The harness of `--harness oracle`: its turns are answered by the eval's
/// reference solution, which already ran when the turn starts.
#[derive(Debug, Default)]
pub struct OracleHarness;

#[async_trait]
impl Harness for OracleHarness {
    fn name(&self) -> &str {
        ORACLE
    }

    fn reads_context_summary(&self) -> bool {
        false
    }

    fn runs_reference_solution(&self) -> bool {
        true
    }

    async fn turn(
        &mut self,
        _sandbox: &SandboxHandle,
        _prompt: &str,
        turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        let message = if turn.index == 1 {
            "the oracle's reference solution ran"
        } else {
            "the oracle answers only the first turn"
        };
        Ok(TurnReport {
            status: TurnStatus::Completed,
            final_message: Some(message.to_string()),
            events: 1,
            ..TurnReport::default()
        })
    }
}

/// The evals whose oracle cell is below 100 %: the eval or its environment
/// is broken (an infra error leaves the cell ungraded, and unflagged).
pub fn broken_evals(cells: &[CellSummary]) -> Vec<String> {
    cells.iter().filter(|c| is_oracle(&c.harness) && c.failed > 0).map(|c| c.eval.clone()).collect()
}
