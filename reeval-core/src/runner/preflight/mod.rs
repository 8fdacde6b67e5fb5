//! Preflight: before anything starts, every harness is known, every secret
//! and credential is present (host environment, then the run's env files),
//! every environment is valid, the records can be written and the engines
//! answer and can run what the cells ask. Each check is its own function and
//! adds the misses it finds; all are listed at once, and nothing is started
//! (exit code 2).
//!
//! A miss is the run's (an engine that does not answer, a record directory
//! that cannot be written, a harness the run names) or one eval's (its
//! environment, its secrets, its judge key, an image it names that is not
//! there, services or resources its engine cannot give). An eval's miss stops
//! the run unless the eval is refused alone (`Eval::refuse_alone`, every
//! Harbor task's): then its cells are config outcomes saying why (listed when
//! the run starts, starting nothing) and the rest of the run goes on.
//!
//! - `mod.rs`: the checks in order, and what they add up to.
//! - `records.rs`: the record directory.
//! - `evals.rs`: each eval's environment, secrets, judge, harnesses; its cells planned.
//! - `engines.rs`: the engines: connected, answering, images, services, resources, the backend's own.

mod engines;
mod evals;
mod records;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::Runner;
use super::pool::Pool;
use crate::attempt::CellPlan;
use crate::eval::Eval;
use crate::secrets::{ExposeSecret, Redactor};

/// A run that could not start: nothing was started (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed preflight, nothing was started:\n{}", .missing.iter().map(|m| format!("  - {m}")).collect::<Vec<_>>().join("\n"))]
pub struct PreflightError {
    /// Everything that is missing or invalid.
    pub missing: Vec<String>,
}

/// What preflight found: the engine, the plan of every cell, the run's redactor.
pub(crate) struct Preflighted {
    /// The engines attempts run on (one, or a pool).
    pub(crate) pool: Arc<Pool>,
    /// Per eval (in the order given), the plans of its cells, their secrets resolved.
    pub(crate) plans: Vec<Vec<Arc<CellPlan>>>,
    pub(crate) redactor: Redactor,
    /// `ok in 12ms`, the preflight phase's detail in every record.
    pub(crate) detail: String,
    /// The engine and its version, for the summary.
    pub(crate) engine: Option<String>,
}

/// What the checks found missing: the run's, and each eval's (by its index).
#[derive(Debug, Default)]
pub(super) struct Misses {
    run: Vec<String>,
    evals: BTreeMap<usize, Vec<String>>,
}

impl Misses {
    /// A miss of the run (said once however often it is found).
    pub(super) fn run(&mut self, line: String) {
        if !self.run.contains(&line) {
            self.run.push(line);
        }
    }

    /// A miss of eval `i` alone (said once).
    pub(super) fn eval(&mut self, i: usize, line: String) {
        let mine = self.evals.entry(i).or_default();
        if !mine.contains(&line) {
            mine.push(line);
        }
    }
}

/// Checks, before anything starts, that every harness is known, every
/// secret and credential is present and the engines answer, and plans every
/// cell (`plan.rs`: each eval's environment built once). Lists every miss.
///
/// # Errors
/// A [`PreflightError`] naming everything missing, but what is an eval's alone
/// when that eval is refused alone (its cells are then planned as config outcomes).
///
/// # Cancel safety
/// Safe: it starts nothing.
pub(crate) async fn preflight(
    runner: &Runner,
    evals: &[Eval],
) -> Result<Preflighted, PreflightError> {
    let began = Instant::now();
    let mut misses = Misses::default();
    records::check(runner, &mut misses);
    let mut plans = evals::check(runner, evals, &mut misses);
    let engines = engines::check(runner, evals, &plans, &mut misses).await;
    let missing = refuse_alone(evals, &mut plans, misses);
    if !missing.is_empty() {
        return Err(PreflightError { missing });
    }
    // The one redactor of the run: every sink writes through it.
    let redactor = Redactor::new(
        plans
            .iter()
            .flatten()
            .flat_map(|p| p.secrets.iter().chain(&p.judge_keys))
            .map(|s| s.value.expose_secret())
            .chain(plans.iter().flatten().flat_map(|p| p.env.redacted_values())),
    );
    crate::secrets::remember(&redactor);
    let engines::Found { pool, engines } = engines;
    let pool = pool.expect("no miss means an engine");
    let engine = (!engines.is_empty()).then(|| engines.join(", "));
    Ok(Preflighted {
        pool: Arc::new(pool),
        plans,
        redactor,
        detail: format!("ok in {}ms · {}", began.elapsed().as_millis(), engines.join(", ")),
        engine,
    })
}

/// The misses that stop the run: the run's, and those of every eval not
/// refused alone. An eval refused alone has its cells marked as unable to
/// run, saying why.
fn refuse_alone(evals: &[Eval], plans: &mut [Vec<Arc<CellPlan>>], misses: Misses) -> Vec<String> {
    let Misses { run: mut missing, evals: by_eval } = misses;
    for (i, lines) in by_eval {
        let eval = &evals[i];
        if !eval.options.refuse_alone {
            for line in lines {
                if !missing.contains(&line) {
                    missing.push(line);
                }
            }
            continue;
        }
        let why = format!("failed to run eval {}: {}", eval.name, lines.join("; "));
        for cell in &mut plans[i] {
            let mut refused = CellPlan::clone(cell);
            refused.cannot_run.get_or_insert_with(|| why.clone());
            // Nothing of the cell is used now: no secret is resolved for a cell that cannot run.
            refused.secrets.clear();
            *cell = Arc::new(refused);
        }
    }
    missing
}
