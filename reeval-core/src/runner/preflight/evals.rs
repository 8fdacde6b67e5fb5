//! Each eval's own checks, and its cells planned (`plan.rs`): its
//! environment (built once from its function), its secrets, its judge and
//! its judge's key, its harnesses and their credentials.

use std::sync::Arc;

use super::Misses;
use crate::attempt::CellPlan;
use crate::environment::Environment;
use crate::eval::Eval;
use crate::runner::Runner;
use crate::runner::plan::{self, CellDraft, EvalDraft};
use crate::secrets::{Secret, SecretScope};
use crate::settings;

/// Where secrets are read from: the host environment, then the run's env files.
struct Secrets {
    from: settings::SecretLookup,
    /// Where they were looked for, for the message naming one not found.
    sources: String,
}

impl Secrets {
    fn get(&self, name: &str) -> Option<String> {
        self.from.get(name)
    }
}

/// Checks and plans every eval's cells, in order; every eval gets its
/// cells planned, so an eval refused alone still has its records.
pub(super) fn check(
    runner: &Runner,
    evals: &[Eval],
    misses: &mut Misses,
) -> Vec<Vec<Arc<CellPlan>>> {
    // An unreadable env file is a miss like any other.
    let from = settings::SecretLookup::load(
        runner.config.settings.env_file.as_deref(),
        runner.config.settings.fallback_env_file.as_deref(),
    )
    .unwrap_or_else(|e| {
        misses.run(e.to_string());
        settings::SecretLookup::default()
    });
    let secrets = Secrets { from, sources: secret_sources(runner) };
    let mut unjudged = Vec::new();
    let plans = evals
        .iter()
        .enumerate()
        .map(|(i, eval)| one(runner, i, eval, &secrets, &mut unjudged, misses))
        .collect();
    judges_chosen(evals, &unjudged, misses);
    plans
}

/// One eval: its environment, secrets and judge checked, its cells planned.
fn one(
    runner: &Runner,
    i: usize,
    eval: &Eval,
    secrets: &Secrets,
    unjudged: &mut Vec<usize>,
    misses: &mut Misses,
) -> Vec<Arc<CellPlan>> {
    let EvalDraft { env, cells } = plan::draft(runner, eval);
    // An eval that cannot run starts nothing: nothing of it is checked.
    if eval.options.cannot_run.is_some() {
        return cells
            .into_iter()
            .map(|d| planned(runner, eval, d, Vec::new(), Vec::new()))
            .collect();
    }
    match &env {
        Err(panic) => {
            misses.eval(i, format!("environment function of eval {} panicked: {panic}", eval.name))
        }
        Ok(env) => {
            for p in env.problems() {
                misses.eval(i, format!("environment of eval {}: {p}", eval.name));
            }
        }
    }
    let resolved = match &env {
        Ok(env) => eval_secrets(i, eval, env, secrets, misses),
        Err(_) => Vec::new(),
    };
    let judge_keys = judge_keys(i, eval, runner, secrets, unjudged, misses);
    cells
        .into_iter()
        .map(|draft| {
            let for_cell = harness_credentials(i, eval, runner, &draft, &resolved, secrets, misses);
            if let Err(panic) = &draft.env {
                misses.eval(i, format!("environment of eval {}: {panic}", eval.name));
            }
            let plan = planned(runner, eval, draft, for_cell, judge_keys.clone());
            // A sandbox with a way out has the gateway's relay on its port.
            if plan.gateway
                && let Some(why) = crate::sandbox::service::relay_port_taken(&plan.env.services)
            {
                misses.eval(i, format!("environment of eval {}: {why}", eval.name));
            }
            plan
        })
        .collect()
}

/// The cell's plan; a cell whose environment could not be built gets the
/// default one (it does not run: its eval has a miss).
fn planned(
    runner: &Runner,
    eval: &Eval,
    draft: CellDraft,
    secrets: Vec<Secret>,
    judge_keys: Vec<Secret>,
) -> Arc<CellPlan> {
    let env = draft.env.unwrap_or_else(|_| Arc::new(Environment::default()));
    let harness = draft.harness.as_deref();
    Arc::new(plan::plan(runner, eval, &draft.cell, env, harness, secrets, judge_keys))
}

/// The environment's secrets, resolved; each one missing is a miss.
fn eval_secrets(
    i: usize,
    eval: &Eval,
    env: &Environment,
    secrets: &Secrets,
    misses: &mut Misses,
) -> Vec<Secret> {
    let mut resolved = Vec::new();
    for s in &env.secrets {
        match secrets.get(&s.name) {
            Some(value) => resolved.push(Secret::new(
                &s.name,
                value,
                if s.checks_only { SecretScope::Checks } else { SecretScope::Placeholder },
            )),
            None => misses.eval(
                i,
                format!(
                    "secret {} of eval {} is not set in {}; set it there, or leave the eval out with --skip {}",
                    s.name, eval.name, secrets.sources, eval.name
                ),
            ),
        }
    }
    resolved
}

/// The judge's keys: the chosen judge's (checked now rather than after the
/// agent worked), and each provider's default key where the host has it.
/// An eval that asks a judge must have one chosen (`REEVAL_JUDGE` of the
/// process is what the judge falls back to when the run's settings name none).
fn judge_keys(
    i: usize,
    eval: &Eval,
    runner: &Runner,
    secrets: &Secrets,
    unjudged: &mut Vec<usize>,
    misses: &mut Misses,
) -> Vec<Secret> {
    let mut keys = Vec::new();
    let judge_env = || std::env::var(crate::judge::JUDGE_ENV).ok().filter(|s| !s.trim().is_empty());
    let spec = eval
        .options
        .judge
        .clone()
        .or_else(|| runner.config.settings.judge.clone())
        .or_else(|| eval.options.uses_judge.then(judge_env).flatten());
    if spec.is_none() && eval.options.uses_judge {
        unjudged.push(i);
    }
    if let Some(spec) = &spec {
        match crate::llm::chat::key_env(spec) {
            Err(problem) => {
                misses.eval(i, format!("judge `{spec}` of eval {}: {problem}", eval.name))
            }
            Ok(var) => match secrets.get(var) {
                Some(value) => keys.push(Secret::new(var, value, SecretScope::Host)),
                None => misses.eval(
                    i,
                    format!("key {var} for judge {spec} is not set in {}", secrets.sources),
                ),
            },
        }
    }
    // A judge whose model the body names (`Judge::model`) is not the one
    // chosen here, so its key was not required above; each provider's
    // default key still comes from the run's env files or the host when
    // they have it, as a chosen judge's does.
    for provider in crate::llm::conversation::Provider::ALL {
        let var = provider.default_key_env();
        if !keys.iter().any(|s| s.name == var)
            && let Some(value) = secrets.get(var)
        {
            keys.push(Secret::new(var, value, SecretScope::Host));
        }
    }
    keys
}

/// The cell's secrets: the eval's, and its harness's credentials (a secret
/// like any other: the agent sees a placeholder). A harness no one knows is a miss.
fn harness_credentials(
    i: usize,
    eval: &Eval,
    runner: &Runner,
    draft: &CellDraft,
    resolved: &[Secret],
    secrets: &Secrets,
    misses: &mut Misses,
) -> Vec<Secret> {
    let spec = &draft.cell.spec;
    let mut for_cell = resolved.to_vec();
    match &draft.harness {
        // Named by the run (--harness, REEVAL_HARNESS, reeval.toml): said once, not per eval.
        None if runner.config.settings.harnesses.contains(spec) => misses.run(format!(
            "harness `{spec}` (from --harness, REEVAL_HARNESS or `harness` in reeval.toml) is not known; {}",
            runner.harnesses.unknown(spec)
        )),
        None => misses.eval(
            i,
            format!(
                "harness `{spec}` of eval {} (its `harness = …`) is not known; {}",
                eval.name,
                runner.harnesses.unknown(spec)
            ),
        ),
        Some(h) => {
            for cred in h.credentials() {
                match secrets.get(&cred) {
                    Some(value) => {
                        for_cell.push(Secret::new(cred, value, SecretScope::Placeholder))
                    }
                    None => misses.run(format!(
                        "credential {cred} for harness {spec} is not set in {}",
                        secrets.sources
                    )),
                }
            }
        }
    }
    for_cell
}

/// Evals that ask a judge with none chosen: one line for those that stop
/// the run, one each for those refused alone.
fn judges_chosen(evals: &[Eval], unjudged: &[usize], misses: &mut Misses) {
    let line = |names: &[&str]| {
        format!(
            "no judge model is chosen for {} {}, which {} a judge (c.judge): name one with the eval's `judge = \"..\"`, `judge` in reeval.toml or {} (e.g. anthropic:claude-sonnet-4-5)",
            if names.len() == 1 { "eval" } else { "evals" },
            names.join(", "),
            if names.len() == 1 { "asks" } else { "ask" },
            crate::judge::JUDGE_ENV,
        )
    };
    let (alone, together): (Vec<usize>, Vec<usize>) =
        unjudged.iter().partition(|&&i| evals[i].options.refuse_alone);
    for i in alone {
        misses.eval(i, line(&[evals[i].name.as_str()]));
    }
    let names: Vec<&str> = together.iter().map(|&i| evals[i].name.as_str()).collect();
    if !names.is_empty() {
        misses.run(line(&names));
    }
}

/// Where preflight looked for a secret, for the message naming one it did not find.
fn secret_sources(runner: &Runner) -> String {
    let file = |path: &Option<std::path::PathBuf>, unset: &str| match path {
        Some(p) => p.display().to_string(),
        None => unset.to_string(),
    };
    format!(
        "the host environment, the env_file of reeval.toml ({}) or the file named by REEVAL_ENV_FILE ({})",
        file(&runner.config.settings.env_file, "none set"),
        file(&runner.config.settings.fallback_env_file, "unset"),
    )
}
