//! The controlled resolver: the only way a destination name becomes addresses.
//!
//! **Architecture Invariant:** no resolver here reads `/etc/hosts`, `/etc/resolv.conf`, search
//! domains or any other system configuration. Name servers are named by the caller (from the
//! manifest); a pinned local road is a [`StaticResolver`] entry.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
    ResolverOpts,
};
use hickory_resolver::net::NetError;
use hickory_resolver::net::runtime::TokioRuntimeProvider;

use crate::DestinationError;

/// Addresses a name resolved to, with how long they may be reused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answers {
    /// Every address returned, in resolver order.
    pub addrs: Vec<IpAddr>,
    /// How long the answer may be cached.
    pub ttl: Duration,
}

/// A controlled resolver.
pub trait Resolver: Send + Sync {
    /// Resolve `name` (a canonical DNS name without trailing dot) to all its addresses.
    fn lookup(&self, name: &str) -> impl Future<Output = Result<Answers, DestinationError>> + Send;
}

/// A resolver answering from a fixed map, for pinned local roads and tests. A name may have a
/// scripted sequence of answers (the last one repeats), which is how tests model DNS rebinding.
/// A name not in the map does not exist (`destination/no-such-name`, as NXDOMAIN); a name mapped
/// to no address exists without records (`destination/no-addresses`, as NODATA).
#[derive(Debug, Default)]
pub struct StaticResolver {
    entries: Mutex<HashMap<String, Script>>,
    ttl: Duration,
}

#[derive(Debug)]
struct Script {
    answers: Vec<Vec<IpAddr>>,
    next: usize,
    lookups: usize,
}

/// TTL of static answers unless set with [`StaticResolver::with_ttl`].
pub const STATIC_TTL: Duration = Duration::from_secs(60);

impl StaticResolver {
    /// An empty map.
    pub fn new() -> Self {
        StaticResolver {
            entries: Mutex::new(HashMap::new()),
            ttl: STATIC_TTL,
        }
    }

    /// Set the TTL reported with every answer (zero disables admission caching).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Answer `name` with `addrs`, always.
    pub fn with(self, name: &str, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        self.with_sequence(name, vec![addrs.into_iter().collect()])
    }

    /// Answer `name` with each element of `answers` in turn; the last repeats.
    pub fn with_sequence(self, name: &str, answers: Vec<Vec<IpAddr>>) -> Self {
        self.lock().insert(
            name.to_owned(),
            Script {
                answers,
                next: 0,
                lookups: 0,
            },
        );
        self
    }

    /// How many times `name` was looked up.
    pub fn lookups(&self, name: &str) -> usize {
        self.lock().get(name).map_or(0, |s| s.lookups)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Script>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn answer(&self, name: &str) -> Result<Answers, DestinationError> {
        let mut entries = self.lock();
        let Some(script) = entries.get_mut(name) else {
            return Err(DestinationError::NoSuchName {
                host: name.to_owned(),
            });
        };
        script.lookups += 1;
        let index = script.next.min(script.answers.len().saturating_sub(1));
        script.next = script.next.saturating_add(1);
        let addrs = script.answers.get(index).cloned().unwrap_or_default();
        Ok(Answers {
            addrs,
            ttl: self.ttl,
        })
    }
}

impl Resolver for StaticResolver {
    fn lookup(&self, name: &str) -> impl Future<Output = Result<Answers, DestinationError>> + Send {
        let answer = self.answer(name);
        async move { answer }
    }
}

/// Settings of the hickory resolver that the manifest may set.
#[derive(Clone, Debug)]
pub struct HickoryConfig {
    /// The name servers to ask (UDP, then TCP on truncation/failure). Nothing else is asked.
    pub name_servers: Vec<SocketAddr>,
    /// Timeout of one query.
    pub timeout: Duration,
    /// Attempts per query.
    pub attempts: usize,
}

impl HickoryConfig {
    /// Ask only `name_servers`, with a 2 s timeout and 2 attempts.
    pub fn new(name_servers: Vec<SocketAddr>) -> Self {
        HickoryConfig {
            name_servers,
            timeout: Duration::from_secs(2),
            attempts: 2,
        }
    }
}

/// What a failed hickory lookup means. Both queries (A and AAAA) failed: hickory returns the A
/// query's error. NXDOMAIN says the name does not exist; an empty NOERROR answer says it exists
/// with no address record; anything else (timeout, SERVFAIL, REFUSED, I/O) is no answer at all.
fn lookup_error(host: String, e: &NetError) -> DestinationError {
    if e.is_nx_domain() {
        DestinationError::NoSuchName { host }
    } else if e.is_no_records_found() {
        DestinationError::NoAddresses { host }
    } else {
        DestinationError::Resolution {
            host,
            reason: e.to_string(),
        }
    }
}

/// A [`Resolver`] backed by hickory-resolver, built from explicit name servers only.
#[derive(Clone)]
pub struct HickoryResolver {
    inner: hickory_resolver::Resolver<TokioRuntimeProvider>,
}

impl std::fmt::Debug for HickoryResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HickoryResolver").finish_non_exhaustive()
    }
}

impl HickoryResolver {
    /// Build a resolver that asks only `config.name_servers`: no hosts file, no search
    /// domains, no system configuration, both A and AAAA asked so mixed answers are seen.
    pub fn new(config: &HickoryConfig) -> Result<Self, DestinationError> {
        let servers = config
            .name_servers
            .iter()
            .map(|addr| {
                let mut udp = ConnectionConfig::udp();
                udp.port = addr.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = addr.port();
                NameServerConfig::new(addr.ip(), true, vec![udp, tcp])
            })
            .collect();
        let mut opts = ResolverOpts::default();
        opts.use_hosts_file = ResolveHosts::Never;
        opts.ndots = 0;
        opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        opts.timeout = config.timeout;
        opts.attempts = config.attempts;
        opts.try_tcp_on_error = true;
        // Hickory's own answer filters stay empty: classification is this crate's job, and
        // filtering inside the resolver would hide a mixed answer instead of refusing it.
        opts.allow_answers = Vec::new();
        opts.deny_answers = Vec::new();
        let inner = hickory_resolver::Resolver::builder_with_config(
            ResolverConfig::from_name_servers(servers),
            TokioRuntimeProvider::default(),
        )
        .with_options(opts)
        .build()
        .map_err(|e| DestinationError::Resolution {
            host: String::new(),
            reason: e.to_string(),
        })?;
        Ok(HickoryResolver { inner })
    }
}

impl Resolver for HickoryResolver {
    fn lookup(&self, name: &str) -> impl Future<Output = Result<Answers, DestinationError>> + Send {
        // The trailing dot makes the name absolute, so no search list could ever apply.
        let absolute = format!("{name}.");
        let host = name.to_owned();
        async move {
            let lookup = self
                .inner
                .lookup_ip(absolute.as_str())
                .await
                .map_err(|e| lookup_error(host.clone(), &e))?;
            let ttl = lookup
                .valid_until()
                .saturating_duration_since(Instant::now());
            let addrs: Vec<IpAddr> = lookup.iter().collect();
            Ok(Answers { addrs, ttl })
        }
    }
}
