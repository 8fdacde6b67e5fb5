//! Running a recorded run's cells again: `--regrade RUN` (each attempt's
//! recorded turns replayed, the checks run afresh) and `--rerun-failed` (the
//! failed cells of the suite binary's last run).

use super::select::Chosen;
use super::{Step, usage};
use crate::record::SuiteIdentity;
use crate::replay::RegradePlan;
use crate::report::{runs, say};
use crate::runner::RunConfig;
use crate::settings::Args;

/// The run `--regrade` names, planned: its replay harnesses and trials in
/// `config`, its cells the only ones chosen; nothing without `--regrade`.
pub(super) fn regrade(
    args: &Args,
    config: &mut RunConfig,
    chosen: &mut Chosen<'_>,
) -> Step<Option<RegradePlan>> {
    let Some(run) = &args.regrade else { return Ok(None) };
    let plan = crate::replay::regrade_plan(&config.settings.record_dir, run).map_err(usage)?;
    config.settings.harnesses = plan.harnesses.clone();
    config.settings.trials = Some(plan.trials);
    chosen.only(plan.cells.clone());
    Ok(Some(plan))
}

/// With `--rerun-failed`, the failed cells of the suite binary's last run
/// are the only ones chosen; the id of that run, said.
pub(super) fn failed(
    args: &Args,
    config: &RunConfig,
    suite: &SuiteIdentity,
    chosen: &mut Chosen<'_>,
) -> Step<Option<String>> {
    if !args.rerun_failed {
        return Ok(None);
    }
    let last = runs::latest_of(&config.settings.record_dir, suite)
        .and_then(|run| runs::records(&run.path).map(|records| (run, records)));
    let (run, cells) = match last {
        Ok((run, records)) => (run, runs::failed_cells(&records)),
        Err(e) => {
            return Err(usage(format!(
                "failed to find the last run's failures (--rerun-failed): {e}"
            )));
        }
    };
    let names: Vec<String> = cells.iter().map(|(e, h)| format!("{e} [{h}]")).collect();
    say(&format!(
        "reeval: --rerun-failed: the failed cells of run {} of the suite binary `{}`: {}\n",
        run.id,
        suite.binary,
        if names.is_empty() { "none".to_string() } else { names.join(", ") }
    ));
    chosen.only(cells);
    Ok(Some(run.id))
}
