//! The runner: selects evals, runs preflight once, runs every attempt
//! (eval × harness × trial, infra errors retried with a fresh sandbox),
//! prints libtest-style lines and reeval's summary, and writes the run's files.

pub mod cli;
pub mod config;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::attempt::{self, AttemptPlan};
use crate::secrets::{Secret as ResolvedSecret, SecretScope};
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::outcome::Outcome;
use crate::record::{CellSummary, Record, Summary, pass_at_k, pass_pow_k};
use crate::sandbox::{Backend, DockerBackend, Sweep};
use crate::secrets::{ExposeSecret, Redactor};
use crate::settings::{self, Settings};

pub use cli::{Args, UsageError};
pub use config::SuiteConfig;

/// The harness an eval runs with when neither it nor the command line names one.
pub const DEFAULT_HARNESS: &str = "shell";

/// How a run is configured.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The run id (`NEXTEST_RUN_ID` when under nextest, so its processes share a run).
    pub run_id: String,
    /// Runs are recorded under `<record_dir>/<run_id>/`.
    pub record_dir: PathBuf,
    /// Print every phase.
    pub verbose: bool,
    /// libtest-style per-eval lines and the summary on stdout.
    pub print: bool,
    /// Harnesses replacing every eval's own.
    pub harnesses: Vec<String>,
    /// Trials replacing every eval's own.
    pub trials: Option<u32>,
    /// Budget replacing every eval's own.
    pub timeout: Option<Duration>,
    /// Attempts at once.
    pub threads: usize,
    /// Retries of an infra error, each with a fresh sandbox.
    pub infra_retries: u32,
    /// The suite's judge model, for evals that name none (`judge` in `reeval.toml`).
    pub judge: Option<String>,
    /// A `.env` file of secrets and credentials read by preflight, before
    /// `fallback_env_file`; the host environment still wins over both.
    pub env_file: Option<PathBuf>,
    /// `REEVAL_ENV_FILE`: read for names that neither the host environment nor `env_file` sets.
    pub fallback_env_file: Option<PathBuf>,
    /// cargo-nextest runs this process: each process writes its own `summary.<pid>.json`.
    pub under_nextest: bool,
}

impl Default for RunConfig {
    /// The defaults and where this process runs ([`Settings::base`]); no flags, twins or `reeval.toml`.
    fn default() -> Self {
        Settings::base(settings::process_env).run_config()
    }
}

/// `NEXTEST_RUN_ID`, or `<utc date>T<time>-<pid>`.
pub fn new_run_id() -> String {
    settings::run_id_from(&settings::process_env)
}

/// `$CARGO_TARGET_DIR/reeval/runs`, or `target/reeval/runs`.
pub fn default_record_dir() -> PathBuf {
    settings::default_record_dir_from(&settings::process_env)
}

/// A run that could not start: nothing was started (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed preflight, nothing was started:\n{}", .missing.iter().map(|m| format!("  - {m}")).collect::<Vec<_>>().join("\n"))]
pub struct PreflightError {
    /// Everything that is missing or invalid.
    pub missing: Vec<String>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The run id.
    pub run_id: String,
    /// Where the run is recorded.
    pub run_dir: PathBuf,
    /// Every attempt's record, retried tries included, in start order.
    pub records: Vec<Record>,
    /// The summary (final tries only).
    pub summary: Summary,
}

impl RunReport {
    /// The process exit code: 0 all passed, 1 any fail, 3 infra errors and no fail.
    pub fn exit_code(&self) -> i32 {
        self.summary.exit_code
    }

    /// Records of the final try of each trial.
    pub fn final_records(&self) -> Vec<&Record> {
        final_tries(&self.records)
    }
}

fn final_tries(records: &[Record]) -> Vec<&Record> {
    let mut last: BTreeMap<(String, String, u32), &Record> = BTreeMap::new();
    for r in records {
        let key = (r.eval.clone(), r.harness.clone(), r.trial);
        if last.get(&key).is_none_or(|prev| prev.try_ < r.try_) {
            last.insert(key, r);
        }
    }
    last.into_values().collect()
}

/// Runs evals.
#[derive(Debug, Clone)]
pub struct Runner {
    config: RunConfig,
    harnesses: HarnessRegistry,
    shutdown: CancellationToken,
    /// The engine sandboxes run on; by default the Docker engine of `DOCKER_HOST`.
    backend: Option<Arc<dyn Backend>>,
}

impl Runner {
    /// A runner with `config` and the harnesses of `registry`.
    pub fn new(config: RunConfig, harnesses: HarnessRegistry) -> Self {
        Self { config, harnesses, shutdown: CancellationToken::new(), backend: None }
    }

    /// Runs sandboxes on `backend` instead of the Docker engine (another engine, or the fake of tests).
    pub fn with_backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// A token that, when cancelled, interrupts every attempt (each still tears down and records).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// The harness specs `eval` runs with.
    pub fn harness_specs(&self, eval: &Eval) -> Vec<String> {
        if !self.config.harnesses.is_empty() {
            self.config.harnesses.clone()
        } else if !eval.options.harnesses.is_empty() {
            eval.options.harnesses.clone()
        } else {
            vec![DEFAULT_HARNESS.to_string()]
        }
    }

    /// Checks, before anything starts, that every harness is known, every
    /// secret and credential is present and the engine answers. Lists every miss.
    ///
    /// # Errors
    /// A [`PreflightError`] naming everything missing.
    ///
    /// # Cancel safety
    /// Safe: it starts nothing.
    pub(crate) async fn preflight(&self, evals: &[Eval]) -> Result<(Option<Arc<dyn Backend>>, BTreeMap<String, Vec<ResolvedSecret>>), PreflightError> {
        let mut missing = Vec::new();
        let mut secrets = BTreeMap::new();
        // The host environment, then the env files; an unreadable file is a miss like any other.
        let from = settings::SecretLookup::load(self.config.env_file.as_deref(), self.config.fallback_env_file.as_deref()).unwrap_or_else(|e| {
            missing.push(e.to_string());
            settings::SecretLookup::default()
        });
        let lookup = |name: &str| from.get(name);
        for eval in evals {
            let env = match crate::attempt::build_environment(eval) {
                Ok(env) => env,
                Err(panic) => {
                    missing.push(format!("environment function of eval {} panicked: {panic}", eval.name));
                    continue;
                }
            };
            missing.extend(env.problems().into_iter().map(|p| format!("environment of eval {}: {p}", eval.name)));
            let mut resolved = Vec::new();
            for s in &env.secrets {
                match lookup(&s.name) {
                    Some(value) => {
                        resolved.push(ResolvedSecret::new(&s.name, value, if s.checks_only { SecretScope::Checks } else { SecretScope::Placeholder }))
                    }
                    None => missing.push(format!("secret {} of eval {} is not set in the host environment", s.name, eval.name)),
                }
            }
            // The eval's judge key: checked now rather than after the agent worked; host only.
            if let Some(spec) = eval.options.judge.as_ref().or(self.config.judge.as_ref()) {
                match crate::judge::key_env(spec) {
                    Err(problem) => missing.push(format!("judge `{spec}` of eval {}: {problem}", eval.name)),
                    Ok(var) => match lookup(var) {
                        Some(value) => resolved.push(ResolvedSecret::new(var, value, SecretScope::Host)),
                        None => {
                            let line = format!("key {var} for judge {spec} is not set in the host environment");
                            if !missing.contains(&line) {
                                missing.push(line);
                            }
                        }
                    },
                }
            }
            for spec in self.harness_specs(eval) {
                // A harness credential is a secret like any other: the agent sees a placeholder.
                let mut for_cell = resolved.clone();
                match self.harnesses.make(&spec) {
                    None => missing.push(format!(
                        "harness `{spec}` of eval {} is not known; known: {}",
                        eval.name,
                        self.harnesses.names().collect::<Vec<_>>().join(", ")
                    )),
                    Some(h) => {
                        for cred in h.credentials() {
                            match lookup(&cred) {
                                Some(value) => for_cell.push(ResolvedSecret::new(cred, value, SecretScope::Placeholder)),
                                None => {
                                    let line = format!("credential {cred} for harness {spec} is not set in the host environment");
                                    if !missing.contains(&line) {
                                        missing.push(line);
                                    }
                                }
                            }
                        }
                    }
                }
                secrets.insert(cell_key(&eval.name, &spec), for_cell);
            }
        }
        let connected = match &self.backend {
            Some(b) => b.ping().await.map(|_| b.clone()),
            None => DockerBackend::connect().await.map(|b| Arc::new(b) as Arc<dyn Backend>),
        };
        let backend: Option<Arc<dyn Backend>> = match connected {
            Ok(b) => Some(b),
            Err(e @ crate::sandbox::SandboxError::EngineConfig { .. }) => {
                missing.push(e.to_string());
                None
            }
            Err(e) => {
                missing.push(format!("the Docker engine does not answer ({e}); start it or set DOCKER_HOST"));
                None
            }
        };
        if missing.is_empty() { Ok((backend, secrets)) } else { Err(PreflightError { missing }) }
    }

    /// Runs `evals` (already selected) and writes the run's records and summary.
    ///
    /// # Errors
    /// A [`PreflightError`] when something required is missing; nothing was started then.
    ///
    /// # Cancel safety
    /// Dropping the future may leave sandboxes behind, which the next run
    /// removes; use [`Runner::shutdown_token`] to stop a run cleanly.
    pub async fn run(&self, evals: Vec<Eval>) -> Result<RunReport, PreflightError> {
        let run_dir = self.config.record_dir.join(&self.config.run_id);
        let began = Instant::now();
        let (backend, secrets) = self.preflight(&evals).await?;
        let preflight = format!("ok in {}ms", began.elapsed().as_millis());
        // The one redactor of the run: every sink writes through it.
        let redactor = Redactor::new(secrets.values().flatten().map(|s| s.value.expose_secret()));
        crate::secrets::remember(&redactor);
        // Fetch git workspaces on the host before the run; an attempt reports a failed fetch itself.
        for eval in &evals {
            if let Ok(env) = crate::attempt::build_environment(eval)
                && let Some(crate::environment::Workspace::Git { url, rev, .. }) = &env.workspace
            {
                let _ = crate::workspace::fetch_git(url, rev).await;
            }
        }
        if let Some(b) = &backend
            && let Ok(n) = b.sweep(Sweep::Orphans).await
            && n > 0
        {
            eprintln!("reeval: removed {n} containers left by runs that were killed");
        }

        let slots = Arc::new(Semaphore::new(self.config.threads.max(1)));
        let mut set: JoinSet<(usize, Vec<Record>)> = JoinSet::new();
        let mut pending: BTreeMap<usize, usize> = BTreeMap::new();
        let mut results: BTreeMap<usize, Vec<Record>> = BTreeMap::new();
        let mut tasks = std::collections::HashMap::new();
        for (i, eval) in evals.iter().enumerate() {
            let trials = self.config.trials.unwrap_or(eval.options.trials).max(1);
            let specs = self.harness_specs(eval);
            pending.insert(i, specs.len() * trials as usize);
            for spec in specs {
                for trial in 1..=trials {
                    let mut planned = eval.clone();
                    if planned.options.judge.is_none() {
                        planned.options.judge = self.config.judge.clone();
                    }
                    let plan = AttemptPlan {
                        run_id: self.config.run_id.clone(),
                        run_dir: run_dir.clone(),
                        eval: planned,
                        harness_spec: spec.clone(),
                        timeout: self.config.timeout.unwrap_or(eval.options.timeout),
                        trial,
                        try_: 1,
                        verbose: self.config.verbose,
                        preflight: preflight.clone(),
                        redactor: redactor.clone(),
                    };
                    let (slots, backend, harnesses, shutdown) = (slots.clone(), backend.clone(), self.harnesses.clone(), self.shutdown.clone());
                    let secrets = secrets.get(&cell_key(&eval.name, &spec)).cloned().unwrap_or_default();
                    let retries = self.config.infra_retries;
                    let task_key = (i, spec.clone(), trial);
                    let task = set.spawn(async move {
                        let mut records = Vec::new();
                        let mut plan = plan;
                        loop {
                            // Waiting for a slot spends no budget: the budget starts inside the attempt.
                            let _slot = slots.acquire().await.expect("semaphore is never closed");
                            let harness = harnesses.make(&plan.harness_spec);
                            let record = attempt::run(plan.clone(), backend.clone(), harness, secrets.clone(), shutdown.clone()).await;
                            let retry = crate::outcome::retry(record.outcome, None, plan.try_, retries, shutdown.is_cancelled()) == crate::outcome::Retry::Again;
                            records.push(record);
                            if !retry {
                                break;
                            }
                            plan.try_ += 1;
                        }
                        (i, records)
                    });
                    tasks.insert(task.id(), task_key);
                }
            }
        }
        let mut all = Vec::new();
        while let Some(joined) = set.join_next_with_id().await {
            let (i, recs) = match joined {
                Ok((_, v)) => v,
                Err(e) => {
                    // A bug of ours (the eval's panics are caught inside): still a record, never a silent gap.
                    let (i, spec, trial) = tasks.remove(&e.id()).expect("every task is known");
                    let mut r = Record::new(&self.config.run_id, &evals[i].name, &spec, trial, 1);
                    r.outcome = Outcome::InfraError;
                    r.message = Some(format!("failed to run the attempt: {e}"));
                    let _ = std::fs::create_dir_all(&run_dir).and_then(|_| redactor.write_json(&run_dir.join(r.file_name()), &r));
                    (i, vec![r])
                }
            };
            all.extend(recs.iter().cloned());
            results.entry(i).or_default().extend(recs);
            let left = pending.get_mut(&i).expect("known eval");
            *left -= 1;
            if *left == 0 && self.config.print {
                print_eval_line(&evals[i], &results[&i]);
            }
        }
        // Sandboxes whose attempt lost track of them (a create cut short) go now, not at the next run.
        if let Some(b) = &backend {
            let _ = b.sweep(Sweep::OwnRun(&self.config.run_id)).await;
        }
        let summary = summarize(&self.config.run_id, &all);
        let _ = std::fs::create_dir_all(&run_dir);
        let summary_name = if self.config.under_nextest { format!("summary.{}.json", std::process::id()) } else { "summary.json".into() };
        if let Err(e) = redactor.write_json(&run_dir.join(&summary_name), &summary) {
            eprintln!("reeval: failed to write the summary: {e}");
        }
        let report_name = summary_name.replace("summary", "report").replace(".json", ".html");
        match crate::report::render(&summary, &all, &redactor) {
            Ok(html) => {
                if let Err(e) = std::fs::write(run_dir.join(&report_name), html) {
                    eprintln!("reeval: failed to write the report: {e}");
                }
            }
            Err(e) => eprintln!("reeval: failed to render the report: {e}"),
        }
        Ok(RunReport { run_id: self.config.run_id.clone(), run_dir, records: all, summary })
    }
}

fn cell_key(eval: &str, harness: &str) -> String {
    format!("{eval}\u{0}{harness}")
}

fn print_eval_line(eval: &Eval, records: &[Record]) {
    let finals = final_tries(records);
    let status = if finals.iter().all(|r| r.outcome == Outcome::Pass) {
        "ok".to_string()
    } else if finals.iter().any(|r| r.outcome.is_fail()) {
        "FAILED".to_string()
    } else {
        "FAILED (infra error)".to_string()
    };
    println!("test {} ... {status}", eval.name);
}

/// Counts the final tries, per kind and per cell, and picks the exit code.
pub fn summarize(run_id: &str, records: &[Record]) -> Summary {
    let finals = final_tries(records);
    let mut s = Summary { schema_version: crate::record::SCHEMA_VERSION, run_id: run_id.to_string(), ..Default::default() };
    let mut cells: BTreeMap<(String, String), CellSummary> = BTreeMap::new();
    for r in &finals {
        let cell = cells.entry((r.eval.clone(), r.harness.clone())).or_insert_with(|| CellSummary {
            eval: r.eval.clone(),
            harness: r.harness.clone(),
            ..Default::default()
        });
        match r.outcome {
            Outcome::Pass => {
                s.passed += 1;
                cell.passed += 1;
            }
            Outcome::Fail(kind) => {
                *s.failed.entry(crate::outcome::Kind::from(kind).as_str().to_string()).or_default() += 1;
                cell.failed += 1;
            }
            Outcome::InfraError | Outcome::Config => {
                s.infra += 1;
                cell.infra += 1;
            }
        }
    }
    for cell in cells.values_mut() {
        let n = cell.passed + cell.failed;
        cell.pass_rate = (n > 0).then(|| f64::from(cell.passed) / f64::from(n));
        cell.pass_at_k = (1..=n).map(|k| pass_at_k(n, cell.passed, k)).collect();
        cell.pass_pow_k = (1..=n).map(|k| pass_pow_k(n, cell.passed, k)).collect();
    }
    s.cells = cells.into_values().collect();
    s.records = records.iter().map(Record::file_name).collect();
    let failed: u32 = s.failed.values().sum();
    s.exit_code = if finals.iter().any(|r| r.outcome == Outcome::Config) {
        2
    } else if failed > 0 {
        1
    } else if s.infra > 0 {
        3
    } else {
        0
    };
    s
}

/// Prints the closing part of a run: failures, libtest's `test result:` line, reeval's summary.
pub fn print_summary(report: &RunReport, ignored: usize, filtered_out: usize, elapsed: Duration) {
    let finals = report.final_records();
    let failing: Vec<&&Record> = finals.iter().filter(|r| r.outcome != Outcome::Pass).collect();
    if !failing.is_empty() {
        println!("\nfailures:\n");
        for r in &failing {
            let kind = r.outcome.kind().map(|k| k.as_str()).unwrap_or("");
            let outcome = r.outcome.as_str();
            let source = r.source.as_deref().map(|s| format!(" ({s})")).unwrap_or_default();
            println!("---- {} #{} [{}] {outcome}/{kind}{source} ----", r.eval, r.trial, r.harness);
            println!("{}", r.message.as_deref().unwrap_or(""));
            println!("record: {}\n", report.run_dir.join(r.file_name()).display());
        }
        println!("failures:");
        let mut names: Vec<&str> = failing.iter().map(|r| r.eval.as_str()).collect();
        names.dedup();
        for n in names {
            println!("    {n}");
        }
    }
    let mut evals: BTreeMap<&str, bool> = BTreeMap::new();
    for r in &finals {
        *evals.entry(r.eval.as_str()).or_insert(true) &= r.outcome == Outcome::Pass;
    }
    let passed = evals.values().filter(|ok| **ok).count();
    let failed = evals.len() - passed;
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        elapsed.as_secs_f64()
    );
    let s = &report.summary;
    let fails: u32 = s.failed.values().sum();
    let by_kind =
        if s.failed.is_empty() { String::new() } else { format!(" ({})", s.failed.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", ")) };
    println!("reeval: {} attempts passed, {fails} failed{by_kind}, {} infra errors; records in {}", s.passed, s.infra, report.run_dir.display());
    for c in &s.cells {
        let rate = c.pass_rate.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "n/a".into());
        let at = |v: &[f64]| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join("/");
        let infra = if c.infra > 0 { format!(", {} infra", c.infra) } else { String::new() };
        println!(
            "  {} [{}]: {}/{} passed ({rate}){infra}; pass@k {}; pass^k {}",
            c.eval,
            c.harness,
            c.passed,
            c.passed + c.failed,
            at(&c.pass_at_k),
            at(&c.pass_pow_k)
        );
    }
}

/// The `main` of an eval suite: parses the command line, lists or runs, and
/// returns the exit code.
pub fn main(evals: Vec<Eval>, harnesses: HarnessRegistry) -> i32 {
    let args = match Args::parse(std::env::args_os().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => return 0,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let selected: Vec<&Eval> = evals.iter().filter(|e| args.selects(&e.name, e.options.ignore)).collect();
    let filtered_out = evals.len() - selected.len();
    if args.list {
        // Side-effect free: a sort over statics, no Docker, no network, no keys.
        for e in &selected {
            println!("{}: test", e.name);
        }
        if !args.terse {
            println!("\n{} tests, 0 benchmarks", selected.len());
        }
        return 0;
    }
    let (to_run, ignored): (Vec<&Eval>, Vec<&Eval>) = selected.into_iter().partition(|e| args.runs(e.options.ignore));
    if args.bench {
        return 0;
    }
    // Flags, environment and reeval.toml, read once (after --list, which reads none of them).
    let settings = match Settings::load(&args, settings::process_env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let config = RunConfig { print: true, ..settings.run_config() };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return 2;
        }
    };
    let runner = Runner::new(config, harnesses);
    crate::secrets::install_redacting_panic_hook();
    runtime.block_on(async {
        let began = Instant::now();
        println!("\nrunning {} test{}", to_run.len(), if to_run.len() == 1 { "" } else { "s" });
        for e in &ignored {
            println!("test {} ... ignored", e.name);
        }
        let shutdown = runner.shutdown_token();
        let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = interrupted.clone();
        tokio::spawn(async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term => {}
            }
            eprintln!("reeval: interrupted; tearing down sandboxes and writing records");
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            shutdown.cancel();
        });
        match runner.run(to_run.into_iter().cloned().collect()).await {
            Ok(report) => {
                print_summary(&report, ignored.len(), filtered_out, began.elapsed());
                if interrupted.load(std::sync::atomic::Ordering::SeqCst) { 130 } else { report.exit_code() }
            }
            Err(e) => {
                eprintln!("error: {e}");
                2
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailKind;

    fn rec(eval: &str, trial: u32, try_: u32, outcome: Outcome) -> Record {
        let mut r = Record::new("run", eval, "shell", trial, try_);
        r.outcome = outcome;
        r
    }

    #[test]
    fn exit_codes_and_pass_rates_count_final_tries_only() {
        let infra_then_pass = [rec("a", 1, 1, Outcome::InfraError), rec("a", 1, 2, Outcome::Pass)];
        let s = summarize("run", &infra_then_pass);
        assert_eq!((s.passed, s.infra, s.exit_code), (1, 0, 0));
        assert_eq!(s.cells[0].pass_rate, Some(1.0));

        let fail_and_infra = [rec("a", 1, 1, Outcome::Fail(FailKind::Judge)), rec("b", 1, 1, Outcome::InfraError)];
        let s = summarize("run", &fail_and_infra);
        assert_eq!(s.exit_code, 1);
        assert_eq!(s.failed.get("judge"), Some(&1));
        // Infra errors are left out of the pass rate.
        assert_eq!(s.cells.iter().find(|c| c.eval == "b").unwrap().pass_rate, None);

        assert_eq!(summarize("run", &[rec("b", 1, 1, Outcome::InfraError)]).exit_code, 3);
        let config = [rec("a", 1, 1, Outcome::Fail(FailKind::Assertion)), rec("b", 1, 1, Outcome::Config)];
        assert_eq!(summarize("run", &config).exit_code, 2, "a config error outranks fails");
    }
}
