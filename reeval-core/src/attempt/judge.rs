//! `judge`: verdicts from the judge model, one `judge` phase per criterion
//! (`lifecycle/12_judge.rs`). What the judge sees is read from the attempt
//! here ([`Shown`]) and made into its evidence by the judge
//! (`judge::prompt::evidence`), which names nothing of the attempt; an
//! agentic judge acts in a throwaway copy of the workspace, and changes
//! outside it are told as an event.

use super::Attempt;
use crate::error::{Error, Result};
use crate::judge::prompt::{Evidence, Shown};
use crate::judge::{Judge, JudgeResult, State};
use crate::lifecycle;
use crate::phase::Phase;

impl Attempt {
    /// Verdicts from the judge model, one `judge` phase per criterion.
    pub(crate) async fn judge(&mut self, judge: Judge) -> Result<JudgeResult> {
        // The judge reads the prompts: a turn whose `send` was dropped is one of them.
        self.settle_dropped_turn();
        // What the last check wrote is the check's, not the state the judge is shown.
        self.list_after_check_if_started().await;
        // Its keys first, then the eval's own secrets (a key the eval also declares).
        let keys: Vec<_> =
            self.given.judge_keys.iter().chain(&self.given.secrets).cloned().collect();
        let prepared = judge
            .prepare(self.given.judge_spec.as_deref(), &keys)
            .map_err(|e| e.in_phase(Phase::Judge))?;
        let evidence = self.evidence(judge.state_shown()).await?;
        let sandbox = if judge.is_agentic() { Some(self.sandbox().await?) } else { None };
        let before = match &sandbox {
            Some(handle) => {
                let last = self.ready().latest();
                Some(self.phases.diff(async { Ok(last.refresh(handle).await?) }).await?)
            }
            None => None,
        };
        let mut verdicts = Vec::new();
        for criterion in prepared.judge.criteria() {
            let verdict = lifecycle::judge::verdict(
                &mut self.phases,
                &prepared,
                criterion,
                &evidence,
                sandbox.as_ref(),
            )
            .await?;
            if let Some(e) = crate::judge::failure(&verdict) {
                self.soft_failures.push(e.in_phase(Phase::Judge));
            }
            self.record.verdicts.push(verdict.clone());
            verdicts.push(verdict);
        }
        if let (Some(handle), Some(before)) = (&sandbox, before)
            && let Some(event) = lifecycle::judge::changes_outside_its_copy(handle, &before).await
        {
            self.phases.log.event(event);
        }
        Ok(JudgeResult { verdicts })
    }

    /// What `state` asks the judge to see, read from this attempt, as the judge's evidence.
    async fn evidence(&mut self, state: &State) -> Result<Evidence> {
        // Only a started sandbox has a diff: the judge never starts one just to find nothing.
        let diff =
            if state.shows_diff() && self.is_ready() { Some(self.diff().await?) } else { None };
        let mut files = Vec::new();
        for path in state.files() {
            let bytes = match self.read_bytes(path).await {
                Ok(bytes) => Some(bytes),
                Err(Error::Sandbox(crate::sandbox::SandboxError::NotFound { .. })) => None,
                Err(e) => return Err(e),
            };
            files.push((path.clone(), bytes));
        }
        let shown = Shown { turns: &self.record().turns, diff, files, captures: self.captures() };
        Ok(crate::judge::prompt::evidence(&shown, state))
    }
}
