//! Interleaved timing: the variants of one point run back to back in rounds, so drift in the
//! machine's speed (other tenants, CPU power states) hits them alike; ratios are the median of
//! each round's paired ratio (the method of `bench io`).

use std::time::Instant;

use anyhow::Result;

use crate::bench::report::percentile;

/// A variant: one call of it does one repetition.
pub type Variant<'a> = Box<dyn FnMut() -> Result<()> + 'a>;

/// Per-call seconds of each variant in each round: `out[variant][round]`. Each round runs
/// every variant `reps` times, in list order in even rounds and in reverse order in odd ones,
/// so that what a variant inherits from the one before it (caches, the page cache, the other
/// end's state) falls on every variant alike rather than always on the same one.
pub fn interleaved(rounds: usize, reps: usize, variants: &mut [Variant<'_>]) -> Result<Vec<Vec<f64>>> {
    let mut out = vec![Vec::with_capacity(rounds); variants.len()];
    for round in 0..rounds {
        let order: Vec<usize> = match round % 2 {
            0 => (0..variants.len()).collect(),
            _ => (0..variants.len()).rev().collect(),
        };
        for v in order {
            let f = &mut variants[v];
            let t = Instant::now();
            for _ in 0..reps {
                f()?;
            }
            out[v].push(t.elapsed().as_secs_f64() / reps as f64);
        }
    }
    Ok(out)
}

/// Median of samples.
pub fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    percentile(&v, 50.0)
}

/// Median over rounds of `a[round] / b[round]`.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> f64 {
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    median(&r)
}

/// Repetitions so that one variant's round lasts about `budget_s`, given one trial call.
pub fn reps_for(budget_s: f64, mut f: impl FnMut() -> Result<()>) -> Result<usize> {
    let t = Instant::now();
    f()?;
    let one = t.elapsed().as_secs_f64().max(1e-7);
    Ok(((budget_s / one) as usize).clamp(1, 100_000))
}
