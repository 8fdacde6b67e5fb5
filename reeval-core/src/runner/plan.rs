//! Planning the run's cells, once, before any attempt: each eval's
//! environment is built from the user's function once (a variant's change
//! applied to that one build), each cell's harness made once for its image
//! spec, image key, version and egress, and the result (a
//! [`CellPlan`], shared behind an `Arc`) is what preflight checks and
//! resolves the secrets of, and what dispatch, the containers made ahead, the
//! setup cache's fills and every attempt of the cell use.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use super::Runner;
use super::given::ArmCell;
use crate::attempt::{CellPlan, panic_message};
use crate::environment::Environment;
use crate::eval::Eval;
use crate::harness::Harness;
use crate::secrets::Secret;

/// An eval's cells before preflight: its environment, built once, and each
/// cell's environment (the arm's change applied) and harness.
pub(super) struct EvalDraft {
    /// The eval's own environment, or the message of the panic its function raised.
    pub(super) env: Result<Arc<Environment>, String>,
    /// Its cells, in the order they run.
    pub(super) cells: Vec<CellDraft>,
}

/// One cell before preflight resolved its secrets.
pub(super) struct CellDraft {
    pub(super) cell: ArmCell,
    /// The cell's environment (the eval's, with its arm's change), or why there is none.
    pub(super) env: Result<Arc<Environment>, String>,
    /// The cell's harness; `None` when no harness of its name is known.
    pub(super) harness: Option<Box<dyn Harness>>,
}

/// The cells of `eval`, their environments built: the eval's function runs
/// once here, and nowhere else in the run.
///
/// `[images]` is applied last, to the eval's environment and to each cell's
/// after its variant's change, so an image a variant names is mapped too (and
/// a variant sees the names the eval gave); so is the run's `allow_internal`.
pub(super) fn draft(runner: &Runner, eval: &Eval) -> EvalDraft {
    let images = &runner.config.settings.images;
    let internal = &runner.config.egress.allow_internal;
    let finish = |env: Environment| {
        let mut env = images.apply_env(env);
        env.allow_internal.extend(internal.iter().cloned());
        env
    };
    let raw = images.scope(|| build_environment(eval));
    let env = raw.clone().map(|e| Arc::new(finish(e)));
    let cells = runner
        .arm_cells(eval)
        .into_iter()
        .map(|cell| {
            let env = match (&env, &raw, &cell.variant) {
                (Err(panic), _, _) | (_, Err(panic), _) => Err(panic.clone()),
                (Ok(env), _, None) => Ok(env.clone()),
                (Ok(_), Ok(raw), Some(variant)) => {
                    let base = raw.clone();
                    std::panic::catch_unwind(AssertUnwindSafe(|| variant.apply_env(base)))
                        .map(|env| Arc::new(finish(env)))
                        .map_err(|p| {
                            format!(
                                "variant {} of eval {} panicked: {}",
                                variant.name(),
                                eval.name,
                                panic_message(p.as_ref())
                            )
                        })
                }
            };
            let harness = runner.harnesses.make(&cell.spec);
            CellDraft { cell, env, harness }
        })
        .collect();
    EvalDraft { env, cells }
}

/// The plan of a cell whose environment was built (and whose harness is
/// known, unless the cell cannot run), with the secrets and judge keys
/// preflight resolved for it.
pub(super) fn plan(
    runner: &Runner,
    eval: &Eval,
    cell: &ArmCell,
    env: Arc<Environment>,
    harness: Option<&dyn Harness>,
    secrets: Vec<Secret>,
    judge_keys: Vec<Secret>,
) -> CellPlan {
    let config = &runner.config;
    // A sandbox with a way out is made with its gateway (an egress that
    // cannot be planned is the attempt's to report).
    let gateway = !matches!(crate::gateway::attempt::plan(&env, harness, &secrets), Ok(None));
    let brokered = harness
        .map(|h| h.egress().brokers)
        .unwrap_or_default()
        .into_iter()
        .chain(env.brokers.iter().cloned());
    CellPlan {
        eval: eval.name.clone(),
        source: eval.location.map(|(file, line)| format!("{file}:{line}")),
        tags: eval.options.tags.clone(),
        min_pass_rate: config.settings.min_pass_rate.or(eval.options.min_pass_rate),
        judge: eval.options.judge.clone().or_else(|| config.settings.judge.clone()),
        timeout: config.settings.timeout.unwrap_or(eval.options.timeout),
        deadline: eval.options.deadline,
        run: eval.run.clone(),
        oracle: eval.options.oracle.clone(),
        harness_spec: cell.spec.clone(),
        arm: cell.arm.clone(),
        image: crate::lifecycle::image::spec(env.image.as_ref(), harness),
        image_key: crate::lifecycle::image::harness_id(harness),
        harness_version: harness.and_then(|h| h.version()),
        gateway,
        brokered: brokered.map(|(name, _)| name).collect(),
        env,
        secrets,
        judge_keys,
        cannot_run: eval.options.cannot_run.clone(),
        images: config.settings.images.clone(),
    }
}

/// The eval's environment, or the message of the panic its function raised.
pub(crate) fn build_environment(eval: &Eval) -> Result<Environment, String> {
    match &eval.options.environment {
        None => Ok(Environment::default()),
        Some(f) => std::panic::catch_unwind(AssertUnwindSafe(|| f()))
            .map_err(|p| panic_message(p.as_ref())),
    }
}
