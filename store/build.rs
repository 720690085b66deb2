//! Rebuilds the store when a migration is added or edited: `sqlx::migrate!` embeds
//! `../migrations` at compile time, and without this cargo would not know to look (a new
//! migration would be missing from every binary until some source file of the store changed).
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
