//! corpus-builder's role settings (the manifest's `settings` table for this role), strict.
//!
//! Production sets none of them: sources are fetched through the public roots and a controlled
//! resolver asking only the manifest's name servers. A test (or an operator mirroring a source
//! on the host) names an exact local road and the one CA that road presents.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use reach_destination::{
    Admission, AdmissionPolicy, Answers, DestinationError, HickoryConfig, HickoryResolver,
    Resolver, StaticResolver,
};

/// An exact local road: `host` is admitted at exactly `addr` (loopback included), nothing else.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Road {
    pub host: String,
    pub addr: SocketAddr,
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Exact local roads (destination admission refuses loopback and private addresses
    /// otherwise).
    pub local_roads: Vec<Road>,
    /// A PEM file whose certificates are the only roots trusted for sources, instead of the
    /// public (webpki) roots.
    pub source_ca_file: Option<PathBuf>,
    /// Name servers of the controlled resolver (nothing else is asked; no system config).
    pub name_servers: Vec<SocketAddr>,
}

impl Settings {
    pub fn from_table(t: &toml::Table) -> anyhow::Result<Self> {
        t.clone()
            .try_into()
            .context("corpus-builder settings (local_roads, source_ca_file, name_servers)")
    }

    /// The roots sources are verified against.
    pub fn roots(&self) -> anyhow::Result<rustls::RootCertStore> {
        let Some(path) = &self.source_ca_file else {
            return Ok(reach_destination::webpki_root_store());
        };
        let pem =
            std::fs::read(path).with_context(|| format!("source_ca_file {}", path.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut &pem[..]) {
            roots.add(cert?)?;
        }
        Ok(roots)
    }

    /// Destination admission for sources: port 443, the named roads, redirects refused (the
    /// fetcher re-admits each one by the source's rules).
    pub fn admission(&self) -> anyhow::Result<Admission<SourceResolver>> {
        let mut policy = AdmissionPolicy::default();
        let mut fixed = StaticResolver::new();
        for road in &self.local_roads {
            let host = reach_destination::Destination::parse(
                &format!("https://{}/", road.host),
                reach_destination::Purpose::new("corpus-acquisition")?,
            )?
            .host()
            .clone();
            policy = policy.with_local_road(host, road.addr);
            fixed = fixed.with(&road.host, [road.addr.ip()]);
        }
        let resolver = if self.name_servers.is_empty() {
            SourceResolver::Static(fixed)
        } else {
            anyhow::ensure!(
                self.local_roads.is_empty(),
                "name_servers and local_roads are exclusive"
            );
            SourceResolver::Hickory(Box::new(HickoryResolver::new(&HickoryConfig::new(
                self.name_servers.clone(),
            ))?))
        };
        Ok(Admission::new(policy, resolver))
    }
}

/// The resolver sources are admitted through: the roads' fixed answers, or hickory asking only
/// the configured name servers. Without either, every public name fails to resolve (typed).
#[derive(Debug)]
pub enum SourceResolver {
    Static(StaticResolver),
    Hickory(Box<HickoryResolver>),
}

impl Resolver for SourceResolver {
    async fn lookup(&self, name: &str) -> Result<Answers, DestinationError> {
        match self {
            SourceResolver::Static(r) => r.lookup(name).await,
            SourceResolver::Hickory(r) => r.lookup(name).await,
        }
    }
}

impl Settings {
    /// The roots the git transport trusts: the source CA if one is named, else webpki.
    pub fn git_tls(&self) -> anyhow::Result<reach_corpus::git::GitTls> {
        let Some(path) = &self.source_ca_file else {
            return Ok(reach_corpus::git::GitTls::WebPki);
        };
        let pem =
            std::fs::read(path).with_context(|| format!("source_ca_file {}", path.display()))?;
        let certs = rustls_pemfile::certs(&mut &pem[..]).collect::<Result<Vec<_>, _>>()?;
        Ok(reach_corpus::git::GitTls::Roots(certs))
    }
}
