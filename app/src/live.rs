//! TEMPORARY (replaced by the live-events branch): the live feed's shape.
use leptos::prelude::*;
#[derive(Clone, Copy)]
pub struct LiveFeed {
    pub last_change: ReadSignal<u64>,
}
