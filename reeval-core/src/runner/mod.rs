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
//! Exceptions today (issue 20 removes them): the reporters, `runs.rs`,
//! `replay.rs`, `progress.rs` and the attempt import names of the runner
//! (`RunReport`, `events`); `scripts/import_cycles.py reeval-core/src` lists
//! the circles they make.

mod background;
pub mod config;
mod config_stops;
mod dispatch;
pub mod events;
#[cfg(test)]
mod fake_tests;
mod plan;
pub mod pool;
mod preflight;
mod prestart;
mod provenance;
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
use crate::outcome::Outcome;
use crate::record::{AtK, CellStatus, CellSummary, Record, Summary, pass_at_k, pass_pow_k};
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
pub use suite::{main, main_with_args};

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
    /// The process exit code: 0 all passed, 1 any fail, 3 infra errors (or a
    /// file of the run that could not be written) and no fail, 2 a config
    /// error, 130 interrupted (see [`RunReport::summary`]'s `exit_reason`).
    pub fn exit_code(&self) -> i32 {
        self.summary.exit_code
    }

    /// Records of the final try of each trial.
    pub fn final_records(&self) -> Vec<&Record> {
        final_tries(&self.records)
    }
}

pub(crate) fn final_tries<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<&'a Record> {
    let mut last: BTreeMap<(crate::record::CellKey, u32), &Record> = BTreeMap::new();
    for r in records {
        let key = (r.cell(), r.trial);
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
        self.kept = crate::runs::finished_trials(records, self.config.infra_retries);
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
        let specs = if !self.config.harnesses.is_empty() {
            self.config.harnesses.clone()
        } else if !eval.options.harnesses.is_empty() {
            eval.options.harnesses.clone()
        } else {
            vec![DEFAULT_HARNESS.to_string()]
        };
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

/// Counts the final tries, per kind and per cell, and picks the exit code
/// (built-in prices; see [`summarize_priced`]).
pub fn summarize(run_id: &str, records: &[Record]) -> Summary {
    summarize_priced(run_id, records, &crate::prices::PriceTable::default())
}

/// Counts the final tries, per kind and per cell, computes each cell's
/// statistics, usage and cost (over every try: retried tries spent tokens
/// too), and picks the exit code: 2 a config error, 1 a cell that failed (a
/// fail, and a pass rate under its `minPassRate` or no threshold), 3 infra
/// errors and no failing cell, 0 otherwise.
pub fn summarize_priced(
    run_id: &str,
    records: &[Record],
    prices: &crate::prices::PriceTable,
) -> Summary {
    let finals = final_tries(records);
    let mut s = Summary {
        schema_version: crate::record::SCHEMA_VERSION,
        run_id: run_id.to_string(),
        ..Default::default()
    };
    let mut cells: BTreeMap<crate::record::CellKey, CellSummary> = BTreeMap::new();
    for r in &finals {
        let cell = cells.entry(r.cell()).or_insert_with(|| CellSummary {
            eval: r.eval.clone(),
            harness: r.harness.clone(),
            arm: r.arm.clone(),
            ..Default::default()
        });
        cell.min_pass_rate = cell.min_pass_rate.or(r.min_pass_rate);
        match r.outcome {
            Outcome::Pass => {
                s.passed += 1;
                cell.passed += 1;
            }
            Outcome::Fail(kind) => {
                *s.failed
                    .entry(crate::outcome::Kind::from(kind).as_str().to_string())
                    .or_default() += 1;
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
        cell.pass_rate_interval = crate::stats::wilson_interval(cell.passed, n);
        cell.pass_at_k = (1..=n).map(|k| pass_at_k(n, cell.passed, k)).collect();
        cell.pass_pow_k = (1..=n).map(|k| pass_pow_k(n, cell.passed, k)).collect();
        cell.by_k = (1..=n)
            .map(|k| AtK {
                k,
                pass_at_k: pass_at_k(n, cell.passed, k),
                pass_pow_k: pass_pow_k(n, cell.passed, k),
            })
            .collect();
        // A cell of infra and config errors only was not graded: neither passed nor failed.
        (cell.ok, cell.status) = if n == 0 {
            (None, CellStatus::NoGradedAttempts)
        } else if crate::stats::cell_passes(cell.passed, cell.failed, cell.min_pass_rate) {
            (Some(true), CellStatus::Passed)
        } else {
            (Some(false), CellStatus::Failed)
        };
        let of_cell: Vec<&Record> = records
            .iter()
            .filter(|r| r.eval == cell.eval && r.harness == cell.harness && r.arm == cell.arm)
            .collect();
        for r in &of_cell {
            cell.usage.add(&r.usage);
        }
        cell.cost_usd = prices.cost(of_cell.iter().copied());
    }
    s.cells = cells.into_values().collect();
    s.broken_evals = crate::oracle::broken_evals(&s.cells);
    s.records = records.iter().map(Record::file_name).collect();
    for r in records {
        s.usage.add(&r.usage);
    }
    s.cost_usd = prices.cost(records);
    let failing = s.cells.iter().filter(|c| c.status == CellStatus::Failed).count();
    let ungraded = s.cells.iter().filter(|c| c.status == CellStatus::NoGradedAttempts).count();
    let by_threshold =
        s.cells.iter().filter(|c| c.status == CellStatus::Passed && c.failed > 0).count();
    let cells_word = |n: usize| if n == 1 { "cell" } else { "cells" };
    let config = finals.iter().filter(|r| r.outcome == Outcome::Config).count();
    (s.exit_code, s.exit_reason) = if config > 0 {
        // The failures already seen are not hidden behind the config error.
        let also = match failing {
            0 => String::new(),
            n => format!("; {n} {} failed too", cells_word(n)),
        };
        let attempts = if config == 1 { "attempt" } else { "attempts" };
        (2, format!("a config error stopped {config} {attempts}{also}"))
    } else if failing > 0 {
        (
            1,
            format!(
                "{failing} {} failed (a fail and no min pass rate, or a pass rate under it)",
                cells_word(failing)
            ),
        )
    } else if s.infra > 0 {
        let ungraded = match ungraded {
            0 => String::new(),
            n => format!(" ({n} {} with no graded attempt)", cells_word(n)),
        };
        (3, format!("{} infra errors and no failing cell{ungraded}", s.infra))
    } else if by_threshold > 0 {
        (
            0,
            format!(
                "every cell passed, {by_threshold} {} by reaching its min pass rate",
                cells_word(by_threshold)
            ),
        )
    } else {
        (0, "every cell passed".to_string())
    };
    s
}

/// The exit code of an interrupted run (SIGINT, SIGTERM, SIGHUP, SIGQUIT): as a shell reports SIGINT.
pub const EXIT_INTERRUPTED: i32 = 130;

/// The summary's exit code and reason once the run is over, from `counted`
/// (what [`summarize_priced`] made of the outcomes): a run that could not
/// write a record, its summary or a report (`lost`) is not a success (exit 3
/// where it would have been 0), its reason naming the first file lost; an
/// interrupted run exits [`EXIT_INTERRUPTED`], as the process does.
pub(crate) fn settle_exit(
    s: &mut Summary,
    counted: &(i32, String),
    interrupted: bool,
    lost: &[String],
) {
    let (mut code, mut reason) = counted.clone();
    if let Some(first) = lost.first() {
        let said = match lost.len() {
            1 => format!("a file of the run could not be written: {first}"),
            n => format!("{n} files of the run could not be written, the first: {first}"),
        };
        if code == 0 {
            (code, reason) = (3, said);
        } else {
            reason = format!("{reason}; and {said}");
        }
    }
    if interrupted {
        code = EXIT_INTERRUPTED;
        reason = format!(
            "interrupted; complete the run with --resume {} (had it ended now: {reason})",
            s.run_id
        );
    }
    s.write_errors = lost.to_vec();
    (s.exit_code, s.exit_reason) = (code, reason);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailKind;

    use crate::test_records::test_record as rec;

    #[test]
    fn exit_codes_and_pass_rates_count_final_tries_only() {
        let infra_then_pass = [rec("a", 1, 1, Outcome::InfraError), rec("a", 1, 2, Outcome::Pass)];
        let s = summarize("run", &infra_then_pass);
        assert_eq!((s.passed, s.infra, s.exit_code), (1, 0, 0));
        assert_eq!(s.cells[0].pass_rate, Some(1.0));

        let fail_and_infra =
            [rec("a", 1, 1, Outcome::Fail(FailKind::Judge)), rec("b", 1, 1, Outcome::InfraError)];
        let s = summarize("run", &fail_and_infra);
        assert_eq!(s.exit_code, 1);
        assert_eq!(s.failed.get("judge"), Some(&1));
        // Infra errors are left out of the pass rate.
        assert_eq!(s.cells.iter().find(|c| c.eval == "b").unwrap().pass_rate, None);

        assert_eq!(summarize("run", &[rec("b", 1, 1, Outcome::InfraError)]).exit_code, 3);
        let config =
            [rec("a", 1, 1, Outcome::Fail(FailKind::Assertion)), rec("b", 1, 1, Outcome::Config)];
        assert_eq!(summarize("run", &config).exit_code, 2, "a config error outranks fails");
    }
}
