//! How a query is written for either backend: the [`Dialect`] (what differs between the
//! PostgreSQL and SQLite texts) and [`SqlBuf`] (text plus arguments in `$n` order, bound by
//! `crate::exec` or [`bind_values`]).

use chrono::{DateTime, Utc};
use lastword_core::Tokens;

/// What differs between the PostgreSQL and SQLite texts of the dashboard's queries.
pub(crate) struct Dialect {
    /// The `STATE_SQL` twin of `lastword_core::run_state` over `runs r`.
    pub state_sql: &'static str,
    /// `r.output` trimmed of exactly the white space `lastword_core::trim_token` trims.
    pub trimmed_output: &'static str,
    /// The case-insensitive `LIKE` operator.
    pub ilike: &'static str,
    /// `r.claimed_at` as whole seconds since the epoch, integer-divided by the parameter named
    /// by the argument (a bucket length in seconds).
    pub bucket: fn(&str) -> String,
    /// How an operator action's transaction begins: SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`), so a read-then-write cannot deadlock against another writer.
    pub begin_write: &'static str,
    /// Row locks for the rows an action reads before it writes them (PostgreSQL only; SQLite's
    /// write lock already covers the database).
    pub for_update: &'static str,
    /// The start of rollup bucket number `arg` (see `crate::rollups`), as a value that compares
    /// with `runs.claimed_at` like time does.
    pub bucket_start: fn(&str) -> String,
    /// How a rollup bucket's recomputation begins: one snapshot for all its statements.
    pub begin_rollup: &'static str,
    /// How a read of several statements that must agree begins (a task page: the task, its
    /// runs, effects and audit): one snapshot, so a runner's commit between two of them cannot
    /// show a finished run beside a task still leased.
    pub begin_snapshot: &'static str,
    /// A statement taking a transaction-scoped advisory lock on `($1, $2)` without waiting,
    /// answering true when it got it (PostgreSQL; SQLite's write lock already serialises).
    pub try_lock: Option<&'static str>,
    /// `arg` (a JSON array of integers, as text) as a set to use after `IN`.
    pub id_list: fn(&str) -> String,
    /// `runs r` restricted to the `claimed_at` ranges `[lo, hi)` of a CTE `g`, as index ranges.
    pub raw_runs: &'static str,
    /// `(table, estimated rows)` of `tasks`, `runs` and `effects` from the catalogue, where the
    /// database keeps such estimates (PostgreSQL's `reltuples`, -1 before the first analyze).
    pub row_estimates: Option<&'static str>,
    /// The time `arg` as milliseconds since the epoch, a number that subtracts like time.
    pub epoch_ms: fn(&str) -> String,
    /// The database's own clock now (not the server's, not a worker's): what clock skew is
    /// measured against.
    pub db_now: &'static str,
}

/// A bound value of a dynamically built query.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    I64(i64),
    /// PostgreSQL picks a function's overload by its arguments' types (the advisory locks
    /// take two `int4` keys).
    I32(i32),
    Text(String),
    Time(DateTime<Utc>),
    /// Typed NULLs: PostgreSQL infers a parameter's type from what is bound, so a missing
    /// number must still be bound as a number.
    MaybeI64(Option<i64>),
    MaybeText(Option<String>),
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::I32(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}

impl From<DateTime<Utc>> for Value {
    fn from(v: DateTime<Utc>) -> Self {
        Value::Time(v)
    }
}

impl From<Option<i64>> for Value {
    fn from(v: Option<i64>) -> Self {
        Value::MaybeI64(v)
    }
}

impl From<Option<&str>> for Value {
    fn from(v: Option<&str>) -> Self {
        Value::MaybeText(v.map(str::to_string))
    }
}

/// Query text plus its arguments in `$n` order: [`SqlBuf::arg`] appends a value and returns
/// its placeholder, so the text and the arguments cannot drift apart.
#[derive(Clone, Debug, Default)]
pub(crate) struct SqlBuf {
    pub sql: String,
    pub args: Vec<Value>,
}

impl SqlBuf {
    /// A query whose `$1..$3` are the state parameters (now, no-action token, skip token).
    pub fn with_state_params(now: DateTime<Utc>, tokens: &Tokens) -> Self {
        SqlBuf {
            sql: String::new(),
            args: vec![
                Value::Time(now),
                Value::Text(lastword_core::trim_token(&tokens.no_action).to_string()),
                Value::Text(lastword_core::trim_token(&tokens.skip).to_string()),
            ],
        }
    }

    /// A query over the runs of a time window: the state parameters, then `since` and `until`,
    /// whose placeholders (`$4`, `$5`) come back with it.
    pub fn with_window(
        now: DateTime<Utc>,
        tokens: &Tokens,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> (Self, String, String) {
        let mut buf = SqlBuf::with_state_params(now, tokens);
        let (s, u) = (buf.arg(Value::Time(since)), buf.arg(Value::Time(until)));
        (buf, s, u)
    }

    /// A fixed statement whose `$n` parameters are bound, in order, with [`SqlBuf::bind`].
    pub fn statement(sql: impl Into<String>) -> Self {
        SqlBuf { sql: sql.into(), args: Vec::new() }
    }

    /// The next parameter's value (builder form of [`SqlBuf::arg`] for fixed statements).
    pub fn bind(mut self, value: impl Into<Value>) -> Self {
        self.args.push(value.into());
        self
    }

    pub fn push(&mut self, text: &str) -> &mut Self {
        self.sql.push_str(text);
        self
    }

    /// Appends `value` to the arguments; returns its placeholder (`$n`).
    pub fn arg(&mut self, value: Value) -> String {
        self.args.push(value);
        format!("${}", self.args.len())
    }
}

/// Binds every argument of a [`SqlBuf`] to a sqlx query, in order.
macro_rules! bind_values {
    ($query:expr, $args:expr) => {{
        let mut q = $query;
        for value in $args {
            q = match value {
                $crate::queries::Value::I64(v) => q.bind(*v),
                $crate::queries::Value::I32(v) => q.bind(*v),
                $crate::queries::Value::Text(v) => q.bind(v.clone()),
                $crate::queries::Value::Time(v) => q.bind(*v),
                $crate::queries::Value::MaybeI64(v) => q.bind(*v),
                $crate::queries::Value::MaybeText(v) => q.bind(v.clone()),
            };
        }
        q
    }};
}
pub(crate) use bind_values;
