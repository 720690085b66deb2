//! How PostgreSQL, the production database, spells what differs between the two databases:
//! the dialect [`SqlStore`](crate::SqlStore) and the rollups build their statements with.

pub(crate) mod dialect {
    /// The SQL twin of `lastword_core::run_state` over `runs r`; `$1` now, `$2`/`$3` the
    /// trimmed no-action and skip tokens. The conformance suite checks it against the Rust one.
    pub const STATE_SQL: &str = "CASE \
        WHEN r.finished_at IS NULL THEN CASE WHEN r.lease_expires_at > $1 THEN 'running' ELSE 'silent' END \
        WHEN r.completion_rows = 0 THEN 'lost_lease' \
        WHEN r.error IS NOT NULL THEN 'failed' \
        WHEN COALESCE(btrim(r.output, E' \\t\\n\\r\\x0B\\x0C'), '') = '' THEN 'empty_output' \
        WHEN btrim(r.output, E' \\t\\n\\r\\x0B\\x0C') = $2 THEN 'no_action' \
        WHEN btrim(r.output, E' \\t\\n\\r\\x0B\\x0C') = $3 THEN 'skip' \
        ELSE 'acted' END";

    /// The dashboard's queries in this dialect (see `crate::queries`).
    pub(crate) const DIALECT: crate::queries::Dialect = crate::queries::Dialect {
        state_sql: STATE_SQL,
        trimmed_output: "btrim(r.output, E' \\t\\n\\r\\x0B\\x0C')",
        ilike: "ILIKE",
        bucket,
        begin_write: crate::Backend::Postgres.begin_write(),
        for_update: " FOR UPDATE",
        bucket_start,
        // One snapshot for the bucket's statements; a concurrent recomputation of the same
        // bucket then fails on the bookkeeping row instead of leaving duplicate counts.
        begin_rollup: "BEGIN ISOLATION LEVEL REPEATABLE READ",
        begin_snapshot: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        try_lock: Some("SELECT pg_try_advisory_xact_lock($1, $2)"),
        id_list,
        // Each range of `g` an index range scan of its own (`OFFSET 0` keeps the planner from
        // merging the subquery and filtering every failure in history by the ranges instead).
        raw_runs: "g CROSS JOIN LATERAL (SELECT * FROM runs r WHERE r.claimed_at >= g.lo AND r.claimed_at < g.hi OFFSET 0) r",
        // Kept current by autovacuum's analyze (after about a tenth of a table changes).
        row_estimates: Some(
            "SELECT c.relname::text, c.reltuples::bigint FROM pg_class c \
             WHERE c.oid IN ('tasks'::regclass, 'runs'::regclass, 'effects'::regclass)",
        ),
        epoch_ms,
        db_now: "clock_timestamp()",
    };

    fn epoch_ms(arg: &str) -> String {
        format!("(extract(epoch from ({arg})) * 1000)")
    }

    fn bucket(param: &str) -> String {
        format!("floor(extract(epoch from r.claimed_at) / {param})::bigint")
    }

    fn bucket_start(arg: &str) -> String {
        format!("to_timestamp(({arg}) * {})", crate::rollups::BUCKET_SECS)
    }

    fn id_list(arg: &str) -> String {
        format!("(SELECT value::bigint FROM json_array_elements_text(({arg})::json))")
    }
}
