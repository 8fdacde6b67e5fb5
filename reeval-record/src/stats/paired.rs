//! The statistics of a comparison of two arms run on the same evals and trial
//! indexes: the paired difference of pass rates with Newcombe's interval, a
//! confidence sequence that stays valid when trials are added, and the
//! verdict.
//!
//! A pair is one eval's trial `i` under the control arm and under the
//! treatment arm, both graded. The difference is treatment − control, so a
//! positive difference means the change helped.

use super::wilson_interval_z;

/// The error budget of a comparison: a false "helped" or "made it worse"
/// happens at most this often, however many times trials are added.
pub const ALPHA: f64 = 0.05;
/// The share of [`ALPHA`] the first look spends on Newcombe's interval.
/// Every later look (after `--resume` added trials) uses the confidence
/// sequence with the rest, which holds at every look at once.
pub const FIRST_LOOK_ALPHA: f64 = 0.04;
/// The rest of [`ALPHA`], for the confidence sequence of later looks.
pub const SEQUENTIAL_ALPHA: f64 = ALPHA - FIRST_LOOK_ALPHA;
/// The normal quantile of the first look's two-sided level: `qnorm(1 − 0.04 / 2)`.
pub const Z_FIRST_LOOK: f64 = 2.053_748_910_631_823;
/// The normal quantile of 80 % power, for how many trials would decide: `qnorm(0.8)`.
pub const Z_POWER_80: f64 = 0.841_621_233_572_914_3;

/// The interval's method, as reports print it next to the figures.
pub const NEWCOMBE: &str = "Newcombe's interval for paired proportions (1998, method 10)";
/// The sequential method's name, as reports print it.
pub const CONFIDENCE_SEQUENCE: &str =
    "two-sided normal-mixture confidence sequence (Howard et al. 2021)";

/// The four cells of a paired 2×2 table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairedTable {
    /// Both arms passed.
    pub both_passed: u32,
    /// Only the treatment passed.
    pub only_treatment: u32,
    /// Only the control passed.
    pub only_control: u32,
    /// Both failed.
    pub both_failed: u32,
}

impl PairedTable {
    /// Adds one pair.
    pub fn add(&mut self, control_passed: bool, treatment_passed: bool) {
        match (control_passed, treatment_passed) {
            (true, true) => self.both_passed += 1,
            (false, true) => self.only_treatment += 1,
            (true, false) => self.only_control += 1,
            (false, false) => self.both_failed += 1,
        }
    }

    /// How many pairs the table holds.
    pub fn pairs(&self) -> u32 {
        self.both_passed + self.only_treatment + self.only_control + self.both_failed
    }

    /// Pairs whose control passed.
    pub fn control_passed(&self) -> u32 {
        self.both_passed + self.only_control
    }

    /// Pairs whose treatment passed.
    pub fn treatment_passed(&self) -> u32 {
        self.both_passed + self.only_treatment
    }

    /// Treatment pass rate − control pass rate; `None` without pairs.
    pub fn difference(&self) -> Option<f64> {
        let n = self.pairs();
        (n > 0)
            .then(|| (f64::from(self.only_treatment) - f64::from(self.only_control)) / f64::from(n))
    }
}

/// Newcombe's square-and-add interval for the difference of paired
/// proportions (Newcombe 1998, Statistics in Medicine 17:2635, method 10):
/// the Wilson intervals of both arms combined with the correlation of the
/// pairs (φ, continuity-corrected), at the two-sided level whose normal
/// quantile is `z` (1.96 for 95 %). `None` without pairs.
pub fn newcombe_interval(table: &PairedTable, z: f64) -> Option<[f64; 2]> {
    let n = table.pairs();
    let d = table.difference()?;
    let nf = f64::from(n);
    // p1: treatment, p2: control.
    let (x1, x2) = (table.treatment_passed(), table.control_passed());
    let (p1, p2) = (f64::from(x1) / nf, f64::from(x2) / nf);
    let [l1, u1] = wilson_interval_z(x1, n, z)?;
    let [l2, u2] = wilson_interval_z(x2, n, z)?;

    let (a, b, c, e) = (
        f64::from(table.both_passed),
        f64::from(table.only_treatment),
        f64::from(table.only_control),
        f64::from(table.both_failed),
    );
    // Margins: treatment passed / failed, control passed / failed.
    let margins = (a + b) * (c + e) * (a + c) * (b + e);
    let phi = if margins == 0.0 {
        0.0
    } else {
        let cross = a * e - b * c;
        let corrected = if cross > nf / 2.0 {
            cross - nf / 2.0
        } else if cross >= 0.0 {
            0.0
        } else {
            cross
        };
        corrected / margins.sqrt()
    };

    let low =
        d - ((p1 - l1).powi(2) - 2.0 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2).powi(2)).sqrt();
    let high =
        d + ((p2 - l2).powi(2) - 2.0 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1).powi(2)).sqrt();
    Some([low.max(-1.0), high.min(1.0)])
}

/// The two-sided normal-mixture uniform boundary (Robbins 1970; Howard,
/// Ramdas, McAuliffe and Sekhon 2021, "Time-uniform, nonparametric,
/// nonasymptotic confidence sequences", Annals of Statistics 49(2)): with
/// probability at least `1 − alpha`, `|S_t| < bound(V_t)` at every `t` at
/// once, for a 1-sub-Gaussian martingale `S_t` with variance process `V_t`.
/// `rho` is the mixture's precision; [`best_rho`] tunes it.
pub fn normal_mixture_bound(v: f64, alpha: f64, rho: f64) -> f64 {
    ((v + rho) * (((v + rho) / rho).ln() + 2.0 * (1.0 / alpha).ln())).sqrt()
}

/// The ρ that makes [`normal_mixture_bound`] tightest at `v_opt`.
pub fn best_rho(v_opt: f64, alpha: f64) -> f64 {
    let l = 2.0 * (1.0 / alpha).ln();
    v_opt / (l + (1.0 + l).ln())
}

/// The confidence sequence for the mean paired difference after `pairs`
/// pairs whose differences sum to `sum` (each difference is −1, 0 or 1,
/// so 1-sub-Gaussian, and `V_t = t`). `planned_pairs` is the pair count of
/// the first look, where the sequence is tuned to be tightest; it must stay
/// the same at every look of one comparison.
pub fn confidence_sequence(
    sum: f64,
    pairs: u32,
    planned_pairs: u32,
    alpha: f64,
) -> Option<[f64; 2]> {
    if pairs == 0 {
        return None;
    }
    let t = f64::from(pairs);
    let rho = best_rho(f64::from(planned_pairs.max(1)), alpha);
    let half = normal_mixture_bound(t, alpha, rho) / t;
    let mean = sum / t;
    Some([(mean - half).max(-1.0), (mean + half).min(1.0)])
}

/// What a comparison concludes about one eval or overall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval lies above zero.
    Helped,
    /// The whole interval lies below zero.
    MadeItWorse,
    /// The interval contains zero.
    CantTellYet,
}

impl Verdict {
    /// The verdict an interval of the difference gives.
    pub fn from_interval([low, high]: [f64; 2]) -> Verdict {
        if low > 0.0 {
            Verdict::Helped
        } else if high < 0.0 {
            Verdict::MadeItWorse
        } else {
            Verdict::CantTellYet
        }
    }

    /// The verdict as reports print it.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Helped => "helped",
            Verdict::MadeItWorse => "made it worse",
            Verdict::CantTellYet => "can't tell yet",
        }
    }
}

/// About how many pairs in all would likely give a verdict at the level whose
/// normal quantile is `z`, with the power whose quantile is `z_power`
/// ([`Z_POWER_80`]), if the observed difference and discordance were the truth:
/// Connor's (1987) sample size for McNemar's test,
/// `N = (z_α·√ψ + z_β·√(ψ − δ²))² / δ²`, with ψ the share of discordant
/// pairs and δ the difference. `None` when no difference was seen.
pub fn pairs_needed(table: &PairedTable, z: f64, z_power: f64) -> Option<u32> {
    let n = f64::from(table.pairs());
    let delta = table.difference()?;
    if delta == 0.0 {
        return None;
    }
    let psi = f64::from(table.only_treatment + table.only_control) / n;
    let root = z * psi.sqrt() + z_power * (psi - delta * delta).max(0.0).sqrt();
    Some((root * root / (delta * delta)).ceil() as u32)
}

#[cfg(test)]
mod tests {
    use super::super::Z_95;
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() < tolerance
    }

    /// Fagerland, Lydersen and Laake, "Statistical Analysis of Contingency
    /// Tables" (2017), chapter 8: complete response before and after
    /// consolidation therapy (Cavo et al. 2012), 59 / 6 / 16 / 80. The
    /// Newcombe square-and-add interval is −0.0621 (−0.1186 to −0.0046).
    #[test]
    fn newcombe_matches_the_published_example() {
        // Rows: before (the "treatment" proportion p1), columns: after.
        let table =
            PairedTable { both_passed: 59, only_treatment: 6, only_control: 16, both_failed: 80 };
        let d = table.difference().unwrap();
        assert!(close(d, -0.0621, 5e-5), "{d}");
        let [low, high] = newcombe_interval(&table, Z_95).unwrap();
        assert!(close(low, -0.1186, 5e-5), "{low}");
        assert!(close(high, -0.0046, 5e-5), "{high}");
    }

    /// The reference values of the confseq library by the authors of Howard
    /// et al. (2021) (test/uniform_boundaries_unittest.cpp,
    /// TestTwoSidedNormalMixture): tuned for V = 100 at α = 0.05, ρ is
    /// 12.60056 and the boundary at V = 100 is 30.35209.
    #[test]
    fn normal_mixture_matches_the_reference_implementation() {
        let rho = best_rho(100.0, 0.05);
        assert!(close(rho, 12.60056, 1e-5), "{rho}");
        let bound = normal_mixture_bound(100.0, 0.05, rho);
        assert!(close(bound, 30.35209, 1e-5), "{bound}");
    }

    #[test]
    fn pairs_needed_grows_as_the_difference_shrinks() {
        // 10 % discordant, all one way: δ = 0.1, ψ = 0.1.
        let t =
            PairedTable { both_passed: 40, only_treatment: 10, only_control: 0, both_failed: 50 };
        let n = pairs_needed(&t, Z_95, Z_POWER_80).unwrap();
        // (1.95996·√0.1 + 0.84162·√0.09)² / 0.01 = 76.09, rounded up.
        assert_eq!(n, 77);
        let t =
            PairedTable { both_passed: 40, only_treatment: 6, only_control: 4, both_failed: 50 };
        assert!(pairs_needed(&t, Z_95, Z_POWER_80).unwrap() > 1000);
        let t =
            PairedTable { both_passed: 40, only_treatment: 5, only_control: 5, both_failed: 50 };
        assert_eq!(pairs_needed(&t, Z_95, Z_POWER_80), None);
    }

    #[test]
    fn verdicts() {
        assert_eq!(Verdict::from_interval([0.1, 0.5]), Verdict::Helped);
        assert_eq!(Verdict::from_interval([-0.5, -0.1]), Verdict::MadeItWorse);
        assert_eq!(Verdict::from_interval([-0.1, 0.5]), Verdict::CantTellYet);
        assert_eq!(Verdict::from_interval([0.0, 0.5]), Verdict::CantTellYet);
    }

    /// Peeking after every pair at a null effect: the sequence covers zero at
    /// every look in at least 1 − α of the runs (a deterministic
    /// pseudo-random check of the time-uniform guarantee).
    #[test]
    fn the_confidence_sequence_survives_peeking() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (runs, looks) = (2000, 200);
        let mut crossed = 0;
        for _ in 0..runs {
            let mut sum = 0.0;
            for t in 1..=looks {
                // Pass rate 0.5 in both arms, independent.
                let (a, b) = (next() & 1, next() & 1);
                sum += b as f64 - a as f64;
                let [low, high] = confidence_sequence(sum, t, 20, 0.05).unwrap();
                if low > 0.0 || high < 0.0 {
                    crossed += 1;
                    break;
                }
            }
        }
        assert!(f64::from(crossed) / f64::from(runs) <= 0.05, "{crossed} of {runs} crossed");
    }
}
