//! The statistics of a cell (eval × harness): the pass rate's 95 % Wilson
//! interval, unbiased pass@k (Chen et al., 2021) and pass^k, each over the
//! graded trials only (infra errors are left out); a cell's mean reward with
//! its interval ([`reward`]).

pub mod paired;
pub mod reward;

/// z for a two-sided 95 % interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The 95 % Wilson score interval of `passed` out of `n` graded trials, as
/// `[low, high]`; `None` when nothing was graded.
pub fn wilson_interval(passed: u32, n: u32) -> Option<[f64; 2]> {
    wilson_interval_z(passed, n, Z_95)
}

/// The Wilson score interval at the two-sided level whose normal quantile is `z`.
pub fn wilson_interval_z(passed: u32, n: u32, z: f64) -> Option<[f64; 2]> {
    if n == 0 {
        return None;
    }
    let n = f64::from(n);
    let p = f64::from(passed) / n;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    Some([(center - half).max(0.0), (center + half).min(1.0)])
}

/// Unbiased pass@k for `n` trials with `c` passes: the chance that at least
/// one of `k` trials drawn without replacement passed, `1 - C(n-c, k) / C(n, k)`.
/// `NaN` when `k` is 0 or more than `n`.
pub fn pass_at_k(n: u32, c: u32, k: u32) -> f64 {
    if k == 0 || n < k {
        return f64::NAN;
    }
    if n - c < k {
        return 1.0;
    }
    let mut none_pass = 1.0;
    for i in 0..k {
        none_pass *= f64::from(n - c - i) / f64::from(n - i);
    }
    1.0 - none_pass
}

/// pass^k for `n` trials with `c` passes: the chance that `k` trials drawn
/// without replacement all passed, `C(c, k) / C(n, k)`. `NaN` when `k` is 0
/// or more than `n`.
pub fn pass_pow_k(n: u32, c: u32, k: u32) -> f64 {
    if k == 0 || n < k {
        return f64::NAN;
    }
    if c < k {
        return 0.0;
    }
    let mut all_pass = 1.0;
    for i in 0..k {
        all_pass *= f64::from(c - i) / f64::from(n - i);
    }
    all_pass
}

/// Whether a cell passes: it has no fail, or its pass rate reaches `min_pass_rate`.
pub fn cell_passes(passed: u32, failed: u32, min_pass_rate: Option<f64>) -> bool {
    let graded = passed + failed;
    // A hair of slack so that 2/3 reaches 0.6667 as written.
    failed == 0
        || min_pass_rate.is_some_and(|min| f64::from(passed) / f64::from(graded) + 1e-9 >= min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-4
    }

    #[test]
    fn wilson_matches_published_values() {
        // 2 of 3: the textbook interval [0.2077, 0.9385].
        let [lo, hi] = wilson_interval(2, 3).unwrap();
        assert!(close(lo, 0.2077) && close(hi, 0.9385), "{lo} {hi}");
        // All or nothing stays inside [0, 1] and is not degenerate.
        let [lo, hi] = wilson_interval(3, 3).unwrap();
        assert!(close(lo, 0.4385) && close(hi, 1.0), "{lo} {hi}");
        let [lo, hi] = wilson_interval(0, 3).unwrap();
        assert!(close(lo, 0.0) && close(hi, 0.5615), "{lo} {hi}");
        assert_eq!(wilson_interval(0, 0), None);
    }

    #[test]
    fn a_threshold_turns_a_flaky_cell_green() {
        assert!(cell_passes(3, 0, None));
        assert!(!cell_passes(2, 1, None));
        assert!(cell_passes(2, 1, Some(0.66)));
        assert!(cell_passes(2, 1, Some(2.0 / 3.0)));
        assert!(!cell_passes(1, 2, Some(0.66)));
        assert!(cell_passes(0, 0, Some(0.5)), "nothing graded: nothing failed");
    }

    #[test]
    fn pass_at_k_and_pass_pow_k() {
        assert_eq!(pass_at_k(3, 0, 1), 0.0);
        assert_eq!(pass_at_k(3, 3, 3), 1.0);
        assert!(close(pass_at_k(3, 1, 1), 1.0 / 3.0));
        assert!(close(pass_at_k(3, 1, 2), 2.0 / 3.0));
        assert_eq!(pass_at_k(3, 1, 3), 1.0);
        assert!(close(pass_pow_k(3, 2, 2), 1.0 / 3.0));
        assert_eq!(pass_pow_k(3, 1, 2), 0.0);
        assert!(pass_at_k(2, 1, 3).is_nan() && pass_pow_k(2, 1, 0).is_nan());
    }
}
