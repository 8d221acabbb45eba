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
    /// How long an activated snapshot serves, in seconds (default: the store's 24 h). Past
    /// it, core answers DEPENDENCY_UNAVAILABLE until a rebuild.
    pub freshness_secs: Option<u64>,
    /// A local directory of Markdown or HTML packed at start as the default corpus, in place of
    /// the embedded project docs (`reach demo --docs DIR`).
    pub docs_dir: Option<std::path::PathBuf>,
    /// The operator sources (`reach corpus add NAME`) this deployment may answer from, by name.
    /// Read by manifest validation, which holds `habitat.corpus` to one of them or to the
    /// default source; sources themselves live in `sources.toml`, added at run time.
    pub sources: Vec<String>,
}

impl Settings {
    pub fn from_table(t: &toml::Table) -> anyhow::Result<Self> {
        t.clone()
            .try_into()
            .context("corpus-builder settings (roads, freshness_secs, docs_dir, sources)")
    }

    /// The snapshot lifetime the settings name, if any; zero is refused.
    pub fn freshness(&self) -> anyhow::Result<Option<time::Duration>> {
        match self.freshness_secs {
            None => Ok(None),
            Some(0) => anyhow::bail!("settings.freshness_secs must be at least 1"),
            Some(s) => Ok(Some(time::Duration::seconds(
                i64::try_from(s).context("settings.freshness_secs is too large")?,
            ))),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> anyhow::Result<Settings> {
        Settings::from_table(&text.parse::<toml::Table>().unwrap())
    }

    #[test]
    fn freshness_is_optional_positive_and_strict() {
        assert_eq!(settings("").unwrap().freshness().unwrap(), None);
        assert_eq!(
            settings("freshness_secs = 90")
                .unwrap()
                .freshness()
                .unwrap(),
            Some(time::Duration::seconds(90))
        );
        let zero = settings("freshness_secs = 0")
            .unwrap()
            .freshness()
            .unwrap_err();
        assert!(zero.to_string().contains("at least 1"), "{zero}");
        assert!(
            settings("freshness = 90").is_err(),
            "unknown keys are refused"
        );
    }

    #[test]
    fn declared_sources_are_names_the_manifest_reads() {
        assert_eq!(
            settings("sources = [\"my-book\"]").unwrap().sources,
            ["my-book"]
        );
        assert!(settings("sources = \"my-book\"").is_err());
    }
}
