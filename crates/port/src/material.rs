//! A role's TLS material (leaf, key, trust bundle), read from its secret directory and
//! reloaded when Scribe rotates it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use reach_identity::files::{self, LEAF_CERT, LEAF_KEY, SecretFileError, TRUST_BUNDLE};
use reach_identity::{LeafError, LeafInfo, TrustDomain, inspect_leaf};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How often a role checks its secret directory for rotated material. A rotation is in force
/// at most this long after Scribe's atomic rename.
pub const RELOAD_INTERVAL: Duration = Duration::from_millis(500);

/// Why TLS material could not be loaded. The role does not start (or keeps its old material).
#[derive(Debug, thiserror::Error)]
pub enum MaterialError {
    /// a secret file is missing, unreadable or too open
    #[error(transparent)]
    Secret(#[from] SecretFileError),
    /// a PEM file holds no usable certificate or key
    #[error("{path}: {what}")]
    Pem { path: PathBuf, what: &'static str },
    /// the role's own leaf breaks the SPIFFE rules
    #[error("own leaf {path}: {source}")]
    OwnLeaf { path: PathBuf, source: LeafError },
    /// the role's own leaf does not chain to its trust bundle
    #[error("own leaf {path} does not chain to the trust bundle: {reason}")]
    OwnChain { path: PathBuf, reason: String },
    /// rustls refused the material
    #[error("TLS material refused: {0}")]
    Tls(String),
}

/// One consistent generation of material.
#[derive(Debug)]
pub(crate) struct Generation {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) roots: Arc<RootCertStore>,
    pub(crate) client_verifier: Arc<dyn ClientCertVerifier>,
    pub(crate) own: LeafInfo,
    stamp: Vec<(PathBuf, Option<SystemTime>)>,
}

/// The reloadable TLS material of one role, shared by all its servers and clients.
#[derive(Debug)]
pub struct PortMaterial {
    dir: PathBuf,
    trust_domain: TrustDomain,
    pub(crate) provider: Arc<CryptoProvider>,
    current: RwLock<Arc<Generation>>,
}

fn stamp(dir: &Path) -> Vec<(PathBuf, Option<SystemTime>)> {
    [LEAF_CERT, LEAF_KEY, TRUST_BUNDLE]
        .iter()
        .map(|n| {
            let p = dir.join(n);
            let m = std::fs::metadata(&p).and_then(|m| m.modified()).ok();
            (p, m)
        })
        .collect()
}

fn certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, MaterialError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|_| MaterialError::Pem {
            path: path.to_owned(),
            what: "unparsable PEM",
        })?;
    if certs.is_empty() {
        return Err(MaterialError::Pem {
            path: path.to_owned(),
            what: "no certificate",
        });
    }
    Ok(certs)
}

impl PortMaterial {
    /// Loads the material in `dir`, refusing missing files, open modes and a bad own leaf.
    pub fn load(dir: &Path, trust_domain: TrustDomain) -> Result<Arc<Self>, MaterialError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let generation = Self::read(dir, &trust_domain, &provider)?;
        Ok(Arc::new(Self {
            dir: dir.to_owned(),
            trust_domain,
            provider,
            current: RwLock::new(Arc::new(generation)),
        }))
    }

    fn read(
        dir: &Path,
        td: &TrustDomain,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Generation, MaterialError> {
        let stamp = stamp(dir);
        let cert_path = dir.join(LEAF_CERT);
        let key_path = dir.join(LEAF_KEY);
        let bundle_path = dir.join(TRUST_BUNDLE);
        let chain = certs(&cert_path, &files::read_secret(&cert_path)?)?;
        let key_pem = files::read_secret(&key_path)?;
        let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &key_pem[..])
            .ok()
            .flatten()
            .ok_or(MaterialError::Pem {
                path: key_path.clone(),
                what: "no private key",
            })?;
        let bundle = certs(&bundle_path, &files::read_secret(&bundle_path)?)?;

        let own = inspect_leaf(&chain[0], td, SystemTime::now()).map_err(|source| {
            MaterialError::OwnLeaf {
                path: cert_path.clone(),
                source,
            }
        })?;
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| MaterialError::Tls(e.to_string()))?;
        let key = Arc::new(CertifiedKey::new(chain, signing));
        key.keys_match()
            .map_err(|e| MaterialError::Tls(e.to_string()))?;

        let mut roots = RootCertStore::empty();
        for c in bundle {
            roots
                .add(c)
                .map_err(|e| MaterialError::Tls(e.to_string()))?;
        }
        let parsed = rustls::server::ParsedCertificate::try_from(&key.cert[0])
            .map_err(|e| MaterialError::Tls(e.to_string()))?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &roots,
            &key.cert[1..],
            rustls_pki_types::UnixTime::now(),
            provider.signature_verification_algorithms.all,
        )
        .map_err(|e| MaterialError::OwnChain {
            path: cert_path.clone(),
            reason: e.to_string(),
        })?;
        let roots = Arc::new(roots);
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| MaterialError::Tls(e.to_string()))?;
        Ok(Generation {
            key,
            roots,
            client_verifier,
            own,
            stamp,
        })
    }

    pub fn trust_domain(&self) -> &TrustDomain {
        &self.trust_domain
    }

    pub(crate) fn current(&self) -> Arc<Generation> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What this role's own leaf proves.
    pub fn own(&self) -> LeafInfo {
        self.current().own.clone()
    }

    /// Re-reads the material if any file changed. A bad new generation is refused and the old
    /// one stays in force, so a half-finished rotation never takes a role down.
    pub fn reload_if_changed(&self) -> Result<bool, MaterialError> {
        if stamp(&self.dir) == self.current().stamp {
            return Ok(false);
        }
        let next = Self::read(&self.dir, &self.trust_domain, &self.provider)?;
        let serial = next.own.serial_hex.clone();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        tracing::info!(leaf_serial = %serial, "reloaded TLS material");
        Ok(true)
    }

    /// Polls for rotated material every [`RELOAD_INTERVAL`] until the task is dropped.
    pub fn spawn_reloader(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RELOAD_INTERVAL);
            loop {
                tick.tick().await;
                if let Err(e) = me.reload_if_changed() {
                    tracing::warn!(error = %e, "rotated TLS material refused; keeping the old");
                }
            }
        })
    }
}
