//! One attempt: a fresh context, the eval's future under its budget, teardown
//! whatever happened, classification, and the record written.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::ctx::{Ctx, ResolvedSecret};
use crate::error::Error;
use crate::eval::Eval;
use crate::harness::Harness;
use crate::outcome::{Ended, conclude};
use crate::progress::PhaseLog;
use crate::record::Record;
use crate::sandbox::DockerBackend;

/// How long the eval gets to finish after its budget ran out during a turn
/// (the turn's 3-second grace, the kill, the turn's diff).
const ABORT_GRACE: Duration = Duration::from_secs(15);

/// Everything an attempt needs from its run.
#[derive(Debug, Clone)]
pub(crate) struct AttemptPlan {
    pub(crate) run_id: String,
    pub(crate) run_dir: PathBuf,
    pub(crate) eval: Eval,
    pub(crate) harness_spec: String,
    pub(crate) timeout: Duration,
    pub(crate) trial: u32,
    pub(crate) try_: u32,
    pub(crate) verbose: bool,
    /// The run-wide preflight's detail (`ok in 12ms`).
    pub(crate) preflight: String,
    /// The run's redactor, built in preflight.
    pub(crate) redactor: crate::secrets::Redactor,
}

/// The eval's environment, or the message of the panic its function raised.
pub(crate) fn build_environment(eval: &Eval) -> Result<crate::Environment, String> {
    match &eval.options.environment {
        None => Ok(crate::Environment::default()),
        Some(f) => std::panic::catch_unwind(AssertUnwindSafe(|| f())).map_err(|p| panic_message(p.as_ref())),
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

/// Runs one attempt to its record. Never panics on the eval's account.
pub(crate) async fn run(
    plan: AttemptPlan,
    backend: Option<Arc<DockerBackend>>,
    harness: Option<Box<dyn Harness>>,
    secrets: Vec<ResolvedSecret>,
    shutdown: CancellationToken,
) -> Record {
    // Preflight already built it once; a panic here is a panic of the eval's own code.
    let (env, env_panic) = match build_environment(&plan.eval) {
        Ok(env) => (env, None),
        Err(panic) => (Default::default(), Some(panic)),
    };
    let mut record = Record::new(&plan.run_id, &plan.eval.name, &plan.harness_spec, plan.trial, plan.try_);
    let artifacts_dir = plan.run_dir.join(record.artifacts_dir_name());
    let redactor = plan.redactor.clone();
    let mut log = PhaseLog::new(&plan.eval.name, plan.trial, &plan.harness_spec, plan.verbose, redactor.clone());
    // Preflight ran once for the whole run, before anything started.
    log.phase(crate::phase::Phase::Preflight, log.started(), plan.preflight.clone());
    record.source = plan.eval.location.map(|(file, line)| format!("{file}:{line}"));
    let budget = Budget::new(plan.timeout);
    let mut ctx = Ctx {
        deadline: plan.eval.options.deadline.map(|d| Instant::now() + d),
        env,
        backend,
        harness,
        budget: budget.clone(),
        log,
        record,
        artifacts_dir,
        secrets,
        redactor: redactor.clone(),
        sandbox: None,
        start: crate::ctx::StartState::NotYet,
        baseline: None,
        last_snapshot: None,
        harness_started: false,
        agent_user_ready: false,
        soft_failures: Vec::new(),
        judge_spec: plan.eval.options.judge.clone(),
        captures: Vec::new(),
        forwards: Vec::new(),
        turn_unsettled: Default::default(),
        oom_kills_seen: 0,
    };

    let signal = budget.signal();
    let ctx_deadline = ctx.deadline;
    let turn_unsettled = ctx.turn_unsettled.clone();
    budget.start();
    let ended = {
        let run = plan.eval.run.clone();
        let fut = crate::matchers::CURRENT_EVAL.scope(plan.eval.name.clone(), AssertUnwindSafe(run(&mut ctx)).catch_unwind());
        let fut = fut.map(|r| r.map_err(|p| panic_message(p.as_ref())));
        tokio::pin!(fut);
        let deadline = async {
            match ctx_deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        if let Some(p) = env_panic {
            Ended::Returned(Ok(Err(Error::other(format!("failed to build the environment: its function panicked: {p}")))))
        } else {
            tokio::select! {
                r = &mut fut => Ended::Returned(r),
                _ = signal.cancelled() => {
                    // A running turn needs its grace, its kill and its diff; reeval's other calls return at once.
                    let grace = if turn_unsettled.load(std::sync::atomic::Ordering::SeqCst) { ABORT_GRACE } else { Duration::from_secs(1) };
                    Ended::BudgetRanOut(tokio::time::timeout(grace, &mut fut).await.ok())
                }
                _ = deadline => Ended::DeadlinePassed,
                _ = shutdown.cancelled() => Ended::Interrupted,
            }
        }
    };
    budget.finish();

    // Teardown runs whatever happened; a panic in it (a harness's stop) must not lose the record.
    if let Err(panic) = AssertUnwindSafe(crate::lifecycle::teardown(&mut ctx)).catch_unwind().await {
        ctx.log.event(format!("failed to tear down: teardown panicked: {}", panic_message(panic.as_ref())));
        if let Some(h) = &ctx.sandbox {
            let _ = h.sandbox().destroy().await;
        }
    }

    let (outcome, message) = conclude(ended, &ctx.soft_failures, plan.timeout);
    let total_ms = ctx.log.now_ms();
    let mut record = ctx.record;
    record.outcome = outcome;
    record.message = message;
    record.phases = ctx.log.phases;
    record.events = ctx.log.events;
    record.timings.total_ms = total_ms;
    if let Err(e) = std::fs::create_dir_all(&plan.run_dir).and_then(|_| redactor.write_json(&plan.run_dir.join(record.file_name()), &record)) {
        eprintln!("reeval: failed to write the record of {}: {e}", record.eval);
    }
    // What the runner prints and an embedding program reads is redacted like the file.
    redactor.scrub(&record).unwrap_or(record)
}
