//! The Discord adapters of Reach.
//!
//! - [`gateway`]: the Gateway v10 client of ingress-edge (HELLO, IDENTIFY, heartbeat on its own
//!   task, RESUME, INVALID_SESSION, RECONNECT), emitting typed [`gateway::GatewayEvent`]s.
//! - [`edge`]: the pure admission filter turning an event into an [`edge::EdgeEvent`] for
//!   core's admission port, or a typed [`edge::EdgeRefusal`].
//! - [`rest`]: the REST v10 Create Message adapter of egress-discord, with the intent's nonce
//!   and `enforce_nonce`, outcome classification, and the channel read that reconciles an
//!   UNKNOWN delivery.
//! - [`render`]: answer splitting, citations and refusal texts.
//!
//! **Architecture Invariant:** nothing here touches the ledger, a database or another role.
//! Deduplication of events and the decision to (re)send belong to core's ledger; this crate
//! reports what happened on the wire, exactly once per delivery.
//!
//! **Architecture Invariant:** every connection goes through `reach-destination` (admission,
//! pinned address, configured roots), except a `ws://` gateway on a loopback IP literal, which
//! exists for the emulator.

#![forbid(unsafe_code)]

pub mod edge;
pub mod gateway;
pub mod model;
pub mod render;
pub mod rest;

pub use model::{Author, BotToken, InteractionCreate, InvalidToken, MessageCreate, Snowflake};
