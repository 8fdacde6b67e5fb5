//! The paired analysis of two arms' records: per eval and overall, each
//! arm's pass rate with its 95 % Wilson interval, the paired difference
//! (treatment − control) with its interval and the method's name, the
//! verdict, and time, tokens and cost per arm.
//!
//! Attempts pair by eval and trial index (and harness, when both arms ran
//! the same harnesses). A pair in which either arm ended in an infra error
//! is left out, and counted per arm.
//!
//! The first look uses Newcombe's interval at 96 % (α = 0.04); every later
//! look (`--resume` added trials) uses the confidence sequence at α = 0.01,
//! so that the chance of any false verdict over all looks stays under 5 %
//! (see [`crate::stats::paired`]).

use std::collections::BTreeMap;

use super::Look;
use crate::outcome::Outcome;
use crate::prices::PriceTable;
use crate::record::Record;
use crate::stats::paired::{self, PairedTable, Verdict};

pub use reeval_record::comparison::{ArmFigures, Comparison, ComparisonRow, Differences, Excluded};

/// How records are split into the two arms.
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    /// The control arm's name and its records (every try).
    pub control: (&'a str, &'a [&'a Record]),
    /// The treatment arm's name and its records (every try).
    pub treatment: (&'a str, &'a [&'a Record]),
    /// Pair by harness too (the arms ran the same harnesses).
    pub by_harness: bool,
}

/// The paired analysis of `sides` at `look`, with costs from `prices`.
pub fn analyze(sides: Sides<'_>, prices: &PriceTable, look: &Look) -> Comparison {
    type Key = (String, Option<String>);
    let key = |r: &Record| -> Key { (r.eval.clone(), sides.by_harness.then(|| r.harness.clone())) };
    let mut rows: BTreeMap<Key, [Vec<&Record>; 2]> = BTreeMap::new();
    for (side, records) in [sides.control.1, sides.treatment.1].into_iter().enumerate() {
        for r in records {
            rows.entry(key(r)).or_default()[side].push(r);
        }
    }
    let names = [sides.control.0, sides.treatment.0];
    let evals: Vec<ComparisonRow> = rows
        .into_iter()
        .map(|((eval, harness), [c, t])| {
            row(eval, harness, [&c, &t], names, prices, look, (1, sides.by_harness))
        })
        .collect();
    let all_c: Vec<&Record> = sides.control.1.to_vec();
    let all_t: Vec<&Record> = sides.treatment.1.to_vec();
    let row_count = evals.len().max(1) as u32;
    let overall = row(
        "overall".into(),
        None,
        [&all_c, &all_t],
        names,
        prices,
        look,
        (row_count, sides.by_harness),
    );
    Comparison {
        control: names[0].to_string(),
        treatment: names[1].to_string(),
        look: look.number.max(1),
        alpha: paired::ALPHA,
        evals,
        overall,
    }
}

/// The final try of each trial, by pair key.
fn finals<'a>(records: &[&'a Record]) -> BTreeMap<(String, String, u32), &'a Record> {
    let mut last: BTreeMap<(String, String, u32), &Record> = BTreeMap::new();
    for r in records {
        let k = (r.eval.clone(), r.harness.clone(), r.trial);
        if last.get(&k).is_none_or(|prev| prev.try_ < r.try_) {
            last.insert(k, r);
        }
    }
    last
}

fn is_infra(r: &Record) -> bool {
    matches!(r.outcome, Outcome::InfraError | Outcome::Config)
}

fn figures(arm: &str, records: &[&Record], prices: &PriceTable) -> ArmFigures {
    let finals = finals(records);
    let mut f = ArmFigures { arm: arm.to_string(), ..Default::default() };
    for r in finals.values() {
        match r.outcome {
            Outcome::Pass => f.passed += 1,
            Outcome::Fail(_) => f.failed += 1,
            Outcome::InfraError | Outcome::Config => f.infra += 1,
        }
    }
    let graded = f.passed + f.failed;
    f.pass_rate = (graded > 0).then(|| f64::from(f.passed) / f64::from(graded));
    f.pass_rate_interval = crate::stats::wilson_interval(f.passed, graded);
    if !finals.is_empty() {
        let total: u64 = finals.values().map(|r| r.timings.total_ms).sum();
        f.mean_ms = Some(total as f64 / finals.len() as f64);
    }
    for r in records {
        f.usage.add(&r.usage);
    }
    let u = &f.usage;
    f.tokens = [u.input, u.output, u.cache_read, u.cache_write].into_iter().flatten().sum();
    f.cost_usd = prices.cost(records.iter().copied());
    f
}

/// One row: `records` are [control, treatment] of this row (every try);
/// `evals` is how many evals the row pools (for "more trials per eval"),
/// `by_harness` whether pairs are per harness too.
fn row(
    eval: String,
    harness: Option<String>,
    records: [&Vec<&Record>; 2],
    names: [&str; 2],
    prices: &PriceTable,
    look: &Look,
    (evals, by_harness): (u32, bool),
) -> ComparisonRow {
    let control = figures(names[0], records[0], prices);
    let treatment = figures(names[1], records[1], prices);
    // Pair by eval, trial and (when the arms share harnesses) harness.
    let pair_key = |(e, h, t): &(String, String, u32)| -> (String, Option<String>, u32) {
        (e.clone(), by_harness.then(|| h.clone()), *t)
    };
    let c: BTreeMap<_, _> =
        finals(records[0]).into_iter().map(|(k, r)| (pair_key(&k), r)).collect();
    let t: BTreeMap<_, _> =
        finals(records[1]).into_iter().map(|(k, r)| (pair_key(&k), r)).collect();
    let mut table = PairedTable::default();
    let mut excluded = Excluded::default();
    let mut unpaired = 0;
    for (k, rc) in &c {
        let Some(rt) = t.get(k) else {
            unpaired += 1;
            continue;
        };
        if is_infra(rc) || is_infra(rt) {
            excluded.pairs += 1;
            excluded.control += u32::from(is_infra(rc));
            excluded.treatment += u32::from(is_infra(rt));
            continue;
        }
        table.add(rc.outcome == Outcome::Pass, rt.outcome == Outcome::Pass);
    }
    unpaired += t.keys().filter(|k| !c.contains_key(*k)).count() as u32;

    let pairs = table.pairs();
    let label = match &harness {
        Some(h) => format!("{eval} [{h}]"),
        None => eval.clone(),
    };
    let planned_pairs = look.planned_pairs.get(&label).copied().unwrap_or(pairs);
    let first_look = look.number <= 1;
    let (interval, method, confidence, z) = if first_look {
        (
            paired::newcombe_interval(&table, paired::Z_FIRST_LOOK),
            paired::NEWCOMBE,
            1.0 - paired::FIRST_LOOK_ALPHA,
            paired::Z_FIRST_LOOK,
        )
    } else {
        let sum = f64::from(table.only_treatment) - f64::from(table.only_control);
        (
            paired::confidence_sequence(sum, pairs, planned_pairs, paired::SEQUENTIAL_ALPHA),
            paired::CONFIDENCE_SEQUENCE,
            1.0 - paired::SEQUENTIAL_ALPHA,
            // The normal quantile of α = 0.01, two-sided: for the estimate of pairs needed.
            2.575_829_303_548_900_4,
        )
    };
    let verdict = interval.map_or(Verdict::CantTellYet, Verdict::from_interval);
    let more_trials_per_eval = (verdict == Verdict::CantTellYet)
        .then(|| paired::pairs_needed(&table, z, paired::Z_POWER_80))
        .flatten()
        .map(|needed| needed.saturating_sub(pairs).div_ceil(evals.max(1)).max(1));
    let differences = Differences {
        mean_ms: control.mean_ms.zip(treatment.mean_ms).map(|(c, t)| t - c),
        tokens: treatment.tokens as i64 - control.tokens as i64,
        cost_usd: match (control.cost_usd, treatment.cost_usd) {
            (None, None) => None,
            (c, t) => Some(t.unwrap_or(0.0) - c.unwrap_or(0.0)),
        },
    };
    ComparisonRow {
        eval,
        harness,
        control,
        treatment,
        table,
        pairs,
        excluded,
        unpaired,
        difference: table.difference(),
        interval,
        method: method.to_string(),
        confidence,
        verdict,
        more_trials_per_eval,
        planned_pairs,
        differences,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailKind;

    fn rec(eval: &str, arm: &str, trial: u32, outcome: Outcome) -> Record {
        let mut r = Record::new("run", eval, "shell", trial, 1);
        r.arm = Some(arm.to_string());
        r.outcome = outcome;
        r
    }

    #[test]
    fn infra_errors_leave_their_pairs_out_and_are_counted_per_arm() {
        let fail = Outcome::Fail(FailKind::Assertion);
        let control = [
            rec("e", "control", 1, fail),
            rec("e", "control", 2, Outcome::InfraError),
            rec("e", "control", 3, fail),
            rec("e", "control", 4, Outcome::Pass),
        ];
        let treatment = [
            rec("e", "v", 1, Outcome::Pass),
            rec("e", "v", 2, Outcome::Pass),
            rec("e", "v", 3, Outcome::InfraError),
            rec("e", "v", 4, Outcome::InfraError),
        ];
        let c: Vec<&Record> = control.iter().collect();
        let t: Vec<&Record> = treatment.iter().collect();
        let sides = Sides { control: ("control", &c), treatment: ("v", &t), by_harness: true };
        let cmp = analyze(sides, &PriceTable::default(), &Look::default());
        let row = &cmp.evals[0];
        assert_eq!(row.pairs, 1);
        assert_eq!(row.excluded, Excluded { control: 1, treatment: 2, pairs: 3 });
        assert_eq!(row.table.only_treatment, 1);
        assert_eq!((row.control.infra, row.treatment.infra), (1, 2));
        assert_eq!(row.method, paired::NEWCOMBE);
    }

    #[test]
    fn a_change_that_breaks_an_eval_made_it_worse_and_a_small_one_needs_more_trials() {
        let fail = Outcome::Fail(FailKind::Assertion);
        let control: Vec<Record> =
            (1..=10).map(|t| rec("e", "control", t, Outcome::Pass)).collect();
        let treatment: Vec<Record> = (1..=10).map(|t| rec("e", "v", t, fail)).collect();
        let (c, t): (Vec<&Record>, Vec<&Record>) =
            (control.iter().collect(), treatment.iter().collect());
        let sides = Sides { control: ("control", &c), treatment: ("v", &t), by_harness: true };
        let row = &analyze(sides, &PriceTable::default(), &Look::default()).evals[0];
        assert_eq!(row.verdict, Verdict::MadeItWorse);
        assert_eq!(row.verdict_text(), "made it worse");

        // 2 of 10 pairs favour the change, none the control: not enough yet.
        let treatment: Vec<Record> =
            (1..=10).map(|t| rec("e", "v", t, if t <= 2 { Outcome::Pass } else { fail })).collect();
        let control: Vec<Record> = (1..=10).map(|t| rec("e", "control", t, fail)).collect();
        let (c, t): (Vec<&Record>, Vec<&Record>) =
            (control.iter().collect(), treatment.iter().collect());
        let sides = Sides { control: ("control", &c), treatment: ("v", &t), by_harness: true };
        let row = &analyze(sides, &PriceTable::default(), &Look::default()).evals[0];
        assert_eq!(row.verdict, Verdict::CantTellYet);
        // Connor: ψ = δ = 0.2, (2.0537·√0.2 + 0.8416·√(0.2 − 0.04))² / 0.04 = 39.4 → 40 pairs, 30 more.
        assert_eq!(row.more_trials_per_eval, Some(30));
        assert!(row.verdict_text().contains("~30 more trials per eval"), "{}", row.verdict_text());
    }

    #[test]
    fn a_later_look_uses_the_confidence_sequence_tuned_at_the_first() {
        let control: Vec<Record> =
            (1..=8).map(|t| rec("e", "control", t, Outcome::Fail(FailKind::Assertion))).collect();
        let treatment: Vec<Record> = (1..=8).map(|t| rec("e", "v", t, Outcome::Pass)).collect();
        let c: Vec<&Record> = control.iter().collect();
        let t: Vec<&Record> = treatment.iter().collect();
        let sides = Sides { control: ("control", &c), treatment: ("v", &t), by_harness: true };
        let first = analyze(sides, &PriceTable::default(), &Look::default());
        assert_eq!(first.evals[0].planned_pairs, 8);
        let look = Look::after(&first);
        assert_eq!(look.number, 2);
        let second = analyze(sides, &PriceTable::default(), &look);
        let row = &second.evals[0];
        assert_eq!(row.method, paired::CONFIDENCE_SEQUENCE);
        let expected = paired::confidence_sequence(8.0, 8, 8, paired::SEQUENTIAL_ALPHA).unwrap();
        assert_eq!(row.interval, Some(expected));
        // Wider than the first look's Newcombe interval: the price of looking again.
        assert!(expected[0] < first.evals[0].interval.unwrap()[0]);
    }
}
