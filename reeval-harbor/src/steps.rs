//! A multi-step Harbor task (`[[steps]]`), as Harbor 0.26's `MultiStepTrial`
//! runs one: per step, the log directories and `/tests` emptied,
//! `steps/<name>/workdir/` copied into the workdir and its `setup.sh` run,
//! one turn with the step's instruction, the artifacts, the step's verifier
//! (the task's `tests/` merged with the step's; in the agent's sandbox, or
//! in a sandbox of its own started for that step, `verifier-<n>`, when the
//! step's verifier is separate) and its reward; a step whose reward misses its `min_reward`, or that ends without
//! one, stops the steps after it. The task's reward is the steps' combined by
//! `multi_step_reward_strategy` (`mean` by default, or `final`).

use std::collections::BTreeMap;

use super::eval::{HarborTask, LOG_DIRS};
use super::run::{self, Files, Graded, Verified, Verifier};
use super::shell::quote;
use super::task::{RewardStrategy, StepConfig};
use reeval_core::Ctx;
use reeval_core::error::{Error, Result};
use reeval_core::exec::Command;
use reeval_core::record::StepReward;

/// The step's files: its own `sub/` over the task's (`tests/` merged; a
/// step's `solution/` replaces the task's).
fn step_files(task: &HarborTask, step: &StepConfig, sub: &str, merge: bool) -> Result<Files> {
    let config = |e: super::error::HarborError| Error::Config(e.to_string());
    let own = task.files(&format!("steps/{}/{sub}", step.name), sub).map_err(config)?;
    if !merge && !own.is_empty() {
        return Ok(own);
    }
    let mut files = BTreeMap::new();
    for file in task.files(sub, sub).map_err(config)?.into_iter().chain(own) {
        files.insert(file.path.clone(), file);
    }
    Ok(files.into_values().collect())
}

/// The agent's user for a step's setup and oracle: the step's, else the task's.
fn step_user(task: &HarborTask, step: &StepConfig) -> Option<String> {
    step.agent.user.as_ref().or(task.config.agent.user.as_ref()).map(|u| u.spec())
}

/// The oracle of a multi-step task: the first step's solution (later steps'
/// run before their turns, in [`run`]).
pub(super) async fn oracle(c: &mut Ctx, task: &HarborTask) -> Result<()> {
    let Some(step) = task.config.steps.as_ref().and_then(|s| s.first()) else { return Ok(()) };
    let solution = step_files(task, step, "solution", false)?;
    run::solve(c, task, &solution, step_user(task, step), task.step_agent_timeout(step)).await
}

/// What one step left: its reward, or why it has none.
struct StepResult {
    name: String,
    graded: Option<Graded>,
    /// The end of its verifier's output.
    output: String,
    /// The step's `min_reward` gate that stopped the steps after it.
    gated: Option<String>,
}

/// A step's result as the record keeps it; `later`: steps after it were not run.
fn step_reward(r: &StepResult, later: bool) -> StepReward {
    let (reward, why) = match &r.graded {
        Some(Graded::Reward(reward)) => (Some(reward.clone()), None),
        Some(Graded::TimedOut(limit)) => {
            (None, Some(format!("the verifier timed out after {:.0}s", limit.as_secs_f64())))
        }
        Some(Graded::NoReward(why)) => (None, Some(format!("no reward: {why}"))),
        None => (None, Some("not run".to_string())),
    };
    let why = why.or_else(|| r.gated.clone());
    let note = match why {
        Some(why) if later => Some(format!("{why}; the steps after it were not run")),
        other => other,
    };
    StepReward { step: r.name.clone(), reward, note }
}

/// A multi-step task's body.
pub(super) async fn run(c: &mut Ctx, task: &HarborTask) -> Result<()> {
    let steps = task.config.steps.clone().unwrap_or_default();
    let oracle = c.runs_reference_solution();
    let mut results: Vec<StepResult> = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        let prefix = format!("step-{}-", step.name);
        if index > 0 {
            // What the step before left in the log directories is its own (captured).
            let dirs = LOG_DIRS.join(" ");
            c.exec(
                Command::shell(format!("find {dirs} /tests -mindepth 1 -delete 2>/dev/null; true"))
                    .user("0")
                    .step("empty the log directories and /tests for the next step"),
            )
            .await?;
        }
        if let Some(why) = prepare(c, task, step).await? {
            results.push(StepResult {
                name: step.name.clone(),
                graded: Some(Graded::NoReward(why)),
                output: String::new(),
                gated: None,
            });
            break;
        }
        if let Some(h) = &step.healthcheck {
            super::healthcheck::step(c, h, &step.name).await?;
        }
        if oracle && index > 0 {
            // The first step's solution runs as the eval's oracle, at the first turn.
            let solution = step_files(task, step, "solution", false)?;
            run::solve(c, task, &solution, step_user(task, step), task.step_agent_timeout(step))
                .await?;
        }
        let instruction = &task.step_instructions[index];
        run::turn(c, task, instruction, task.step_agent_timeout(step)).await?;
        let hooks: Vec<_> =
            task.config.verifier.collect.iter().chain(&step.verifier.collect).cloned().collect();
        super::collect::run(c, &hooks).await?;
        super::artifacts::collect(c, task, &step.artifacts, &prefix).await?;
        if task.disable_verification {
            continue;
        }
        let verifier = Verifier {
            tests: step_files(task, step, "tests", true)?,
            env: task.step_verifier_envs[index].clone(),
            user: step
                .verifier
                .user
                .as_ref()
                .or(task.config.verifier.user.as_ref())
                .map(|u| u.spec()),
            timeout: task.step_verifier_timeout(step),
            prefix,
            image_user: task.image_user.clone(),
        };
        let Verified { graded, output } = match &task.step_separate_verifiers[index] {
            Some(separate) => {
                // Its own sandbox, named for the step (a name is used once in an attempt).
                let name = format!("verifier-{}", index + 1);
                let apart =
                    super::separate::Apart { separate, name: &name, artifacts: &step.artifacts };
                super::separate::verify(c, task, &apart, &verifier).await?
            }
            None => run::verify(c, &verifier).await?,
        };
        let reward = match &graded {
            Graded::Reward(r) => Some(r.clone()),
            _ => None,
        };
        // No reward, or one under the step's gate, stops the steps after it.
        let gated = step.min_reward.as_ref().and_then(|m| m.failure(reward.as_ref()));
        let stop = reward.is_none() || gated.is_some();
        results.push(StepResult { name: step.name.clone(), graded: Some(graded), output, gated });
        if stop {
            break;
        }
    }
    if task.disable_verification {
        return Ok(());
    }
    let stopped_early = results.len() < steps.len();
    let last = results.len().saturating_sub(1);
    c.set_step_rewards(
        results
            .iter()
            .enumerate()
            .map(|(i, r)| step_reward(r, stopped_early && i == last))
            .collect(),
    );
    let rewards: Vec<Option<BTreeMap<String, f64>>> = results
        .iter()
        .map(|r| match &r.graded {
            Some(Graded::Reward(reward)) => Some(reward.clone()),
            _ => None,
        })
        .collect();
    let strategy = task.config.multi_step_reward_strategy.unwrap_or(RewardStrategy::Mean);
    let shown: Vec<String> = results
        .iter()
        .map(|r| match &r.graded {
            Some(Graded::Reward(reward)) => {
                format!("{} {}", r.name, serde_json::to_string(reward).unwrap_or_default())
            }
            Some(Graded::TimedOut(_)) => format!("{} verifier timed out", r.name),
            Some(Graded::NoReward(why)) => format!("{} no reward ({why})", r.name),
            None => format!("{} not run", r.name),
        })
        .collect();
    let detail =
        format!(" (steps: {}; {} of {} ran)", shown.join(", "), results.len(), steps.len());
    let combined = strategy.combine(&rewards);
    let passes = combined.as_ref().is_some_and(|r| super::reward::passes(r, task.reward_threshold));
    // A failure shows the last step's verifier output (and the oracle's).
    let last_output = results.last().map(|r| r.output.clone()).unwrap_or_default();
    let why = if passes { String::new() } else { run::why(c, &last_output).await };
    match combined {
        Some(reward) => run::judge(c, task, reward, &detail, &why),
        None => {
            // No reward to combine: the last step's reason, as for one step.
            let last = results.pop().and_then(|r| r.graded.map(|g| (r.name, g)));
            match last {
                Some((name, graded)) => {
                    Err(run::ungraded(task, graded, &format!(" (step {name})"), &why))
                }
                None => Err(Error::Config(format!(
                    "failed to grade Harbor task {}: it has no steps",
                    task.name
                ))),
            }
        }
    }
}

/// A step's `workdir/` copied into the workdir (the agent's own files) and
/// its `setup.sh` run there; `Some(why)` when the setup failed, which ends
/// the task's steps without a reward for this one (Harbor: the step's
/// exception, no verifier).
async fn prepare(c: &mut Ctx, task: &HarborTask, step: &StepConfig) -> Result<Option<String>> {
    let files = task
        .files(&format!("steps/{}/workdir", step.name), ".")
        .map_err(|e| Error::Config(e.to_string()))?;
    if files.is_empty() {
        return Ok(None);
    }
    let workdir = super::shell::workdir(c).await?;
    run::copy_in_for_agent(c, &files, &workdir).await?;
    if !files.iter().any(|f| f.path == "./setup.sh") {
        return Ok(None);
    }
    let script = format!("{}/setup.sh", workdir.trim_end_matches('/'));
    let mut setup = Command::new("bash")
        .arg("-c")
        .arg(format!("{}bash {}", super::shell::USER_HOME, quote(&script)))
        .workdir(workdir);
    if let Some(user) = step_user(task, step) {
        setup = setup.user(user);
    }
    let out = c.exec(setup).await?;
    Ok((!out.success()).then(|| {
        format!(
            "step {}'s setup.sh exited {}: {}",
            step.name,
            out.exit_code,
            reeval_core::exec::tail(out.stderr.trim(), 500)
        )
    }))
}
