//! `reach scribe check`: re-derive everything from the manifest and report every difference
//! from what is on disk.
//!
//! Units, configs and the secrets script are compared byte for byte (they are deterministic);
//! units on disk are also vetted by the same [`refusal`](crate::refusal) rules, so a hand edit
//! is reported with the refusal code it would earn. Secret sources are looked for in the state
//! directory; with a `podman` binary, the Podman secrets and the local image digests are
//! compared too; with a ruleset file, its bytes are compared with the derived ruleset.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::images::local_digest;
use crate::quadlet::{
    Materialized, QuadletInput, scribe_files_on_disk, secret_owners, state_files,
};
use crate::refusal::{Refusal, RefusalKind, vet_podman_args};

/// One difference between the manifest and the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drift {
    /// a file Scribe derives is not on disk
    MissingFile(String),
    /// a Scribe file on disk the manifest no longer derives
    ExtraFile(String),
    /// a file differs; the first differing line (1-based) and both versions of it
    ChangedFile {
        name: String,
        line: usize,
        expected: String,
        found: String,
    },
    /// a unit on disk breaks a refusal rule
    Refused { file: String, refusal: Refusal },
    /// a file a role's container reads from its secret directory is missing
    MissingSecretSource { secret: String, path: PathBuf },
    /// a Podman secret the units mount does not exist
    MissingPodmanSecret(String),
    /// a `reach.*` Podman secret no unit mounts
    StrayPodmanSecret(String),
    /// the local image store does not hold the pinned digest
    ImageDigest {
        role: String,
        pinned: String,
        found: Option<String>,
    },
    /// the ruleset file differs from the derived ruleset
    Ruleset {
        path: PathBuf,
        line: usize,
        expected: String,
        found: String,
    },
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingFile(n) => write!(f, "missing: {n}"),
            Self::ExtraFile(n) => write!(f, "extra: {n} (not derived from the manifest)"),
            Self::ChangedFile {
                name,
                line,
                expected,
                found,
            } => {
                write!(
                    f,
                    "changed: {name} line {line}: expected `{expected}`, found `{found}`"
                )
            }
            Self::Refused { file, refusal } => write!(f, "refused: {file}: {refusal}"),
            Self::MissingSecretSource { secret, path } => {
                write!(f, "secret source missing: {secret} from {}", path.display())
            }
            Self::MissingPodmanSecret(n) => write!(f, "podman secret missing: {n}"),
            Self::StrayPodmanSecret(n) => write!(f, "podman secret not mounted by any unit: {n}"),
            Self::ImageDigest {
                role,
                pinned,
                found,
            } => write!(
                f,
                "image of role {role}: pinned {pinned}, local store has {}",
                found.as_deref().unwrap_or("no such image")
            ),
            Self::Ruleset {
                path,
                line,
                expected,
                found,
            } => {
                write!(
                    f,
                    "ruleset {} line {line}: expected `{expected}`, found `{found}`",
                    path.display()
                )
            }
        }
    }
}

/// What to compare beyond the output directory.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// Compare Podman secrets and image digests through this binary.
    pub podman: Option<PathBuf>,
    /// A ruleset file on disk and the ruleset derived from the manifest.
    pub ruleset: Option<(PathBuf, String)>,
}

/// The first line (1-based) where `found` differs from `expected`, with both versions of it
/// (`<end of file>` past either end); two empty strings when the texts are the same.
pub(crate) fn first_difference(expected: &str, found: &str) -> (usize, String, String) {
    let mut e = expected.lines();
    let mut f = found.lines();
    let mut line = 1;
    loop {
        match (e.next(), f.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (None, None) => return (line, String::new(), String::new()),
            (a, b) => {
                return (
                    line,
                    a.unwrap_or("<end of file>").to_owned(),
                    b.unwrap_or("<end of file>").to_owned(),
                );
            }
        }
    }
}

/// Splits a `PodmanArgs=` value into words (double quotes group; `%%` and `$$` unescaped).
fn split_words(value: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = value.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c if c.is_whitespace() && !quoted => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
        .into_iter()
        .map(|w| w.replace("%%", "%").replace("$$", "$"))
        .collect()
}

/// Vets one `.container` file as found on disk, for `role`.
pub fn vet_unit_text(input: &QuadletInput<'_>, file: &str, role: &str, text: &str) -> Vec<Refusal> {
    let owners = secret_owners(input);
    let mut refusals = Vec::new();
    let egress = input
        .manifest
        .role(role)
        .is_some_and(|r| !matches!(r.network, reach_manifest::NetworkClass::None));
    for (n, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", n + 1);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key.trim() {
            "PodmanArgs" => {
                // Scribe's own ceilings and umask lead every PodmanArgs line; skip them, vet the rest.
                let words: Vec<String> = split_words(value)
                    .into_iter()
                    .filter(|w| {
                        !(w.starts_with("--memory=")
                            || w.starts_with("--memory-swap=")
                            || w.starts_with("--cpus=")
                            || *w == format!("--umask={}", crate::quadlet::ROLE_UMASK))
                    })
                    .collect();
                if let Err(r) = vet_podman_args(role, &words, &owners, |_| at.clone()) {
                    refusals.push(r);
                }
            }
            "Secret" => {
                let name = value.split(',').next().unwrap_or("").trim();
                match owners.get(name) {
                    Some(owner) if owner == role => {}
                    Some(owner) => refusals.push(Refusal::new(
                        at,
                        RefusalKind::ForeignSecret {
                            secret: name.to_owned(),
                            owner: owner.clone(),
                            role: role.to_owned(),
                        },
                    )),
                    None => refusals.push(Refusal::new(
                        at,
                        RefusalKind::ForeignSecret {
                            secret: name.to_owned(),
                            owner: "no role of the manifest".to_owned(),
                            role: role.to_owned(),
                        },
                    )),
                }
            }
            "Volume" => {
                let source = value.trim().split(':').next().unwrap_or("");
                if let Some(kind) = foreign_state_mount(input, role, source) {
                    refusals.push(Refusal::new(at, kind));
                }
            }
            "Network" if !egress && value.trim() != "none" => {
                refusals.push(Refusal::new(
                    at,
                    RefusalKind::HostNamespace(format!("Network={}", value.trim())),
                ));
            }
            "Pod" => refusals.push(Refusal::new(at, RefusalKind::SharedPod(line.to_owned()))),
            "AddCapability" => {
                refusals.push(Refusal::new(at, RefusalKind::CapAdd(line.to_owned())))
            }
            "SecurityLabelDisable" | "SeccompProfile" | "Unmask" => {
                refusals.push(Refusal::new(at, RefusalKind::SecurityOpt(line.to_owned())))
            }
            "Environment" => {
                let v = split_words(value).join(" ");
                let (k, val) = v.split_once('=').unwrap_or((&v, ""));
                if crate::refusal::looks_like_credential(k, val) {
                    refusals.push(Refusal::new(
                        at,
                        RefusalKind::CredentialInEnvironment(format!("{k}=…")),
                    ));
                }
            }
            _ => {}
        }
    }
    refusals
}

/// A unit's `Volume=` source inside the state directory other than the role's own secret
/// directory: another role's secrets, Scribe's trust root, or more of the state than a role
/// may see.
fn foreign_state_mount(input: &QuadletInput<'_>, role: &str, source: &str) -> Option<RefusalKind> {
    let path = Path::new(source);
    let rel = path.strip_prefix(input.state.root()).ok()?;
    if path == input.state.secret_dir(role) {
        return None;
    }
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let (secret, owner) = (source.to_owned(), role.to_owned());
    Some(match (parts.next().as_deref(), parts.next()) {
        (Some("secrets"), Some(o)) if o != role => RefusalKind::ForeignSecret {
            secret,
            owner: o,
            role: owner,
        },
        (Some("scribe"), _) => RefusalKind::ForeignSecret {
            secret,
            owner: "scribe".to_owned(),
            role: owner,
        },
        _ => RefusalKind::VolumeOutsideManifest(format!(
            "{source} (inside the state directory Scribe manages)"
        )),
    })
}

/// Compares `derived` (from [`crate::quadlet::derive`]) with `out_dir` and the host.
pub fn check(
    input: &QuadletInput<'_>,
    derived: &Materialized,
    out_dir: &Path,
    options: &CheckOptions,
) -> std::io::Result<Vec<Drift>> {
    let mut drift = Vec::new();
    let on_disk = scribe_files_on_disk(out_dir)?;
    for (name, expected) in &derived.files {
        match std::fs::read(out_dir.join(name)) {
            Ok(found) => {
                let found = String::from_utf8_lossy(&found);
                if found != *expected {
                    let (line, expected, found) = first_difference(expected, &found);
                    drift.push(Drift::ChangedFile {
                        name: name.clone(),
                        line,
                        expected,
                        found,
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                drift.push(Drift::MissingFile(name.clone()))
            }
            Err(e) => return Err(e),
        }
    }
    for name in &on_disk {
        if !derived.files.contains_key(name) {
            drift.push(Drift::ExtraFile(name.clone()));
        }
        if let Some(role) = name
            .strip_prefix("reach-")
            .and_then(|n| n.strip_suffix(".container"))
        {
            let text = std::fs::read_to_string(out_dir.join(name))?;
            for refusal in vet_unit_text(input, name, role, &text) {
                drift.push(Drift::Refused {
                    file: name.clone(),
                    refusal,
                });
            }
        }
    }
    let mounted: BTreeSet<&str> = derived
        .containers
        .iter()
        .flat_map(|c| c.secrets.iter().map(|s| s.name.as_str()))
        .collect();
    for (role, file, rel) in state_files(input) {
        let path = input.state.root().join(rel);
        if !path.exists() {
            drift.push(Drift::MissingSecretSource {
                secret: format!("{role}/{file}"),
                path,
            });
        }
    }
    if let Some(podman) = &options.podman {
        let out = Command::new(podman)
            .args(["secret", "ls", "--format", "{{.Name}}"])
            .output()?;
        let listed: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        for name in &mounted {
            if !listed.contains(*name) {
                drift.push(Drift::MissingPodmanSecret((*name).to_owned()));
            }
        }
        for name in listed.iter().filter(|n| n.starts_with("reach.")) {
            if !mounted.contains(name.as_str()) {
                drift.push(Drift::StrayPodmanSecret(name.clone()));
            }
        }
        for (role, pinned) in &input.images {
            let found = local_digest(podman, &pinned.name);
            if found.as_ref() != Some(&pinned.digest) {
                drift.push(Drift::ImageDigest {
                    role: role.clone(),
                    pinned: pinned.digest.to_string(),
                    found: found.map(|d| d.to_string()),
                });
            }
        }
    }
    if let Some((path, expected)) = &options.ruleset {
        let found = std::fs::read_to_string(path).unwrap_or_default();
        if found != *expected {
            let (line, e, f) = first_difference(expected, &found);
            drift.push(Drift::Ruleset {
                path: path.clone(),
                line,
                expected: e,
                found: f,
            });
        }
    }
    Ok(drift)
}
