//! The model Portal (issue #6, item 5): a model is a separate E2E case under the same
//! egress/attempt/quarantine/delivery law as everything else that leaves the body.
//!
//! - [`cut`](mod@cut): the Privacy Cut core makes after grounding — the question and the bounded
//!   evidence bundle only, with a digest-bearing receipt of what was cut.
//! - [`custody`]: the provider's declared storage, training, region, subcontractor and deletion
//!   policy, admitted before any egress and bound into every model decision.
//! - [`openai`]: the OpenAI-compatible chat completions wire, reduced to one
//!   [`ProviderReturn`].
//! - [`quarantine`](mod@quarantine): the judgement of a return before core adopts it, with the seed's codes.
//! - `client` and `key` (feature `net`, egress-provider only): the adapter over destination
//!   admission and bounded reading, holding only its API key.
//!
//! **Architecture Invariant:** without the `net` feature this crate links no HTTP client, so
//! core (which cuts and quarantines) stays offline.

#![forbid(unsafe_code)]

#[cfg(feature = "net")]
mod client;
pub mod custody;
pub mod cut;
mod failure;
#[cfg(feature = "net")]
mod key;
pub mod openai;
pub mod quarantine;

#[cfg(feature = "net")]
pub use client::{CallFailure, PURPOSE, PortalClient, PortalConfig, portal_bounds};
pub use custody::{AdmittedCustody, CustodyRefusal, ProviderCustody, admit_custody};
pub use cut::{CutInput, CutPayload, CutReceipt, CutRefusal, EvidenceIn, PrivacyCut, cut};
pub use failure::worth_another_attempt;
#[cfg(feature = "net")]
pub use key::{ApiKey, KeyError};
pub use openai::{Constrain, Messages, ProviderReturn, Usage};
pub use quarantine::{Adopted, AdoptedCitation, Expectation, Quarantine, quarantine};
#[cfg(feature = "net")]
pub use reach_bounded::Bounds;
