//! Image pinning: every unit names its image by digest.
//!
//! A digest comes from the manifest (`image = "name@sha256:…"`), from a digests file
//! (`role = "sha256:…"`, e.g. written after a local build), or from the local Podman store
//! (`podman image inspect`). Where two sources name a digest they must agree. Scribe never
//! invents one: an image no source pins is refused with `scribe/image-without-digest`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use reach_manifest::Manifest;

use crate::refusal::{Refusal, RefusalKind};

/// A `sha256:<64 lowercase hex>` digest.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    pub fn parse(s: &str) -> Result<Self, RefusalKind> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| RefusalKind::BadDigest(s.to_owned()))?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(RefusalKind::BadDigest(s.to_owned()));
        }
        Ok(Self(s.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An image reference as the manifest writes it: a name and perhaps a digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    pub name: String,
    pub digest: Option<Digest>,
}

impl ImageRef {
    pub fn parse(image: &str) -> Result<Self, RefusalKind> {
        match image.split_once('@') {
            Some((name, digest)) => Ok(Self {
                name: name.to_owned(),
                digest: Some(Digest::parse(digest)?),
            }),
            None => Ok(Self {
                name: image.to_owned(),
                digest: None,
            }),
        }
    }
}

/// An image pinned by digest: what a unit's `Image=` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedImage {
    pub name: String,
    pub digest: Digest,
}

impl fmt::Display for PinnedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.name, self.digest)
    }
}

/// Where digests the manifest leaves out come from.
#[derive(Clone, Debug, Default)]
pub enum DigestSource {
    /// Only the manifest's own `@sha256:` digests.
    #[default]
    Manifest,
    /// A digests file: one `role = "sha256:…"` line per role.
    File(PathBuf),
    /// The local Podman image store, through this `podman` binary.
    LocalPodman(PathBuf),
}

impl DigestSource {
    fn describe(&self) -> String {
        match self {
            Self::Manifest => "the manifest".to_owned(),
            Self::File(p) => p.display().to_string(),
            Self::LocalPodman(_) => "the local image store".to_owned(),
        }
    }
}

/// Reads a digests file: a TOML table of role name to digest.
pub fn read_digests_file(path: &Path) -> Result<BTreeMap<String, Digest>, Refusal> {
    let at = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Refusal::new(
            &at,
            RefusalKind::BadDigestsFile(format!("cannot read: {e}")),
        )
    })?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| Refusal::new(&at, RefusalKind::BadDigestsFile(e.to_string())))?;
    let mut out = BTreeMap::new();
    for (role, v) in table {
        let s = v.as_str().unwrap_or_default();
        out.insert(
            role.clone(),
            Digest::parse(s).map_err(|k| Refusal::new(format!("{at}: {role}"), k))?,
        );
    }
    Ok(out)
}

/// The digest the local Podman store holds for `name`, if it holds the image.
pub fn local_digest(podman: &Path, name: &str) -> Option<Digest> {
    let out = Command::new(podman)
        .args(["image", "inspect", "--format", "{{.Digest}}", name])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Digest::parse(String::from_utf8_lossy(&out.stdout).trim()).ok()
}

/// Pins every role's image, or refuses naming the first role whose image no source pins.
pub fn pin_images(
    manifest: &Manifest,
    source: &DigestSource,
) -> Result<BTreeMap<String, PinnedImage>, Refusal> {
    let file = match source {
        DigestSource::File(p) => Some(read_digests_file(p)?),
        _ => None,
    };
    if let Some(stray) = file
        .iter()
        .flat_map(|f| f.keys())
        .find(|r| manifest.role(r).is_none())
    {
        return Err(Refusal::new(
            source.describe(),
            RefusalKind::BadDigestsFile(format!("`{stray}` is not a role of the manifest")),
        ));
    }
    let mut pinned = BTreeMap::new();
    for role in &manifest.roles {
        let i = role.index;
        let at = format!("roles[{i}].image");
        let image = ImageRef::parse(&role.image).map_err(|k| Refusal::new(&at, k))?;
        let other = match source {
            DigestSource::Manifest => None,
            DigestSource::File(_) => file
                .as_ref()
                .and_then(|f| f.get(role.name.as_str()))
                .cloned(),
            DigestSource::LocalPodman(podman) => local_digest(podman, &image.name),
        };
        let digest = match (image.digest, other) {
            (Some(a), Some(b)) if a != b => {
                return Err(Refusal::new(
                    at,
                    RefusalKind::ImageDigestMismatch {
                        image: image.name,
                        pinned: a.to_string(),
                        found: b.to_string(),
                        source_name: source.describe(),
                    },
                ));
            }
            (Some(a), _) => a,
            (None, Some(b)) => b,
            (None, None) => {
                return Err(Refusal::new(
                    at,
                    RefusalKind::ImageWithoutDigest(role.image.clone()),
                ));
            }
        };
        pinned.insert(
            role.name.as_str().to_owned(),
            PinnedImage {
                name: image.name,
                digest,
            },
        );
    }
    Ok(pinned)
}
