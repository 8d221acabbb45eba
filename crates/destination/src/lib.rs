//! Destination admission, the one library every egress role and the corpus-builder use before
//! any byte leaves the body.
//!
//! The flow is: [`Destination::parse`] (canonical HTTPS origin, port, path, purpose) →
//! [`Admission::admit`] (port policy, controlled resolution, [`special::judge`]: public IPv4,
//! or IPv6 inside `2000::/3`, and outside the IANA special-purpose table; mixed-resolution
//! refusal, exact local roads) → [`AdmittedDestination`] (pins one socket
//! address) → [`PinnedConnector::connect`] (dials only that address; SNI and certificate name are
//! the admitted name) → [`AdmittedDestination::request`] (the Host header is the admitted name).
//!
//! Each refusal has the code that names its fault ([`DestinationError::code`]): a relative
//! reference is `destination/not-absolute`, not `not-https`; port 0 is `destination/bad-port`;
//! a name that does not exist (NXDOMAIN) is `destination/no-such-name`, one without address
//! records `destination/no-addresses`, and only a lookup with no answer at all
//! `destination/resolution-failed`; unassigned IPv6 is `destination/not-global-unicast`.
//!
//! **Architecture Invariant:** this crate never reads the process environment: no
//! `HTTP(S)_PROXY`, no `SSL_CERT_FILE`, no credentials. Everything comes from the caller.
//!
//! **Architecture Invariant:** an unchecked value cannot reach a connection: the connector
//! accepts only [`AdmittedDestination`], which only admission builds.

#![forbid(unsafe_code)]

mod admission;
mod connector;
mod error;
mod resolver;
pub mod roads;
pub mod special;
#[cfg(feature = "test-support")]
pub mod testing;
mod url;

pub use admission::{
    Admission, AdmissionPolicy, AdmittedDestination, LocalRoad, MAX_CACHE_TTL, MAX_REDIRECT_HOPS,
    RedirectPolicy,
};
pub use connector::{
    CONNECT_TIMEOUT, Dialer, PinnedConnector, PinnedStream, RecordingDialer, TcpDialer,
    client_config, webpki_root_store,
};
pub use error::DestinationError;
pub use resolver::{Answers, HickoryConfig, HickoryResolver, Resolver, STATIC_TTL, StaticResolver};
pub use url::{DEFAULT_HTTPS_PORT, Destination, Host, Purpose};
