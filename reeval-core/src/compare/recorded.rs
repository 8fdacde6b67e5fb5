//! `reeval compare RUN_A RUN_B`: the paired analysis of two recorded runs,
//! RUN_A the control and RUN_B the treatment, paired by eval and trial (and
//! harness, when both runs ran the same harnesses). Each arm may be several
//! runs read as one (the parts of a partitioned run: see
//! [`crate::report::combine::union`]).

use std::path::PathBuf;

use super::Look;
use super::analysis::{self, Sides};
use crate::prices::PriceTable;
use crate::record::Record;
use crate::report::combine::{run_name, union};
use crate::report::runs::RunsError;

use crate::report::compare::RecordedComparison;

/// The name of an arm: its run's directory name, or for several runs the
/// first one's and how many more (`<run id>+2-more`).
pub fn arm_name(dirs: &[PathBuf]) -> String {
    match dirs {
        [] => String::new(),
        [one] => run_name(one),
        [first, rest @ ..] => format!("{}+{}-more", run_name(first), rest.len()),
    }
}

/// Compares the runs recorded in `control` and `treatment` (each one run
/// directory or several read as one), at the first look.
///
/// # Errors
/// A [`RunsError`] when a run directory or one of its records cannot be
/// read, or an arm's runs cannot be read as one (an attempt in two of them).
pub fn compare_runs(
    control: &[PathBuf],
    treatment: &[PathBuf],
    prices: &PriceTable,
) -> Result<RecordedComparison, RunsError> {
    let c = union(control)?;
    let t = union(treatment)?;
    let harnesses = |records: &[(PathBuf, Record)]| -> std::collections::BTreeSet<String> {
        records.iter().map(|(_, r)| r.harness.clone()).collect()
    };
    // Two runs of the same harnesses pair per harness; runs of different ones pair across them.
    let by_harness = harnesses(&c) == harnesses(&t);
    let (c_name, t_name) = (arm_name(control), arm_name(treatment));
    let c_refs: Vec<&Record> = c.iter().map(|(_, r)| r).collect();
    let t_refs: Vec<&Record> = t.iter().map(|(_, r)| r).collect();
    let sides = Sides { control: (&c_name, &c_refs), treatment: (&t_name, &t_refs), by_harness };
    let comparison = analysis::analyze(sides, prices, &Look::default());
    Ok(RecordedComparison { comparison, control: c, treatment: t })
}
