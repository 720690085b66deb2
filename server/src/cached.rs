//! One value read at most once per lifetime, whoever asks and however often.
//!
//! Why: probes and scrapes are asked by machines, on a schedule nobody here controls, and a
//! flood of them (a misconfigured balancer, a dozen Prometheus replicas, an attacker) must not
//! turn into a flood of database queries, or make every replica report unhealthy because its
//! pool is busy answering them. Callers that arrive while a refresh runs wait for it and share
//! its answer (single flight); the refresh itself is bounded by the caller's own timeout.

use std::future::Future;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

pub struct Cached<T> {
    ttl: Duration,
    last: Mutex<Option<(Instant, T)>>,
}

impl<T: Clone> Cached<T> {
    pub fn new(ttl: Duration) -> Self {
        Cached { ttl, last: Mutex::new(None) }
    }

    /// The value read within the last `ttl`, or a fresh one from `fetch`.
    pub async fn get<F: Future<Output = T>>(&self, fetch: impl FnOnce() -> F) -> T {
        let mut last = self.last.lock().await;
        if let Some((at, value)) = last.as_ref() {
            if at.elapsed() < self.ttl {
                return value.clone();
            }
        }
        let value = fetch().await;
        *last = Some((Instant::now(), value.clone()));
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_flood_of_callers_makes_one_read_per_lifetime() {
        let cached = Arc::new(Cached::new(Duration::from_millis(200)));
        let reads = Arc::new(AtomicUsize::new(0));
        let ask = |cached: Arc<Cached<usize>>, reads: Arc<AtomicUsize>| async move {
            cached
                .get(|| async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    reads.fetch_add(1, Ordering::SeqCst) + 1
                })
                .await
        };
        let answers = futures::future::join_all((0..500).map(|_| ask(cached.clone(), reads.clone()))).await;
        assert_eq!(reads.load(Ordering::SeqCst), 1, "500 concurrent callers, one read");
        assert!(answers.iter().all(|a| *a == 1));
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(ask(cached.clone(), reads.clone()).await, 2, "read again once the answer is old");
    }
}
