//! reach-corpus-builder: acquires admitted sources and atomically activates snapshots that core
//! reads. The default source is the project's own documentation, embedded in this binary and
//! packed as an immutable release archive with its digest, so the body needs no network for it.
//! Operator sources (`reach corpus add`) live in this role's own `sources.toml`; this role alone
//! fetches them (it owns the corpus egress), over HTTPS through destination admission.

pub mod admin;
pub mod embedded;
pub mod fetch;
pub mod progress;
pub mod settings;
pub mod sources;
