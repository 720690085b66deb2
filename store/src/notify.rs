//! The notifier's log (migration 0012): incidents, the messages owed about them, and the lease
//! that makes one dashboard server the sender. The policy (what opens and resolves an
//! incident, cooldowns, backoff, the bodies) is the server's (`server/src/notify.rs`); this is
//! only its storage, so that a restart neither loses nor repeats a notification: an incident
//! and its deliveries are written in one transaction before anything is sent, and a delivery is
//! marked once its receiver answered.

use crate::{Db, StoreError};
use chrono::{DateTime, Utc};
use lastword_core::alerts::OpenItem;
use lastword_core::AttentionKind;

/// An incident not yet resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incident {
    pub id: i64,
    pub kind: AttentionKind,
    pub task_id: i64,
    pub task_kind: String,
    pub epoch: i64,
    pub began_at: Option<DateTime<Utc>>,
    pub opened_at: DateTime<Utc>,
}

/// A message owed: one incident's phase to one receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: i64,
    pub sink: String,
    pub resolved: bool,
    pub attempts: i32,
    pub incident: Incident,
    pub resolved_at: Option<DateTime<Utc>>,
}

/// A delivery as the log holds it (for tests and the operator's log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedDelivery {
    pub id: i64,
    pub sink: String,
    pub kind: String,
    pub task_id: i64,
    pub phase: String,
    pub attempts: i32,
    pub delivered: bool,
    pub abandoned: bool,
    pub last_error: Option<String>,
    pub message_id: Option<String>,
}

/// Takes or keeps the sender's lease for `owner` until `until`; false while another server
/// holds a live one.
pub async fn lead(
    db: &Db,
    owner: &str,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let sql = "UPDATE notifier_lease SET epoch = epoch + CASE WHEN owner = $1 THEN 0 ELSE 1 END, owner = $1, expires_at = $3 \
               WHERE id = 1 AND (owner = $1 OR owner IS NULL OR expires_at IS NULL OR expires_at <= $2)";
    let n =
        on_db!(db, p => sqlx::query(sql).bind(owner).bind(now).bind(until).execute(p).await?.rows_affected());
    Ok(n == 1)
}

/// Gives the lease up (a server shutting down), so another takes over at once.
pub async fn resign(db: &Db, owner: &str) -> Result<(), StoreError> {
    let sql = "UPDATE notifier_lease SET owner = NULL, expires_at = NULL WHERE id = 1 AND owner = $1";
    on_db!(db, p => sqlx::query(sql).bind(owner).execute(p).await?.rows_affected());
    Ok(())
}

type IncidentRow = (i64, String, i64, String, i64, Option<DateTime<Utc>>, DateTime<Utc>);

fn incident((id, kind, task_id, task_kind, epoch, began_at, opened_at): IncidentRow) -> Option<Incident> {
    Some(Incident { id, kind: AttentionKind::parse(&kind)?, task_id, task_kind, epoch, began_at, opened_at })
}

/// Every incident not yet resolved.
pub async fn open_incidents(db: &Db) -> Result<Vec<Incident>, StoreError> {
    let sql = "SELECT id, kind, task_id, task_kind, epoch, began_at, opened_at FROM alert_incidents \
               WHERE resolved_at IS NULL ORDER BY id";
    let rows: Vec<IncidentRow> = on_db!(db, p => sqlx::query_as(sql).fetch_all(p).await?);
    Ok(rows.into_iter().filter_map(incident).collect())
}

/// What one round decided: incidents to open (with the receivers each is owed to) and to
/// resolve. Written in one transaction.
#[derive(Clone, Debug, Default)]
pub struct Round {
    pub open: Vec<(OpenItem, Vec<String>)>,
    pub resolve: Vec<i64>,
    /// Incidents closed without a message: dead tasks left dead past the notifier's look-back
    /// (nobody re-queued them; watching them for ever would grow every round).
    pub expire: Vec<i64>,
}

/// Writes a [`Round`]: new incidents with a pending firing message per receiver; resolved
/// incidents with a pending resolved message for each receiver that was, or may have been, told
/// it fired (delivered, or tried and not refused: a server may have crashed between the answer
/// and its record, or a timeout may have hidden a receipt);
/// a firing message not yet delivered is dropped (expired incidents: dropped, nothing owed).
pub async fn record(db: &Db, round: &Round, now: DateTime<Utc>) -> Result<(), StoreError> {
    macro_rules! write {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await?;
            // Expired incidents owe nothing; resolved ones a resolution to whoever may have
            // the firing message. Both close the incident and drop an undelivered firing.
            let closing = round.expire.iter().map(|id| (id, false)).chain(round.resolve.iter().map(|id| (id, true)));
            for (id, resolved) in closing {
                sqlx::query("UPDATE alert_incidents SET resolved_at = $2 WHERE id = $1 AND resolved_at IS NULL")
                    .bind(id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                if resolved {
                    sqlx::query(
                        "INSERT INTO alert_deliveries (incident_id, sink, phase, created_at, due_at) \
                         SELECT incident_id, sink, 'resolved', $2, $2 FROM alert_deliveries \
                         WHERE incident_id = $1 AND phase = 'firing' \
                           AND (delivered_at IS NOT NULL OR (attempts > 0 AND abandoned_at IS NULL)) \
                         ON CONFLICT DO NOTHING",
                    )
                    .bind(id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                }
                let why = if resolved { "resolved before it was delivered" } else { "expired: still dead past the look-back" };
                sqlx::query(
                    "UPDATE alert_deliveries SET abandoned_at = $2, last_error = $3 \
                     WHERE incident_id = $1 AND phase = 'firing' AND delivered_at IS NULL AND abandoned_at IS NULL",
                )
                .bind(id)
                .bind(now)
                .bind(why)
                .execute(&mut *tx)
                .await?;
            }
            for (item, sinks) in &round.open {
                let id: Option<i64> = sqlx::query_scalar(
                    "INSERT INTO alert_incidents (kind, task_id, task_kind, epoch, began_at, opened_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING id",
                )
                .bind(item.kind.as_str())
                .bind(item.task_id)
                .bind(&item.task_kind)
                .bind(item.epoch)
                .bind(item.since)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(id) = id else { continue };
                for sink in sinks {
                    sqlx::query(
                        "INSERT INTO alert_deliveries (incident_id, sink, phase, created_at, due_at) \
                         VALUES ($1, $2, 'firing', $3, $3) ON CONFLICT DO NOTHING",
                    )
                    .bind(id)
                    .bind(sink)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                }
            }
            tx.commit().await?;
        }};
    }
    match db {
        Db::Postgres(p) => write!(p),
        Db::Sqlite(p) => write!(p),
    }
    Ok(())
}

type DeliveryRow = (
    i64,
    String,
    String,
    i32,
    i64,
    String,
    i64,
    String,
    i64,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
);

/// Messages due by `now` (oldest first, at most `limit`).
pub async fn due(db: &Db, now: DateTime<Utc>, limit: i64) -> Result<Vec<Delivery>, StoreError> {
    let sql = "SELECT d.id, d.sink, d.phase, d.attempts, i.id, i.kind, i.task_id, i.task_kind, i.epoch, i.began_at, \
                      i.opened_at, i.resolved_at \
               FROM alert_deliveries d JOIN alert_incidents i ON i.id = d.incident_id \
               WHERE d.delivered_at IS NULL AND d.abandoned_at IS NULL AND d.due_at <= $1 ORDER BY d.id LIMIT $2";
    let rows: Vec<DeliveryRow> =
        on_db!(db, p => sqlx::query_as(sql).bind(now).bind(limit).fetch_all(p).await?);
    Ok(rows
        .into_iter()
        .filter_map(
            |(
                id,
                sink,
                phase,
                attempts,
                iid,
                kind,
                task_id,
                task_kind,
                epoch,
                began_at,
                opened_at,
                resolved_at,
            )| {
                let incident = incident((iid, kind, task_id, task_kind, epoch, began_at, opened_at))?;
                Some(Delivery { id, sink, resolved: phase == "resolved", attempts, incident, resolved_at })
            },
        )
        .collect())
}

/// When each receiver was last sent a firing message of each kind (the cooldown's start).
pub async fn last_fired(db: &Db) -> Result<Vec<(String, String, DateTime<Utc>)>, StoreError> {
    let sql = "SELECT d.sink, i.kind, MAX(d.delivered_at) FROM alert_deliveries d JOIN alert_incidents i ON i.id = d.incident_id \
               WHERE d.phase = 'firing' AND d.delivered_at IS NOT NULL GROUP BY d.sink, i.kind";
    let rows: Vec<(String, String, Option<DateTime<Utc>>)> =
        on_db!(db, p => sqlx::query_as(sql).fetch_all(p).await?);
    Ok(rows.into_iter().filter_map(|(s, k, t)| Some((s, k, t?))).collect())
}

fn id_list(ids: &[i64]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".into())
}

fn ids_sql(db: &Db, arg: &str) -> String {
    (crate::rollups::dialect(db).id_list)(arg)
}

/// About to send `ids` in the request `message_id`: counts the attempt and makes them not due
/// before `until` (the sender's lease), written before the request goes out, so a server that
/// takes over after a crash does not send them again at once, and a resolution knows the
/// receiver may have heard of them.
pub async fn attempting(
    db: &Db,
    ids: &[i64],
    message_id: &str,
    until: DateTime<Utc>,
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE alert_deliveries SET attempts = attempts + 1, due_at = $1, message_id = $2 WHERE id IN {}",
        ids_sql(db, "$3")
    );
    on_db!(db, p => sqlx::query(&sql).bind(until).bind(message_id).bind(id_list(ids)).execute(p).await?.rows_affected());
    Ok(())
}

/// The receiver answered 2xx for `ids`.
pub async fn delivered(db: &Db, ids: &[i64], now: DateTime<Utc>) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE alert_deliveries SET delivered_at = $1, last_error = NULL WHERE id IN {}",
        ids_sql(db, "$2")
    );
    on_db!(db, p => sqlx::query(&sql).bind(now).bind(id_list(ids)).execute(p).await?.rows_affected());
    Ok(())
}

/// The attempt failed: try again at `retry_at`, or give up (`None`).
pub async fn failed(
    db: &Db,
    ids: &[i64],
    error: &str,
    retry_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE alert_deliveries SET last_error = $1, due_at = COALESCE($2, due_at), \
         abandoned_at = CASE WHEN $2 IS NULL THEN $3 END WHERE id IN {}",
        ids_sql(db, "$4")
    );
    let error: String = error.chars().take(500).collect();
    on_db!(db, p => sqlx::query(&sql).bind(error).bind(retry_at).bind(now).bind(id_list(ids)).execute(p).await?.rows_affected());
    Ok(())
}

/// Holds messages back until `until` (a receiver's cooldown for their kind).
pub async fn postpone(db: &Db, ids: &[i64], until: DateTime<Utc>) -> Result<(), StoreError> {
    let sql = format!("UPDATE alert_deliveries SET due_at = $1 WHERE id IN {}", ids_sql(db, "$2"));
    on_db!(db, p => sqlx::query(&sql).bind(until).bind(id_list(ids)).execute(p).await?.rows_affected());
    Ok(())
}

type LogRow = (
    i64,
    String,
    String,
    i64,
    String,
    i32,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    Option<String>,
    Option<String>,
);

/// The newest `limit` deliveries, newest first.
pub async fn log(db: &Db, limit: i64) -> Result<Vec<LoggedDelivery>, StoreError> {
    let sql = "SELECT d.id, d.sink, i.kind, i.task_id, d.phase, d.attempts, d.delivered_at, d.abandoned_at, d.last_error, d.message_id \
               FROM alert_deliveries d JOIN alert_incidents i ON i.id = d.incident_id ORDER BY d.id DESC LIMIT $1";
    let rows: Vec<LogRow> = on_db!(db, p => sqlx::query_as(sql).bind(limit).fetch_all(p).await?);
    Ok(rows
        .into_iter()
        .map(|(id, sink, kind, task_id, phase, attempts, delivered, abandoned, last_error, message_id)| {
            LoggedDelivery {
                id,
                sink,
                kind,
                task_id,
                phase,
                attempts,
                delivered: delivered.is_some(),
                abandoned: abandoned.is_some(),
                last_error,
                message_id,
            }
        })
        .collect())
}

/// Forgets incidents resolved before `before` with their deliveries (the log is for the recent
/// past; an hourly call keeps it small).
pub async fn forget(db: &Db, before: DateTime<Utc>) -> Result<u64, StoreError> {
    let deliveries = "DELETE FROM alert_deliveries WHERE incident_id IN \
                      (SELECT id FROM alert_incidents WHERE resolved_at IS NOT NULL AND resolved_at < $1)";
    let incidents = "DELETE FROM alert_incidents WHERE resolved_at IS NOT NULL AND resolved_at < $1";
    on_db!(db, p => sqlx::query(deliveries).bind(before).execute(p).await?.rows_affected());
    Ok(on_db!(db, p => sqlx::query(incidents).bind(before).execute(p).await?.rows_affected()))
}
