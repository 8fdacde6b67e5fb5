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
//!
//! While only checks can have run in the sandbox (no turn, no reference
//! solution, no handle given to the eval, no port served: nothing of the
//! agent's that could still be running or be made to write), whatever
//! changes the workspace after a check is a check's. Its listing then waits
//! (`Ready::unlisted_check`) until the next call that may act in the sandbox
//! ([`Attempt::list_after_check`]), or is teardown's one read of the final
//! workspace: an eval of checks alone pays no read per check beyond that.
//!
//! A check runs under what checks may reach (checks-only secrets swapped,
//! `gateway::attempt`), and a check that failed in a sandbox lost meanwhile
//! is the platform's (`lost.rs`).

use super::{Attempt, SandboxState, Solution, lost};
use crate::diff::{Diff, Snapshot};
use crate::error::Result;
use crate::exec::{Command, ExecOutput};
use crate::lifecycle;
use crate::phase::Phase;
use crate::record::CheckRecord;
use crate::sandbox::SandboxHandle;

impl Attempt {
    /// A check in the sandbox.
    pub(crate) async fn exec(&mut self, cmd: Command) -> Result<ExecOutput> {
        let handle = self.sandbox().await?;
        self.list_after_check(&handle).await;
        self.before_check(&handle).await;
        // A check reaches what checks may, and only now are checks-only secrets swapped.
        if let Some(egress) = &self.egress.attempt {
            egress.for_check().await.map_err(|e| e.in_phase(Phase::Check))?;
        }
        let egress = self.egress.attempt.as_ref();
        let brokered = |name: &str| egress.is_some_and(|e| e.brokers(name));
        let shown = lifecycle::check::one_line(&cmd.display());
        let step = cmd.step_name().map(str::to_string);
        let check = lifecycle::check::run(&handle, cmd, &self.given.secrets, brokered);
        let detail = |o: &ExecOutput| lifecycle::check::detail(o, step.as_deref());
        let ran = self.phases.run(Phase::Check, check, detail).await;
        // A check that failed in a sandbox lost meanwhile: its result must not reach the eval.
        let lost = match &ran {
            Ok(out) if out.exit_code == 0 => None,
            ran => {
                let killed = ran.as_ref().map_or(true, |out| lost::looks_killed(out.exit_code));
                let during = format!("the check `{shown}`");
                lost::lost(&handle, "run the check", &during, killed).await
            }
        };
        if let Some(egress) = &self.egress.attempt {
            egress.for_agent().await.map_err(|e| e.in_phase(Phase::Check))?;
        }
        if let Some(e) = lost {
            if let Ok(out) = &ran {
                self.record.checks.push(lifecycle::check::record(out, false, step.as_deref()));
            }
            return Err(e.in_phase(Phase::Check));
        }
        let out = ran?;
        let oom_killed = out.exit_code == 137
            && self
                .saw_oom_kill(
                    &handle,
                    &format!("check `{}`", lifecycle::check::one_line(&out.command)),
                )
                .await;
        // What the check wrote is its own, not the agent's: listed now, or
        // when something other than a check may act.
        let defer = self.only_checks_ran();
        let changes = match defer {
            true => None,
            false => {
                self.after_check(&handle, &lifecycle::check::one_line(&out.command)).await.flatten()
            }
        };
        self.record.checks.push(CheckRecord {
            changes,
            ..lifecycle::check::record(&out, oom_killed, step.as_deref())
        });
        if defer {
            self.ready().unlisted_check = Some(self.record.checks.len() - 1);
        }
        Ok(out)
    }

    /// Whether nothing but checks can have acted in the sandbox: no turn
    /// started (an agent's processes may outlive its turn), no reference
    /// solution ran or runs (its work is the agent's), the eval holds no
    /// handle of the sandbox (an in-process agent) and no port is served
    /// (the agent's server may write as the eval calls it). Whatever changes
    /// the workspace meanwhile is then a check's.
    fn only_checks_ran(&self) -> bool {
        let SandboxState::Ready(ready) = &self.sandbox else { return false };
        self.record.turns.is_empty()
            && self.turns.in_flight.is_none()
            && matches!(self.solution, Solution::None)
            && !ready.handle_given
            && self.forwards.is_empty()
    }

    /// The listing after the last check, when it waited (see
    /// [`Attempt::only_checks_ran`]): taken before any call that may act in
    /// the sandbox, so that what the check wrote stays the check's. Whether
    /// the workspace was read now (`Ready::last` is then the workspace as it is).
    pub(super) async fn list_after_check(&mut self, handle: &SandboxHandle) -> bool {
        let SandboxState::Ready(ready) = &mut self.sandbox else { return false };
        let Some(index) = ready.unlisted_check.take() else { return false };
        let Some(command) = self.record.checks.get(index).map(|c| c.command.clone()) else {
            return false;
        };
        let listed = self.after_check(handle, &lifecycle::check::one_line(&command)).await;
        let read = listed.is_some();
        if let Some(check) = self.record.checks.get_mut(index) {
            check.changes = listed.flatten();
        }
        read
    }

    /// [`Attempt::list_after_check`] in the started sandbox, if any (for
    /// calls that need no sandbox of their own).
    pub(super) async fn list_after_check_if_started(&mut self) {
        if let SandboxState::Ready(ready) = &self.sandbox
            && ready.unlisted_check.is_some()
        {
            let handle = ready.handle.clone();
            self.list_after_check(&handle).await;
        }
    }

    /// A check in one of the sandbox's services (`Ctx::exec_in_service`).
    pub(crate) async fn exec_in_service(
        &mut self,
        service: &str,
        cmd: Command,
    ) -> Result<ExecOutput> {
        let handle = self.sandbox().await?;
        self.list_after_check(&handle).await;
        let step = cmd.step_name().map(str::to_string);
        let run = async { Ok(handle.sandbox().exec_in_service(service, &cmd).await?) };
        let detail = |o: &ExecOutput| {
            format!("service {service}: {}", lifecycle::check::detail(o, step.as_deref()))
        };
        let out = self.phases.run(Phase::Check, run, detail).await?;
        let mut record = lifecycle::check::record(&out, false, step.as_deref());
        record.service = Some(service.to_string());
        self.record.checks.push(record);
        Ok(out)
    }

    /// Before a check: the eval's own writes since the last listing
    /// (`write_file`) are listed now, so they are not taken for the check's.
    /// Costs nothing when the eval wrote nothing.
    pub(super) async fn before_check(&mut self, handle: &SandboxHandle) {
        // The oracle's solution writing and then running a script is all the turn's work.
        if !self.ready().eval_wrote || matches!(self.solution, Solution::Solving) {
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
    /// of the agent's diffs: `Some(None)` when it changed nothing, `None`
    /// when the workspace was not read (the oracle's solution at work, or
    /// the workspace could not be read: then an event says so, and the
    /// agent's diffs are as they were).
    pub(super) async fn after_check(
        &mut self,
        handle: &SandboxHandle,
        check: &str,
    ) -> Option<Option<Diff>> {
        let SandboxState::Ready(ready) = &self.sandbox else { return None };
        // The oracle's solution acting through checks is doing the turn's work.
        if matches!(self.solution, Solution::Solving) {
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
        let ready = self.ready();
        let changes = absorb_check(&mut ready.baseline, &before, &now);
        ready.last = Some(now);
        Some(changes)
    }
}

/// What a check changed between `before` and `now`, moved out of the
/// agent's diffs by moving `baseline` past it; `None` when it changed nothing.
pub(super) fn absorb_check(
    baseline: &mut Snapshot,
    before: &Snapshot,
    now: &Snapshot,
) -> Option<Diff> {
    let changes = before.diff(now);
    if changes.is_empty() {
        return None;
    }
    *baseline = baseline.absorb(before, now, &changes);
    Some(changes)
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
