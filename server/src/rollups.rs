//! The background task that keeps the count rollups up to date (docs/counts.md): one per
//! dashboard process, started by `lastword serve` next to the live hub.
//!
//! It calls [`Store::refresh_rollups`] every [`INTERVAL`], or again at once while a backfill is
//! under way (each call does a bounded amount), so the counting pages stay cheap without any
//! work in the runner's transactions. Several servers on one database may all run it: the
//! store coordinates them. A failed refresh is logged and retried; the pages stay exact
//! meanwhile (what is not rolled up is counted from the runs), only slower.

use lastword_store::Store;
use std::sync::Arc;
use std::time::Duration;

/// How often the rollups catch up with the changes: the freshness a page shows.
pub const INTERVAL: Duration = Duration::from_secs(2);
/// The pause between calls while a backfill is under way, so it yields to the pages.
const BACKFILL_PAUSE: Duration = Duration::from_millis(50);
/// After a failure, wait this long before trying again (database down).
const RETRY: Duration = Duration::from_secs(5);

/// Starts the maintainer; abort the handle to stop it.
pub fn spawn(store: Arc<dyn Store>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            let pause = match store.refresh_rollups(chrono::Utc::now()).await {
                Ok(report) => {
                    if failing {
                        tracing::info!("rollups: refreshing again");
                        failing = false;
                    }
                    if report.recomputed > 0 || report.skipped > 0 {
                        tracing::debug!(?report, "rollups refreshed");
                    }
                    if report.has_more() {
                        BACKFILL_PAUSE
                    } else {
                        INTERVAL
                    }
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "rollups: refresh failed; counts come from the runs until it works");
                        failing = true;
                    }
                    RETRY
                }
            };
            tokio::time::sleep(pause).await;
        }
    })
}
