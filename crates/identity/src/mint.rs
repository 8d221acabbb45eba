//! Minting the trust root and role leaves (rcgen).
//!
//! Leaves follow the SPIFFE X509-SVID profile: exactly one URI SAN, not a CA, a critical
//! key usage of digitalSignature, and both serverAuth and clientAuth, because every role is
//! both a server and a client of typed ports.

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::OffsetDateTime;

use crate::{Principal, TrustDomain};

/// Default leaf lifetime. Short, so a stolen leaf is worth little; Scribe rotates before expiry.
pub const DEFAULT_LEAF_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Trust root lifetime. The root key never leaves Scribe's own directory.
pub const ROOT_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// Leaves are back-dated slightly so a small clock skew between roles does not refuse them.
const BACKDATE: Duration = Duration::from_secs(60);

/// Why minting failed.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    /// certificate generation failed
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// trust root PEM is unreadable
    #[error("trust root PEM is unreadable: {0}")]
    BadRootPem(String),
    /// a secret file could not be written
    #[error(transparent)]
    Secret(#[from] crate::files::SecretFileError),
}

/// The deployment's trust root: a self-signed CA and its key, both PEM.
#[derive(Clone)]
pub struct TrustRoot {
    pub cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for TrustRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustRoot")
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// A freshly issued leaf: certificate and private key (PEM) and its serial (hex).
#[derive(Clone)]
pub struct IssuedLeaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub serial_hex: String,
}

impl std::fmt::Debug for IssuedLeaf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedLeaf")
            .field("serial_hex", &self.serial_hex)
            .finish_non_exhaustive()
    }
}

fn odt(t: SystemTime) -> OffsetDateTime {
    OffsetDateTime::from(t)
}

fn fresh_serial() -> rcgen::SerialNumber {
    // 16 random bytes from a fresh key's public half: unique without another RNG dependency.
    let k = KeyPair::generate().expect("key generation");
    let mut bytes: Vec<u8> = k.public_key_raw().iter().rev().take(16).copied().collect();
    // Positive, and minimal as DER writes it: a leading zero byte would be dropped from the
    // certificate, and the serial recorded here would not be the certificate's.
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    rcgen::SerialNumber::from(bytes)
}

impl TrustRoot {
    /// Generates a new root for `trust_domain`, valid from `now` for [`ROOT_LIFETIME`].
    pub fn generate(trust_domain: &TrustDomain, now: SystemTime) -> Result<Self, MintError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            format!("Reach trust root {trust_domain}"),
        );
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.subject_alt_names =
            vec![SanType::URI(format!("spiffe://{trust_domain}").try_into()?)];
        params.not_before = odt(now - BACKDATE);
        params.not_after = odt(now + ROOT_LIFETIME);
        params.serial_number = Some(fresh_serial());
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Loads a root from its PEM certificate and PEM key.
    pub fn from_pem(cert_pem: String, key_pem: String) -> Result<Self, MintError> {
        KeyPair::from_pem(&key_pem).map_err(|e| MintError::BadRootPem(e.to_string()))?;
        Ok(Self { cert_pem, key_pem })
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Issues a leaf for `principal`, valid from `now` for `lifetime`.
    pub fn issue_leaf(
        &self,
        principal: &Principal,
        now: SystemTime,
        lifetime: Duration,
    ) -> Result<IssuedLeaf, MintError> {
        self.issue_with(principal, now, lifetime, |_| {})
    }

    /// Gives `principal` a complete secret directory under this root alone: a fresh leaf and a
    /// bundle holding only this root. Tests and benchmarks use it to stand up ports without
    /// Scribe; Scribe writes bundles and leaves separately so rotations can overlap.
    pub fn provision(
        &self,
        dir: &std::path::Path,
        principal: &Principal,
        lifetime: Duration,
    ) -> Result<IssuedLeaf, MintError> {
        use crate::files;
        files::ensure_secret_dir(dir)?;
        let leaf = self.issue_leaf(principal, SystemTime::now(), lifetime)?;
        files::write_secret(&dir.join(files::TRUST_BUNDLE), self.cert_pem.as_bytes())?;
        files::write_leaf(dir, &leaf)?;
        Ok(leaf)
    }

    /// Issues a leaf after letting `tweak` change its parameters. Tests use this to mint the
    /// malformed leaves the verifier must refuse; production code uses [`Self::issue_leaf`].
    pub fn issue_with(
        &self,
        principal: &Principal,
        now: SystemTime,
        lifetime: Duration,
        tweak: impl FnOnce(&mut CertificateParams),
    ) -> Result<IssuedLeaf, MintError> {
        let root_key =
            KeyPair::from_pem(&self.key_pem).map_err(|e| MintError::BadRootPem(e.to_string()))?;
        let issuer = Issuer::from_ca_cert_pem(&self.cert_pem, root_key)
            .map_err(|e| MintError::BadRootPem(e.to_string()))?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, principal.name());
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.subject_alt_names = vec![SanType::URI(principal.uri().try_into()?)];
        params.not_before = odt(now - BACKDATE);
        params.not_after = odt(now + lifetime);
        let serial = fresh_serial();
        let serial_hex = hex::encode(serial.as_ref());
        params.serial_number = Some(serial);
        params.use_authority_key_identifier_extension = true;
        tweak(&mut params);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(IssuedLeaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            serial_hex,
        })
    }
}
