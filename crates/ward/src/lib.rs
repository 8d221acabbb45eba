//! Ward (the Security Desk): the authority every egress passes through.
//!
//! - [`scope`]: a public event becomes a guest scope keyed by (platform, application, guild,
//!   channel-or-thread, subject pseudonym); the raw subject id stops at the door.
//! - [`desk`]: rate limits per application, guild, channel and subject; a secret-free task
//!   [`Sigil`] per run with its budgets (concurrency, tokens, time, retries,
//!   spend); single-use EgressDecisions issued immediately before bytes and redeemed exactly once
//!   by the one principal their purpose names; revocation. A duty
//!   [`DutySigil`] authorizes one duty (a reconciliation read) on one subject
//!   (a delivery intent) after the task's Sigil may have expired.
//! - [`grant`]: step grants, ward's single-use permission for one stamped plan step of one
//!   experiment on one instance under one pack generation; every check in one function.
//! - [`hil`]: the operator's answer to one stamped step (HIL requests), and the current-use
//!   fence's standing that every grant is minted and redeemed under.
//! - [`room_key`]: the node's ed25519 key, created in ward's data directory on first start,
//!   with which ward signs Room records for core (which holds no key).
//! - [`refusal`]: every refusal as one enum with the seed's stable codes.
//! - [`grpc`]: the Ward port adapter (the only place protobuf types appear).
//!
//! **Architecture Invariant:** ward has no network and no HTTP client. It never sees a payload,
//! only its digest, and never stores a raw subject id or a personal history.
//!
//! **Architecture Invariant:** a Sigil id is never a decision id, nor a step grant id. They are
//! different types with different prefixes, so a Sigil shown to an egress role redeems nothing.
//!
//! **Architecture Invariant:** the desk never reads the wall clock; a [`clock::Clock`] is
//! injected, so tests expire things without sleeping.
#![forbid(unsafe_code)]

pub mod clock;
pub mod desk;
pub mod grant;
pub mod grpc;
pub mod hil;
mod hil_desk;
pub mod ids;
pub mod policy;
pub mod refusal;
pub mod room_key;
pub mod scope;
mod store;

pub use clock::{Clock, ManualClock, SystemClock, UnixMillis};
pub use desk::{
    Admission, DECISION_TTL, DecisionRequest, Desk, DutyRequest, DutySigil, IssuedDecision,
    RedeemedDecision, Revocation, RunRef, Sigil,
};
pub use grant::{
    EffectClass, FenceRequest, Fenced, GrantRefusal, HilMode, MintedGrant, RedeemedGrant, Standing,
    StepClaim, StepGrantRequest,
};
pub use grpc::WardService;
pub use hil::{DEFAULT_HIL_TTL, HilFiling, HilRefusal, HilRequest, HilState, StepAction};
pub use ids::{DecisionId, HilRequestId, SigilId, StepGrantId};
pub use policy::{
    DutyBudgets, PurposeRule, RateLimits, StepGrantPolicy, TaskBudgets, WardPolicy, Window,
    WindowKind,
};
pub use refusal::{Budget, DeskError, Dimension, Refusal};
pub use room_key::{ROOM_KEY_FILE, RoomKey, RoomKeyError};
pub use scope::{GuestEvent, GuestScope, Pseudonym, ScopeId, WardKey};
pub use store::{BUSY_TIMEOUT, MAX_CONNECTIONS};
