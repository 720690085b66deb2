//! One route component per file; the only place that creates Resources and Actions.

pub mod overview;
