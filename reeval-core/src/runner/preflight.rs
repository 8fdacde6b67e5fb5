//! Preflight: before anything starts, every harness is known, every secret
//! and credential is present (host environment, then the run's env files),
//! every environment is valid, and the engine answers. Every miss is listed
//! at once; nothing is started (exit code 2).

use std::sync::Arc;
use std::time::Instant;

use super::plan::{self, EvalDraft};
use super::pool::Pool;
use super::{PreflightError, Runner};
use crate::attempt::CellPlan;
use crate::eval::Eval;
use crate::sandbox::{CellNeeds, RunNeeds};
use crate::secrets::{ExposeSecret, Redactor, Secret as ResolvedSecret, SecretScope};
use crate::settings;

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

/// Checks, before anything starts, that every harness is known, every
/// secret and credential is present and the engine answers, and plans every
/// cell ([`plan`]: each eval's environment built once). Lists every miss.
///
/// # Errors
/// A [`PreflightError`] naming everything missing.
///
/// # Cancel safety
/// Safe: it starts nothing.
pub(crate) async fn preflight(
    runner: &Runner,
    evals: &[Eval],
) -> Result<Preflighted, PreflightError> {
    let began = Instant::now();
    let mut missing = Vec::new();
    let mut plans: Vec<Vec<Arc<CellPlan>>> = Vec::new();
    // The host environment, then the env files; an unreadable file is a miss like any other.
    let from = settings::SecretLookup::load(
        runner.config.env_file.as_deref(),
        runner.config.fallback_env_file.as_deref(),
    )
    .unwrap_or_else(|e| {
        missing.push(e.to_string());
        settings::SecretLookup::default()
    });
    let lookup = |name: &str| from.get(name);
    let sources = secret_sources(runner);
    // Records must be writable before any sandbox starts: a run that cannot record is no run.
    let run_dir = runner.config.record_dir.join(&runner.config.run_id);
    if let Err(problem) = writable(&run_dir) {
        missing.push(format!(
            "failed to write records under {}: {problem}; choose another --record-dir (or REEVAL_RECORD_DIR, or record_dir in reeval.toml)",
            runner.config.record_dir.display()
        ));
    } else if let Some(free) = free_bytes(&runner.config.record_dir)
        && free < MIN_FREE_BYTES
    {
        missing.push(format!(
            "only {} free under {}; a run needs at least {} there for its records and report: free some space or choose another --record-dir",
            kib(free),
            runner.config.record_dir.display(),
            kib(MIN_FREE_BYTES)
        ));
    }
    let mut images = Vec::new();
    // Evals with services, which only some engines can start.
    let mut with_services = Vec::new();
    // Evals with mounts, which only some engines can give: (eval, its mounts).
    let mut with_mounts = Vec::new();
    // Evals that ask a judge and have no judge model chosen.
    let mut unjudged = Vec::new();
    for eval in evals {
        let EvalDraft { env, cells } = plan::draft(runner, eval);
        let mut planned = Vec::new();
        let env = match env {
            Ok(env) => env,
            Err(panic) => {
                missing
                    .push(format!("environment function of eval {} panicked: {panic}", eval.name));
                plans.push(planned);
                continue;
            }
        };
        missing.extend(
            env.problems().into_iter().map(|p| format!("environment of eval {}: {p}", eval.name)),
        );
        if !env.services.is_empty() {
            let names: Vec<&str> = env.services.iter().map(|s| s.name.as_str()).collect();
            with_services.push((eval.name.clone(), names.join(", ")));
        }
        let mounts = env.all_mounts();
        if !mounts.is_empty() {
            with_mounts.push((eval.name.clone(), mounts));
        }
        if let Some(spec @ crate::environment::ImageSpec::From(_)) = &env.image
            && !images.iter().any(|(s, _)| s == spec)
        {
            images.push((spec.clone(), eval.name.clone()));
        }
        let mut resolved = Vec::new();
        // The judge's keys: the host's judge calls use them, nothing in a sandbox.
        let mut judge_keys = Vec::new();
        for s in &env.secrets {
            match lookup(&s.name) {
                Some(value) => resolved.push(ResolvedSecret::new(
                    &s.name,
                    value,
                    if s.checks_only { SecretScope::Checks } else { SecretScope::Placeholder },
                )),
                None => missing.push(format!(
                    "secret {} of eval {} is not set in {sources}; set it there, or leave the eval out with --skip {}",
                    s.name, eval.name, eval.name
                )),
            }
        }
        // The eval's judge key: checked now rather than after the agent worked.
        // An eval that asks a judge must have one chosen (`REEVAL_JUDGE` of the process
        // is what the judge falls back to when the run's settings name none).
        let judge_env =
            || std::env::var(crate::judge::JUDGE_ENV).ok().filter(|s| !s.trim().is_empty());
        let spec = eval
            .options
            .judge
            .clone()
            .or_else(|| runner.config.judge.clone())
            .or_else(|| eval.options.uses_judge.then(judge_env).flatten());
        if spec.is_none() && eval.options.uses_judge {
            unjudged.push(eval.name.as_str());
        }
        if let Some(spec) = &spec {
            match crate::judge::key_env(spec) {
                Err(problem) => {
                    missing.push(format!("judge `{spec}` of eval {}: {problem}", eval.name))
                }
                Ok(var) => match lookup(var) {
                    Some(value) => {
                        judge_keys.push(ResolvedSecret::new(var, value, SecretScope::Host))
                    }
                    None => {
                        let line = format!("key {var} for judge {spec} is not set in {sources}");
                        if !missing.contains(&line) {
                            missing.push(line);
                        }
                    }
                },
            }
        }
        // A judge whose model the body names (`Judge::model`) is not the one
        // chosen here, so its key was not required above; each provider's
        // default key still comes from the run's env files or the host when
        // they have it, as a chosen judge's does.
        for provider in crate::llm::chat::Provider::ALL {
            let var = provider.default_key_env();
            if !judge_keys.iter().any(|s| s.name == var)
                && let Some(value) = lookup(var)
            {
                judge_keys.push(ResolvedSecret::new(var, value, SecretScope::Host));
            }
        }
        for draft in cells {
            let spec = &draft.cell.spec;
            // A harness credential is a secret like any other: the agent sees a placeholder.
            let mut for_cell = resolved.clone();
            match &draft.harness {
                // Named by the run (--harness, REEVAL_HARNESS, reeval.toml): said once, not per eval.
                None if runner.config.harnesses.contains(spec) => {
                    let line = format!(
                        "harness `{spec}` (from --harness, REEVAL_HARNESS or `harness` in reeval.toml) is not known; {}",
                        runner.harnesses.unknown(spec)
                    );
                    if !missing.contains(&line) {
                        missing.push(line);
                    }
                }
                None => {
                    let line = format!(
                        "harness `{spec}` of eval {} (its `harness = …`) is not known; {}",
                        eval.name,
                        runner.harnesses.unknown(spec)
                    );
                    if !missing.contains(&line) {
                        missing.push(line);
                    }
                }
                Some(h) => {
                    for cred in h.credentials() {
                        match lookup(&cred) {
                            Some(value) => for_cell.push(ResolvedSecret::new(
                                cred,
                                value,
                                SecretScope::Placeholder,
                            )),
                            None => {
                                let line = format!(
                                    "credential {cred} for harness {spec} is not set in {sources}"
                                );
                                if !missing.contains(&line) {
                                    missing.push(line);
                                }
                            }
                        }
                    }
                }
            }
            match (draft.env, &draft.harness) {
                (Ok(env), Some(h)) => {
                    let plan = plan::plan(
                        runner,
                        eval,
                        &draft.cell,
                        env,
                        h.as_ref(),
                        for_cell,
                        judge_keys.clone(),
                    );
                    // A sandbox with a way out has the gateway's relay on its port.
                    if plan.gateway
                        && let Some(why) =
                            crate::sandbox::service::relay_port_taken(&plan.env.services)
                    {
                        let line = format!("environment of eval {}: {why}", eval.name);
                        if !missing.contains(&line) {
                            missing.push(line);
                        }
                    }
                    planned.push(Arc::new(plan));
                }
                (Err(panic), _) => {
                    let line = format!("environment of eval {}: {panic}", eval.name);
                    if !missing.contains(&line) {
                        missing.push(line);
                    }
                }
                (Ok(_), None) => {}
            }
        }
        plans.push(planned);
    }
    if !unjudged.is_empty() {
        missing.push(format!(
            "no judge model is chosen for {} {}, which {} a judge (c.judge): name one with the eval's `judge = \"..\"`, `judge` in reeval.toml or {} (e.g. anthropic:claude-sonnet-4-5)",
            if unjudged.len() == 1 { "eval" } else { "evals" },
            unjudged.join(", "),
            if unjudged.len() == 1 { "asks" } else { "ask" },
            crate::judge::JUDGE_ENV,
        ));
    }
    // The engines of the run's backend, whichever it is.
    let config = match &runner.backend {
        Some(b) => crate::sandbox::BackendConfig::Given(b.clone()),
        None => runner.config.backend(),
    };
    let pool = Pool::connect(&config).await.map_err(|misses| missing.extend(misses)).ok();
    let needs = needs(&plans);
    // Which engines, where: `-v` and every record say so.
    let mut engines = Vec::new();
    for engine in pool.iter().flat_map(|p| p.engines()) {
        if let (Some((eval, names)), Err(why)) =
            (with_services.first(), engine.backend.runs_services())
        {
            let more = match with_services.len() {
                1 => String::new(),
                n => format!(" (and {} more evals with services)", n - 1),
            };
            missing.push(format!(
                "eval {eval} has services ({names}) that engine {} cannot start{more}: {why}",
                engine.name
            ));
        }
        for (eval, mounts) in &with_mounts {
            if let Err(why) = engine.backend.mounts(mounts) {
                missing.push(format!(
                    "eval {eval} has mounts that engine {} cannot give: {why}",
                    engine.name
                ));
            }
        }
        match engine.backend.ping().await {
            Ok(info) => {
                engines.push(format!(
                    "{} {} (API {}) at {}",
                    info.name, info.version, info.api_version, info.host
                ));
                // An image named by reference that is not on the engine and cannot be
                // pulled will not appear by retrying: say so now, before anything starts.
                for (spec, eval) in &images {
                    if let Err(e @ crate::sandbox::SandboxError::ImageMissing { .. }) =
                        engine.backend.ensure_image(spec, "").await
                    {
                        missing.push(format!("environment of eval {eval}: {e}"));
                    }
                }
            }
            Err(e) => missing.push(format!("engine {} does not answer ({e})", engine.name)),
        }
        // What the backend itself cannot run (a cluster without a registry, say).
        let found = engine.backend.check_run(&needs).await;
        for warning in &found.warnings {
            crate::report::say(&format!("reeval: warning: {warning}\n"));
        }
        for line in found.missing {
            if !missing.contains(&line) {
                missing.push(line);
            }
        }
    }
    if !missing.is_empty() {
        return Err(PreflightError { missing });
    }
    // The one redactor of the run: every sink writes through it.
    let redactor = Redactor::new(
        plans
            .iter()
            .flatten()
            .flat_map(|p| p.secrets.iter().chain(&p.judge_keys))
            .map(|s| s.value.expose_secret()),
    );
    crate::secrets::remember(&redactor);
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

/// What the run's cells ask of an engine (see [`crate::sandbox::Backend::check_run`]),
/// from their plans: each cell's images (its own, and the eval's without the
/// harness's install), whether it needs egress, the secrets its gateway brokers.
fn needs(plans: &[Vec<Arc<CellPlan>>]) -> RunNeeds {
    let cells = plans
        .iter()
        .flatten()
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

/// Where preflight looked for a secret, for the message naming one it did not find.
fn secret_sources(runner: &Runner) -> String {
    let file = |path: &Option<std::path::PathBuf>, unset: &str| match path {
        Some(p) => p.display().to_string(),
        None => unset.to_string(),
    };
    format!(
        "the host environment, the env_file of reeval.toml ({}) or the file named by REEVAL_ENV_FILE ({})",
        file(&runner.config.env_file, "none set"),
        file(&runner.config.fallback_env_file, "unset"),
    )
}

/// The free space a run needs in its record directory before it starts:
/// records of a few attempts and the report (a full disk mid-run is still
/// caught, and named, as each file is written).
pub(crate) const MIN_FREE_BYTES: u64 = 1024 * 1024;

/// Bytes an unprivileged process may still write on the filesystem of `dir`.
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// `180 KiB`, `1024 KiB`.
fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes / 1024)
}

/// Whether records can be written in `run_dir`: it is created, and a file written and removed there.
fn writable(run_dir: &std::path::Path) -> Result<(), std::io::Error> {
    std::fs::create_dir_all(run_dir)?;
    let probe = run_dir.join(format!(".reeval-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)?;
    // Left empty until the first record, so a run that stops in preflight leaves no directory.
    let _ = std::fs::remove_dir(run_dir);
    Ok(())
}
