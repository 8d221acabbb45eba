//! Minting and rotating identities.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use reach_identity::files::{self, SecretFileError, TRUST_BUNDLE};
use reach_identity::{MintError, Principal, TrustRoot, inspect_leaf};
use reach_manifest::plan::StateLayout;
use reach_manifest::{CredentialKind, Manifest};

const ROOT_CERT: &str = "root.crt";
const ROOT_KEY: &str = "root.key";
const PREVIOUS_ROOT_CERT: &str = "root.previous.crt";
/// A leaf with less than this left is renewed (on `reach up`, by a running body's renewal and by
/// `reach scribe identities`), so a role never starts with, or keeps, a leaf about to end.
pub const RENEW_BEFORE: Duration = Duration::from_secs(6 * 3600);
/// Length of generated role keys (ward's signing and pseudonym key).
const ROLE_KEY_BYTES: usize = 32;

/// What a rotation changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rotation {
    /// Create what is missing; renew leaves close to expiry.
    #[default]
    IfNeeded,
    /// Issue new leaves for every principal under the current root.
    Leaves,
    /// Mint a new root; the bundle trusts both until [`Rotation::RetirePreviousRoot`].
    Root,
    /// Drop the previous root from every bundle: old-chain peers are refused from then on.
    RetirePreviousRoot,
}

/// Why Scribe could not materialize identities.
#[derive(Debug, thiserror::Error)]
pub enum ScribeError {
    #[error(transparent)]
    Mint(#[from] MintError),
    #[error(transparent)]
    Secret(#[from] SecretFileError),
    /// a secret directory could not be prepared
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// there is no previous root to retire
    #[error("there is no previous root to retire")]
    NoPreviousRoot,
    /// random bytes were unavailable
    #[error("random source failed: {0}")]
    Random(String),
    /// the interaction-seal key on disk is not a key
    #[error("{path}: {source}")]
    SealKey {
        path: PathBuf,
        source: reach_discord::seal::SealError,
    },
    /// ingress-edge seals to a key no egress-discord in this manifest holds
    #[error("role {0} holds interaction-seal-public but no role holds interaction-seal-key")]
    NoSealKeyHolder(String),
}

/// What was written.
#[derive(Debug, Default)]
pub struct IdentityReport {
    pub root_created: bool,
    pub leaves_issued: Vec<String>,
    pub keys_generated: Vec<PathBuf>,
    pub bundle_roots: usize,
}

fn load_root(dir: &Path) -> Result<Option<TrustRoot>, ScribeError> {
    let cert = dir.join(ROOT_CERT);
    if !cert.exists() {
        return Ok(None);
    }
    let cert_pem = String::from_utf8_lossy(&files::read_secret(&cert)?).into_owned();
    let key_pem = String::from_utf8_lossy(&files::read_secret(&dir.join(ROOT_KEY))?).into_owned();
    Ok(Some(TrustRoot::from_pem(cert_pem, key_pem)?))
}

fn save_root(dir: &Path, root: &TrustRoot) -> Result<(), ScribeError> {
    files::write_private(&dir.join(ROOT_CERT), root.cert_pem.as_bytes())?;
    files::write_private(&dir.join(ROOT_KEY), root.key_pem().as_bytes())?;
    Ok(())
}

fn leaf_needs_renewal(
    dir: &Path,
    manifest: &Manifest,
    principal: &Principal,
    now: SystemTime,
) -> bool {
    let Ok(der) = files::read_leaf_cert(dir) else {
        return true;
    };
    match inspect_leaf(&der, &manifest.trust_domain, now + RENEW_BEFORE) {
        Ok(info) => info.principal != *principal,
        Err(_) => true,
    }
}

/// Mints or rotates the identities of every principal in `manifest` under `layout`.
///
/// Bundles are written before leaves, so every role trusts a new root before any peer
/// presents a leaf chained to it; callers that rotate a live body wait one reload interval
/// between the two ([`write_bundles`] and [`issue_leaves`] are public for that).
pub fn materialize_identities(
    manifest: &Manifest,
    layout: &StateLayout,
    rotation: Rotation,
    now: SystemTime,
) -> Result<IdentityReport, ScribeError> {
    let mut report = write_bundles(manifest, layout, rotation, now)?;
    let issued = issue_leaves(manifest, layout, rotation, now)?;
    report.leaves_issued = issued;
    report.keys_generated = generate_role_keys(manifest, layout)?;
    Ok(report)
}

/// Creates or rotates the root and writes every principal's trust bundle.
pub fn write_bundles(
    manifest: &Manifest,
    layout: &StateLayout,
    rotation: Rotation,
    now: SystemTime,
) -> Result<IdentityReport, ScribeError> {
    let dir = layout.scribe_dir();
    files::ensure_private_dir(&dir)?;
    let mut report = IdentityReport::default();
    let current = load_root(&dir)?;
    let previous_path = dir.join(PREVIOUS_ROOT_CERT);
    let root = match (current, rotation) {
        (None, _) => {
            report.root_created = true;
            let r = TrustRoot::generate(&manifest.trust_domain, now)?;
            save_root(&dir, &r)?;
            let _ = std::fs::remove_file(&previous_path);
            r
        }
        (Some(old), Rotation::Root) => {
            report.root_created = true;
            files::write_private(&previous_path, old.cert_pem.as_bytes())?;
            let r = TrustRoot::generate(&manifest.trust_domain, now)?;
            save_root(&dir, &r)?;
            r
        }
        (Some(r), Rotation::RetirePreviousRoot) => {
            if !previous_path.exists() {
                return Err(ScribeError::NoPreviousRoot);
            }
            std::fs::remove_file(&previous_path).map_err(|source| ScribeError::Io {
                path: previous_path.clone(),
                source,
            })?;
            r
        }
        (Some(r), _) => r,
    };
    let mut bundle = root.cert_pem.clone();
    report.bundle_roots = 1;
    if previous_path.exists() {
        bundle.push_str(&String::from_utf8_lossy(&files::read_secret(
            &previous_path,
        )?));
        report.bundle_roots = 2;
    }
    for p in manifest.principals() {
        let sd = layout.secret_dir(p.name());
        files::ensure_secret_dir(&sd)?;
        // A body whose files predate group-readable secrets: its containers read them now.
        files::open_to_group(&sd)?;
        let path = sd.join(TRUST_BUNDLE);
        let same = files::read_secret(&path)
            .map(|b| b == bundle.as_bytes())
            .unwrap_or(false);
        if !same {
            files::write_secret(&path, bundle.as_bytes())?;
        }
    }
    Ok(report)
}

/// The file in Scribe's directory naming, one per line, the principals whose leaves are
/// withheld after a compromise (`reach compromise`): no rotation or renewal issues them a leaf
/// until the operator reinstates them, after rebuilding the role.
const WITHHELD: &str = "withheld";

/// The principals whose leaves are withheld.
pub fn withheld(layout: &StateLayout) -> Result<std::collections::BTreeSet<String>, ScribeError> {
    let path = layout.scribe_dir().join(WITHHELD);
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(t
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(source) => Err(ScribeError::Io { path, source }),
    }
}

fn write_withheld(
    layout: &StateLayout,
    names: &std::collections::BTreeSet<String>,
) -> Result<(), ScribeError> {
    let dir = layout.scribe_dir();
    files::ensure_private_dir(&dir)?;
    let text: String = names.iter().map(|n| format!("{n}\n")).collect();
    files::write_private(&dir.join(WITHHELD), text.as_bytes())?;
    Ok(())
}

/// Withholds `principal`'s leaf: its leaf and key are removed from its secret directory and no
/// later issuance gives it one, so once the root it was issued under is retired no peer accepts
/// anything it presents. Returns whether it held a leaf.
pub fn withhold(layout: &StateLayout, principal: &str) -> Result<bool, ScribeError> {
    let mut names = withheld(layout)?;
    names.insert(principal.to_owned());
    write_withheld(layout, &names)?;
    let sd = layout.secret_dir(principal);
    let mut held = false;
    for file in [files::LEAF_CERT, files::LEAF_KEY] {
        let path = sd.join(file);
        match std::fs::remove_file(&path) {
            Ok(()) => held = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(ScribeError::Io { path, source }),
        }
    }
    Ok(held)
}

/// Lifts [`withhold`]: the next issuance gives `principal` a fresh leaf under the current root.
/// Returns whether it was withheld.
pub fn reinstate(layout: &StateLayout, principal: &str) -> Result<bool, ScribeError> {
    let mut names = withheld(layout)?;
    let was = names.remove(principal);
    write_withheld(layout, &names)?;
    Ok(was)
}

/// Issues leaves under the current root: all of them for a rotation, else only those missing
/// or close to expiry; never to a withheld principal ([`withhold`]). Returns the principals
/// that got a new leaf.
pub fn issue_leaves(
    manifest: &Manifest,
    layout: &StateLayout,
    rotation: Rotation,
    now: SystemTime,
) -> Result<Vec<String>, ScribeError> {
    let root = load_root(&layout.scribe_dir())?.ok_or(ScribeError::NoPreviousRoot)?;
    let withheld = withheld(layout)?;
    let mut issued = Vec::new();
    for p in manifest.principals() {
        if withheld.contains(p.name()) {
            continue;
        }
        let sd = layout.secret_dir(p.name());
        let renew = match rotation {
            Rotation::Leaves | Rotation::Root => true,
            Rotation::IfNeeded | Rotation::RetirePreviousRoot => {
                leaf_needs_renewal(&sd, manifest, &p, now)
            }
        };
        if !renew {
            continue;
        }
        let leaf = root.issue_leaf(&p, now, reach_identity::mint::DEFAULT_LEAF_LIFETIME)?;
        files::write_leaf(&sd, &leaf)?;
        issued.push(p.name().to_owned());
    }
    Ok(issued)
}

/// Generates role keys the body owns itself (ward's key, the interaction-seal pair). External credentials — the Discord
/// token, provider keys — are never generated: the operator provides them.
fn generate_role_keys(
    manifest: &Manifest,
    layout: &StateLayout,
) -> Result<Vec<PathBuf>, ScribeError> {
    let mut written = Vec::new();
    for role in &manifest.roles {
        for c in role
            .credentials
            .iter()
            .filter(|c| c.kind == CredentialKind::WardKey)
        {
            let path = layout.secret_dir(role.name.as_str()).join(&c.file);
            if path.exists() {
                continue;
            }
            let mut key = [0u8; ROLE_KEY_BYTES];
            getrandom::fill(&mut key).map_err(|e| ScribeError::Random(e.to_string()))?;
            files::write_secret(&path, &key)?;
            written.push(path);
        }
    }
    written.extend(generate_seal_pair(manifest, layout)?);
    Ok(written)
}

/// Mints the interaction-seal pair: the private key ring into the secret dir of the role that
/// opens interaction tokens (egress-discord), the current public half into each role that seals
/// them (ingress-edge). An existing ring is kept and the public half rewritten from its current
/// key, so the two never drift apart. With `rotate_at` (Unix ms), the ring first rotates: a new
/// current key, the old one kept as the previous for `PREVIOUS_KEY_GRACE`.
fn generate_seal_pair(
    manifest: &Manifest,
    layout: &StateLayout,
) -> Result<Vec<PathBuf>, ScribeError> {
    seal_pair(manifest, layout, None)
}

/// `reach scribe identities --rotate interaction-seal`: a new interaction-seal pair, the old
/// private key kept as the previous one (retired at `now`), so tokens sealed before the
/// rotation are still answered. Takes effect when egress-discord, then ingress-edge, restart.
pub fn rotate_interaction_seal(
    manifest: &Manifest,
    layout: &StateLayout,
    now: SystemTime,
) -> Result<Vec<PathBuf>, ScribeError> {
    let ms = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    seal_pair(manifest, layout, Some(ms))
}

fn seal_pair(
    manifest: &Manifest,
    layout: &StateLayout,
    rotate_at: Option<u64>,
) -> Result<Vec<PathBuf>, ScribeError> {
    use reach_discord::seal::SealKeyring;
    let holders = |kind: CredentialKind| {
        manifest.roles.iter().flat_map(move |role| {
            role.credentials
                .iter()
                .filter(move |c| c.kind == kind)
                .map(move |c| layout.secret_dir(role.name.as_str()).join(&c.file))
        })
    };
    let mut written = Vec::new();
    // The one ring every holder gets (the first holder's, rotated at most once).
    let mut ring: Option<SealKeyring> = None;
    for path in holders(CredentialKind::InteractionSealKey) {
        let on_disk = path
            .exists()
            .then(|| -> Result<SealKeyring, ScribeError> {
                SealKeyring::from_bytes(&files::read_secret(&path)?).map_err(|source| {
                    ScribeError::SealKey {
                        path: path.clone(),
                        source,
                    }
                })
            })
            .transpose()?;
        if ring.is_none() {
            let first = match on_disk {
                Some(r) => r,
                None => SealKeyring::generate().map_err(|e| ScribeError::Random(e.to_string()))?,
            };
            ring = Some(match rotate_at {
                Some(at) => first
                    .rotate(at)
                    .map_err(|e| ScribeError::Random(e.to_string()))?,
                None => first,
            });
        }
        let bytes = ring.as_ref().expect("set above").to_bytes();
        if files::read_secret(&path).ok().as_deref() != Some(bytes.as_slice()) {
            files::write_secret(&path, &bytes)?;
            written.push(path);
        }
    }
    for path in holders(CredentialKind::InteractionSealPublic) {
        let Some(r) = &ring else {
            return Err(ScribeError::NoSealKeyHolder(path.display().to_string()));
        };
        let public = r.current_public();
        let current = path
            .exists()
            .then(|| files::read_secret(&path))
            .transpose()?;
        if current.as_deref() != Some(public.as_bytes().as_slice()) {
            files::write_secret(&path, public.as_bytes())?;
            written.push(path);
        }
    }
    Ok(written)
}

/// External credentials the manifest names that are not on disk yet (optional ones, and the
/// keys Scribe generates itself, excluded).
pub fn missing_credentials(manifest: &Manifest, layout: &StateLayout) -> Vec<(String, String)> {
    let mut missing = Vec::new();
    for role in &manifest.roles {
        for c in role.credentials.iter().filter(|c| {
            !c.optional
                && !matches!(
                    c.kind,
                    CredentialKind::WardKey
                        | CredentialKind::InteractionSealKey
                        | CredentialKind::InteractionSealPublic
                )
        }) {
            if !layout.secret_dir(role.name.as_str()).join(&c.file).exists() {
                missing.push((role.name.as_str().to_owned(), c.file.clone()));
            }
        }
    }
    missing
}
