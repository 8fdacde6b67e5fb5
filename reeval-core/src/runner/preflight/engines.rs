//! The engines: the run's backend connected (one engine or a pool), each
//! answering, and able to run what the cells ask: their services, the images
//! they name, the resources they ask, and whatever the backend itself checks
//! (`Backend::check_run`: a cluster without a registry, say).

use std::sync::Arc;

use super::Misses;
use crate::attempt::CellPlan;
use crate::environment::ImageSpec;
use crate::eval::Eval;
use crate::runner::Runner;
use crate::runner::pool::Pool;
use crate::sandbox::{Backend, CellNeeds, RunNeeds, SandboxError};
use crate::secrets::ExposeSecret;

/// The engines found: the pool (when it could connect), and each engine's
/// `name version (API x) at host`.
pub(super) struct Found {
    pub(super) pool: Option<Pool>,
    pub(super) engines: Vec<String>,
}

/// Connects the run's engines and checks each one against the cells.
pub(super) async fn check(
    runner: &Runner,
    evals: &[Eval],
    plans: &[Vec<Arc<CellPlan>>],
    misses: &mut Misses,
) -> Found {
    // The engines of the run's backend, whichever it is.
    let config = match &runner.backend {
        Some(b) => crate::sandbox::BackendConfig::Given(b.clone()),
        None => runner.config.settings.backend.clone(),
    };
    let pool = match Pool::connect(&config).await {
        Ok(pool) => Some(pool),
        Err(found) => {
            found.into_iter().for_each(|line| misses.run(line));
            None
        }
    };
    let needs = needs(plans);
    let mut engines = Vec::new();
    for engine in pool.iter().flat_map(|p| p.engines()) {
        let backend = engine.backend.as_ref();
        services(&engine.name, backend, evals, plans, misses);
        mounts(&engine.name, backend, evals, plans, misses);
        match backend.ping().await {
            Ok(info) => {
                engines.push(format!(
                    "{} {} (API {}) at {}",
                    info.name, info.version, info.api_version, info.host
                ));
                images(backend, evals, plans, misses).await;
                if let Some(capacity) = info.capacity {
                    resources(&engine.name, capacity, evals, plans, misses);
                }
            }
            Err(e) => misses.run(format!("engine {} does not answer ({e})", engine.name)),
        }
        // What the backend itself cannot run (a cluster without a registry, say).
        let found = backend.check_run(&needs).await;
        for warning in &found.warnings {
            crate::report::say(&format!("reeval: warning: {warning}\n"));
        }
        found.missing.into_iter().for_each(|line| misses.run(line));
    }
    Found { pool, engines }
}

/// Evals with services, which only some engines can start: each one's miss.
fn services(
    engine: &str,
    backend: &dyn Backend,
    evals: &[Eval],
    plans: &[Vec<Arc<CellPlan>>],
    misses: &mut Misses,
) {
    for (i, cells) in plans.iter().enumerate() {
        let Some(cell) = cells.iter().find(|c| !c.env.services.is_empty()) else { continue };
        let Err(why) = backend.runs_services(&cell.env.services) else { continue };
        let names: Vec<&str> = cell.env.services.iter().map(|s| s.name.as_str()).collect();
        misses.eval(
            i,
            format!(
                "eval {} has services ({}) that engine {engine} cannot start: {why}",
                evals[i].name,
                names.join(", ")
            ),
        );
    }
}

/// Evals with mounts (volumes, host paths), which only some engines can give: each one's miss.
fn mounts(
    engine: &str,
    backend: &dyn Backend,
    evals: &[Eval],
    plans: &[Vec<Arc<CellPlan>>],
    misses: &mut Misses,
) {
    for (i, cells) in plans.iter().enumerate() {
        let Some(cell) = cells.iter().find(|c| c.cannot_run.is_none()) else { continue };
        if let Err(why) = backend.mounts(&cell.env.all_mounts()) {
            misses.eval(
                i,
                format!(
                    "eval {} has mounts that engine {engine} cannot give: {why}",
                    evals[i].name
                ),
            );
        }
    }
}

/// An image named by reference that is not on the engine and cannot be
/// pulled will not appear by retrying: said now, before anything starts.
async fn images(
    backend: &dyn Backend,
    evals: &[Eval],
    plans: &[Vec<Arc<CellPlan>>],
    misses: &mut Misses,
) {
    let mut asked: Vec<(&ImageSpec, Option<String>)> = Vec::new();
    for (i, cells) in plans.iter().enumerate() {
        for cell in cells.iter().filter(|c| c.cannot_run.is_none()) {
            let Some(spec @ ImageSpec::From(_)) = &cell.env.image else { continue };
            let known = match asked.iter().find(|(s, _)| *s == spec) {
                Some((_, problem)) => problem.clone(),
                None => {
                    let problem = match backend.ensure_image(spec, "").await {
                        Err(e @ SandboxError::ImageMissing { .. }) => Some(e.to_string()),
                        _ => None,
                    };
                    asked.push((spec, problem.clone()));
                    problem
                }
            };
            if let Some(problem) = known {
                misses.eval(i, format!("environment of eval {}: {problem}", evals[i].name));
            }
        }
    }
}

/// A sandbox asking more CPUs or memory than the engine has is refused at
/// creation every time: the eval's fault, said now, not retried as the platform's.
fn resources(
    engine: &str,
    capacity: crate::sandbox::Capacity,
    evals: &[Eval],
    plans: &[Vec<Arc<CellPlan>>],
    misses: &mut Misses,
) {
    for (i, cells) in plans.iter().enumerate() {
        let Some(cell) = cells.iter().find(|c| c.cannot_run.is_none()) else { continue };
        let lacks = capacity.lacks(&cell.env.limits);
        if !lacks.is_empty() {
            misses.eval(
                i,
                format!(
                    "eval {} asks for {}, more than engine {engine} can give one sandbox: lower its limits (`cpus`, `memory` of its environment; a Harbor task's [environment] cpus and memory_mb) or run it on a larger engine",
                    evals[i].name,
                    lacks.join(" and ")
                ),
            );
        }
    }
}

/// What the run's cells ask of an engine (see [`crate::sandbox::Backend::check_run`]),
/// from their plans: each cell's images (its own, and the eval's without the
/// harness's install), whether it needs egress, the secrets its gateway brokers.
fn needs(plans: &[Vec<Arc<CellPlan>>]) -> RunNeeds {
    let cells = plans
        .iter()
        .flatten()
        .filter(|cell| cell.cannot_run.is_none())
        .map(|cell| {
            let mut images = vec![
                cell.image.clone(),
                crate::lifecycle::image::spec(cell.env.image.as_ref(), None),
            ];
            images.dedup();
            let brokered = cell
                .brokered
                .iter()
                .filter_map(|name| {
                    // The cell's secrets only: a judge's key is never brokered.
                    let secret = cell.secrets.iter().find(|s| &s.name == name)?;
                    Some((
                        crate::egress::secret_env(name),
                        secrecy::SecretString::from(secret.value.expose_secret().to_string()),
                    ))
                })
                .collect();
            CellNeeds { eval: cell.eval.clone(), images, egress: cell.gateway, brokered }
        })
        .collect();
    RunNeeds { cells }
}
