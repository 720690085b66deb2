//! The dashboard's read queries, built once as text for either backend.
//!
//! Every query that decides a run's state binds `$1` now, `$2`/`$3` the trimmed tokens (see
//! [`SqlBuf::with_state_params`]); filters append numbered parameters
//! after them through [`SqlBuf`]. `$n` placeholders work on both backends (sqlx maps SQLite's
//! `$n` names to the n-th argument), so one text serves both, with the few dialect differences
//! taken from a [`Dialect`].
//!
//! States and causes are filtered with *sargable* predicates ([`state_predicate`],
//! [`cause_predicate`]) rather than by comparing the `STATE_SQL` twin's result, so the planner
//! can use the partial indexes on `runs`; the conformance suite checks that each predicate
//! selects exactly the runs the twin puts in that state or cause.

pub(crate) mod task;

mod audit;
mod counts;
mod predicates;
mod runs;
mod sql;

pub(crate) use audit::*;
pub(crate) use counts::*;
pub(crate) use predicates::*;
pub(crate) use runs::*;
pub(crate) use sql::*;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use lastword_core::{Bucket, Cause, Cursor, PageRequest, RunFilter, RunState, Tokens};

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("50% off"), "%50\\% off%");
        assert_eq!(like_pattern("a_b\\c"), "%a\\_b\\\\c%");
        assert_eq!(like_pattern("plain"), "%plain%");
    }

    #[test]
    fn placeholders_follow_the_arguments() {
        let mut buf = SqlBuf::with_state_params(Utc::now(), &Tokens::default());
        assert_eq!(buf.arg(Value::I64(1)), "$4");
        assert_eq!(buf.arg(Value::Text("x".into())), "$5");
        assert_eq!(buf.args.len(), 5);
    }

    #[test]
    fn a_window_query_binds_since_and_until_after_the_state_parameters() {
        let (since, until) = (Utc::now() - chrono::Duration::hours(1), Utc::now());
        let (buf, s, u) = SqlBuf::with_window(Utc::now(), &Tokens::default(), since, until);
        assert_eq!((s.as_str(), u.as_str()), ("$4", "$5"));
        assert!(matches!(buf.args[3], Value::Time(t) if t == since));
        assert!(matches!(buf.args[4], Value::Time(t) if t == until));
        assert_eq!(buf.args.len(), 5);
    }

    #[test]
    fn list_queries_number_their_parameters_in_order() {
        let d = &crate::postgres::dialect::DIALECT;
        let filter = RunFilter {
            worker: Some("w".into()),
            causes: vec![Cause::Timeout, Cause::LostLease],
            q: Some("x".into()),
            ..RunFilter::default()
        };
        let page = PageRequest { limit: 10, after: Some(Cursor { claimed_at: Utc::now(), id: 3 }) };
        let buf = list_runs(d, &filter, &page, Utc::now(), &Tokens::default());
        // worker, q, cursor time, cursor id, limit after the three state parameters.
        assert_eq!(buf.args.len(), 8);
        for n in 1..=8 {
            assert!(buf.sql.contains(&format!("${n}")), "${n} unused in {}", buf.sql);
        }
        assert!(!buf.sql.contains("$9"));
        assert!(matches!(buf.args[7], Value::I64(11)), "limit + 1");
    }

    #[test]
    fn both_dialects_trim_like_their_state_twin() {
        for d in [&crate::postgres::dialect::DIALECT, &crate::sqlite::dialect::DIALECT] {
            assert!(d.state_sql.contains(d.trimmed_output), "{}", d.trimmed_output);
        }
    }

    #[test]
    fn series_are_filled_with_empty_buckets() {
        let t = |s: i64| DateTime::from_timestamp(s, 0).unwrap();
        let rows =
            vec![(3, "acted".to_string(), 2), (3, "silent".to_string(), 1), (5, "acted".to_string(), 4)];
        // [250, 600) in 100 s buckets: 2, 3, 4, 5.
        let series = fold_series(&rows, t(250), t(600), 100);
        let starts: Vec<i64> = series.iter().map(|b| b.start.unwrap().timestamp()).collect();
        assert_eq!(starts, vec![200, 300, 400, 500]);
        let acted = |b: &Bucket| b.counts.iter().find(|(s, _)| *s == RunState::Acted).unwrap().1;
        assert_eq!(series.iter().map(acted).collect::<Vec<_>>(), vec![0, 2, 0, 4]);
        assert!(series.iter().all(|b| b.counts.len() == RunState::ALL.len()));
    }
}
