//! One attempt from its plan to its record: [`run`] builds the attempt, runs
//! the eval's future under its budget, its deadline and the run's
//! interruption, blames a lost sandbox, tears down whatever happened, and
//! concludes the record (`finish`: the outcome classified, the call that was
//! running named, the timings, phases and events written).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use super::{
    ABORT_GRACE, Attempt, AttemptPlan, EgressState, Given, InFlight, Phases, Prepare, Purpose,
    SandboxState, Solution, TurnUnsettled, Turns, calls,
};
use crate::budget::Budget;
use crate::error::Error;
use crate::harness::Harness;
use crate::lifecycle;
use crate::outcome::{Conclusion, Ended, conclude};
use crate::phase::Phase;
use crate::progress::PhaseLog;
use crate::record::Record;
use crate::sandbox::Backend;
use crate::turn::TurnStatus;

/// Runs one attempt to its record. Never panics on the eval's account.
pub(crate) async fn run(
    plan: AttemptPlan,
    backend: Option<Arc<dyn Backend>>,
    harness: Option<Box<dyn Harness>>,
    shutdown: CancellationToken,
    prestarted: Option<super::Ahead>,
) -> Attempted {
    let deadline = plan.cell.deadline.map(|d| Instant::now() + d);
    let purpose = Purpose::Eval(plan.ask_fill.clone());
    let mut attempt = Attempt::new(&plan, backend, harness, &shutdown, deadline, purpose);
    attempt.prepare.prestarted = prestarted;
    let (budget, turn_unsettled) = (attempt.phases.budget.clone(), attempt.turns.unsettled.clone());
    let redactor = attempt.given.redactor.clone();
    let mut ctx = super::Ctx { attempt };

    let signal = budget.signal();
    budget.start();
    // What the eval's body prints is its own (under the suite binary; see eval_output.rs).
    let output = crate::eval_output::Output::begin();
    let ended = {
        let run = plan.cell.run.clone();
        let fut = crate::matchers::CURRENT_EVAL
            .scope(plan.cell.eval.clone(), AssertUnwindSafe(run(&mut ctx)).catch_unwind());
        let fut = output.around(fut.map(|r| r.map_err(|p| panic_message(p.as_ref()))));
        tokio::pin!(fut);
        let deadline = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut fut => Ended::Returned(r),
            _ = signal.cancelled() => {
                // A running turn needs its grace, its kill and its diff; reeval's other calls return at once.
                let grace = if turn_unsettled.load(std::sync::atomic::Ordering::SeqCst) { ABORT_GRACE } else { Duration::from_secs(1) };
                Ended::BudgetRanOut(tokio::time::timeout(grace, &mut fut).await.ok())
            }
            _ = deadline => Ended::DeadlinePassed,
            _ = shutdown.cancelled() => {
                // A running turn stops as `interrupted`: let it record what it did so far.
                if turn_unsettled.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = tokio::time::timeout(ABORT_GRACE, &mut fut).await;
                }
                Ended::Interrupted
            }
        }
    };
    budget.finish();

    let mut attempt = ctx.attempt;
    let ended = attempt.blame_lost_sandbox(ended).await;
    // Teardown runs whatever happened; a panic in it (a harness's stop) must not lose the record.
    let to_destroy = match AssertUnwindSafe(attempt.teardown()).catch_unwind().await {
        Ok(sandbox) => sandbox,
        Err(panic) => {
            attempt.phases.log.event(format!(
                "failed to tear down: teardown panicked: {}",
                panic_message(panic.as_ref())
            ));
            attempt.handle().map(|h| h.sandbox().clone())
        }
    };
    // A container made ahead that the attempt never used goes too.
    let to_destroy = match (to_destroy, attempt.prepare.prestarted.take()) {
        (None, Some(ahead)) => Some(ahead.discard().await),
        (Some(own), Some(ahead)) => {
            let _ = ahead.discard().await.destroy().await;
            Some(own)
        }
        (to_destroy, None) => to_destroy,
    };
    let harness = attempt.given.harness.take();
    let (mut record, cause) = attempt.finish(ended, plan.cell.timeout);
    record.output = output.finish();
    // The harness's last word on the record (a replay names what it re-graded).
    if let Some(mut harness) = harness {
        harness.conclude(&mut record, &plan.run_dir);
    }
    // Everything downstream (reporters, an embedding program) gets the redacted record.
    Attempted { record: redactor.scrub(&record).unwrap_or(record), cause, to_destroy }
}

impl Attempt {
    /// A fresh attempt of `plan`, its sandbox not started, its clock not running.
    pub(super) fn new(
        plan: &AttemptPlan,
        backend: Option<Arc<dyn Backend>>,
        harness: Option<Box<dyn Harness>>,
        shutdown: &CancellationToken,
        deadline: Option<Instant>,
        purpose: Purpose,
    ) -> Self {
        let cell = &plan.cell;
        let mut record = plan.new_record();
        record.source = cell.source.clone();
        record.tags = cell.tags.clone();
        record.min_pass_rate = cell.min_pass_rate;
        calls::remember_panic_locations();
        let artifacts_dir = plan.run_dir.join(record.artifacts_dir_name());
        let redactor = plan.redactor.clone();
        let log = PhaseLog::new(plan.id(), redactor.clone(), plan.events.clone());
        let budget = Budget::new(cell.timeout);
        let mut phases = Phases::new(log, budget, deadline);
        // Preflight ran once for the whole run, before anything started.
        let started = phases.log.started();
        phases.record(Phase::Preflight, started, plan.preflight.clone());
        // A harness that runs the eval's reference solution (the oracle) runs it at the first `send`.
        let solution =
            match (&cell.oracle, harness.as_ref().is_some_and(|h| h.runs_reference_solution())) {
                (_, false) => Solution::None,
                (Some(solve), true) => Solution::Pending(solve.clone()),
                (None, true) => Solution::Missing,
            };
        Attempt {
            given: Given {
                cell: cell.clone(),
                env: cell.env.clone(),
                backend,
                harness,
                secrets: cell.secrets.clone(),
                judge_keys: cell.judge_keys.clone(),
                redactor,
                artifacts_dir,
                judge_spec: cell.judge.clone(),
            },
            phases,
            sandbox: SandboxState::NotStarted,
            prepare: Prepare {
                purpose,
                setup_cache: plan.setup_cache,
                prestarted: None,
                snapshot_ahead: None,
                cache_mismatch: None,
                cache_digest: None,
                session_beside_snapshot: false,
                session_failed: None,
                helper: None,
            },
            egress: EgressState {
                run: plan.egress.clone(),
                attempt: None,
                started_unix_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0),
                refused: Vec::new(),
            },
            turns: Turns {
                in_flight: None,
                unsettled: TurnUnsettled::default(),
                interrupt: shutdown.clone(),
            },
            calls: calls::Calls::default(),
            record,
            soft_failures: Vec::new(),
            captures: Vec::new(),
            forwards: Vec::new(),
            oom_kills_seen: 0,
            solution,
            extras: Vec::new(),
        }
    }

    /// The record, concluded (outcome, message, phases, events, timings), and the error that caused its outcome.
    fn finish(mut self, ended: Ended, budget: Duration) -> (Record, Option<Error>) {
        // Interrupted: the run stopped it, or a call it made ended because the run stopped.
        let interrupted = matches!(ended, Ended::Interrupted)
            || (self.turns.interrupt.is_cancelled()
                && matches!(ended, Ended::Returned(Ok(Err(_)))));
        let stopped =
            matches!(ended, Ended::BudgetRanOut(_) | Ended::DeadlinePassed | Ended::Interrupted);
        let returned_error = matches!(ended, Ended::Returned(Ok(Err(_))));
        let panicked = matches!(ended, Ended::Returned(Err(_)));
        let Conclusion { outcome, message, cause } = if interrupted {
            conclude(Ended::Interrupted, &mut self.soft_failures, budget)
        } else {
            conclude(ended, &mut self.soft_failures, budget)
        };
        let total_ms = self.phases.log.now_ms();
        // A turn cut short keeps its place in the record (the last): a turn that
        // never concluded by how it was stopped; one cut short in its diff as it concluded.
        if let Some(InFlight { mut turn, began }) = self.turns.in_flight.take() {
            if turn.duration_ms == 0 {
                turn.status =
                    if interrupted { TurnStatus::Interrupted } else { TurnStatus::Aborted };
                turn.duration_ms = began.elapsed().as_millis().max(1) as u64;
            }
            self.record.turns.push(turn);
        }
        let mut message = message;
        let mut record = self.record;
        record.interrupted = interrupted;
        let timed_out = outcome == crate::outcome::Outcome::Fail(crate::FailKind::Timeout);
        if panicked {
            record.location = calls::take_panic_location();
            if let (Some(at), Some(m)) = (&record.location, message.as_mut()) {
                *m = m.replacen("the eval panicked: ", &format!("the eval panicked at {at}: "), 1);
            }
        } else if (stopped || timed_out)
            && let Some(call) = self.calls.in_flight.or(self.calls.failed)
        {
            // The call that was running when time ran out (or the run stopped), and what
            // the agent had printed by then.
            record.location = Some(call.to_string());
            if let Some(m) = message.as_mut() {
                m.push_str(&format!("\n  while {call} was running"));
                if let Some(tail) = lifecycle::turn::output_tail(&record.turns) {
                    m.push_str(&format!("\n  the agent's last output: {tail}"));
                }
            }
        } else if returned_error {
            record.location = self.calls.failed.map(|c| c.to_string());
        }
        // A failure says what the gateway refused meanwhile: often why it failed.
        if outcome != crate::outcome::Outcome::Pass
            && let Some(m) = message.as_mut()
        {
            for refused in self.egress.refused.drain(..) {
                m.push_str(&format!("\n  {refused}"));
            }
        }
        record.outcome = outcome;
        record.message = message;
        record.timings = self.phases.timings;
        record.timings.total_ms = total_ms;
        record.phases = self.phases.log.phases;
        record.events = self.phases.log.events;
        (record, cause)
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".into()
    }
}

/// What an attempt left: its record (redacted), and the error that decided its outcome.
#[derive(Debug)]
pub(crate) struct Attempted {
    pub(crate) record: Record,
    pub(crate) cause: Option<Error>,
    /// The sandbox, still to destroy: the caller does it, off the critical path.
    pub(crate) to_destroy: Option<Arc<dyn crate::sandbox::Sandbox>>,
}
