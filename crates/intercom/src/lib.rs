//! Intercom: Reach's outbound A2A 1.0 client (issue #6 item 6; seed 001, "Outbound A2A without
//! an inbound edge").
//!
//! Reach only calls out: `SendMessage` with `A2A-Version: 1.0` and
//! `configuration.returnImmediately = true`, then `GetTask` polling under a budget and a local
//! deadline. No push notification config is ever sent and nothing here listens.
//!
//! - [`wire`]: the A2A 1.0 JSON-RPC shapes, with the spec passages they follow.
//! - [`state`]: the checked [`Phase`] machine and the task-state mapping (COMPLETED → success,
//!   REJECTED → refusal, FAILED → failure, CANCELED → cancellation, INPUT_REQUIRED and
//!   AUTH_REQUIRED refuse one-shot work).
//! - [`task`]: one [`OutboundTask`] (its fixed envelope, phase and evidence trail) and the pure
//!   classification of peer answers.
//! - [`decision`]: one decision per physical attempt, through the caller's
//!   [`DecisionAuthority`].
//! - [`journal`]: where each step is made durable before the driver acts on it.
//! - [`quarantine`]: the peer's answer judged (schema, size, privacy, output class) before
//!   anything adopts it.
//! - [`receipt`]: the peer's [`EnrollmentReceipt`], the only thing that admits a resend of an
//!   ambiguous send.
//! - [`transport`]: how one attempt's bytes travel; [`Intercom`] (the driver) runs over any
//!   [`Transport`], so core can drive a task over its ports while egress-provider carries it.
//! - `client` (feature `net`): the HTTPS transport over `reach-destination` and `reach-bounded`,
//!   and [`carry`], the egress side of one attempt.
//! - `ledger` (feature `ledger`): persisting the task through the Phylactery's Intercom
//!   task/outbox table.
//!
//! **Architecture Invariant:** an ambiguous initial send is never resent unless the receipt
//! admits it; every physical attempt (send, resend, poll) carries its own redeemed decision.

#![forbid(unsafe_code)]

pub mod decision;
pub mod journal;
pub mod quarantine;
pub mod receipt;
pub mod refusal;
pub mod state;
pub mod task;
pub mod transport;
pub mod wire;

#[cfg(feature = "net")]
mod client;
mod driver;
#[cfg(feature = "ledger")]
pub mod ledger;

#[cfg(feature = "net")]
pub use client::{PURPOSE, PeerClient, PeerConfig, PeerCredential, Prepared, a2a_bounds, carry};
pub use decision::{
    Attempt, AttemptKind, DecisionAuthority, DecisionId, DecisionRefusal, Redeemed,
};
pub use driver::{Intercom, answer_text};
pub use journal::{Journal, JournalError, NoJournal};
pub use quarantine::{quarantine_answer, quarantine_status_message};
pub use receipt::{EnrollmentReceipt, RECEIPT_BINDING, ResendGuarantee};
pub use refusal::IntercomRefusal;
pub use state::{Phase, StateMeaning, meaning};
pub use task::{
    Answer, CancelOutcome, Evidence, OutboundTask, PollBudget, PollVerdict, SendVerdict, TaskSpec,
};
pub use transport::{Transmitted, Transport};
pub use wire::{Part, TaskState};
