//! The one definition of a run's terminal state.
//!
//! Every page, filter, metric and API answer derives a run's state from the same columns with
//! this function; the store carries its SQL twin (so filters run in the database, on indexes)
//! and the conformance suite checks the two agree. Precedence matters and is spelled out in
//! [`run_state`]: a run that lost its lease is reported as `lost_lease` even if it also carried
//! an error, because the operator's remedy (compensate) depends on that fact first.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The strings a healthy run ends with when it did nothing visible. Configurable because fleets
/// already have their own words; compared after trimming surrounding white space.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tokens {
    pub no_action: String,
    pub skip: String,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens { no_action: "no action needed".to_string(), skip: "skip".to_string() }
    }
}

string_enum!(
    /// What a run reached, in order of precedence.
    #[derive(PartialOrd, Ord)]
    RunState, "state" {
        /// Unfinished, lease still live.
        Running => "running",
        /// Unfinished and the lease lapsed: the run never said how it ended (hang, kill, crash).
        Silent => "silent",
        /// The owner-guarded final write matched zero rows; the output is what was discarded.
        LostLease => "lost_lease",
        /// The run reported an error cause.
        Failed => "failed",
        /// Finished "successfully" with nothing to say: a contract violation, hence a failure.
        EmptyOutput => "empty_output",
        /// A processed notification that owed nothing.
        NoAction => "no_action",
        /// A tick with nothing to do.
        Skip => "skip",
        /// The run did something; the output says what.
        Acted => "acted",
    }
);

impl RunState {
    /// True for the states an on-call engineer has to look at.
    pub fn is_failure(self) -> bool {
        matches!(self, RunState::Silent | RunState::LostLease | RunState::Failed | RunState::EmptyOutput)
    }

    /// The failure states in order: what the Failures page lists when no state or cause is chosen.
    pub fn failures() -> Vec<RunState> {
        RunState::ALL.into_iter().filter(|s| s.is_failure()).collect()
    }
}

string_enum!(
    /// The failure cause a runner writes into `runs.error`.
    ErrorCause, "error" {
        Timeout => "timeout", ApiError => "api_error", ContextOverflow => "context_overflow", Crash => "crash",
        Other => "other",
    }
);

string_enum!(
    /// Why a run counts as a failure: the error causes plus the three the contract itself detects.
    #[derive(PartialOrd, Ord)]
    Cause, "cause" {
        Timeout => "timeout", ApiError => "api_error", ContextOverflow => "context_overflow", Crash => "crash",
        Other => "other", EmptyOutput => "empty_output", Silent => "silent", LostLease => "lost_lease",
    }
);

impl Cause {
    /// The cause as written in `runs.error`, for the five a runner reports itself.
    pub fn as_error(self) -> Option<ErrorCause> {
        match self {
            Cause::Timeout => Some(ErrorCause::Timeout),
            Cause::ApiError => Some(ErrorCause::ApiError),
            Cause::ContextOverflow => Some(ErrorCause::ContextOverflow),
            Cause::Crash => Some(ErrorCause::Crash),
            Cause::Other => Some(ErrorCause::Other),
            Cause::EmptyOutput | Cause::Silent | Cause::LostLease => None,
        }
    }
}

impl From<ErrorCause> for Cause {
    fn from(e: ErrorCause) -> Self {
        match e {
            ErrorCause::Timeout => Cause::Timeout,
            ErrorCause::ApiError => Cause::ApiError,
            ErrorCause::ContextOverflow => Cause::ContextOverflow,
            ErrorCause::Crash => Cause::Crash,
            ErrorCause::Other => Cause::Other,
        }
    }
}

/// A value outside a closed vocabulary; the message names the field and the allowed values so
/// an API caller can fix the request without reading the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownValue {
    pub field: &'static str,
    pub message: String,
}

impl UnknownValue {
    pub fn new(field: &'static str, value: &str, allowed: &[&str]) -> Self {
        UnknownValue {
            field,
            message: format!("{field}: unknown value {value:?}; expected one of {}", allowed.join(", ")),
        }
    }
}

impl fmt::Display for UnknownValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UnknownValue {}

/// The white space trimmed around a terminal token: ASCII only, because the SQL twin's
/// `btrim`/`trim` must strip exactly the same characters.
pub const TOKEN_TRIM_CHARS: [char; 6] = [' ', '\t', '\n', '\r', '\x0B', '\x0C'];

/// A token or output with surrounding white space removed, as both twins compare it.
pub fn trim_token(s: &str) -> &str {
    s.trim_matches(TOKEN_TRIM_CHARS.as_slice())
}

/// The columns of `runs` the state is decided from.
#[derive(Clone, Copy, Debug)]
pub struct RunFacts<'a> {
    pub finished_at: Option<DateTime<Utc>>,
    pub lease_expires_at: DateTime<Utc>,
    pub completion_rows: Option<i32>,
    pub error: Option<&'a str>,
    pub output: Option<&'a str>,
}

/// Decides a run's state and, for failures, its cause. `now` is passed in so the answer is
/// deterministic in tests and identical to the SQL twin evaluated with the same `now`.
///
/// 1. unfinished: `running` while the lease is live, else `silent`;
/// 2. `completion_rows = 0`: `lost_lease` (null means "not recorded", never a lost lease);
/// 3. an error: `failed` with that cause (unknown strings count as `other`);
/// 4. output null or blank: `empty_output`;
/// 5. the no-action token: `no_action`; the skip token: `skip` (after trimming);
/// 6. otherwise `acted`.
pub fn run_state(facts: &RunFacts<'_>, now: DateTime<Utc>, tokens: &Tokens) -> (RunState, Option<Cause>) {
    if facts.finished_at.is_none() {
        return if facts.lease_expires_at > now {
            (RunState::Running, None)
        } else {
            (RunState::Silent, Some(Cause::Silent))
        };
    }
    if facts.completion_rows == Some(0) {
        return (RunState::LostLease, Some(Cause::LostLease));
    }
    if let Some(error) = facts.error {
        let cause = error.parse::<ErrorCause>().unwrap_or(ErrorCause::Other);
        return (RunState::Failed, Some(cause.into()));
    }
    let output = facts.output.map(trim_token).unwrap_or("");
    if output.is_empty() {
        return (RunState::EmptyOutput, Some(Cause::EmptyOutput));
    }
    if output == trim_token(&tokens.no_action) {
        (RunState::NoAction, None)
    } else if output == trim_token(&tokens.skip) {
        (RunState::Skip, None)
    } else {
        (RunState::Acted, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    fn facts<'a>(
        finished: Option<i64>,
        expires: i64,
        rows: Option<i32>,
        error: Option<&'a str>,
        output: Option<&'a str>,
    ) -> RunFacts<'a> {
        RunFacts {
            finished_at: finished.map(t),
            lease_expires_at: t(expires),
            completion_rows: rows,
            error,
            output,
        }
    }

    #[test]
    fn table_of_cases() {
        use RunState::*;
        let now = t(100);
        let tokens = Tokens::default();
        #[rustfmt::skip]
        let cases: Vec<(&str, RunFacts, RunState, Option<Cause>)> = vec![
            ("unfinished, lease live", facts(None, 101, None, None, None), Running, None),
            ("unfinished, lease expires exactly now", facts(None, 100, None, None, None), Silent, Some(Cause::Silent)),
            ("unfinished, lease lapsed", facts(None, 50, None, None, Some("half")), Silent, Some(Cause::Silent)),
            ("unfinished beats zero rows", facts(None, 50, Some(0), Some("timeout"), None), Silent, Some(Cause::Silent)),
            ("zero rows beats error", facts(Some(90), 50, Some(0), Some("timeout"), None), LostLease, Some(Cause::LostLease)),
            ("zero rows with an action", facts(Some(90), 50, Some(0), None, Some("sent mail")), LostLease, Some(Cause::LostLease)),
            ("null rows is not a lost lease", facts(Some(90), 50, None, None, Some("sent mail")), Acted, None),
            ("error timeout", facts(Some(90), 200, Some(1), Some("timeout"), None), Failed, Some(Cause::Timeout)),
            ("error api", facts(Some(90), 200, Some(1), Some("api_error"), Some("")), Failed, Some(Cause::ApiError)),
            ("error overflow", facts(Some(90), 200, Some(1), Some("context_overflow"), None), Failed, Some(Cause::ContextOverflow)),
            ("error crash", facts(Some(90), 200, Some(1), Some("crash"), None), Failed, Some(Cause::Crash)),
            ("unknown error is other", facts(Some(90), 200, Some(1), Some("disk full"), None), Failed, Some(Cause::Other)),
            ("null output", facts(Some(90), 200, Some(1), None, None), EmptyOutput, Some(Cause::EmptyOutput)),
            ("blank output", facts(Some(90), 200, Some(1), None, Some(" \n\t")), EmptyOutput, Some(Cause::EmptyOutput)),
            ("no action token", facts(Some(90), 200, Some(1), None, Some("no action needed")), NoAction, None),
            ("no action token padded", facts(Some(90), 200, Some(1), None, Some("  no action needed\n")), NoAction, None),
            ("skip token", facts(Some(90), 200, None, None, Some("skip")), Skip, None),
            ("token is case sensitive", facts(Some(90), 200, Some(1), None, Some("Skip")), Acted, None),
            ("action", facts(Some(90), 200, Some(1), None, Some("replied to #42")), Acted, None),
        ];
        for (name, f, state, cause) in cases {
            assert_eq!(run_state(&f, now, &tokens), (state, cause), "{name}");
        }
    }

    #[test]
    fn custom_tokens_are_honoured() {
        let tokens = Tokens { no_action: "NOOP".into(), skip: "idle".into() };
        let f = facts(Some(1), 2, Some(1), None, Some("NOOP"));
        assert_eq!(run_state(&f, t(0), &tokens).0, RunState::NoAction);
        let f = facts(Some(1), 2, Some(1), None, Some("skip"));
        assert_eq!(run_state(&f, t(0), &tokens).0, RunState::Acted);
    }

    #[test]
    fn vocabularies_round_trip_and_reject_unknowns() {
        for s in RunState::ALL {
            assert_eq!(s.as_str().parse::<RunState>().unwrap(), s);
        }
        for c in Cause::ALL {
            assert_eq!(c.as_str().parse::<Cause>().unwrap(), c);
        }
        let err = "melted".parse::<Cause>().unwrap_err();
        assert_eq!(err.field, "cause");
        assert!(err.message.contains("lost_lease"), "{}", err.message);
    }
}
