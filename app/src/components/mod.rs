//! Presentational components: props in, callbacks out.

pub mod badges;
pub mod layout;
pub mod shortcuts;
pub mod time;
