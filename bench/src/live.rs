//! Live latency: how long after a run row's change commits an SSE client on
//! `GET /api/v1/events` receives the `changes` event that names it — the delay an operator
//! sees between a worker's write and the open page reacting. Also the SSE plumbing the
//! simulated browsers share ([`connect`]).

use crate::http::Client;
use crate::load::Loaded;
use crate::stats::Summary;
use anyhow::Context;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use sqlx::postgres::PgPool;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What an event stream reports to its owner.
#[derive(Debug)]
pub enum Event {
    /// The stream is open (its first event, `status`, arrived).
    Open,
    /// A `changes` batch: the changes it names, and when it arrived.
    Changes(Vec<Change>, Instant),
    /// `refresh`: the moment pages refetch (after changes, at most once a second).
    Refresh,
    /// `reset`: the client should reload everything.
    Reset,
}

/// Opens `GET /api/v1/events` and forwards its events until the stream ends or the receiver is
/// dropped. The returned task ends with the stream.
pub async fn connect(
    client: &Client,
    tx: mpsc::UnboundedSender<Event>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let resp = client
        .http
        .get(client.url("/api/v1/events"))
        .header("Accept", "text/event-stream")
        // The stream is long-lived: no whole-request timeout.
        .timeout(Duration::from_secs(24 * 3600))
        .send()
        .await
        .context("GET /api/v1/events")?;
    anyhow::ensure!(resp.status().is_success(), "GET /api/v1/events: {}", resp.status());
    let mut events = resp.bytes_stream().eventsource();
    Ok(tokio::spawn(async move {
        while let Some(Ok(event)) = events.next().await {
            let at = Instant::now();
            let forwarded = match event.event.as_str() {
                "status" => tx.send(Event::Open),
                "changes" => tx.send(Event::Changes(parse_changes(&event.data), at)),
                "refresh" => tx.send(Event::Refresh),
                "reset" => tx.send(Event::Reset),
                _ => Ok(()),
            };
            if forwarded.is_err() {
                break;
            }
        }
    }))
}

/// One change a `changes` event names: its `change_log` id and the row it touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub id: i64,
    pub table: String,
    pub row_id: i64,
}

/// `[{"id", "table", "row_id", "task_id"}, …]` (docs/live.md).
fn parse_changes(data: &str) -> Vec<Change> {
    let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(data) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|c| {
            Some(Change {
                id: c.get("id")?.as_i64()?,
                table: c.get("table")?.as_str()?.to_string(),
                row_id: c.get("row_id")?.as_i64()?,
            })
        })
        .collect()
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Latency {
    pub summary: Summary,
    /// Samples whose event did not arrive within the timeout.
    pub missed: usize,
}

/// `samples` times: commit an update of the probe run, wait for its `changes` event.
pub async fn measure_latency(
    client: &Client,
    pool: &PgPool,
    loaded: &Loaded,
    samples: usize,
) -> anyhow::Result<Latency> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let stream = connect(client, tx).await?;
    wait_open(&mut rx).await?;
    let mut taken = Vec::with_capacity(samples);
    let mut missed = 0;
    for i in 0..samples {
        // Whatever arrived before this sample (the fleet's changes, a late duplicate) is not it.
        while rx.try_recv().is_ok() {}
        let t0 = Instant::now();
        // A logged write to a run (a heartbeat inside a lease fires no trigger, migration 0008):
        // setting `completion_rows` to itself changes nothing the pages show.
        sqlx::query("UPDATE runs SET completion_rows = completion_rows WHERE id = $1")
            .bind(loaded.probe_run)
            .execute(pool)
            .await?;
        let deadline = t0 + Duration::from_secs(10);
        let arrived = loop {
            match tokio::time::timeout_at(deadline.into(), rx.recv()).await {
                Ok(Some(Event::Changes(rows, at)))
                    if rows.iter().any(|c| c.table == "runs" && c.row_id == loaded.probe_run) =>
                {
                    break Some(at)
                }
                Ok(Some(_)) => continue,
                Ok(None) => anyhow::bail!("the event stream ended during sample {i}"),
                Err(_) => break None,
            }
        };
        match arrived {
            Some(at) => taken.push(at.saturating_duration_since(t0)),
            None => missed += 1,
        }
        // Spread the samples over the hub's read cycle rather than locking onto it.
        tokio::time::sleep(Duration::from_millis(100 + (i as u64 * 37) % 150)).await;
    }
    stream.abort();
    let summary = Summary::of(&taken);
    println!("live latency {summary} (missed {missed})");
    Ok(Latency { summary, missed })
}

/// Waits for the stream's first `status` event.
pub async fn wait_open(rx: &mut mpsc::UnboundedReceiver<Event>) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Event::Open)) => return Ok(()),
            Ok(Some(_)) => continue,
            Ok(None) => anyhow::bail!("the event stream closed before its first status event"),
            Err(_) => anyhow::bail!("no status event within 30 s of connecting to /api/v1/events"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_their_rows() {
        let data = r#"[{"id":7,"table":"runs","row_id":42,"task_id":3},{"id":8,"table":"tasks","row_id":3,"task_id":3}]"#;
        let change = |id, table: &str, row_id| Change { id, table: table.to_string(), row_id };
        assert_eq!(parse_changes(data), vec![change(7, "runs", 42), change(8, "tasks", 3)]);
        assert!(parse_changes("not json").is_empty());
    }
}
