//! The statistics onebash reports, each checked against values computed by
//! hand: the Wilson score interval of a pass rate, and the unbiased
//! estimators of pass@k (Chen et al. 2021) and pass^k (all k pass).

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score 95% interval of `passed` out of `n`; (0, 1) when n is 0.
pub(crate) fn wilson95(passed: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = passed as f64 / n_f;
    let z2 = Z95 * Z95;
    let denominator = 1.0 + z2 / n_f;
    let center = (p + z2 / (2.0 * n_f)) / denominator;
    let half = Z95 * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denominator;
    ((center - half).max(0.0), (center + half).min(1.0))
}

/// The unbiased estimate of pass@k for a task tried `n` times with `c`
/// passes: 1 - C(n-c, k) / C(n, k), in the numerically stable product form
/// of Chen et al. None when k > n.
pub(crate) fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let product: f64 = ((n - c + 1)..=n)
        .map(|i| 1.0 - k as f64 / i as f64)
        .product();
    Some(1.0 - product)
}

/// The unbiased estimate of pass^k (all of k tries pass): C(c, k) / C(n, k).
/// None when k > n.
pub(crate) fn pass_hat_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if c < k {
        return Some(0.0);
    }
    Some((0..k).map(|i| (c - i) as f64 / (n - i) as f64).product())
}

/// The exact McNemar test: two-sided binomial test of the discordant pairs
/// (`b` went one way, `c` the other) against an even split.
/// p = min(1, 2 * P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2).
pub(crate) fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    let tail: f64 = if n <= 1000 {
        // Exact in floating point for small tables: 2^-n is a power of two
        // and each term is the previous times (n - i + 1) / i.
        let mut term = 0.5f64.powi(n as i32);
        let mut sum = term;
        for i in 1..=k {
            term *= (n - i + 1) as f64 / i as f64;
            sum += term;
        }
        sum
    } else {
        // Summed in log space so that 2^-n does not underflow.
        let ln_half_n = n as f64 * 0.5f64.ln();
        let mut ln_choose = 0.0;
        let mut sum = 0.0;
        for i in 0..=k {
            if i > 0 {
                ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
            }
            sum += (ln_choose + ln_half_n).exp();
        }
        sum
    };
    (2.0 * tail).min(1.0)
}

/// Newcombe's hybrid score interval (1998, method 10) for the difference
/// of two paired proportions, p_B - p_A, from the 2x2 table of pairs:
/// `both` passed in both, `only_a`, `only_b`, `neither`. Built from the
/// Wilson intervals of each proportion and the correlation of the pairs.
pub(crate) fn newcombe_paired_diff95(
    both: u64,
    only_a: u64,
    only_b: u64,
    neither: u64,
) -> (f64, f64) {
    let n = both + only_a + only_b + neither;
    if n == 0 {
        return (-1.0, 1.0);
    }
    let n_f = n as f64;
    let (p_b, p_a) = ((both + only_b) as f64 / n_f, (both + only_a) as f64 / n_f);
    let (l_b, u_b) = wilson95(both + only_b, n);
    let (l_a, u_a) = wilson95(both + only_a, n);
    let (a, b, c, d) = (both as f64, only_b as f64, only_a as f64, neither as f64);
    // With B as the first proportion: b = pairs where B passed and A did not.
    let denominator = ((a + b) * (c + d) * (a + c) * (b + d)).sqrt();
    let phi = if denominator > 0.0 {
        (a * d - b * c) / denominator
    } else {
        0.0
    };
    let diff = p_b - p_a;
    let lower = diff
        - ((p_b - l_b).powi(2) - 2.0 * phi * (p_b - l_b) * (u_a - p_a) + (u_a - p_a).powi(2))
            .max(0.0)
            .sqrt();
    let upper = diff
        + ((u_b - p_b).powi(2) - 2.0 * phi * (u_b - p_b) * (p_a - l_a) + (p_a - l_a).powi(2))
            .max(0.0)
            .sqrt();
    (lower.max(-1.0), upper.min(1.0))
}

/// The median of some numbers (the mean of the middle two for an even count).
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn wilson_matches_hand_computed_values() {
        // 8 of 10: center (0.8 + 0.19207)/1.38415 = 0.71682, half 0.22666.
        let (lo, hi) = wilson95(8, 10);
        assert!((lo - 0.490_162).abs() < 1e-5, "{lo}");
        assert!((hi - 0.943_318).abs() < 1e-5, "{hi}");
        // All or nothing stay inside [0, 1] and are not degenerate.
        let (lo, hi) = wilson95(0, 10);
        assert!(close(lo, 0.0) && (hi - 0.277_533).abs() < 1e-6, "{hi}");
        let (lo, hi) = wilson95(10, 10);
        assert!((lo - 0.722_467).abs() < 1e-6 && close(hi, 1.0), "{lo}");
        assert_eq!(wilson95(0, 0), (0.0, 1.0));
    }

    #[test]
    fn pass_at_k_matches_the_combinatorial_definition() {
        // n = 3, c = 1: pass@1 = 1/3, pass@2 = 1 - C(2,2)/C(3,2) = 2/3, pass@3 = 1.
        assert!(close(pass_at_k(3, 1, 1).expect("k<=n"), 1.0 / 3.0));
        assert!(close(pass_at_k(3, 1, 2).expect("k<=n"), 2.0 / 3.0));
        assert!(close(pass_at_k(3, 1, 3).expect("k<=n"), 1.0));
        // n = 5, c = 2, k = 2: 1 - C(3,2)/C(5,2) = 1 - 3/10.
        assert!(close(pass_at_k(5, 2, 2).expect("k<=n"), 0.7));
        assert!(close(pass_at_k(4, 0, 2).expect("k<=n"), 0.0));
        assert_eq!(pass_at_k(2, 1, 3), None);
    }

    #[test]
    fn pass_hat_k_is_all_k_pass() {
        // n = 3, c = 2: pass^1 = 2/3, pass^2 = C(2,2)/C(3,2) = 1/3, pass^3 = 0.
        assert!(close(pass_hat_k(3, 2, 1).expect("k<=n"), 2.0 / 3.0));
        assert!(close(pass_hat_k(3, 2, 2).expect("k<=n"), 1.0 / 3.0));
        assert!(close(pass_hat_k(3, 2, 3).expect("k<=n"), 0.0));
        assert!(close(pass_hat_k(3, 3, 3).expect("k<=n"), 1.0));
        assert_eq!(pass_hat_k(1, 1, 2), None);
    }

    #[test]
    fn mcnemar_exact_by_hand() {
        // 8 discordant pairs all one way: 2 * (1/2)^8.
        assert!(close(mcnemar_exact(0, 8), 0.007_812_5));
        assert!(close(mcnemar_exact(8, 0), 0.007_812_5));
        // No discordant pair: nothing to test.
        assert!(close(mcnemar_exact(0, 0), 1.0));
        // 1 vs 4: 2 * (C(5,0) + C(5,1)) / 32 = 12/32.
        assert!(close(mcnemar_exact(1, 4), 0.375));
        // An even split is capped at 1.
        assert!(close(mcnemar_exact(3, 3), 1.0));
        // Large n stays finite: 100 vs 200 is far from even, and the log-space
        // path (n > 1000) matches the exact sum computed with Python integers.
        let p = mcnemar_exact(100, 200);
        assert!(p > 0.0 && p < 1e-7, "{p}");
        let p = mcnemar_exact(600, 700);
        assert!((p - 0.006_015_793_861_045).abs() < 1e-9, "{p}");
    }

    #[test]
    fn newcombe_interval_by_hand() {
        // 10 pairs: both 5, only A 1, only B 3, neither 1; p_B - p_A = 0.2.
        // Newcombe's formulas worked in Python from the Wilson limits:
        // phi = 0.1020621, interval [-0.1675298, 0.5077186].
        let (lo, hi) = newcombe_paired_diff95(5, 1, 3, 1);
        assert!((lo - -0.167_529_8).abs() < 1e-6, "{lo}");
        assert!((hi - 0.507_718_6).abs() < 1e-6, "{hi}");
        // All concordant: the difference is 0 and the interval holds it.
        let (lo, hi) = newcombe_paired_diff95(6, 0, 0, 4);
        assert!(lo < 0.0 && hi > 0.0);
        // All discordant one way: the interval lies above 0.
        let (lo, hi) = newcombe_paired_diff95(0, 0, 8, 0);
        assert!(lo > 0.0 && close(hi, 1.0), "{lo} {hi}");
        assert_eq!(newcombe_paired_diff95(0, 0, 0, 0), (-1.0, 1.0));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
