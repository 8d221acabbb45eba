//! The vm-broker role's settings (the manifest's `settings` table for that role), strict. The
//! broker reads them at start; `reach image prune --manifest` reads which digests they pin.
//!
//! Production pins images and prepared systems by digest here; with none pinned, every
//! create is refused as `environment/unknown-image`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reach_digest::Sha256Digest;

use crate::instance::{BrokerConfig, PinnedImage};

/// The broker's run directory (journal, instances) under the role's data directory.
pub const RUN_DIR: &str = "vm";

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Image {
    pub digest: Sha256Digest,
    pub dir: PathBuf,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub images: Vec<Image>,
    /// Prepared systems (`reach image prepare`), each over one of `images`.
    pub prepared: Vec<Image>,
    /// Per-instance ceilings.
    pub max_memory_mib: u32,
    pub max_cpus: u32,
    pub ready_timeout_s: u64,
    /// The image cache (`reach image build|prepare --cache`) readiness searches for a task
    /// pack's prepared system (`FindPrepared`); none: only the pins above.
    pub cache: Option<PathBuf>,
    /// The task-pack keys whose packs' command profiles the broker runs
    /// (`[{ name, key = "ed25519:<hex>" }]`, read by `reach_taskpack::TrustedKeys`; none:
    /// every create that carries a pack is refused `package/unknown-signer`).
    pub pack_keys: Option<toml::Value>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            images: Vec::new(),
            prepared: Vec::new(),
            max_memory_mib: 1024,
            max_cpus: 2,
            ready_timeout_s: 120,
            cache: None,
            pack_keys: None,
        }
    }
}

impl Settings {
    pub fn from_table(t: &toml::Table) -> Result<Self, toml::de::Error> {
        t.clone().try_into()
    }

    /// Every digest pinned here: the images and the prepared systems.
    pub fn pinned(&self) -> impl Iterator<Item = Sha256Digest> + '_ {
        self.images.iter().chain(&self.prepared).map(|i| i.digest)
    }

    /// Where `FindPrepared` looks: these pins, then the cache.
    pub fn find_prepared(
        &self,
        image_spec: &Sha256Digest,
        prepared_spec: &Sha256Digest,
    ) -> Option<crate::cache::FoundPrepared> {
        let images: Vec<PathBuf> = self.images.iter().map(|i| i.dir.clone()).collect();
        let prepared: Vec<PathBuf> = self.prepared.iter().map(|i| i.dir.clone()).collect();
        crate::cache::find_prepared(
            crate::cache::Search {
                pinned_images: &images,
                pinned_prepared: &prepared,
                cache: self.cache.as_deref(),
            },
            image_spec,
            prepared_spec,
        )
    }

    pub fn broker_config(&self, run_dir: &Path) -> BrokerConfig {
        let pin = |v: &[Image]| {
            v.iter()
                .map(|i| PinnedImage {
                    digest: i.digest,
                    dir: i.dir.clone(),
                })
                .collect::<Vec<_>>()
        };
        let mut cfg = BrokerConfig::new(run_dir, pin(&self.images));
        cfg.prepared = pin(&self.prepared);
        cfg.max_memory_mib = self.max_memory_mib;
        cfg.max_cpus = self.max_cpus;
        cfg.ready_timeout = Duration::from_secs(self.ready_timeout_s);
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_settings() {
        let t: toml::Table = toml::from_str(
            "max_cpus = 1\n[[images]]\ndigest = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\ndir = \"/srv/img\"\n[[prepared]]\ndigest = \"sha256:1111111111111111111111111111111111111111111111111111111111111111\"\ndir = \"/srv/prep\"\n",
        )
        .unwrap();
        let s = Settings::from_table(&t).unwrap();
        assert_eq!((s.images.len(), s.prepared.len()), (1, 1));
        assert_eq!(s.pinned().count(), 2);
        let cfg = s.broker_config(Path::new("/run/vm"));
        assert_eq!((cfg.max_cpus, cfg.max_memory_mib), (1, 1024));
        assert_eq!(cfg.journal, Path::new("/run/vm/journal.db"));
        assert_eq!(cfg.prepared[0].dir, Path::new("/srv/prep"));
        for bad in [
            "network = \"isolated\"",
            "[[images]]\ndigest = \"md5:00\"\ndir = \"/x\"",
        ] {
            let t: toml::Table = toml::from_str(bad).unwrap();
            assert!(Settings::from_table(&t).is_err(), "{bad}");
        }
    }
}
