//! Presentational components: props in, callbacks out.

pub mod actions;
pub mod audit_line;
pub mod badges;
pub mod bulk;
pub mod confirm;
pub mod layout;
pub mod meter;
pub mod reason;
pub mod segmented;
pub mod shortcuts;
pub mod since;
pub mod table;
pub mod text;
pub mod time;
pub mod trace;
