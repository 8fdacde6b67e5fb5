//! A cell that cannot run (`Eval::cannot_run`, or an eval refused alone in
//! preflight) ends each of its trials as a config outcome saying why, with
//! no slot, no sandbox and no retry.
//!
//! A config error found mid-run (a judge model no one chose, a key the
//! eval's own code needs) is not the agent's and will not go away by running
//! the cell again: the cell's remaining attempts stop before they start, so
//! no more agents run and are paid for. Each stopped attempt is still a
//! record (a config error saying which attempt found it), and the failures
//! already seen in other cells stay as they were.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::attempt::AttemptPlan;
use crate::outcome::Outcome;
use crate::record::{CellKey, Record};

/// The first config error of each cell, shared by the run's attempts.
#[derive(Debug, Default)]
pub(crate) struct ConfigStops {
    found: Mutex<HashMap<CellKey, String>>,
}

fn cell(plan: &AttemptPlan) -> CellKey {
    (plan.cell.eval.clone(), plan.cell.harness_spec.clone(), plan.cell.arm.clone())
}

impl ConfigStops {
    /// Remembers `record`'s config error, if it ended with one.
    pub(crate) fn remember(&self, record: &Record) {
        if record.outcome != Outcome::Config {
            return;
        }
        let found = format!(
            "trial {} try {}: {}",
            record.trial,
            record.try_,
            record.message.as_deref().unwrap_or("a config error")
        );
        self.found.lock().expect("not poisoned").entry(record.cell()).or_insert(found);
    }

    /// The record of `plan`'s attempt, not run, when its cell already found a config error.
    pub(crate) fn stopped(&self, plan: &AttemptPlan) -> Option<Record> {
        let found = self.found.lock().expect("not poisoned").get(&cell(plan)).cloned()?;
        let mut r = plan.new_record();
        r.tags = plan.cell.tags.clone();
        r.outcome = Outcome::Config;
        r.message = Some(format!(
            "not run: an earlier attempt of this cell found a config error, which running it again would meet too ({found})"
        ));
        Some(r)
    }
}

/// The record of `plan`'s attempt when its cell cannot run: a config outcome
/// saying why, nothing started.
pub(crate) fn cannot_run(plan: &AttemptPlan) -> Option<Record> {
    let why = plan.cell.cannot_run.as_ref()?;
    let mut r = plan.new_record();
    r.tags = plan.cell.tags.clone();
    r.outcome = Outcome::Config;
    r.message = Some(why.clone());
    Some(r)
}
