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
use crate::outcome::{Kind, Outcome, classify};
use crate::progress::PhaseLog;
use crate::record::{Record, write_json};
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
    pub(crate) preflight: (Instant, String),
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".into()
    }
}

/// Runs one attempt to its record. Never panics on the eval's account.
pub(crate) async fn run(plan: AttemptPlan, backend: Option<Arc<DockerBackend>>, harness: Option<Box<dyn Harness>>, secrets: Vec<ResolvedSecret>, shutdown: CancellationToken) -> Record {
    let env = plan.eval.options.environment.as_ref().map(|f| f()).unwrap_or_default();
    let mut record = Record::new(&plan.run_id, &plan.eval.name, &plan.harness_spec, plan.trial, plan.try_);
    let artifacts_dir = plan.run_dir.join(record.artifacts_dir_name());
    let secret_values: Vec<String> = secrets.iter().map(|s| s.value.clone()).collect();
    let mut log = PhaseLog::new(&plan.eval.name, plan.trial, &plan.harness_spec, plan.verbose, secret_values.clone());
    // Preflight ran once for the whole run, before anything started.
    log.phase("preflight", log.started(), plan.preflight.1.clone());
    record.started_at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
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
        sandbox: None,
        start_error: None,
        baseline: None,
        last_snapshot: None,
        harness_started: false,
        ready: false,
        turns_sent: 0,
        soft_failures: Vec::new(),
        judge_spec: plan.eval.options.judge.clone(),
        captures: Vec::new(),
        forwards: Vec::new(),
        turn_aborted: false,
        oom_kills_seen: 0,
    };

    enum Ended {
        Returned(Result<crate::Result<()>, String>),
        BudgetRanOut(Option<Result<crate::Result<()>, String>>),
        Interrupted,
    }
    let signal = budget.signal();
    budget.start();
    let ended = {
        let run = plan.eval.run.clone();
        let fut = crate::matchers::CURRENT_EVAL.scope(plan.eval.name.clone(), AssertUnwindSafe(run(&mut ctx)).catch_unwind());
        let fut = fut.map(|r| r.map_err(|p| panic_message(p.as_ref())));
        tokio::pin!(fut);
        tokio::select! {
            r = &mut fut => Ended::Returned(r),
            _ = signal.cancelled() => Ended::BudgetRanOut(tokio::time::timeout(ABORT_GRACE, &mut fut).await.ok()),
            _ = shutdown.cancelled() => Ended::Interrupted,
        }
    };
    budget.finish();

    crate::lifecycle::teardown(&mut ctx).await;

    let (outcome, kind, message) = match ended {
        Ended::Returned(Ok(Ok(()))) => match ctx.soft_failures.first() {
            None => (Outcome::Pass, None, None),
            Some(e) => {
                let (o, k) = classify(e);
                (o, Some(k), Some(e.to_string()))
            }
        },
        Ended::Returned(Ok(Err(e))) => {
            let (o, k) = classify(&e);
            (o, Some(k), Some(e.to_string()))
        }
        Ended::Returned(Err(panic)) => (Outcome::Fail, Some(Kind::Assertion), Some(format!("the eval panicked: {panic}"))),
        Ended::BudgetRanOut(returned) => match returned {
            // The platform's failure stays the platform's (a harness that never produced an event).
            Some(Ok(Err(e))) if classify(&e).0 == Outcome::InfraError => {
                let (o, k) = classify(&e);
                (o, Some(k), Some(e.to_string()))
            }
            _ => (Outcome::Fail, Some(Kind::Timeout), Some(Error::Timeout { elapsed: plan.timeout }.to_string())),
        },
        Ended::Interrupted => (Outcome::InfraError, Some(Kind::Infra), Some("failed to finish: the run was interrupted".into())),
    };
    let total_ms = ctx.log.now_ms();
    let mut record = ctx.record;
    record.outcome = outcome;
    record.kind = kind;
    record.message = message;
    record.phases = ctx.log.phases;
    record.events = ctx.log.events;
    record.timings.total_ms = total_ms;
    if let Err(e) = std::fs::create_dir_all(&plan.run_dir).and_then(|_| write_json(&plan.run_dir.join(record.file_name()), &record, &secret_values)) {
        eprintln!("reeval: failed to write the record of {}: {e}", record.eval);
    }
    record
}
