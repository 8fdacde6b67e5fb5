//! How a comparison reads: a terminal table, and (for `reeval compare`) an
//! HTML page.

use std::path::PathBuf;

use crate::comparison::{ArmFigures, Comparison, ComparisonRow, RewardComparison};
use crate::record::Record;
use crate::stats::paired::Verdict;

/// Two recorded runs compared (`reeval compare RUN_A RUN_B`, made by
/// [`crate::compare::recorded::compare_runs`]).
#[derive(Debug, Clone)]
pub struct RecordedComparison {
    /// The analysis (each arm is named by its run id).
    pub comparison: Comparison,
    /// The control arm's records, each with the run directory it was read from.
    pub control: Vec<(PathBuf, Record)>,
    /// The treatment arm's records, each with the run directory it was read from.
    pub treatment: Vec<(PathBuf, Record)>,
}

fn percent(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.0}%", x * 100.0))
}

fn interval(x: Option<[f64; 2]>) -> String {
    x.map_or("-".into(), |[l, h]| format!("[{:.0}%, {:.0}%]", l * 100.0, h * 100.0))
}

fn signed_percent(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:+.0}%", x * 100.0))
}

fn arm(f: &ArmFigures) -> String {
    format!(
        "{}/{} {} {}",
        f.passed,
        f.passed + f.failed,
        percent(f.pass_rate),
        interval(f.pass_rate_interval)
    )
}

fn reward_interval(x: Option<[f64; 2]>) -> String {
    x.map_or("-".into(), |[l, h]| format!("[{l:+.2}, {h:+.2}]"))
}

/// A row's rewards on one line: each arm's mean, the paired difference, its interval, the verdict.
fn reward_line(r: &RewardComparison) -> String {
    let left_out = match r.unrewarded {
        0 => String::new(),
        n => format!(" ({n} left out: no reward)"),
    };
    format!(
        "mean reward {:.2} → {:.2}, difference {:+.2} {} over {} pairs{left_out}: {}",
        r.control_mean,
        r.treatment_mean,
        r.difference,
        reward_interval(r.interval),
        r.pairs,
        r.verdict_text()
    )
}

fn line(row: &ComparisonRow) -> String {
    let mut excluded = String::new();
    if row.excluded.pairs > 0 {
        excluded = format!(
            "; {} pairs left out for infra errors ({} {}, {} {})",
            row.excluded.pairs,
            row.excluded.control,
            row.control.arm,
            row.excluded.treatment,
            row.treatment.arm
        );
    }
    let cost = match row.differences.cost_usd {
        Some(c) => format!(", cost {c:+.4} USD"),
        None => String::new(),
    };
    let reward = match &row.reward {
        Some(r) => format!("  {:<32} {}\n", "", reward_line(r)),
        None => String::new(),
    };
    format!(
        "  {:<32} {:<22} {:<22} {:>5} {:<13} {}\n  {:<32} {} pairs{excluded}; time {}, tokens {:+}{cost}\n{reward}",
        row.label(),
        arm(&row.control),
        arm(&row.treatment),
        signed_percent(row.difference),
        interval(row.interval),
        row.verdict_text(),
        "",
        row.pairs,
        row.differences.mean_ms.map_or("-".into(), |ms| format!("{:+.1}s", ms / 1000.0)),
        row.differences.tokens,
    )
}

/// The comparison as a table for a terminal.
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "\ncomparison: {} vs {} (difference = {} − {}), look {}\n",
        c.treatment, c.control, c.treatment, c.control, c.look
    );
    out.push_str(&format!(
        "  {:<32} {:<22} {:<22} {:>5} {:<13} {}\n",
        "eval", c.control, c.treatment, "diff", "interval", "verdict"
    ));
    for row in &c.evals {
        out.push_str(&line(row));
    }
    out.push_str(&line(&c.overall));
    out.push_str(&format!(
        "  pass rates: 95% Wilson intervals; difference: {} at {:.0}%{}\n",
        c.overall.method,
        c.overall.confidence * 100.0,
        if c.look > 1 {
            " (a later look: valid however often trials are added)"
        } else {
            " (a resumed run's later looks use a confidence sequence)"
        }
    ));
    if let Some(r) = &c.overall.reward {
        out.push_str(&format!(
            "  rewards: the mean of paired differences (treatment − control), {} at {:.0}%\n",
            r.method,
            r.confidence * 100.0
        ));
    }
    out
}

/// One row of the HTML page's table.
struct RowView {
    label: String,
    anchor: String,
    overall: bool,
    control: String,
    treatment: String,
    difference: String,
    interval: String,
    verdict: String,
    verdict_class: &'static str,
    pairs: u32,
    excluded: String,
    time: String,
    tokens: String,
    cost: String,
    /// The rewards' comparison, when the row has one.
    reward: Option<RewardView>,
}

/// A row's rewards in the HTML page.
struct RewardView {
    control: String,
    treatment: String,
    difference: String,
    interval: String,
    verdict: String,
    verdict_class: &'static str,
    pairs: u32,
    unrewarded: u32,
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Helped => "helped",
        Verdict::MadeItWorse => "made_it_worse",
        Verdict::CantTellYet => "cant_tell_yet",
    }
}

/// One trial of an eval, both arms side by side.
struct TrialView {
    trial: u32,
    control: String,
    control_class: &'static str,
    control_href: String,
    treatment: String,
    treatment_class: &'static str,
    treatment_href: String,
}

struct EvalView {
    label: String,
    anchor: String,
    trials: Vec<TrialView>,
}

#[derive(askama::Template)]
#[template(path = "compare.html")]
struct ComparePage {
    control: String,
    treatment: String,
    method: String,
    confidence: String,
    /// The rewards' method and level, when a row compares rewards.
    reward_method: String,
    rows: Vec<RowView>,
    evals: Vec<EvalView>,
}

fn row_view(row: &ComparisonRow, overall: bool) -> RowView {
    RowView {
        label: row.label(),
        anchor: crate::record::sanitize(&row.label()),
        overall,
        control: arm(&row.control),
        treatment: arm(&row.treatment),
        difference: signed_percent(row.difference),
        interval: interval(row.interval),
        verdict: row.verdict_text(),
        verdict_class: verdict_class(row.verdict),
        pairs: row.pairs,
        excluded: format!(
            "{} (control {}, treatment {})",
            row.excluded.pairs, row.excluded.control, row.excluded.treatment
        ),
        time: row.differences.mean_ms.map_or("-".into(), |ms| format!("{:+.1}s", ms / 1000.0)),
        tokens: format!("{:+}", row.differences.tokens),
        cost: row.differences.cost_usd.map_or("-".into(), |c| format!("{c:+.4} USD")),
        reward: row.reward.as_ref().map(|r| RewardView {
            control: format!("{:.2}", r.control_mean),
            treatment: format!("{:.2}", r.treatment_mean),
            difference: format!("{:+.2}", r.difference),
            interval: reward_interval(r.interval),
            verdict: r.verdict_text(),
            verdict_class: verdict_class(r.verdict),
            pairs: r.pairs,
            unrewarded: r.unrewarded,
        }),
    }
}

/// The final try of each (eval, harness, trial) of `records`, with its run directory.
fn final_of<'a>(
    records: &'a [(PathBuf, Record)],
    row: &ComparisonRow,
    trial: u32,
) -> Option<&'a (PathBuf, Record)> {
    records
        .iter()
        .filter(|(_, r)| {
            r.eval == row.eval
                && r.trial == trial
                && row.harness.as_ref().is_none_or(|h| *h == r.harness)
        })
        .max_by_key(|(_, r)| r.try_)
}

/// The HTML page of two recorded runs compared: the table of figures, then
/// per eval both arms' outcomes side by side with links to their records.
///
/// # Errors
/// An [`askama::Error`] when the page cannot be rendered.
pub fn html(compared: &RecordedComparison) -> Result<String, askama::Error> {
    use askama::Template;
    let c = &compared.comparison;
    let mut rows: Vec<RowView> = c.evals.iter().map(|r| row_view(r, false)).collect();
    rows.push(row_view(&c.overall, true));
    let (c_records, t_records) = (&compared.control, &compared.treatment);
    let href = |dir: &std::path::Path, r: &Record| -> String {
        let path = dir.join(r.file_name());
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        format!("file://{}", path.display())
    };
    let cell = |found: Option<&(PathBuf, Record)>| match found {
        Some((dir, r)) => (
            match (r.outcome.kind(), r.reward.as_ref().and_then(crate::stats::reward::scalar)) {
                (Some(kind), None) => format!("{} ({})", r.outcome.as_str(), kind.as_str()),
                (None, None) => r.outcome.as_str().to_string(),
                (Some(kind), Some(x)) => {
                    format!("{} ({}), reward {x}", r.outcome.as_str(), kind.as_str())
                }
                (None, Some(x)) => format!("{}, reward {x}", r.outcome.as_str()),
            },
            r.outcome.as_str(),
            href(dir, r),
        ),
        None => (String::new(), "", String::new()),
    };
    let evals = c
        .evals
        .iter()
        .map(|row| {
            let mut trials: Vec<u32> = c_records
                .iter()
                .chain(t_records.iter())
                .filter(|(_, r)| r.eval == row.eval)
                .map(|(_, r)| r.trial)
                .collect();
            trials.sort_unstable();
            trials.dedup();
            EvalView {
                label: row.label(),
                anchor: crate::record::sanitize(&row.label()),
                trials: trials
                    .into_iter()
                    .map(|trial| {
                        let (control, control_class, control_href) =
                            cell(final_of(c_records, row, trial));
                        let (treatment, treatment_class, treatment_href) =
                            cell(final_of(t_records, row, trial));
                        TrialView {
                            trial,
                            control,
                            control_class,
                            control_href,
                            treatment,
                            treatment_class,
                            treatment_href,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    ComparePage {
        control: c.control.clone(),
        treatment: c.treatment.clone(),
        method: c.overall.method.clone(),
        confidence: format!("{:.0} %", c.overall.confidence * 100.0),
        reward_method: c
            .overall
            .reward
            .as_ref()
            .map(|r| format!("{} at {:.0} %", r.method, r.confidence * 100.0))
            .unwrap_or_default(),
        rows,
        evals,
    }
    .render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{FailKind, Outcome};
    use crate::record::Record;

    fn rewarded(arm: &str, trial: u32, reward: f64) -> Record {
        let mut r = Record::new(arm, "task", "shell", trial, 1);
        r.outcome = if reward >= 1.0 { Outcome::Pass } else { Outcome::Fail(FailKind::Assertion) };
        r.reward = Some([("reward".to_string(), reward)].into());
        r
    }

    #[test]
    fn rewards_have_a_line_in_the_table_and_a_table_in_the_page() {
        let control: Vec<Record> = (1..=6).map(|t| rewarded("a", t, 0.25)).collect();
        let treatment: Vec<Record> = (1..=6).map(|t| rewarded("b", t, 1.0)).collect();
        let (c, t): (Vec<&Record>, Vec<&Record>) =
            (control.iter().collect(), treatment.iter().collect());
        let sides = crate::compare::analysis::Sides {
            control: ("a", &c),
            treatment: ("b", &t),
            by_harness: true,
        };
        let comparison = crate::compare::analyze(sides, &Default::default(), &Default::default());
        let text = table(&comparison);
        assert!(text.contains("mean reward 0.25 → 1.00, difference +0.75 ["), "{text}");
        assert!(text.contains("over 6 pairs: helped"), "{text}");
        assert!(text.contains("rewards: the mean of paired differences"), "{text}");
        let dir = |d: &str, records: Vec<Record>| -> Vec<(PathBuf, Record)> {
            records.into_iter().map(|r| (PathBuf::from(d), r)).collect()
        };
        let compared = RecordedComparison {
            comparison,
            control: dir("/runs/a", control),
            treatment: dir("/runs/b", treatment),
        };
        let page = html(&compared).unwrap();
        assert!(page.contains("<h2>Rewards</h2>"), "{page}");
        assert!(page.contains("<td>0.25</td><td>1.00</td><td>+0.75</td>"), "{page}");
        assert!(page.contains("fail (assertion), reward 0.25"), "{page}");
    }
}
