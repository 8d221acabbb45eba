//! corpus-builder's role settings (the manifest's `settings` table for this role), strict.
//!
//! Where source bytes may come from is the shared `roads` setting of every egress role
//! (`reach_destination::roads`): public sources through the controlled resolver asking only the
//! named name servers, or exact local roads (a host admitted at one socket address, loopback
//! included) with the one CA those roads present. Production names no road.

use anyhow::Context as _;
use reach_destination::roads::{ConfiguredResolver, Roads};
use reach_destination::{Admission, AdmissionPolicy};

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub roads: Roads,
}

impl Settings {
    pub fn from_table(t: &toml::Table) -> anyhow::Result<Self> {
        t.clone()
            .try_into()
            .context("corpus-builder settings (roads)")
    }

    /// The roots sources are verified against.
    pub fn roots(&self) -> anyhow::Result<rustls::RootCertStore> {
        self.roads.roots().context("corpus-builder roads")
    }

    /// Destination admission for sources: port 443 and the named roads; redirects are refused
    /// here because the fetcher judges each one by the source's rules and re-admits it.
    pub fn admission(&self) -> anyhow::Result<Admission<ConfiguredResolver>> {
        self.roads
            .admission(AdmissionPolicy::default())
            .context("corpus-builder roads")
    }

    /// The roots the git transport trusts: the same as for archives.
    pub fn git_tls(&self) -> anyhow::Result<reach_corpus::git::GitTls> {
        Ok(match &self.roads.ca_file {
            None => reach_corpus::git::GitTls::WebPki,
            Some(_) => reach_corpus::git::GitTls::Store(self.roots()?),
        })
    }
}
