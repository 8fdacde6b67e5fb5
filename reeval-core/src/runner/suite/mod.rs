//! The `main` of an eval suite (`reeval::main!()`), as named steps: the
//! command line parsed, the evals selected (filters, `--skip`, `--ignored`,
//! `--tag`; `select.rs`), `--list`, the settings loaded, the arms of a
//! comparison, a run resumed (`resume.rs`), regraded or its failures run
//! again (`rerun.rs`), the part of a partitioned run, the reporters the
//! flags ask for (`reporters.rs`), then the run under signals (`signals.rs`)
//! and the exit code.
//!
//! A step that ends the process returns its exit code as `Err`, having said why.

mod reporters;
mod rerun;
mod resume;
mod select;
mod signals;

use std::fmt::Display;

use super::part::Part;
use super::{RunConfig, Runner};
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::record::SuiteIdentity;
use crate::report::{Reporter, say};
use crate::settings::{self, Args, Settings};
use select::Chosen;

/// The exit code of a run whose stdout was closed before it ended (as if killed by SIGPIPE).
const EXIT_OUTPUT_LOST: i32 = 141;

/// A step's result: what it found, or the exit code of a process that stops here.
type Step<T> = Result<T, i32>;

/// `error: {e}` said, and the exit code of a usage or config error.
fn usage(e: impl Display) -> i32 {
    say(&format!("error: {e}\n"));
    2
}

/// The `main` of an eval suite: parses the command line, lists or runs, and
/// returns the exit code.
pub fn main(evals: Vec<Eval>, harnesses: HarnessRegistry) -> i32 {
    main_with_args(evals, harnesses, std::env::args_os().skip(1))
}

/// [`main`] with the command line given (`reeval harbor run PATH …` passes
/// what follows PATH): the same flags, selection, reporters and exit code.
pub fn main_with_args(
    evals: Vec<Eval>,
    harnesses: HarnessRegistry,
    argv: impl IntoIterator<Item = std::ffi::OsString>,
) -> i32 {
    main_with_reporters(evals, harnesses, argv, Vec::new())
}

/// [`main_with_args`] with reporters of the caller's beside the ones the
/// flags ask for (`reeval harbor run -o DIR` writes Harbor's job directory
/// from the run's records this way). They see a run's events only when it
/// runs: not under `--list`, nor when the command line or settings fail.
pub fn main_with_reporters(
    evals: Vec<Eval>,
    harnesses: HarnessRegistry,
    argv: impl IntoIterator<Item = std::ffi::OsString>,
    extra: Vec<Box<dyn Reporter>>,
) -> i32 {
    match suite(&evals, harnesses, argv, extra) {
        Ok(code) | Err(code) => code,
    }
}

/// The steps of [`main_with_reporters`], each one's exit said where it stops.
fn suite(
    evals: &[Eval],
    harnesses: HarnessRegistry,
    argv: impl IntoIterator<Item = std::ffi::OsString>,
    extra: Vec<Box<dyn Reporter>>,
) -> Step<i32> {
    let args = match Args::parse(argv) {
        Ok(Some(a)) => a,
        Ok(None) => return Ok(0),
        Err(e) => return Err(usage(e)),
    };
    let tags = Settings::tags(&args, settings::process_env);
    let selected = select::selected(&args, &tags, evals);
    let partition = Settings::partition(&args, settings::process_env).map_err(usage)?;
    if args.list {
        // Side-effect free: a sort over statics, no Docker, no network, no keys.
        return select::list(&args, &selected, partition);
    }
    let mut chosen = Chosen::of(&args, selected, evals.len());
    if args.bench {
        return Ok(0);
    }
    // Flags, environment and reeval.toml, read once (after --list, which reads none of them).
    let settings = Settings::load(&args, settings::process_env).map_err(usage)?;
    let (mut config, suite) = run_config(&settings, evals);
    let known_variants = crate::compare::known_variants(&settings).map_err(usage)?;
    (config.compare, config.variant) = settings.arms(&known_variants).map_err(usage)?;
    let resumed = resume::resume(&args, &mut config, &suite, &known_variants)?;
    let regraded = rerun::regrade(&args, &mut config, &mut chosen)?;
    let rerun_of = rerun::failed(&args, &config, &suite, &mut chosen)?;
    let mut runner = Runner::new(config, harnesses).resuming(resumed.kept);
    if let Some(cells) = chosen.only_cells.take() {
        runner = runner.only_cells(cells);
    }
    let (mut runner, empty_part) = partition_cells(runner, &mut chosen);
    // A run that selected nothing is no green: say why, unless asked for. Evals
    // selected but marked ignore are reported as ignored, as libtest does: a
    // suite of ignored evals is not a run of nothing that claims to pass. A
    // part of a partitioned run that got no cell is a part, not a mistake.
    if empty_part && chosen.ignored.is_empty() {
        return Ok(record_empty_part(&runner.config));
    }
    if chosen.to_run.is_empty() && chosen.ignored.is_empty() && !settings.allow_empty {
        let why = select::nothing_selected(&args, &tags, evals, rerun_of.as_deref());
        return Err(usage(format!(
            "no eval selected: {why}; pass --allow-empty (or REEVAL_ALLOW_EMPTY=1) to accept a run of nothing"
        )));
    }
    let reporters =
        reporters::of_flags(&args, &settings, &chosen, runner.config.settings.verbose, extra);
    if let Some(previous) = &resumed.comparison {
        runner = runner.comparing_after(previous);
    }
    let to_run = chosen.to_run.into_iter().cloned().collect();
    signals::run(runner, to_run, reporters, regraded.as_ref())
}

/// The run's config from `settings`, and which suite binary this is: in the
/// summary, so that --rerun-failed and --resume take only its runs.
fn run_config(settings: &Settings, evals: &[Eval]) -> (RunConfig, SuiteIdentity) {
    // The console reporter prints libtest's lines; the runner adds no other.
    let mut config = RunConfig { print: false, ..settings.run_config() };
    let suite = SuiteIdentity::new(
        SuiteIdentity::current_binary(),
        evals.iter().map(|e| e.name.clone()).collect(),
    );
    config.suite = Some(suite.clone());
    (config, suite)
}

/// After every other selection, as nextest partitions: this part's cells
/// only. Also says whether the part got no cell of a selection that had some.
fn partition_cells(runner: Runner, chosen: &mut Chosen<'_>) -> (Runner, bool) {
    let Some(p) = runner.config.settings.partition else { return (runner, false) };
    let part = Part::of(p, chosen.to_run.iter().copied(), |e| runner.harness_specs(e));
    say(&format!("reeval: {}\n", part.said(false)));
    chosen.retain(|e| part.has_eval(&e.name));
    let empty = part.is_empty_of_some();
    (runner.only_cells(part.cells), empty)
}

/// A part of a partitioned run that got no cell is a part, not a mistake:
/// recorded as a run of nothing. Its exit code.
fn record_empty_part(config: &RunConfig) -> i32 {
    match super::part::record_nothing(config) {
        Ok(dir) => {
            say(&format!("reeval: recorded the empty part in {}\n", dir.display()));
            0
        }
        Err(e) => {
            say(&format!("error: {e}\n"));
            3
        }
    }
}
