//! The runner: selects evals ([`crate::settings`] parses the command line), runs preflight
//! once (`preflight.rs`), and dispatches every attempt (eval × harness ×
//! trial, infra errors retried with a fresh sandbox; `dispatch.rs`). What it
//! prints and writes is a reporter ([`crate::report`]) on its event stream
//! ([`events`]).
//!
//! Key types: `Runner` (built from a `RunConfig` and a harness registry),
//! `RunConfig` (`config.rs`: the run's settings, built from `crate::settings`), `RunReport` (the
//! records and the summary), `events::RunEvent` (what reporters hear),
//! `pool` (the engines and their slots).
//!
//! The flow: `suite::main` (the binary's `main!`) parses the command line and
//! settings → selection (filters, tags, rerun, resume) → preflight (engines,
//! images, secrets, the judge; a config error stops the run before anything
//! starts), which plans every cell once (`plan.rs`: the eval's environment
//! built from its function once, the image spec, the harness's version, the
//! secrets; one `attempt::CellPlan` shared by dispatch, prestart, the setup
//! fills and every attempt) → dispatch: each attempt waits for a slot on an engine, runs
//! (`crate::attempt::run`), is retried on infra → its record is written and
//! announced → background work the run waits for before it ends
//! (`background.rs`: teardown's destroys, `setup_fill.rs`'s cache fills,
//! `prestart.rs`'s containers made ahead) → the summary and the exit code.
//!
//! What may depend on what: the runner sits at the top of the core. It uses
//! the attempt, the sandbox traits, settings, the reporters and the record's
//! types; nothing below it (the attempt, a backend, the record) should call
//! back into it. Settings sit below it: `crate::settings` owns the command
//! line, the variables and `reeval.toml` and names nothing of the runner
//! (`config` and `cli` re-export its types at their old paths). The record's
//! types are the `reeval-record` crate, which cannot name the runner.
//! The run's events (`events`) and what a run produced (`RunReport`, the
//! summary's counting) belong to the reporters (`crate::report::events`,
//! `crate::report::summary`): the runner re-exports them at their old paths
//! and uses them; the reporters, `runs.rs`, `replay.rs`, `progress.rs` and
//! the attempt import them from there, never from the runner.
//! `scripts/import_cycles.py reeval-core/src` lists any import circle left.

mod background;
pub mod config;
mod config_stops;
mod dispatch;
/// The run's event stream, at its old path (the reporters own it: [`crate::report::events`]).
pub use crate::report::events;
#[cfg(test)]
mod fake_tests;
#[cfg(all(test, feature = "kubernetes"))]
mod kubernetes_tests;
mod part;
pub(crate) mod plan;
pub mod pool;
mod preflight;
mod prestart;
mod provenance;
#[cfg(test)]
mod record_shape_tests;
#[cfg(test)]
mod records_tests;
mod setup_fill;
mod suite;
mod teardown;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::record::Record;
use crate::report::{AtifFiles, Console, HtmlReport, JsonFiles, Reporter};
use crate::sandbox::Backend;
use crate::settings;

pub use crate::settings::{Args, UsageError};
pub use config::{RunConfig, SuiteConfig};

/// The command line's types, at the paths they had when the runner parsed it
/// (they live in [`crate::settings`], which owns every option's forms).
pub mod cli {
    pub use crate::settings::{Args, UsageError};
}
pub use suite::{main, main_with_args, main_with_reporters};

// What a run produced and how it is summarized, at their old paths: the
// reporters own them (`crate::report::summary`), and the runner uses them.
pub use crate::report::summary::{EXIT_INTERRUPTED, RunReport, summarize, summarize_priced};
pub(crate) use crate::report::summary::{final_tries, settle_exit};

/// The harness an eval runs with when neither it nor the command line names one.
pub const DEFAULT_HARNESS: &str = "shell";

/// `NEXTEST_RUN_ID`, or `<utc date>T<time>-<pid>`.
pub fn new_run_id() -> String {
    settings::run_id_from(&settings::process_env)
}

/// `$CARGO_TARGET_DIR/reeval/runs`, or `target/reeval/runs`.
pub fn default_record_dir() -> PathBuf {
    settings::default_record_dir_from(&settings::process_env)
}

/// The harness specs `eval` runs with when `harnesses` (the command line's,
/// empty for none) replace its own: theirs, else its own, else [`DEFAULT_HARNESS`].
pub(crate) fn harness_specs_of(harnesses: &[String], eval: &Eval) -> Vec<String> {
    if !harnesses.is_empty() {
        harnesses.to_vec()
    } else if !eval.options.harnesses.is_empty() {
        eval.options.harnesses.clone()
    } else {
        vec![DEFAULT_HARNESS.to_string()]
    }
}

/// A run that could not start: nothing was started (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed preflight, nothing was started:\n{}", .missing.iter().map(|m| format!("  - {m}")).collect::<Vec<_>>().join("\n"))]
pub struct PreflightError {
    /// Everything that is missing or invalid.
    pub missing: Vec<String>,
}

/// Runs evals.
#[derive(Debug, Clone)]
pub struct Runner {
    config: RunConfig,
    harnesses: HarnessRegistry,
    shutdown: CancellationToken,
    /// The engine sandboxes run on; by default the Docker engine of `DOCKER_HOST`.
    backend: Option<Arc<dyn Backend>>,
    /// Records of a resumed run whose trials are not run again.
    kept: Vec<Record>,
    /// Only these cells (eval, harness) run, when set (`--rerun-failed`).
    only_cells: Option<Vec<(String, String)>>,
    /// Which look at a comparison this run is (`--resume` of a compare run looks again).
    look: crate::compare::Look,
}

/// One cell of an eval as the run plans it: the harness, the arm of a
/// comparison, and the variant whose change the arm makes to the eval's
/// environment (`runner/plan.rs` applies it to the environment built once).
#[derive(Debug, Clone)]
pub(crate) struct ArmCell {
    pub(crate) spec: String,
    pub(crate) arm: Option<String>,
    pub(crate) variant: Option<crate::compare::Variant>,
}

impl Runner {
    /// A runner with `config` and the harnesses of `registry`.
    pub fn new(config: RunConfig, harnesses: HarnessRegistry) -> Self {
        Self {
            config,
            harnesses,
            shutdown: CancellationToken::new(),
            backend: None,
            kept: Vec::new(),
            only_cells: None,
            look: crate::compare::Look::default(),
        }
    }

    /// Completes the run of `records` (same run id): their finished trials
    /// are kept and count in the summary; the other trials run.
    pub fn resuming(mut self, records: Vec<Record>) -> Self {
        self.kept = crate::report::runs::finished_trials(records, self.config.infra_retries);
        self
    }

    /// Makes this run a later look at the comparison `previous` recorded
    /// (`--resume` of a compare run): its interval is then the confidence
    /// sequence, valid however often trials are added and looked at.
    pub fn comparing_after(mut self, previous: &crate::compare::Comparison) -> Self {
        self.look = crate::compare::Look::after(previous);
        self
    }

    /// The cells `eval` runs as: each harness, and in a comparison each arm.
    pub(crate) fn arm_cells(&self, eval: &Eval) -> Vec<ArmCell> {
        use crate::compare::Arms;
        let specs = self.harness_specs(eval);
        match (&self.config.compare, &self.config.variant) {
            (Some(Arms::Variants(a, b)), _) => specs
                .iter()
                .flat_map(|spec| {
                    [a, b].map(|v| ArmCell {
                        spec: spec.clone(),
                        arm: Some(v.name().to_string()),
                        variant: Some(v.clone()),
                    })
                })
                .collect(),
            (Some(Arms::Harnesses(..)), _) => specs
                .into_iter()
                .map(|spec| ArmCell { arm: Some(spec.clone()), spec, variant: None })
                .collect(),
            (None, Some(v)) => specs
                .into_iter()
                .map(|spec| ArmCell {
                    spec,
                    arm: Some(v.name().to_string()),
                    variant: Some(v.clone()),
                })
                .collect(),
            (None, None) => {
                specs.into_iter().map(|spec| ArmCell { spec, arm: None, variant: None }).collect()
            }
        }
    }

    /// The paired analysis of a compare run's `records`; `None` outside a comparison.
    pub(crate) fn comparison(&self, records: &[Record]) -> Option<crate::compare::Comparison> {
        use crate::compare::{Arms, analysis};
        let arms = self.config.compare.as_ref()?;
        let [control, treatment] = arms.names();
        let of = |name: &str| -> Vec<&Record> {
            records.iter().filter(|r| r.arm.as_deref() == Some(name)).collect()
        };
        let (c, t) = (of(&control), of(&treatment));
        let sides = analysis::Sides {
            control: (&control, &c),
            treatment: (&treatment, &t),
            by_harness: matches!(arms, Arms::Variants(..)),
        };
        Some(analysis::analyze(sides, &self.config.prices, &self.look))
    }

    /// Runs only these cells (eval, harness) of the evals given to [`Runner::run`].
    pub fn only_cells(mut self, cells: Vec<(String, String)>) -> Self {
        self.only_cells = Some(cells);
        self
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
        let specs = harness_specs_of(&self.config.harnesses, eval);
        match &self.only_cells {
            Some(cells) => specs
                .into_iter()
                .filter(|spec| cells.iter().any(|(e, h)| *e == eval.name && h == spec))
                .collect(),
            None => specs,
        }
    }

    /// Runs `evals` (already selected) and writes the run's records, summary
    /// and report (with `print` or `verbose`, also on the console).
    ///
    /// # Errors
    /// A [`PreflightError`] when something required is missing; nothing was started then.
    ///
    /// # Cancel safety
    /// Dropping the future may leave sandboxes behind, which the next run
    /// removes; use [`Runner::shutdown_token`] to stop a run cleanly.
    pub async fn run(&self, evals: Vec<Eval>) -> Result<RunReport, PreflightError> {
        self.run_with(evals, Vec::new()).await
    }

    /// [`Runner::run`] with reporters of the caller's on the run's event
    /// stream too. With any given, the default console is left out.
    ///
    /// # Errors
    /// As [`Runner::run`].
    ///
    /// # Cancel safety
    /// As [`Runner::run`].
    pub async fn run_with(
        &self,
        evals: Vec<Eval>,
        extra: Vec<Box<dyn Reporter>>,
    ) -> Result<RunReport, PreflightError> {
        let ready = preflight::preflight(self, &evals).await?;
        let run_dir = self.config.record_dir.join(&self.config.run_id);
        // Found once, in the cells' plans: the trajectories name them, and the summary's provenance.
        let versions: BTreeMap<String, String> = ready
            .plans
            .iter()
            .flatten()
            .filter_map(|p| Some((p.harness_spec.clone(), p.harness_version.clone()?)))
            .collect();
        let atif = AtifFiles::new(
            run_dir.clone(),
            ready.redactor.clone(),
            self.config.prices.clone(),
            versions.clone(),
        );
        let mut reporters: Vec<Box<dyn Reporter>> = if self.config.under_nextest {
            // Every eval is its own process writing into one run directory: each writes its
            // own summary, and the whole run's summary and report are rebuilt over all of them.
            let summary = format!("summary.{}.json", std::process::id());
            vec![Box::new(
                JsonFiles::new(run_dir.clone(), summary, ready.redactor.clone())
                    .combining(self.config.prices.clone()),
            )]
        } else {
            // The report before the summary: the summary then says whether the report was written.
            vec![
                Box::new(
                    HtmlReport::new(run_dir.join("report.html"), ready.redactor.clone())
                        .priced(self.config.prices.clone()),
                ),
                Box::new(JsonFiles::new(run_dir.clone(), "summary.json", ready.redactor.clone())),
            ]
        };
        if extra.is_empty() && (self.config.print || self.config.verbose) {
            reporters.push(Box::new(Console::new(self.config.print, self.config.verbose)));
        }
        reporters.push(Box::new(atif));
        reporters.extend(extra);
        Ok(dispatch::dispatch(self, evals, ready, versions, &mut reporters).await)
    }
}
