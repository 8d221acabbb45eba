//! Workload identity for Reach.
//!
//! A role's identity is its SPIFFE ID, carried as the one URI SAN of a short-lived leaf
//! certificate chained to the deployment's trust root. This crate mints those leaves
//! ([`mint`]), inspects a presented leaf against the SPIFFE X509-SVID rules ([`inspect`]) and
//! reads and writes the secret files that hold them ([`files`]).
//!
//! **Architecture Invariant:** this crate knows no TLS and no network. Which principal may call
//! which method is the manifest's business; how a handshake uses these checks is the port
//! crate's.

pub mod files;
pub mod inspect;
pub mod mint;
mod principal;

pub use inspect::{LeafError, LeafInfo, inspect_leaf};
pub use mint::{IssuedLeaf, MintError, TrustRoot};
pub use principal::{Principal, PrincipalError, TrustDomain};
