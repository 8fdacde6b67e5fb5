//! Rewards: an attempt's reward as one number, a cell's mean reward with
//! its interval, and the interval of a paired difference of mean rewards.
//!
//! A reward is a map of named numbers (a Harbor task's `reward.json`, or
//! `{"reward": x}`). Its one number ([`scalar`]) is its `reward` key; a
//! reward without that key counts as its smallest key, so that the number
//! reaches a threshold exactly when the attempt passes ([`reaches`]: the
//! `reward` key, else every key, at or above it).
//!
//! The interval of a mean:
//! - rewards in \[0, 1\] (the common case): the Wilson score interval with the
//!   mean in place of the proportion ([`BOUNDED_WILSON`]). A variable in
//!   \[0, 1\] with mean μ has a variance of at most μ(1 − μ), so the interval
//!   is conservative for fractional rewards, never collapses to a point when
//!   every reward is the same, and for rewards of 0 and 1 only it is the pass
//!   rate's own Wilson interval;
//! - other rewards: Student's t interval ([`STUDENT_T`]), which needs two
//!   rewards or more.
//!
//! The paired difference of mean rewards (treatment − control, paired by
//! eval and trial), for rewards in \[0, 1\]: the square-and-add of the
//! method of variance estimates recovery (MOVER; Zou and Donner 2008), which
//! combines each arm's bounded Wilson limits with the correlation of the
//! pairs, continuity-corrected as Newcombe's φ ([`MOVER`]). For rewards of 0
//! and 1 only it is Newcombe's interval for paired proportions (1998, method
//! 10), which is itself this method on proportions, so the rewards' verdict
//! and the pass/fail verdict agree there. Other rewards: Student's t on the
//! differences.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The key whose value is a reward's one number.
pub const REWARD_KEY: &str = "reward";

/// The interval method of rewards in \[0, 1\], as reports print it.
pub const BOUNDED_WILSON: &str =
    "Wilson score interval of a mean in [0, 1] (variance bounded by mean × (1 − mean))";
/// The interval method of other rewards, as reports print it.
pub const STUDENT_T: &str = "Student's t interval";
/// The interval method of a paired difference of rewards in \[0, 1\], as reports print it.
pub const MOVER: &str = "MOVER square-and-add of the arms' bounded Wilson limits with the pairs' \
     correlation (Zou and Donner 2008; Newcombe's method 10 for rewards of 0 and 1)";

/// A reward's one number: its `reward` key, else its smallest key; `None`
/// for a reward without keys.
pub fn scalar(reward: &BTreeMap<String, f64>) -> Option<f64> {
    match reward.get(REWARD_KEY) {
        Some(r) => Some(*r),
        None => reward.values().copied().reduce(f64::min),
    }
}

/// Whether a reward reaches `threshold`: its `reward` key, else every key,
/// at or above it (an empty reward never does).
pub fn reaches(reward: &BTreeMap<String, f64>, threshold: f64) -> bool {
    scalar(reward).is_some_and(|r| r >= threshold)
}

/// The Wilson score interval of a mean `mean` of `n` values in \[0, 1\], at the
/// two-sided level whose normal quantile is `z`; `None` when `n` is 0.
pub fn wilson_of_mean(mean: f64, n: u32, z: f64) -> Option<[f64; 2]> {
    if n == 0 {
        return None;
    }
    let n = f64::from(n);
    let p = mean.clamp(0.0, 1.0);
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    Some([(center - half).max(0.0), (center + half).min(1.0)])
}

/// A mean with its interval and the interval's method.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanInterval {
    /// The mean.
    pub mean: f64,
    /// Its interval; `None` when the method cannot give one (Student's t of one value).
    pub interval: Option<[f64; 2]>,
    /// [`BOUNDED_WILSON`] or [`STUDENT_T`].
    pub method: &'static str,
}

/// The mean of `values` with its interval at the two-sided `level` (0.95),
/// whose normal quantile is `z` (1.96): the bounded Wilson interval when
/// every value lies in \[`low`, `low` + `width`\] (rescaled to \[0, 1\]), else
/// Student's t. `None` without values.
fn mean_in(values: &[f64], z: f64, level: f64, low: f64, width: f64) -> Option<MeanInterval> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if width.is_finite() && values.iter().all(|v| (low..=low + width).contains(v)) {
        let interval = wilson_of_mean((mean - low) / width, values.len() as u32, z)
            .map(|[a, b]| [low + a * width, low + b * width]);
        return Some(MeanInterval { mean, interval, method: BOUNDED_WILSON });
    }
    let interval = (values.len() >= 2).then(|| {
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let half = student_t_quantile(1.0 - (1.0 - level) / 2.0, n - 1.0) * (variance / n).sqrt();
        [mean - half, mean + half]
    });
    Some(MeanInterval { mean, interval, method: STUDENT_T })
}

/// The mean of rewards with its interval (see the module's note).
pub fn mean_interval(values: &[f64], z: f64, level: f64) -> Option<MeanInterval> {
    mean_in(values, z, level, 0.0, 1.0)
}

/// The mean paired difference of `pairs` (control, treatment) with its
/// interval at the two-sided `level` whose normal quantile is `z`: [`MOVER`]
/// for rewards in \[0, 1\], else Student's t on the differences. `None`
/// without pairs.
pub fn paired_interval(pairs: &[(f64, f64)], z: f64, level: f64) -> Option<MeanInterval> {
    if pairs.is_empty() {
        return None;
    }
    let bounded = pairs.iter().all(|(c, t)| (0.0..=1.0).contains(c) && (0.0..=1.0).contains(t));
    if !bounded {
        let differences: Vec<f64> = pairs.iter().map(|(c, t)| t - c).collect();
        return mean_in(&differences, z, level, f64::NAN, f64::NAN);
    }
    let n = pairs.len() as f64;
    let count = pairs.len() as u32;
    let (sum_c, sum_t) = pairs.iter().fold((0.0, 0.0), |(a, b), (c, t)| (a + c, b + t));
    let (p1, p2) = (sum_t / n, sum_c / n);
    let [l1, u1] = wilson_of_mean(p1, count, z)?;
    let [l2, u2] = wilson_of_mean(p2, count, z)?;
    // The pairs' correlation: for 0/1 rewards, n·Σct − ΣcΣt is the 2×2 table's ad − bc.
    let cross = n * pairs.iter().map(|(c, t)| c * t).sum::<f64>() - sum_c * sum_t;
    let spread = |sum: f64, squares: f64| n * squares - sum * sum;
    let margins = spread(sum_c, pairs.iter().map(|(c, _)| c * c).sum())
        * spread(sum_t, pairs.iter().map(|(_, t)| t * t).sum());
    let phi = if margins <= 0.0 {
        0.0
    } else {
        let corrected = if cross > n / 2.0 {
            cross - n / 2.0
        } else if cross >= 0.0 {
            0.0
        } else {
            cross
        };
        (corrected / margins.sqrt()).clamp(-1.0, 1.0)
    };
    let d = p1 - p2;
    let low = d
        - ((p1 - l1).powi(2) - 2.0 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2).powi(2))
            .max(0.0)
            .sqrt();
    let high = d
        + ((p2 - l2).powi(2) - 2.0 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1).powi(2))
            .max(0.0)
            .sqrt();
    Some(MeanInterval { mean: d, interval: Some([low.max(-1.0), high.min(1.0)]), method: MOVER })
}

/// One key's mean over a cell's rewards (a reward without the key counts 0,
/// as Harbor's `mean` metric counts it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyMean {
    /// The mean.
    pub mean: f64,
    /// Its 95 % interval (see [`RewardSummary::method`]).
    pub interval: Option<[f64; 2]>,
}

/// A cell's rewards: the summary's `reward` of a cell whose attempts recorded one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewardSummary {
    /// Graded final tries that recorded a reward: the mean's count.
    pub n: u32,
    /// Graded final tries that recorded none (a verifier past its limit):
    /// left out of the mean, as Harbor leaves them out.
    #[serde(default)]
    pub unrewarded: u32,
    /// The mean of the rewards' one number ([`scalar`]).
    pub mean: f64,
    /// Its 95 % interval; `None` where the method cannot give one.
    pub interval: Option<[f64; 2]>,
    /// The interval's method ([`BOUNDED_WILSON`] or [`STUDENT_T`]).
    pub method: String,
    /// The threshold the attempts' rewards were held to, when they recorded one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// Each key's mean, when a reward has a key other than `reward`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, KeyMean>,
}

/// The summary of `rewards` (one per graded final try that recorded one);
/// `unrewarded` graded final tries recorded none. `None` without rewards.
pub fn summarize(
    rewards: &[&BTreeMap<String, f64>],
    unrewarded: u32,
    threshold: Option<f64>,
) -> Option<RewardSummary> {
    let values: Vec<f64> = rewards.iter().filter_map(|r| scalar(r)).collect();
    let m = mean_interval(&values, super::Z_95, 0.95)?;
    let mut keys = BTreeMap::new();
    let names: std::collections::BTreeSet<&String> =
        rewards.iter().flat_map(|r| r.keys()).collect();
    if names.iter().any(|k| *k != REWARD_KEY) {
        for name in names {
            let of_key: Vec<f64> =
                rewards.iter().map(|r| r.get(name).copied().unwrap_or(0.0)).collect();
            if let Some(k) = mean_interval(&of_key, super::Z_95, 0.95) {
                keys.insert(name.clone(), KeyMean { mean: k.mean, interval: k.interval });
            }
        }
    }
    Some(RewardSummary {
        n: values.len() as u32,
        unrewarded,
        mean: m.mean,
        interval: m.interval,
        method: m.method.to_string(),
        threshold,
        keys,
    })
}

/// The quantile of Student's t distribution with `df` degrees of freedom at
/// probability `p` (bisection on the distribution function).
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -student_t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while student_t_cdf(hi, df) < p && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if student_t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom.
fn student_t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The regularized incomplete beta function I_x(a, b) (continued fraction,
/// modified Lentz; Numerical Recipes §6.4).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        sum += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::super::{Z_95, wilson_interval};
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() < tolerance
    }

    fn r(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn the_reward_key_is_the_number_else_the_smallest_key() {
        assert_eq!(scalar(&r(&[("reward", 0.5), ("x", 0.0)])), Some(0.5));
        assert_eq!(scalar(&r(&[("a", 1.0), ("b", 0.25)])), Some(0.25));
        assert_eq!(scalar(&r(&[])), None);
        assert!(reaches(&r(&[("reward", 1.0)]), 1.0));
        assert!(!reaches(&r(&[("reward", 0.99), ("x", 5.0)]), 1.0));
        assert!(reaches(&r(&[("a", 1.0), ("b", 2.0)]), 1.0));
        assert!(!reaches(&r(&[("a", 1.0), ("b", 0.0)]), 1.0));
        assert!(!reaches(&r(&[]), 0.0));
    }

    /// Published two-sided 97.5 % quantiles of t (any statistics table).
    #[test]
    fn t_quantiles_match_the_tables() {
        for (df, q) in [(1.0, 12.7062), (2.0, 4.3027), (4.0, 2.7764), (9.0, 2.2622), (30.0, 2.0423)]
        {
            let got = student_t_quantile(0.975, df);
            assert!(close(got, q, 5e-4), "df {df}: {got}");
        }
        assert!(close(student_t_quantile(0.025, 9.0), -2.2622, 5e-4));
        // Large df: the normal quantile.
        assert!(close(student_t_quantile(0.975, 1e6), Z_95, 1e-3));
    }

    #[test]
    fn rewards_of_zero_and_one_get_the_pass_rates_interval() {
        let values = [1.0, 1.0, 0.0];
        let m = mean_interval(&values, Z_95, 0.95).unwrap();
        assert_eq!(m.method, BOUNDED_WILSON);
        let [lo, hi] = m.interval.unwrap();
        let [wlo, whi] = wilson_interval(2, 3).unwrap();
        assert!(close(lo, wlo, 1e-12) && close(hi, whi, 1e-12));
        // Every reward the same: still an interval, not a point.
        let [lo, hi] = mean_interval(&[0.5; 4], Z_95, 0.95).unwrap().interval.unwrap();
        assert!(lo < 0.5 && hi > 0.5, "{lo} {hi}");
    }

    #[test]
    fn rewards_outside_zero_to_one_get_students_t() {
        // Mean 2, sample sd 1, n 4: 2 ± 3.1824 × 0.5.
        let m = mean_interval(&[1.0, 2.0, 2.0, 3.0], Z_95, 0.95).unwrap();
        assert_eq!(m.method, STUDENT_T);
        let [lo, hi] = m.interval.unwrap();
        let half = 3.1824 * (2.0_f64 / 3.0).sqrt() / 2.0;
        assert!(close(lo, 2.0 - half, 1e-3) && close(hi, 2.0 + half, 1e-3), "{lo} {hi}");
        assert_eq!(mean_interval(&[5.0], Z_95, 0.95).unwrap().interval, None);
        assert_eq!(mean_interval(&[], Z_95, 0.95), None);
    }

    /// For rewards of 0 and 1 the paired interval is Newcombe's: the
    /// published example of [`super::super::paired`]'s test (Fagerland,
    /// Lydersen and Laake 2017, 59 / 6 / 16 / 80: −0.1186 to −0.0046).
    #[test]
    fn paired_rewards_of_zero_and_one_get_newcombes_interval() {
        use super::super::paired::{PairedTable, newcombe_interval};
        let mut pairs = Vec::new();
        for (n, c, t) in [(59, 1.0, 1.0), (6, 0.0, 1.0), (16, 1.0, 0.0), (80, 0.0, 0.0)] {
            pairs.extend(std::iter::repeat_n((c, t), n));
        }
        let m = paired_interval(&pairs, Z_95, 0.95).unwrap();
        assert_eq!(m.method, MOVER);
        let [lo, hi] = m.interval.unwrap();
        assert!(close(lo, -0.1186, 5e-5) && close(hi, -0.0046, 5e-5), "{lo} {hi}");
        let table =
            PairedTable { both_passed: 59, only_treatment: 6, only_control: 16, both_failed: 80 };
        let [nlo, nhi] = newcombe_interval(&table, Z_95).unwrap();
        assert!(close(lo, nlo, 1e-12) && close(hi, nhi, 1e-12));
        // Four pairs, all 0 → 1: above zero, as Newcombe's.
        let [lo, _] = paired_interval(&[(0.0, 1.0); 4], 2.053_748_910_631_823, 0.96)
            .unwrap()
            .interval
            .unwrap();
        assert!(lo > 0.27 && lo < 0.28, "{lo}");
    }

    #[test]
    fn fractional_and_unbounded_paired_rewards() {
        // Partial credit 0.25 → 1 in four pairs: the arms' bounded limits, no correlation.
        let [lo, hi] = paired_interval(&[(0.25, 1.0); 4], 2.053_748_910_631_823, 0.96)
            .unwrap()
            .interval
            .unwrap();
        assert!(lo > 0.0 && hi <= 1.0, "{lo} {hi}");
        // No difference: around zero; correlated pairs narrow it.
        let same = [(0.2, 0.2), (0.4, 0.4), (0.6, 0.6), (0.8, 0.8)];
        let [lo, hi] = paired_interval(&same, Z_95, 0.95).unwrap().interval.unwrap();
        assert!(lo < 0.0 && hi > 0.0);
        let crossed = [(0.2, 0.8), (0.4, 0.6), (0.6, 0.4), (0.8, 0.2)];
        let [clo, chi] = paired_interval(&crossed, Z_95, 0.95).unwrap().interval.unwrap();
        assert!(chi - clo > hi - lo, "anti-correlated pairs: wider");
        // Outside [0, 1]: Student's t on the differences (2, 2, 3, 1: mean 2, sd 0.816).
        let m =
            paired_interval(&[(0.0, 2.0), (1.0, 3.0), (0.0, 3.0), (1.0, 2.0)], Z_95, 0.95).unwrap();
        assert_eq!(m.method, STUDENT_T);
        let half = 3.1824 * (2.0_f64 / 3.0).sqrt() / 2.0;
        let [lo, hi] = m.interval.unwrap();
        assert!(close(lo, 2.0 - half, 1e-3) && close(hi, 2.0 + half, 1e-3), "{lo} {hi}");
        assert_eq!(paired_interval(&[], Z_95, 0.95), None);
    }

    #[test]
    fn a_cells_summary_keeps_every_key() {
        let a = r(&[("reward", 1.0), ("accuracy", 0.5)]);
        let b = r(&[("reward", 0.0)]);
        let s = summarize(&[&a, &b], 1, Some(1.0)).unwrap();
        assert_eq!((s.n, s.unrewarded, s.mean), (2, 1, 0.5));
        assert_eq!(s.keys["accuracy"].mean, 0.25, "a missing key counts 0");
        assert_eq!(s.keys["reward"].mean, 0.5);
        assert_eq!(s.threshold, Some(1.0));
        let only = summarize(&[&b], 0, None).unwrap();
        assert!(only.keys.is_empty(), "a plain reward has no per-key table");
        assert_eq!(summarize(&[], 3, None), None);
    }
}
