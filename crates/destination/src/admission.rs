//! Admission: from a parsed [`Destination`] to an [`AdmittedDestination`] that pins one socket
//! address.
//!
//! **Architecture Invariant:** an [`AdmittedDestination`] can only be built here, after every
//! address the resolver returned passed [`crate::special::judge`] (public IPv4, or IPv6 inside
//! `2000::/3`, and in no special-purpose block), or is an exact local road the policy names. The connector dials only its pinned address, so a later answer of the same name
//! (DNS rebinding) can never redirect an admitted connection.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::header::HOST;
use http::{HeaderValue, Method, Request};
use rustls_pki_types::ServerName;

use crate::DestinationError;
use crate::resolver::Resolver;
use crate::special::{Refusal, judge};
use crate::url::{DEFAULT_HTTPS_PORT, Destination, Host};

/// Longest time an admitted answer is reused, whatever TTL DNS gave it. Short, so revocation of
/// a name (or a changed answer) is seen within minutes.
pub const MAX_CACHE_TTL: Duration = Duration::from_secs(300);
/// Most redirects one request chain may follow when redirects are admitted.
pub const MAX_REDIRECT_HOPS: u8 = 5;
/// Most cached names; beyond it the cache is cleared (an egress role talks to a handful).
const MAX_CACHE_ENTRIES: usize = 1024;

/// An exact local service road named by the manifest: the only way a special-purpose address
/// (loopback, private…) is admitted, and only for this name at this exact socket address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocalRoad {
    /// The host name the road is admitted for (also the TLS name).
    pub host: Host,
    /// The exact socket address.
    pub addr: SocketAddr,
}

/// Whether redirects may be followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RedirectPolicy {
    /// Redirects are refused (the default).
    #[default]
    Refuse,
    /// Redirects are followed as brand-new destinations, each re-admitted, up to `max_hops`.
    Readmit {
        /// Most redirects in one chain (at most [`MAX_REDIRECT_HOPS`]).
        max_hops: u8,
    },
}

/// What the caller's configuration admits.
#[derive(Clone, Debug)]
pub struct AdmissionPolicy {
    /// Ports admitted for public destinations (443 by default).
    pub ports: BTreeSet<u16>,
    /// Exact local roads.
    pub local_roads: Vec<LocalRoad>,
    /// Redirect handling.
    pub redirects: RedirectPolicy,
    /// Upper bound on reuse of an admitted answer.
    pub max_cache_ttl: Duration,
}

impl Default for AdmissionPolicy {
    fn default() -> Self {
        AdmissionPolicy {
            ports: BTreeSet::from([DEFAULT_HTTPS_PORT]),
            local_roads: Vec::new(),
            redirects: RedirectPolicy::Refuse,
            max_cache_ttl: MAX_CACHE_TTL,
        }
    }
}

impl AdmissionPolicy {
    /// Add an exact local road.
    pub fn with_local_road(mut self, host: Host, addr: SocketAddr) -> Self {
        self.local_roads.push(LocalRoad { host, addr });
        self
    }

    fn is_road(&self, host: &Host, addr: SocketAddr) -> bool {
        self.local_roads
            .iter()
            .any(|road| &road.host == host && road.addr == addr)
    }

    fn port_admitted(&self, host: &Host, port: u16) -> bool {
        self.ports.contains(&port)
            || self
                .local_roads
                .iter()
                .any(|road| &road.host == host && road.addr.port() == port)
    }
}

/// A destination that passed admission, pinned to one socket address.
///
/// It has no public constructor: only [`Admission::admit`] builds one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmittedDestination {
    destination: Destination,
    pinned: SocketAddr,
    server_name: ServerName<'static>,
    local_road: bool,
}

impl AdmittedDestination {
    /// The admitted destination.
    pub fn destination(&self) -> &Destination {
        &self.destination
    }

    /// The one socket address the connector will dial.
    pub fn pinned_addr(&self) -> SocketAddr {
        self.pinned
    }

    /// The TLS name (SNI and certificate name).
    pub fn server_name(&self) -> &ServerName<'static> {
        &self.server_name
    }

    /// Whether the address was admitted as an exact local road.
    pub fn is_local_road(&self) -> bool {
        self.local_road
    }

    /// The Host header value, which equals the admitted authority.
    pub fn host_header(&self) -> HeaderValue {
        // The authority is ASCII `[a-z0-9.-:[]]` by construction, always a valid header value.
        HeaderValue::from_str(&self.destination.authority())
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"))
    }

    /// A request builder for the admitted path, with the origin-form URI and the Host header
    /// already set, so a caller cannot send one name in SNI and another in Host.
    pub fn request(&self, method: Method) -> http::request::Builder {
        Request::builder()
            .method(method)
            .uri(self.destination.path_and_query())
            .header(HOST, self.host_header())
    }

    /// Check a request built elsewhere: exactly one Host header equal to the admitted
    /// authority, an absolute URI (if any) with the same authority, and a path inside the
    /// admitted path.
    pub fn check_request<B>(&self, request: &Request<B>) -> Result<(), DestinationError> {
        let admitted = self.destination.authority();
        let hosts: Vec<&HeaderValue> = request.headers().get_all(HOST).iter().collect();
        let found = match hosts.as_slice() {
            [one] => one.to_str().unwrap_or("<non-ascii>").to_owned(),
            [] => String::new(),
            _ => "<several Host headers>".to_owned(),
        };
        if found != admitted {
            return Err(DestinationError::HostMismatch { admitted, found });
        }
        if let Some(authority) = request.uri().authority()
            && authority.as_str() != admitted
        {
            return Err(DestinationError::HostMismatch {
                admitted,
                found: authority.to_string(),
            });
        }
        if let Some(scheme) = request.uri().scheme_str()
            && scheme != "https"
        {
            return Err(DestinationError::NotHttps {
                scheme: scheme.to_owned(),
            });
        }
        let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
        if !path_within(self.destination.path_and_query(), path) {
            return Err(DestinationError::PathNotAdmitted {
                admitted: self.destination.path_and_query().to_owned(),
                found: path.to_owned(),
            });
        }
        Ok(())
    }

    /// Turn a redirect `Location` into a brand-new [`Destination`] that must pass
    /// [`Admission::admit`] again. Refused unless `policy` admits redirects and hops remain.
    pub fn redirect(
        &self,
        location: &str,
        policy: &AdmissionPolicy,
    ) -> Result<Destination, DestinationError> {
        let refused = || DestinationError::RedirectNotAdmitted {
            location: location.to_owned(),
        };
        match policy.redirects {
            RedirectPolicy::Refuse => Err(refused()),
            RedirectPolicy::Readmit { max_hops } => {
                if self.destination.redirect_hops() >= max_hops.min(MAX_REDIRECT_HOPS) {
                    return Err(refused());
                }
                self.destination.redirect(location)
            }
        }
    }
}

/// Whether request `path` lies within the admitted `base` path: equal, or below it by whole
/// segments. An admitted query pins the exact request.
fn path_within(base: &str, path: &str) -> bool {
    if base.contains('?') {
        return base == path;
    }
    let path_only = path.split('?').next().unwrap_or(path);
    if path_only == base || base == "/" {
        return true;
    }
    if base.ends_with('/') {
        path_only.starts_with(base)
    } else {
        path_only
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

#[derive(Debug, Clone)]
struct Cached {
    addr: SocketAddr,
    local_road: bool,
    expires: Instant,
}

/// The admission gate: a policy, a controlled resolver and a cache of admitted answers.
#[derive(Debug)]
pub struct Admission<R> {
    policy: AdmissionPolicy,
    resolver: R,
    cache: Mutex<HashMap<(String, u16), Cached>>,
}

impl<R: Resolver> Admission<R> {
    /// A gate with `policy`, resolving through `resolver`.
    pub fn new(policy: AdmissionPolicy, resolver: R) -> Self {
        Admission {
            policy,
            resolver,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &AdmissionPolicy {
        &self.policy
    }

    /// The resolver.
    pub fn resolver(&self) -> &R {
        &self.resolver
    }

    /// Forget every cached answer (the next admission resolves again).
    pub fn clear_cache(&self) {
        self.lock_cache().clear();
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u16), Cached>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admit `destination`: port, then every resolved address, then pin the first.
    pub async fn admit(
        &self,
        destination: Destination,
    ) -> Result<AdmittedDestination, DestinationError> {
        let port = destination.port();
        if !self.policy.port_admitted(destination.host(), port) {
            return Err(DestinationError::PortNotAdmitted { port });
        }
        let name = match destination.host() {
            Host::Ip(ip) => {
                let (addr, local_road) = self.check_addresses(destination.host(), &[*ip], port)?;
                return Ok(build(destination, addr, local_road));
            }
            Host::Name(name) => name.clone(),
        };
        if let Some(admitted) = self.admit_cached(&destination, &name) {
            return Ok(admitted);
        }
        let answers = self.resolver.lookup(&name).await?;
        if answers.addrs.is_empty() {
            return Err(DestinationError::NoAddresses { host: name });
        }
        let (addr, local_road) = self.check_addresses(destination.host(), &answers.addrs, port)?;
        let ttl = answers.ttl.min(self.policy.max_cache_ttl);
        if !ttl.is_zero() {
            let mut cache = self.lock_cache();
            if cache.len() >= MAX_CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(
                (name, port),
                Cached {
                    addr,
                    local_road,
                    expires: Instant::now() + ttl,
                },
            );
        }
        Ok(build(destination, addr, local_road))
    }

    /// Admission from the cache alone (`None` when the name is not cached or expired).
    fn admit_cached(&self, destination: &Destination, name: &str) -> Option<AdmittedDestination> {
        let key = (name.to_owned(), destination.port());
        let mut cache = self.lock_cache();
        let cached = cache.get(&key)?.clone();
        if cached.expires <= Instant::now() {
            cache.remove(&key);
            return None;
        }
        drop(cache);
        Some(build(destination.clone(), cached.addr, cached.local_road))
    }

    /// Check every answer; any refused address refuses the destination. Returns the address
    /// to pin (the first answer) and whether it is a local road.
    fn check_addresses(
        &self,
        host: &Host,
        addrs: &[IpAddr],
        port: u16,
    ) -> Result<(SocketAddr, bool), DestinationError> {
        let mut refused: Option<(IpAddr, Refusal)> = None;
        let mut admitted = 0usize;
        for ip in addrs {
            let addr = SocketAddr::new(*ip, port);
            if self.policy.is_road(host, addr) {
                admitted += 1;
                continue;
            }
            match judge(*ip) {
                Some(refusal) => {
                    if refused.is_none() {
                        refused = Some((*ip, refusal));
                    }
                }
                None => {
                    if !self.policy.ports.contains(&port) {
                        // The port was admitted only for a road, and this answer is no road.
                        return Err(DestinationError::PortNotAdmitted { port });
                    }
                    admitted += 1;
                }
            }
        }
        if let Some((addr, refusal)) = refused {
            let reason = refusal.to_string();
            return Err(match refusal {
                _ if admitted > 0 => DestinationError::MixedResolution {
                    addr,
                    special: reason,
                },
                // The host's road is at this very address on another port: say so, rather than
                // call the operator's own loopback road special-purpose.
                Refusal::Special(_) => match self
                    .policy
                    .local_roads
                    .iter()
                    .find(|r| &r.host == host && r.addr.ip() == addr && r.addr.port() != port)
                {
                    Some(road) => DestinationError::RoadPortMismatch {
                        host: host.to_string(),
                        port,
                        road: road.addr,
                        road_port: road.addr.port(),
                    },
                    None => DestinationError::SpecialPurposeAddress {
                        addr,
                        special: reason,
                    },
                },
                Refusal::NotGlobalUnicast => DestinationError::NotGlobalUnicast { addr, reason },
            });
        }
        let first = SocketAddr::new(addrs[0], port);
        Ok((first, self.policy.is_road(host, first)))
    }
}

fn build(destination: Destination, pinned: SocketAddr, local_road: bool) -> AdmittedDestination {
    let server_name = match destination.host() {
        Host::Ip(ip) => ServerName::IpAddress((*ip).into()),
        Host::Name(name) => match ServerName::try_from(name.clone()) {
            Ok(name) => name,
            // Parsing admitted only valid DNS names, which rustls accepts; fall back to the IP
            // so a disagreement fails certificate verification instead of panicking.
            Err(_) => ServerName::IpAddress(pinned.ip().into()),
        },
    };
    AdmittedDestination {
        destination,
        pinned,
        server_name,
        local_road,
    }
}
