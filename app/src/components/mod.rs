//! Presentational components: props in, callbacks out.

pub mod layout;
