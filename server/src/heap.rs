//! The process's heap, as the allocator counts it, for `/metrics` and the crowd benchmark.
//!
//! The server allocates through jemalloc (the `#[global_allocator]` in `lib.rs`) rather than
//! glibc's malloc: under a crowd of page reads, glibc's per-thread arenas kept the memory of
//! finished server-side renders (a few hundred kilobytes each, freed on another thread than the
//! one that allocated them) and the resident size grew for as long as the crowd lasted (63 → 141
//! MB in 7 minutes of HTML requests, while the same crowd on the JSON API stayed flat at 50 MB).
//! jemalloc returns freed pages to the system after a few seconds, so resident memory follows
//! what is live. These two figures tell the two apart on a running server: `allocated` is what
//! the program holds, `resident` what the allocator keeps from the system for it.

/// The allocator's counts, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heap {
    /// Bytes the program has allocated and not yet freed.
    pub allocated: u64,
    /// Bytes in physically resident pages the allocator maps (allocated, its metadata, and
    /// free pages it has not returned yet).
    pub resident: u64,
}

/// Reads the counts now (jemalloc's statistics are refreshed by advancing its epoch); `None`
/// if the allocator would not say.
pub fn now() -> Option<Heap> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    let allocated = stats::allocated::read().ok()?;
    let resident = stats::resident::read().ok()?;
    Some(Heap { allocated: allocated as u64, resident: resident as u64 })
}
