//! What a run produced ([`RunReport`]) and how its records are summarized:
//! the final try of each trial, each cell's statistics, usage and cost, and
//! the exit code. The reporters read them; the runner, `runs.rs` (a run
//! rebuilt from its directory) and regrade make them. Public as
//! `crate::report::{RunReport, summarize, …}`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::outcome::Outcome;
use crate::record::{AtK, CellStatus, CellSummary, Record, Summary, pass_at_k, pass_pow_k};

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

/// Counts the final tries, per kind and per cell, and picks the exit code
/// (built-in prices; see [`summarize_priced`]).
pub fn summarize(run_id: &str, records: &[Record]) -> Summary {
    summarize_priced(run_id, records, &crate::prices::PriceTable::default())
}

/// A cell's mean reward over its graded final tries that recorded one (see
/// [`crate::stats::reward`]); `None` when none did.
fn cell_reward(
    finals: &[&Record],
    cell: &CellSummary,
) -> Option<crate::stats::reward::RewardSummary> {
    let graded: Vec<&&Record> = finals
        .iter()
        .filter(|r| r.eval == cell.eval && r.harness == cell.harness && r.arm == cell.arm)
        .filter(|r| matches!(r.outcome, Outcome::Pass | Outcome::Fail(_)))
        .collect();
    let rewards: Vec<&BTreeMap<String, f64>> =
        graded.iter().filter_map(|r| r.reward.as_ref()).collect();
    let threshold = graded.iter().find_map(|r| r.reward_threshold);
    let unrewarded = (graded.len() - rewards.len()) as u32;
    crate::stats::reward::summarize(&rewards, unrewarded, threshold)
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
        cell.reward = cell_reward(&finals, cell);
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
