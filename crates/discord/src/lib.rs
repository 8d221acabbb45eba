//! The Discord adapters of Reach.
//!
//! - `gateway`: the Gateway v10 client of ingress-edge (HELLO, IDENTIFY, heartbeat on its own
//!   task, RESUME, INVALID_SESSION, RECONNECT), emitting typed [`model::GatewayEvent`]s, with
//!   its IDENTIFY budget (`identify`) by Discord's `session_start_limit`, which `session_limit`
//!   reads from `GET /gateway/bot`.
//! - [`edge`]: the pure admission filter turning an event into an [`edge::EdgeEvent`] for
//!   core's admission port, or a typed [`edge::EdgeRefusal`].
//! - `rest`: the REST v10 Create Message adapter of egress-discord, with the intent's nonce
//!   and `enforce_nonce`, outcome classification, and the channel read that reconciles an
//!   UNKNOWN delivery.
//! - [`render`]: answer splitting, citations and refusal texts.
//! - [`delivery`]: the nonce, the exact Create Message body and the typed outcomes, shared by
//!   core and egress-discord.
//!
//! - `seal`: sealing of the interaction token to egress-discord's key (feature `seal`).
//!
//! `gateway`, `identify`, `session_limit` and `rest` exist only with the `net` feature
//! (ingress-edge, egress-discord); without it the crate has no network code, so core links no
//! HTTP or WebSocket client.
//!
//! **Architecture Invariant:** nothing here touches the ledger, a database or another role.
//! Deduplication of events and the decision to (re)send belong to core's ledger; this crate
//! reports what happened on the wire, exactly once per delivery.
//!
//! **Architecture Invariant:** every connection goes through `reach-destination` (admission,
//! pinned address, configured roots), except a `ws://` gateway on a loopback IP literal, which
//! exists for the emulator.

#![forbid(unsafe_code)]

pub mod delivery;
pub mod edge;
#[cfg(feature = "net")]
pub mod gateway;
#[cfg(feature = "net")]
pub mod identify;
pub mod model;
#[cfg(feature = "net")]
pub mod ratelimit;
pub mod render;
#[cfg(feature = "net")]
pub mod rest;
#[cfg(feature = "seal")]
pub mod seal;
#[cfg(feature = "net")]
pub mod session_limit;

pub use model::{
    Author, BotToken, GatewayEvent, InteractionCreate, InvalidToken, MessageCreate, Snowflake,
};
