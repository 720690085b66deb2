//! Latency summaries: min, median and p95 of a set of samples, in milliseconds.

use std::fmt;
use std::time::Duration;

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Summary {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        Summary::of_ms(&mut ms)
    }

    pub fn of_ms(ms: &mut [f64]) -> Summary {
        if ms.is_empty() {
            return Summary::default();
        }
        ms.sort_by(f64::total_cmp);
        Summary {
            n: ms.len(),
            min_ms: ms[0],
            p50_ms: percentile(ms, 0.50),
            p95_ms: percentile(ms, 0.95),
            max_ms: ms[ms.len() - 1],
        }
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n={:<4} min {:>9.2}  p50 {:>9.2}  p95 {:>9.2}  max {:>9.2} ms",
            self.n, self.min_ms, self.p50_ms, self.p95_ms, self.max_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of_ms(&mut v);
        assert_eq!((s.min_ms, s.p50_ms, s.p95_ms, s.max_ms), (1.0, 50.0, 95.0, 100.0));
        let s = Summary::of_ms(&mut [3.0]);
        assert_eq!((s.p50_ms, s.p95_ms), (3.0, 3.0));
    }
}
