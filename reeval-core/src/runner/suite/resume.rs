//! `--resume RUN`: the run's records kept, its run id taken again, and what
//! it was: a part of a partitioned run stays that part, a comparison is
//! looked at again with the same arms.

use super::{Step, usage};
use crate::compare::{Arms, Comparison, Variant};
use crate::record::{Record, SuiteIdentity};
use crate::report::runs;
use crate::report::say;
use crate::runner::RunConfig;
use crate::settings::Args;

/// What a resumed run brings: its records, and the comparison it recorded.
#[derive(Default)]
pub(super) struct Resumed {
    pub(super) kept: Vec<Record>,
    /// A compare run resumed is a later look at its comparison.
    pub(super) comparison: Option<Comparison>,
}

/// The run `--resume` names, read back into `config`; nothing without `--resume`.
pub(super) fn resume(
    args: &Args,
    config: &mut RunConfig,
    suite: &SuiteIdentity,
    known_variants: &[Variant],
) -> Step<Resumed> {
    let Some(run_id) = &args.resume else { return Ok(Resumed::default()) };
    let failed =
        |why: &dyn std::fmt::Display| usage(format!("failed to resume run {run_id}: {why}"));
    let run_dir = config.settings.record_dir.join(run_id);
    let kept = runs::records(&run_dir).map_err(|e| failed(&e))?;
    runs::belongs_to(&run_dir, suite).map_err(|why| failed(&why))?;
    say(&format!(
        "reeval: resuming run {run_id} of the suite binary `{}` ({} attempts recorded)\n",
        suite.binary,
        kept.len()
    ));
    let recorded = runs::summaries(&run_dir).unwrap_or_default();
    let comparison = recorded.iter().find_map(|s| s.comparison.clone());
    // A part resumed is the same part: its cells, not the whole run's.
    let part = recorded.iter().find_map(|s| s.partition.as_deref()?.parse().ok());
    match (part, config.settings.partition) {
        (Some(p), None) => config.settings.partition = Some(p),
        (Some(p), Some(given)) if p != given => {
            return Err(failed(&format!("it is part {p} of a partitioned run, not {given}")));
        }
        _ => {}
    }
    // Resuming a comparison without naming its arms again compares the same arms.
    if let Some(previous) = comparison.as_ref().filter(|_| config.compare.is_none()) {
        let arms = Arms::recorded(previous, &kept, known_variants).map_err(|e| failed(&e))?;
        if let Arms::Harnesses(a, b) = &arms {
            config.settings.harnesses = vec![a.clone(), b.clone()];
        }
        config.compare = Some(arms);
    }
    config.settings.run_id = run_id.clone();
    Ok(Resumed { kept, comparison })
}
