//! The one error enum of the destination boundary. Each variant's message is its documentation;
//! [`DestinationError::code`] gives the stable refusal code that crosses service boundaries.

use std::net::{IpAddr, SocketAddr};

/// A destination was refused or could not be reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DestinationError {
    /// The scheme is not `https`.
    #[error("destination scheme {scheme:?} is not https")]
    NotHttps { scheme: String },
    /// The input is not an absolute `https://host…` URL at all (a relative reference, a
    /// scheme-relative one, or a scheme without `//` and a host).
    #[error("destination is not an absolute https URL: {reason}")]
    NotAbsolute { reason: &'static str },
    /// The URL carries userinfo (`user:pass@`); credentials never travel in a destination.
    #[error("destination carries userinfo")]
    Userinfo,
    /// The URL is not written in its one canonical form.
    #[error("destination is not canonical: {reason}")]
    NonCanonical { reason: &'static str },
    /// The host is not a valid DNS name or IP literal.
    #[error("destination host is invalid: {reason}")]
    InvalidHost { reason: &'static str },
    /// The URL has a fragment, which never reaches a server.
    #[error("destination carries a fragment")]
    Fragment,
    /// The port is not a number, is 0 or is above 65535.
    #[error("destination port is invalid: {reason}")]
    BadPort { reason: &'static str },
    /// The purpose label is empty, too long or uses characters outside `[a-z0-9.-]`.
    #[error("destination purpose {purpose:?} is invalid")]
    InvalidPurpose { purpose: String },
    /// The port is neither admitted by policy nor part of a named local road.
    #[error("destination port {port} is not admitted")]
    PortNotAdmitted { port: u16 },
    /// The host is a local road, but the URL's port is not the road's: the address it resolves
    /// to is admitted only at the road's own socket address.
    #[error(
        "destination {host} is a local road only at {road}: the URL must name port {road_port}, \
         not {port}"
    )]
    RoadPortMismatch {
        host: String,
        port: u16,
        road: std::net::SocketAddr,
        road_port: u16,
    },
    /// The (only) address lies in a special-purpose block.
    #[error("destination address {addr} is special-purpose: {special}")]
    SpecialPurposeAddress { addr: IpAddr, special: String },
    /// The (only) address is IPv6 outside `2000::/3` global unicast and in no special-purpose
    /// block: unassigned or reserved space, refused by the allow-list.
    #[error("destination address {addr} is not global unicast: {reason}")]
    NotGlobalUnicast { addr: IpAddr, reason: String },
    /// Some answers were admissible and at least one was not; the whole destination is refused.
    #[error("destination resolved to a refused address {addr} among its answers: {special}")]
    MixedResolution { addr: IpAddr, special: String },
    /// The name exists but has no A or AAAA record (an empty NOERROR answer, "NODATA").
    #[error("destination {host} resolved to no address")]
    NoAddresses { host: String },
    /// The name does not exist (NXDOMAIN from the named server, or no entry in a fixed map).
    #[error("destination {host} does not exist")]
    NoSuchName { host: String },
    /// The controlled resolver failed (timeout, refusal, server failure): no answer at all.
    #[error("destination {host} could not be resolved: {reason}")]
    Resolution { host: String, reason: String },
    /// A redirect was returned and policy does not admit redirects (or the hop limit is spent).
    #[error("redirect to {location:?} is not admitted")]
    RedirectNotAdmitted { location: String },
    /// A request's Host or authority differs from the admitted name.
    #[error("request host {found:?} does not match the admitted {admitted:?}")]
    HostMismatch { admitted: String, found: String },
    /// A request's path lies outside the admitted path.
    #[error("request path {found:?} is outside the admitted path {admitted:?}")]
    PathNotAdmitted { admitted: String, found: String },
    /// Dialing the pinned address failed.
    #[error("dial to pinned address {addr} failed: {source}")]
    Dial {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The connected peer is not the pinned address.
    #[error("connected peer {found} is not the pinned address {pinned}")]
    PeerMismatch {
        pinned: SocketAddr,
        found: SocketAddr,
    },
    /// The TLS handshake failed (including a certificate that does not name the admitted host).
    #[error("tls handshake with {name} failed: {source}")]
    Tls {
        name: String,
        #[source]
        source: std::io::Error,
    },
}

impl DestinationError {
    /// The stable refusal code, e.g. `destination/userinfo`.
    pub fn code(&self) -> &'static str {
        match self {
            DestinationError::NotHttps { .. } => "destination/not-https",
            DestinationError::NotAbsolute { .. } => "destination/not-absolute",
            DestinationError::Userinfo => "destination/userinfo",
            DestinationError::NonCanonical { .. } => "destination/non-canonical",
            DestinationError::InvalidHost { .. } => "destination/invalid-host",
            DestinationError::Fragment => "destination/fragment",
            DestinationError::BadPort { .. } => "destination/bad-port",
            DestinationError::InvalidPurpose { .. } => "destination/invalid-purpose",
            DestinationError::PortNotAdmitted { .. } => "destination/port-not-admitted",
            DestinationError::RoadPortMismatch { .. } => "destination/road-port-mismatch",
            DestinationError::SpecialPurposeAddress { .. } => "destination/special-purpose-address",
            DestinationError::NotGlobalUnicast { .. } => "destination/not-global-unicast",
            DestinationError::MixedResolution { .. } => "destination/mixed-resolution",
            DestinationError::NoAddresses { .. } => "destination/no-addresses",
            DestinationError::NoSuchName { .. } => "destination/no-such-name",
            DestinationError::Resolution { .. } => "destination/resolution-failed",
            DestinationError::RedirectNotAdmitted { .. } => "destination/redirect-not-admitted",
            DestinationError::HostMismatch { .. } => "destination/host-mismatch",
            DestinationError::PathNotAdmitted { .. } => "destination/path-not-admitted",
            DestinationError::Dial { .. } => "destination/dial-failed",
            DestinationError::PeerMismatch { .. } => "destination/peer-mismatch",
            DestinationError::Tls { .. } => "destination/tls",
        }
    }
}
