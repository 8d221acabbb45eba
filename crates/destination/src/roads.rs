//! How an egress role's manifest settings say where its bytes may go: public destinations
//! through a controlled resolver (only the named name servers, no system configuration), or
//! exact local roads (a host admitted at one socket address, loopback included) with the one CA
//! those roads present. Every egress role builds its admission and roots here, so the rules are
//! the same for Discord, corpus sources and providers.

use std::net::SocketAddr;
use std::path::PathBuf;

use rustls::RootCertStore;

use crate::{
    Admission, AdmissionPolicy, Answers, Destination, DestinationError, HickoryConfig,
    HickoryResolver, Host, Purpose, Resolver, StaticResolver, webpki_root_store,
};

/// An exact local road: `host` is admitted at exactly `addr`, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Road {
    pub host: String,
    pub addr: SocketAddr,
}

/// Where a role may dial, as its settings say (the `roads` table of an egress role's settings).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Roads {
    /// Exact local roads; exclusive with `name_servers`.
    pub local_roads: Vec<Road>,
    /// A PEM file whose certificates are the only trusted roots (instead of webpki's).
    pub ca_file: Option<PathBuf>,
    /// Name servers of the controlled resolver.
    pub name_servers: Vec<SocketAddr>,
}

/// Why the settings cannot become an admission.
#[derive(Debug, thiserror::Error)]
pub enum RoadsError {
    #[error("name_servers and local_roads are exclusive")]
    Exclusive,
    #[error("a local road's host is not a DNS name or IP literal: {0}")]
    Host(String),
    #[error("ca_file {path}: {reason}")]
    CaFile { path: PathBuf, reason: String },
    #[error(transparent)]
    Destination(#[from] DestinationError),
}

impl Roads {
    /// The roots peers are verified against: the CA file's certificates only, or webpki's.
    pub fn roots(&self) -> Result<RootCertStore, RoadsError> {
        let Some(path) = &self.ca_file else {
            return Ok(webpki_root_store());
        };
        let fail = |reason: String| RoadsError::CaFile {
            path: path.clone(),
            reason,
        };
        let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
        let mut roots = RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut &pem[..]) {
            roots
                .add(cert.map_err(|e| fail(e.to_string()))?)
                .map_err(|e| fail(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(fail("no certificate".into()));
        }
        Ok(roots)
    }

    /// Admission on `policy` (its ports, redirects) plus the roads, with the resolver the
    /// settings name. Without roads or name servers every public name fails to resolve, typed.
    pub fn admission(
        &self,
        mut policy: AdmissionPolicy,
    ) -> Result<Admission<ConfiguredResolver>, RoadsError> {
        if !self.local_roads.is_empty() && !self.name_servers.is_empty() {
            return Err(RoadsError::Exclusive);
        }
        let mut fixed = StaticResolver::new();
        for road in &self.local_roads {
            let host = road_host(&road.host)?;
            policy = policy.with_local_road(host, road.addr);
            fixed = fixed.with(&road.host, [road.addr.ip()]);
        }
        let resolver = if self.name_servers.is_empty() {
            ConfiguredResolver::Static(fixed)
        } else {
            ConfiguredResolver::Hickory(Box::new(HickoryResolver::new(&HickoryConfig::new(
                self.name_servers.clone(),
            ))?))
        };
        Ok(Admission::new(policy, resolver))
    }
}

/// A road's host as destination admission names it: exactly a canonical DNS name or IP
/// literal. Parsed as a URL's authority, a port, path or query would be cut off silently and the
/// road would answer for a name nobody configured.
fn road_host(host: &str) -> Result<Host, RoadsError> {
    let purpose = Purpose::new("local-road").map_err(RoadsError::Destination)?;
    Destination::parse(&format!("https://{host}/"), purpose)
        .ok()
        .map(|d| d.host().clone())
        .filter(|parsed| parsed.to_string() == host)
        .ok_or_else(|| RoadsError::Host(host.to_owned()))
}

/// The resolver [`Roads`] configured: the roads' fixed answers, or hickory asking only the
/// named servers.
#[derive(Debug)]
pub enum ConfiguredResolver {
    Static(StaticResolver),
    Hickory(Box<HickoryResolver>),
}

impl Resolver for ConfiguredResolver {
    async fn lookup(&self, name: &str) -> Result<Answers, DestinationError> {
        match self {
            ConfiguredResolver::Static(r) => r.lookup(name).await,
            ConfiguredResolver::Hickory(r) => r.lookup(name).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roads_and_name_servers_are_exclusive() {
        let r = Roads {
            local_roads: vec![Road {
                host: "discord.test".into(),
                addr: "127.0.0.1:443".parse().unwrap(),
            }],
            name_servers: vec!["127.0.0.53:53".parse().unwrap()],
            ca_file: None,
        };
        assert!(matches!(
            r.admission(AdmissionPolicy::default()),
            Err(RoadsError::Exclusive)
        ));
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = std::env::temp_dir().join(format!("roads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let r = Roads {
            ca_file: Some(path),
            ..Roads::default()
        };
        assert!(matches!(r.roots(), Err(RoadsError::CaFile { .. })));
        let missing = Roads {
            ca_file: Some(dir.join("missing.pem")),
            ..Roads::default()
        };
        assert!(matches!(missing.roots(), Err(RoadsError::CaFile { .. })));
    }

    #[test]
    fn a_road_host_that_is_not_a_dns_name_or_ip_literal_is_refused() {
        for host in [
            "",
            "discord_test",
            "-discord.test",
            "discord..test",
            "Discord.test",
            "user@discord.test",
            "127.1",
            "[::1",
            "discord.test:8443",
            "discord.test/api",
            "discord.test?x",
        ] {
            let r = Roads {
                local_roads: vec![Road {
                    host: host.into(),
                    addr: "127.0.0.1:8443".parse().unwrap(),
                }],
                ..Roads::default()
            };
            match r.admission(AdmissionPolicy::default()) {
                Err(RoadsError::Host(h)) => assert_eq!(h, host),
                other => panic!("{host:?}: expected RoadsError::Host, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_road_admits_its_host_at_its_address_only() {
        let road: SocketAddr = "127.0.0.1:8443".parse().unwrap();
        let admission = Roads {
            local_roads: vec![Road {
                host: "discord.test".into(),
                addr: road,
            }],
            ..Roads::default()
        }
        .admission(AdmissionPolicy::default())
        .unwrap();
        let ok = crate::Destination::parse(
            "https://discord.test:8443/api",
            crate::Purpose::new("discord-rest").unwrap(),
        )
        .unwrap();
        assert_eq!(admission.admit(ok).await.unwrap().pinned_addr(), road);
        // Without a road, a public name does not exist for this role's resolver.
        let other = crate::Destination::parse(
            "https://discord.com/api",
            crate::Purpose::new("discord-rest").unwrap(),
        )
        .unwrap();
        let err = admission.admit(other).await.unwrap_err();
        assert!(
            matches!(&err, DestinationError::NoSuchName { host } if host == "discord.com"),
            "{err:?}"
        );
    }
}
