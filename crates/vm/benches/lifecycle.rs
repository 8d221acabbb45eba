//! Lifecycle benchmark (filled in with the instance module).
fn main() {}
