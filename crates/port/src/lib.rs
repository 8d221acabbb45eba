//! Typed local ports for Reach.
//!
//! Every port is a tonic gRPC server reached over TLS 1.3 with client certificates required, on
//! a Unix domain socket (or, optionally, loopback TCP). The TLS peer identity is the only
//! identity: the handshake verifies the chain to the trust bundle and the SPIFFE leaf rules
//! ([`verify`]), admits only principals the port table names, and the [`authz`] layer checks
//! (peer principal, method) before any handler runs. Certificates are re-read when Scribe
//! rotates them ([`material`]), without a restart.
//!
//! **Architecture Invariant:** nothing a caller says about itself is identity. Metadata, socket
//! path, peer address and possession of the socket are ignored; only [`VerifiedPeer`], which
//! can only be built from a verified handshake, reaches the authorization layer.

pub mod authz;
pub mod client;
pub mod material;
pub mod probe;
pub mod server;
pub mod verify;

pub use authz::{AuthorizeLayer, PortPolicy};
pub use client::{PortAddress, connect, connect_lazy};
pub use material::{MaterialError, PortMaterial};
pub use server::{PortServer, VerifiedPeer};

/// The ALPN protocol every port speaks.
pub const ALPN_H2: &[u8] = b"h2";
