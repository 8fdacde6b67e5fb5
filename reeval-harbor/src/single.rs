//! A single-step task's body and its oracle: the instruction as the one
//! turn, the collect hooks and artifacts, then the verifier (in the agent's
//! sandbox, or in one of its own: `separate.rs`) and its reward as the
//! outcome. `steps.rs` is the multi-step task's.

use super::eval::HarborTask;
use super::reward;
use super::run::{
    Graded, Verified, Verifier, collect_artifacts, judge, solve, turn, ungraded, verify, why,
};
use reeval_core::Ctx;
use reeval_core::error::{Error, Result};

/// A single-step task's body: the instruction as the one turn, the
/// artifacts, then the verifier and its reward as the outcome.
pub(super) async fn run(c: &mut Ctx, task: &HarborTask) -> Result<()> {
    turn(c, task, &task.instruction, task.agent_timeout()).await?;
    super::collect::run(c, &task.config.verifier.collect).await?;
    collect_artifacts(c, task, "").await?;
    if task.disable_verification {
        return Ok(());
    }
    let verifier = Verifier {
        tests: task.files("tests", "tests").map_err(|e| Error::Config(e.to_string()))?,
        env: task.verifier_env.clone(),
        user: task.config.verifier.user.as_ref().map(|u| u.spec()),
        timeout: task.verifier_timeout(),
        prefix: String::new(),
        image_user: task.image_user.clone(),
    };
    let Verified { graded, output } = match &task.separate_verifier {
        Some(separate) => {
            let apart = super::separate::Apart::of_task(separate);
            super::separate::verify(c, task, &apart, &verifier).await?
        }
        None => verify(c, &verifier).await?,
    };
    let passes = matches!(&graded, Graded::Reward(r) if reward::passes(r, task.reward_threshold));
    let why = if passes { String::new() } else { why(c, &output).await };
    match graded {
        Graded::Reward(r) => judge(c, task, r, "", &why),
        other => Err(ungraded(task, other, "", &why)),
    }
}

/// A single-step task's oracle.
pub(super) async fn oracle(c: &mut Ctx, task: &HarborTask) -> Result<()> {
    let solution = task.files("solution", "solution").map_err(|e| Error::Config(e.to_string()))?;
    let user = task.config.agent.user.as_ref().map(|u| u.spec());
    solve(c, task, &solution, user, task.agent_timeout()).await
}
