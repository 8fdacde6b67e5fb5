//! A comparison of two arms as the run's summary holds it (`comparison`):
//! per eval and overall, each arm's figures, the paired difference and its
//! verdict. Computing it from records is `reeval_core::compare::analysis`'s.

use serde::{Deserialize, Serialize};

use crate::stats::paired::{PairedTable, Verdict};
use crate::turn::Usage;

/// One arm's figures in a row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmFigures {
    /// The arm's name (`control`, a variant, a harness, a run id).
    pub arm: String,
    /// Final tries that passed.
    pub passed: u32,
    /// Final tries that failed.
    pub failed: u32,
    /// Final tries that ended in an infra error (not graded).
    pub infra: u32,
    /// passed / (passed + failed).
    pub pass_rate: Option<f64>,
    /// Its 95 % Wilson interval.
    pub pass_rate_interval: Option<[f64; 2]>,
    /// Mean wall time of a final try, in milliseconds.
    pub mean_ms: Option<f64>,
    /// The agent's usage over every try (retried tries spent tokens too).
    pub usage: Usage,
    /// Input, output and cache tokens of `usage`, summed.
    pub tokens: u64,
    /// The agent's cost, when its models are priced.
    pub cost_usd: Option<f64>,
    /// The mean reward of the final tries that recorded one, when any did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_reward: Option<f64>,
    /// Its 95 % interval (see [`crate::stats::reward`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_reward_interval: Option<[f64; 2]>,
}

/// Treatment − control of time, tokens and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Differences {
    /// Mean wall time of a try.
    pub mean_ms: Option<f64>,
    /// Tokens.
    pub tokens: i64,
    /// Cost.
    pub cost_usd: Option<f64>,
}

/// Pairs left out because an arm had an infra error, counted per arm (a
/// pair where both had one counts in both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Excluded {
    /// Pairs whose control attempt was an infra error.
    pub control: u32,
    /// Pairs whose treatment attempt was an infra error.
    pub treatment: u32,
    /// Pairs left out in all.
    pub pairs: u32,
}

/// One eval's comparison, or the overall one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonRow {
    /// The eval (`overall` for the overall row).
    pub eval: String,
    /// The harness both arms ran, when pairs are per harness too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// The control arm.
    pub control: ArmFigures,
    /// The treatment arm.
    pub treatment: ArmFigures,
    /// The graded pairs.
    pub table: PairedTable,
    /// Graded pairs.
    pub pairs: u32,
    /// Pairs left out for an infra error.
    pub excluded: Excluded,
    /// Trials recorded in one arm only.
    pub unpaired: u32,
    /// Paired difference of pass rates, treatment − control.
    pub difference: Option<f64>,
    /// Its interval.
    pub interval: Option<[f64; 2]>,
    /// The interval's method.
    pub method: String,
    /// The interval's own confidence level (0.96 at the first look, 0.99 later).
    pub confidence: f64,
    /// What the interval says.
    pub verdict: Verdict,
    /// With "can't tell yet": about how many more trials per eval would likely
    /// decide it (80 % power, if the difference seen is the truth); none when
    /// no difference was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_trials_per_eval: Option<u32>,
    /// Pairs at the comparison's first look (the confidence sequence is tuned there).
    pub planned_pairs: u32,
    /// Treatment − control of time, tokens and cost.
    pub differences: Differences,
    /// The paired difference of mean rewards, when both arms recorded rewards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<RewardComparison>,
}

/// The paired comparison of rewards in one row: per pair (eval, trial) the
/// treatment's reward minus the control's, their mean, its interval and the
/// verdict the interval gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewardComparison {
    /// Graded pairs in which both arms recorded a reward.
    pub pairs: u32,
    /// Graded pairs left out because an arm recorded no reward.
    pub unrewarded: u32,
    /// The control's mean reward over those pairs.
    pub control_mean: f64,
    /// The treatment's mean reward over those pairs.
    pub treatment_mean: f64,
    /// The mean paired difference, treatment − control.
    pub difference: f64,
    /// Its interval.
    pub interval: Option<[f64; 2]>,
    /// The interval's method.
    pub method: String,
    /// The interval's own confidence level (0.96 at the first look, 0.99 later).
    pub confidence: f64,
    /// What the interval says.
    pub verdict: Verdict,
}

impl RewardComparison {
    /// The verdict in words.
    pub fn verdict_text(&self) -> String {
        match self.verdict {
            Verdict::CantTellYet if self.interval.is_none() => {
                "can't tell yet (too few pairs for an interval)".to_string()
            }
            Verdict::CantTellYet if self.difference == 0.0 => {
                "can't tell yet (no difference seen)".to_string()
            }
            v => v.label().to_string(),
        }
    }
}

impl ComparisonRow {
    /// The row's key across looks: `eval` or `eval [harness]`.
    pub fn label(&self) -> String {
        match &self.harness {
            Some(h) => format!("{} [{h}]", self.eval),
            None => self.eval.clone(),
        }
    }

    /// The verdict in words, with what would decide "can't tell yet".
    pub fn verdict_text(&self) -> String {
        let no_difference = self.difference == Some(0.0);
        match (self.verdict, self.difference, self.more_trials_per_eval) {
            (Verdict::CantTellYet, None, _) => "can't tell yet (no pairs)".to_string(),
            (Verdict::CantTellYet, _, _) if no_difference => {
                "can't tell yet (no difference seen)".to_string()
            }
            (Verdict::CantTellYet, _, Some(n)) => {
                format!("can't tell yet (~{n} more trials per eval would likely decide)")
            }
            (v, _, _) => v.label().to_string(),
        }
    }
}

/// A comparison of two arms: the summary's `comparison`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// The control arm's name.
    pub control: String,
    /// The treatment arm's name.
    pub treatment: String,
    /// 1 for the first analysis, one more per `--resume`.
    pub look: u32,
    /// The error budget over all looks: a false verdict at most this often.
    pub alpha: f64,
    /// Per eval (and harness).
    pub evals: Vec<ComparisonRow>,
    /// Every pair of every eval pooled (pairs within an eval are treated as independent).
    pub overall: ComparisonRow,
}
