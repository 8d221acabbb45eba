//! Bounded reading of returns, before core sees them.
//!
//! An egress role sends one request over a [`reach_destination::PinnedStream`] and reads the
//! return with [`fetch`] (whole body) or [`fetch_sse`] (server-sent events). Every limit is a
//! named field of [`Bounds`]; crossing one closes the connection and yields a
//! [`BoundViolation`] naming it, with nothing further parsed. Core maps every [`ReturnError`]
//! to a dependency failure.
//!
//! **Architecture Invariant:** bytes reach a parser only after the bound that covers them was
//! checked: the wire meter sees each byte before hyper, the expander refuses the write that
//! would cross the expanded or ratio bound, and the JSON scan runs before any serde parse.
//!
//! **Architecture Invariant:** this crate opens no connection and resolves no name; it reads
//! only from a stream the destination crate pinned and admitted.

#![forbid(unsafe_code)]

mod bounds;
mod error;
mod reader;
pub mod scan;
mod wire;

pub use bounds::{Bound, BoundViolation, Bounds, RATIO_GRACE_BYTES};
pub use error::ReturnError;
pub use reader::{BoundedResponse, SseDecoder, SseEvent, SseStream, fetch, fetch_sse};
