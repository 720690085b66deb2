//! The lastword server as a library, so tests drive exactly the router the binary serves.

pub mod act;
pub mod api;
pub mod assets;
pub mod auth;
pub mod cached;
pub mod cli;
pub mod events;
pub mod health;
pub mod heap;
pub mod live;
pub mod metrics;
pub mod notify;
pub mod packs;
pub mod rollups;
pub mod routes;
pub mod security;
pub mod serve;
pub mod shared_pages;
pub mod state;
pub mod telemetry;
pub mod terminal;

pub use auth::{require_operator, Auth, AuthError, RequireOperator};
pub use routes::{router, router_with};
pub use state::AppState;

// Every binary that links the server (the `lastword` binary and the tests) allocates through
// jemalloc: `heap` says why.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
