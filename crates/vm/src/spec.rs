//! The declarative image spec (`reach.vm.image-spec.v1`, TOML).
//!
//! Strict on purpose: unknown keys are errors, paths are absolute and normalized, modes are
//! octal text, owners numeric. The spec's digest is taken over its canonical JSON form, so two
//! TOML files that mean the same thing pin the same image inputs.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

/// The only spec format this builder reads.
pub const SPEC_FORMAT: &str = "reach.vm.image-spec.v1";

/// Packages every image carries whatever the spec says: the kernel for direct boot, the
/// guest agent the broker talks to, systemd as init (the agent and services are units), and
/// the system bus, without which `systemd-run` cannot start the unit of an instance's
/// observation session (the read-only sandbox every observation runs in, `crate::observe`).
pub const MANDATORY_PACKAGES: [&str; 4] = [
    "dbus",
    "linux-image-cloud-amd64",
    "qemu-guest-agent",
    "systemd-sysv",
];

/// Upper bound on a placed file's content: specs carry configuration, not payloads.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// Bounds on the rootfs size an operator may ask for.
pub const ROOTFS_MIB_RANGE: std::ops::RangeInclusive<u32> = 256..=16_384;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    pub format: String,
    /// Debian suite, e.g. `bookworm`.
    pub suite: String,
    /// Archive URL; a snapshot.debian.org URL pins the package set in time.
    pub mirror: String,
    /// Timestamp every build-time clock is clamped to (SOURCE_DATE_EPOCH).
    pub source_date_epoch: u64,
    /// ext4 image size; large enough for the packages and the prepared system.
    pub rootfs_mib: u32,
    /// `minbase` or `apt` (mmdebstrap variants that keep the image small).
    #[serde(default = "default_variant")]
    pub variant: String,
    #[serde(default)]
    pub packages: Vec<String>,
    /// systemd units to enable.
    #[serde(default)]
    pub services: Vec<String>,
    /// Units the first-boot regeneration unit (`crate::image::FIRST_BOOT_UNIT`) is ordered
    /// before: those that use what it regenerates. Empty: `<service>.service` of each of
    /// `services`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_boot_before: Vec<String>,
    #[serde(default)]
    pub files: Vec<FileSpec>,
    /// Operator-supplied packages, pinned by digest.
    #[serde(default)]
    pub local_debs: Vec<LocalDeb>,
}

fn default_variant() -> String {
    "minbase".to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// Absolute path inside the guest.
    pub path: String,
    pub content: String,
    /// Octal, e.g. `0644`.
    #[serde(default = "default_mode")]
    pub mode: String,
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
}

fn default_mode() -> String {
    "0644".to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalDeb {
    /// Relative to the spec file's directory, or absolute.
    pub path: PathBuf,
    /// `sha256:<hex>` of the .deb file.
    pub sha256: String,
}

/// Why a spec was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    /// spec is not valid TOML for reach.vm.image-spec.v1
    #[error("spec is not valid TOML for {SPEC_FORMAT}: {0}")]
    Syntax(String),
    /// wrong format tag
    #[error("spec format must be {SPEC_FORMAT}, found {0:?}")]
    Format(String),
    /// a field has an invalid value
    #[error("spec field {field}: {reason}")]
    Field { field: String, reason: String },
}

fn field(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A Debian package or unit name: the conservative character set both share.
pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_' | '@'))
        && !s.starts_with('-')
}

/// An absolute, normalized guest path (no `..`, no `.`, no empty component).
pub fn guest_path(s: &str) -> Option<PathBuf> {
    let p = Path::new(s);
    if !p.is_absolute() || s.ends_with('/') || s.contains("//") {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in p.components().skip(1) {
        match c {
            Component::Normal(n) => out.push(n),
            _ => return None,
        }
    }
    (out != Path::new("/")).then_some(out)
}

impl ImageSpec {
    /// Parses and validates a spec.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let spec: ImageSpec =
            toml::from_str(text).map_err(|e| SpecError::Syntax(e.message().to_owned()))?;
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), SpecError> {
        if self.format != SPEC_FORMAT {
            return Err(SpecError::Format(self.format.clone()));
        }
        if !valid_name(&self.suite) {
            return Err(field("suite", "not a suite name"));
        }
        if !(self.mirror.starts_with("http://") || self.mirror.starts_with("https://"))
            || self.mirror.chars().any(|c| c.is_whitespace())
        {
            return Err(field("mirror", "must be an http(s) URL without spaces"));
        }
        if !matches!(self.variant.as_str(), "minbase" | "apt") {
            return Err(field("variant", "must be minbase or apt"));
        }
        if !ROOTFS_MIB_RANGE.contains(&self.rootfs_mib) {
            return Err(field(
                "rootfs_mib",
                format!("must be within {ROOTFS_MIB_RANGE:?}"),
            ));
        }
        let mut seen = BTreeSet::new();
        for p in &self.packages {
            if !valid_name(p) {
                return Err(field("packages", format!("{p:?} is not a package name")));
            }
            if !seen.insert(p) {
                return Err(field("packages", format!("{p:?} listed twice")));
            }
        }
        for s in &self.services {
            if !valid_name(s) {
                return Err(field("services", format!("{s:?} is not a unit name")));
            }
        }
        for u in &self.first_boot_before {
            if !valid_name(u) || !u.contains('.') {
                return Err(field(
                    "first_boot_before",
                    format!("{u:?} is not a unit name with its suffix"),
                ));
            }
        }
        let mut paths = BTreeSet::new();
        for f in &self.files {
            let Some(p) = guest_path(&f.path) else {
                return Err(field(
                    "files.path",
                    format!("{:?} is not an absolute normal path", f.path),
                ));
            };
            if !paths.insert(p) {
                return Err(field("files.path", format!("{:?} placed twice", f.path)));
            }
            if f.content.len() > MAX_FILE_BYTES {
                return Err(field(
                    "files.content",
                    format!("{:?} exceeds {MAX_FILE_BYTES} bytes", f.path),
                ));
            }
            parse_mode(&f.mode)
                .ok_or_else(|| field("files.mode", format!("{:?} is not an octal mode", f.mode)))?;
        }
        for d in &self.local_debs {
            d.sha256
                .parse::<Sha256Digest>()
                .map_err(|e| field("local_debs.sha256", e.to_string()))?;
            if d.path.extension().and_then(|e| e.to_str()) != Some("deb") {
                return Err(field("local_debs.path", "must name a .deb file"));
            }
        }
        Ok(())
    }

    /// The digest of the spec's canonical JSON form.
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(serde_json::to_vec(self).expect("spec serializes"))
    }

    /// The spec's packages plus the mandatory ones, sorted and deduplicated.
    pub fn all_packages(&self) -> Vec<String> {
        let mut set: BTreeSet<String> = self.packages.iter().cloned().collect();
        set.extend(MANDATORY_PACKAGES.iter().map(|s| (*s).to_owned()));
        set.into_iter().collect()
    }
}

/// Parses an octal permission mode (at most 0o7777).
pub fn parse_mode(s: &str) -> Option<u32> {
    let m = u32::from_str_radix(s, 8).ok()?;
    (m <= 0o7777 && !s.is_empty() && s.len() <= 4).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
format = "reach.vm.image-spec.v1"
suite = "bookworm"
mirror = "http://deb.debian.org/debian"
source_date_epoch = 1700000000
rootfs_mib = 1024
packages = ["nginx-light"]
services = ["nginx"]
[[files]]
path = "/etc/app.conf"
content = "guest.test\n"
"#;

    #[test]
    fn accepts_a_valid_spec_and_adds_the_mandatory_packages() {
        let s = ImageSpec::parse(OK).unwrap();
        assert_eq!(
            s.all_packages(),
            [
                "dbus",
                "linux-image-cloud-amd64",
                "nginx-light",
                "qemu-guest-agent",
                "systemd-sysv"
            ]
        );
        assert_eq!(s.digest(), ImageSpec::parse(OK).unwrap().digest());
    }

    #[test]
    fn refusals() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "format = \"reach.vm.image-spec.v1\"",
                "format = \"v0\"",
                "format must be",
            ),
            (
                "suite = \"bookworm\"",
                "suite = \"book worm\"",
                "spec field suite",
            ),
            (
                "http://deb.debian.org/debian",
                "ftp://x",
                "spec field mirror",
            ),
            (
                "rootfs_mib = 1024",
                "rootfs_mib = 1",
                "spec field rootfs_mib",
            ),
            (
                "packages = [\"nginx-light\"]",
                "packages = [\"-oops\"]",
                "spec field packages",
            ),
            (
                "packages = [\"nginx-light\"]",
                "packages = [\"a\", \"a\"]",
                "listed twice",
            ),
            (
                "services = [\"nginx\"]",
                "services = [\"a b\"]",
                "spec field services",
            ),
            ("/etc/app.conf", "etc/app.conf", "spec field files.path"),
            ("/etc/app.conf", "/etc/../shadow", "spec field files.path"),
            (
                "services = [\"nginx\"]",
                "services = [\"nginx\"]\nfirst_boot_before = [\"nginx\"]",
                "spec field first_boot_before",
            ),
            (
                "rootfs_mib = 1024",
                "rootfs_mib = 1024\nnetwork = true",
                "unknown field",
            ),
            (
                "content = \"guest.test\\n\"",
                "content = \"x\"\nmode = \"999\"",
                "spec field files.mode",
            ),
            (
                "services = [\"nginx\"]",
                "services = []\n[[local_debs]]\npath = \"x.deb\"\nsha256 = \"md5:00\"",
                "spec field local_debs.sha256",
            ),
        ];
        for (from, to, want) in cases {
            assert!(OK.contains(from), "{from}");
            let err = ImageSpec::parse(&OK.replacen(from, to, 1))
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{to}: {err}");
        }
    }
}
