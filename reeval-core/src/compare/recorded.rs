//! `reeval compare RUN_A RUN_B`: the paired analysis of two recorded runs,
//! RUN_A the control and RUN_B the treatment, paired by eval and trial (and
//! harness, when both runs ran the same harnesses).

use std::path::Path;

use super::Look;
use super::analysis::{self, Sides};
use crate::prices::PriceTable;
use crate::record::Record;
use crate::report::runs::RunsError;

pub use crate::report::compare::RecordedComparison;

/// The name of a run: its directory's name.
fn run_name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Compares the runs recorded in `control` and `treatment`, at the first look.
///
/// # Errors
/// A [`RunsError`] when a run directory or one of its records cannot be read.
pub fn compare_runs(
    control: &Path,
    treatment: &Path,
    prices: &PriceTable,
) -> Result<RecordedComparison, RunsError> {
    let c = crate::report::runs::records(control)?;
    let t = crate::report::runs::records(treatment)?;
    let harnesses = |records: &[Record]| -> std::collections::BTreeSet<String> {
        records.iter().map(|r| r.harness.clone()).collect()
    };
    // Two runs of the same harnesses pair per harness; runs of different ones pair across them.
    let by_harness = harnesses(&c) == harnesses(&t);
    let (c_name, t_name) = (run_name(control), run_name(treatment));
    let c_refs: Vec<&Record> = c.iter().collect();
    let t_refs: Vec<&Record> = t.iter().collect();
    let sides = Sides { control: (&c_name, &c_refs), treatment: (&t_name, &t_refs), by_harness };
    let comparison = analysis::analyze(sides, prices, &Look::default());
    Ok(RecordedComparison {
        comparison,
        control: (control.to_path_buf(), c),
        treatment: (treatment.to_path_buf(), t),
    })
}
