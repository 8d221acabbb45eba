//! How one physical attempt's bytes travel, so the driver runs wherever the task is journaled.
//!
//! In-process, `PeerClient` (feature `net`) is the transport: it admits the endpoint,
//! connects, and writes. Across Reach's ports, core (which holds the Phylactery and asks ward
//! for decisions, but has no network) implements this trait over `ProviderCall/Call` to the
//! egress-provider instance serving the peer, which redeems the decision at ward and carries
//! the bytes with `carry`. Either way the driver's rules hold: the body a decision binds
//! is the body carried, and an attempt is classified only from what the transport reports.

use std::future::Future;

use reach_digest::Sha256Digest;

use crate::decision::Redeemed;
use crate::refusal::IntercomRefusal;

/// What one carried attempt came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmitted {
    /// A complete, bounded response.
    Answered {
        status: u16,
        body: Vec<u8>,
        digest: Sha256Digest,
    },
    /// The request may have been accepted, but no complete answer arrived (connection loss,
    /// time bound, any other bound).
    Ambiguous { code: String },
    /// Proved that no byte of the request was written (a remote gate refused before sending).
    NotSent { code: String },
}

/// Carries one physical attempt.
pub trait Transport: Send + Sync {
    /// A prepared attempt: everything that can fail before the first byte has succeeded.
    type Ready: Send;

    /// The canonical endpoint URL every decision binds.
    fn url(&self) -> String;

    /// Prepares `body` under `redeemed`; every failure here is before any request byte.
    fn prepare(
        &self,
        redeemed: Redeemed,
        body: Vec<u8>,
    ) -> impl Future<Output = Result<Self::Ready, IntercomRefusal>> + Send;

    /// Writes the request and reads the return. From here on bytes may reach the peer.
    fn transmit(&self, ready: Self::Ready) -> impl Future<Output = Transmitted> + Send;
}
