//! The one path every phase runs through: [`Phases::run`] times the phase,
//! logs it, pauses or spends the budget by the phase's policy, enforces the
//! whole-attempt deadline on the phases that prepare the sandbox, adds the
//! time to the record's `timings`, and tags any error with the phase.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::budget::Budget;
use crate::error::{Error, Result};
use crate::phase::{Phase, Timing};
use crate::progress::PhaseLog;
use crate::record::Timings;

/// The attempt's clock, budget, phase log and timings.
#[derive(Debug)]
pub(crate) struct Phases {
    pub(crate) log: PhaseLog,
    pub(crate) budget: Budget,
    pub(crate) timings: Timings,
    /// A ceiling on the whole attempt (setup included), when the eval sets one.
    pub(crate) deadline: Option<Instant>,
}

/// Keeps the budget paused while alive, even if the future holding it is dropped.
pub(crate) struct Paused(Budget);

impl Paused {
    pub(crate) fn new(budget: &Budget) -> Self {
        budget.pause();
        Self(budget.clone())
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        self.0.resume();
    }
}

impl Phases {
    pub(crate) fn new(log: PhaseLog, budget: Budget, deadline: Option<Instant>) -> Self {
        Self { log, budget, timings: Timings::default(), deadline }
    }

    /// Runs one phase: `work` gives its value, and `detail` the one-line detail
    /// of the phase record (an error's message when it failed).
    ///
    /// - Phases that prepare the sandbox do not spend the budget (it is paused)
    ///   and end as an infra error when the attempt's deadline passes.
    /// - Checks, verdicts, serves and captures spend it and stop with
    ///   [`Error::Timeout`] when it runs out. A turn spends it too, but handles
    ///   the budget's signal itself (it gets a grace and keeps its diff).
    pub(crate) async fn run<T>(
        &mut self,
        phase: Phase,
        work: impl Future<Output = Result<T>>,
        detail: impl FnOnce(&T) -> String,
    ) -> Result<T> {
        let began = Instant::now();
        self.log.phase_started(phase);
        let result = if phase.spends_budget() {
            if phase == Phase::Turn { work.await } else { within(&self.budget, work).await }
        } else if phase == Phase::Teardown {
            // Teardown has its own deadline and never runs on the attempt's.
            work.await
        } else {
            let _paused = Paused::new(&self.budget);
            match self.deadline {
                Some(at) => match tokio::time::timeout_at(at.into(), work).await {
                    Ok(r) => r,
                    Err(_) => Err(Error::infra(
                        format!("finish the {phase} phase"),
                        "the attempt's deadline passed (a wedged sandbox or setup?)",
                    )),
                },
                None => work.await,
            }
        };
        self.add(phase.timing(), began.elapsed().as_millis() as u64);
        match result {
            Ok(value) => {
                let text = detail(&value);
                self.log.phase(phase, began, text);
                Ok(value)
            }
            Err(e) => {
                self.log.phase(phase, began, e.to_string());
                Err(e.in_phase(phase))
            }
        }
    }

    /// Records a phase that ran beside another (from `began` to `ended`,
    /// outside [`Phases::run`]): its time added, its record, its error tagged.
    /// For phases that prepare the sandbox, off the budget.
    pub(crate) fn ran_beside<T>(
        &mut self,
        phase: Phase,
        (began, ended): (Instant, Instant),
        result: Result<T>,
        detail: impl FnOnce(&T) -> String,
    ) -> Result<T> {
        self.add(phase.timing(), ended.saturating_duration_since(began).as_millis() as u64);
        let text = match &result {
            Ok(value) => detail(value),
            Err(e) => e.to_string(),
        };
        self.log.phase_until(phase, began, ended, text);
        result.map_err(|e| e.in_phase(phase))
    }

    /// Records a phase that was timed elsewhere (preflight, once per run).
    pub(crate) fn record(&mut self, phase: Phase, began: Instant, detail: impl Into<String>) {
        self.log.phase(phase, began, detail);
    }

    /// Runs a diff outside any phase (`Ctx::diff`): it spends the budget, and its time counts as `diffMs`.
    pub(crate) async fn diff<T>(&mut self, work: impl Future<Output = Result<T>>) -> Result<T> {
        let began = Instant::now();
        let value = within(&self.budget, work).await;
        self.timings.diff_ms += began.elapsed().as_millis() as u64;
        value
    }

    /// Counts `ms` of a phase that was spent on its diff (a turn's) as `diffMs` instead.
    pub(crate) fn count_as_diff(&mut self, phase: Phase, ms: u64) {
        let from = match phase.timing() {
            Timing::Agent => &mut self.timings.agent_ms,
            Timing::Setup => &mut self.timings.setup_ms,
            Timing::Checks => &mut self.timings.checks_ms,
            Timing::Judge => &mut self.timings.judge_ms,
            Timing::Teardown => &mut self.timings.teardown_ms,
            Timing::None => return,
        };
        *from = from.saturating_sub(ms);
        self.timings.diff_ms += ms;
    }

    /// Runs the eval's own work outside any phase (reading a file): it spends the budget.
    pub(crate) async fn within_budget<T>(
        &self,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        within(&self.budget, work).await
    }

    fn add(&mut self, timing: Timing, ms: u64) {
        let t = &mut self.timings;
        match timing {
            Timing::None => {}
            Timing::Setup => t.setup_ms += ms,
            Timing::Agent => t.agent_ms += ms,
            Timing::Checks => t.checks_ms += ms,
            Timing::Judge => t.judge_ms += ms,
            Timing::Teardown => t.teardown_ms += ms,
        }
    }
}

/// Runs `work` unless the budget runs out first.
async fn within<T>(budget: &Budget, work: impl Future<Output = Result<T>>) -> Result<T> {
    let signal = budget.signal();
    tokio::select! {
        biased;
        _ = signal.cancelled() => Err(Error::Timeout { elapsed: budget.spent() }),
        r = work => r,
    }
}

/// A flag shared with the attempt's runner: set from a turn's start until it
/// reports on its own. A turn still running gets its grace when the budget
/// runs out, and teardown first kills what an unsettled turn may have left.
pub(crate) type TurnUnsettled = Arc<std::sync::atomic::AtomicBool>;

/// How long the eval gets to finish after its budget ran out during a turn
/// (the turn's 3-second grace, the kill, the turn's diff).
pub(crate) const ABORT_GRACE: Duration = Duration::from_secs(15);
