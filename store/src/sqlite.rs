//! How SQLite, the embedded default, spells what differs between the two databases: the
//! dialect [`SqlStore`](crate::SqlStore) and the rollups build their statements with.

pub(crate) mod dialect {
    /// The SQL twin of `lastword_core::run_state`; see the PostgreSQL one. Timestamps compare
    /// as RFC 3339 text, which orders like time because every value is written by sqlx in one
    /// format (see the migration's header).
    pub const STATE_SQL: &str = "CASE \
        WHEN r.finished_at IS NULL THEN CASE WHEN r.lease_expires_at > $1 THEN 'running' ELSE 'silent' END \
        WHEN r.completion_rows = 0 THEN 'lost_lease' \
        WHEN r.error IS NOT NULL THEN 'failed' \
        WHEN COALESCE(trim(r.output, char(32, 9, 10, 13, 11, 12)), '') = '' THEN 'empty_output' \
        WHEN trim(r.output, char(32, 9, 10, 13, 11, 12)) = $2 THEN 'no_action' \
        WHEN trim(r.output, char(32, 9, 10, 13, 11, 12)) = $3 THEN 'skip' \
        ELSE 'acted' END";

    /// The dashboard's queries in this dialect (see `crate::queries`). SQLite's `LIKE` is
    /// already case-insensitive for ASCII (not beyond it, unlike PostgreSQL's `ILIKE`).
    pub(crate) const DIALECT: crate::queries::Dialect = crate::queries::Dialect {
        state_sql: STATE_SQL,
        trimmed_output: "trim(r.output, char(32, 9, 10, 13, 11, 12))",
        ilike: "LIKE",
        bucket,
        begin_write: crate::Backend::Sqlite.begin_write(),
        for_update: "",
        bucket_start,
        // The write lock up front: nothing else commits while the bucket is counted.
        begin_rollup: crate::Backend::Sqlite.begin_write(),
        // A deferred read transaction: in WAL mode every statement in it reads the snapshot of
        // its first read.
        begin_snapshot: "BEGIN",
        try_lock: None,
        id_list,
        raw_runs: "g JOIN runs r ON r.claimed_at >= g.lo AND r.claimed_at < g.hi",
        // No catalogue estimates: totals are counted (the embedded database is the small one).
        row_estimates: None,
        epoch_ms,
        db_now: "'now'",
    };

    /// `'subsec'` keeps the milliseconds of the RFC 3339 text (SQLite ≥ 3.42).
    fn epoch_ms(arg: &str) -> String {
        format!("(unixepoch({arg}, 'subsec') * 1000)")
    }

    /// `unixepoch` reads the RFC 3339 text (fraction and `+00:00` included); SQLite ≥ 3.38.
    fn bucket(param: &str) -> String {
        format!("(unixepoch(r.claimed_at) / {param})")
    }

    /// In exactly the text form sqlx writes a whole-second time in (`…T08:15:00+00:00`), so
    /// it compares with `claimed_at` as time does.
    fn bucket_start(arg: &str) -> String {
        format!("strftime('%Y-%m-%dT%H:%M:%S+00:00', ({arg}) * {}, 'unixepoch')", crate::rollups::BUCKET_SECS)
    }

    fn id_list(arg: &str) -> String {
        format!("(SELECT value FROM json_each({arg}))")
    }
}
