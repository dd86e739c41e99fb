//! The statistics onebash reports, each checked against values computed by
//! hand: the Wilson score interval of a pass rate, and the unbiased
//! estimators of pass@k (Chen et al. 2021) and pass^k (all k pass).

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score 95% interval of `passed` out of `n`; (0, 1) when n is 0.
pub fn wilson95(passed: u64, n: u64) -> (f64, f64) {
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
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
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
pub fn pass_hat_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if c < k {
        return Some(0.0);
    }
    Some((0..k).map(|i| (c - i) as f64 / (n - i) as f64).product())
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
}
