//! Live updates on the wire: one row of the database's `change_log` (migration 0002), and the
//! names of the server-sent events that carry them (`GET /api/v1/events`, docs/live.md). Shared
//! by the server, which writes them, and the browser build, which reads them.

use serde::{Deserialize, Serialize};

/// A row of a contract table was inserted or updated. `id` is the change log's id: increasing,
/// never reused, and the cursor a client resumes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Change {
    pub id: i64,
    /// `tasks`, `runs`, `effects` or `operator_actions`.
    pub table: String,
    /// The id of the changed row in that table.
    pub row_id: i64,
    /// The task the row belongs to (for `tasks`, the row itself).
    pub task_id: Option<i64>,
}

/// The server-sent event stream's vocabulary.
pub mod sse {
    /// Where the stream is served.
    pub const PATH: &str = "/api/v1/events";
    /// Query parameter naming the cursor to resume after, for clients that cannot set the
    /// `Last-Event-ID` header (a browser's first connection, scripts, tests). The header wins.
    pub const RESUME_PARAM: &str = "last_event_id";
    /// `data:` is a JSON array of [`Change`](super::Change), oldest first.
    pub const CHANGES: &str = "changes";
    /// `data:` is [`DB_UP`] or [`DB_DOWN`]. Sent on connect and whenever it changes.
    pub const STATUS: &str = "status";
    /// Refetch now: every change sent before it is in what the server answers from here on.
    /// At most once a second, to every stream at the same moment, so that the pages' reads
    /// coincide and are shared. `data:` is the server's refresh version.
    pub const REFRESH: &str = "refresh";
    /// The server cannot tell what the client missed (resume point pruned or unknown, or the
    /// client fell behind): reload everything. `data:` is the reason.
    pub const RESET: &str = "reset";
    pub const DB_UP: &str = "db_up";
    pub const DB_DOWN: &str = "db_down";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_like_the_documented_json() {
        let change = Change { id: 7, table: "runs".into(), row_id: 3, task_id: Some(2) };
        let json = serde_json::to_value(&change).unwrap();
        assert_eq!(json, serde_json::json!({"id": 7, "table": "runs", "row_id": 3, "task_id": 2}));
        assert_eq!(serde_json::from_value::<Change>(json).unwrap(), change);
    }
}
