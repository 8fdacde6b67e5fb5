//! `[[verifier.collect]]`: commands run in compose services after the
//! agent and before the artifacts are collected, so a service can snapshot
//! its runtime state (a database's rows, a counter) into files an artifact
//! then names (Harbor 0.26's `_run_collect_hooks`). Best effort, as in
//! Harbor: a hook that fails, or exits non-zero, is told in the record's
//! checks and events and never fails the attempt. Hooks in `main` run first
//! (`bash -c`, in the workdir), then those in other services (`sh -c`).

use std::time::Duration;

use super::compose::Compose;
use super::error::HarborError;
use super::task::{CollectConfig, TaskConfig};
use reeval_core::Ctx;
use reeval_core::error::Result;
use reeval_core::exec::Command;

/// Runs `hooks`, `main`'s first; only a budget that ran out stops them.
pub(super) async fn run(c: &mut Ctx, hooks: &[CollectConfig]) -> Result<()> {
    let (main, sidecars): (Vec<&CollectConfig>, Vec<&CollectConfig>) =
        hooks.iter().partition(|h| h.service == super::compose::MAIN);
    for hook in main.into_iter().chain(sidecars) {
        let limit = Duration::from_secs_f64(hook.timeout_sec.max(0.0));
        let in_main = hook.service == super::compose::MAIN;
        let shell = if in_main { "bash" } else { "sh" };
        let mut cmd = Command::new(shell).arg("-c").arg(hook.command.clone()).timeout(limit);
        // In `main`, it starts in the workspace, which is the task's workdir, as in Harbor.
        if let Some(user) = &hook.user {
            cmd = cmd.user(user.spec());
        }
        let ran = match in_main {
            true => c.exec(cmd).await,
            false => c.exec_in_service(&hook.service, cmd).await,
        };
        if let Err(e) = ran
            && matches!(e.root(), reeval_core::Error::Timeout { .. })
        {
            return Err(e);
        }
    }
    Ok(())
}

/// A hook naming a service the task's compose file does not define is
/// refused when the task is read (Harbor: no such service to run it in).
pub(super) fn check(task: &str, config: &TaskConfig, compose: &Compose) -> Result<(), HarborError> {
    let steps = config.steps.iter().flatten().flat_map(|s| &s.verifier.collect);
    for hook in config.verifier.collect.iter().chain(steps) {
        let known = hook.service == super::compose::MAIN
            || compose.services.iter().any(|s| s.name == hook.service);
        if !known {
            return Err(HarborError::Parse {
                task: task.to_string(),
                message: format!(
                    "[[verifier.collect]] names the service `{}`, which environment/docker-compose.yaml does not define",
                    hook.service
                ),
            });
        }
    }
    Ok(())
}
