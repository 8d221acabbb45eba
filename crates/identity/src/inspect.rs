//! Inspection of a presented leaf against the SPIFFE X509-SVID rules.
//!
//! Chain validation is the TLS stack's job (webpki, in the port crate); this module checks what
//! webpki does not know about: one URI SAN that is a SPIFFE ID of our trust domain, no CA bit,
//! the digitalSignature key usage, and the validity window.

use std::time::SystemTime;

use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::{Principal, TrustDomain};

/// What a good leaf proves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafInfo {
    pub principal: Principal,
    pub serial_hex: String,
    /// Expiry as seconds since the Unix epoch.
    pub not_after_unix: i64,
}

/// Why a presented leaf was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeafError {
    /// leaf is not a parsable X.509 certificate
    #[error("leaf is not a parsable X.509 certificate")]
    Unparsable,
    /// leaf is not valid yet
    #[error("leaf is not valid yet")]
    NotYetValid,
    /// leaf has expired
    #[error("leaf has expired")]
    Expired,
    /// a CA certificate was presented as a leaf
    #[error("a CA certificate was presented as a leaf")]
    CaAsLeaf,
    /// leaf must carry exactly one SAN, a URI
    #[error("leaf must carry exactly one SAN, a URI; it has {uris} URI and {others} other SANs")]
    SanCount { uris: usize, others: usize },
    /// leaf lacks the digitalSignature key usage
    #[error("leaf lacks a critical digitalSignature key usage")]
    KeyUsage,
    /// leaf URI SAN is not a Reach SPIFFE ID
    #[error("leaf URI SAN `{0}` is not a Reach SPIFFE ID")]
    BadSpiffeId(String),
    /// leaf belongs to another trust domain
    #[error("leaf belongs to trust domain `{0}`")]
    ForeignTrustDomain(String),
}

/// Checks a DER leaf against the SVID rules and returns the principal it proves.
pub fn inspect_leaf(
    der: &[u8],
    trust_domain: &TrustDomain,
    now: SystemTime,
) -> Result<LeafInfo, LeafError> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|_| LeafError::Unparsable)?;
    let now_unix = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let validity = cert.validity();
    if now_unix < validity.not_before.timestamp() {
        return Err(LeafError::NotYetValid);
    }
    if now_unix > validity.not_after.timestamp() {
        return Err(LeafError::Expired);
    }

    let mut uris = Vec::new();
    let mut others = 0;
    let mut key_usage_ok = false;
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::BasicConstraints(bc) if bc.ca => return Err(LeafError::CaAsLeaf),
            ParsedExtension::SubjectAlternativeName(san) => {
                for name in &san.general_names {
                    match name {
                        GeneralName::URI(u) => uris.push((*u).to_owned()),
                        _ => others += 1,
                    }
                }
            }
            ParsedExtension::KeyUsage(ku) => {
                key_usage_ok = ext.critical && ku.digital_signature() && !ku.key_cert_sign();
            }
            _ => {}
        }
    }
    if uris.len() != 1 || others != 0 {
        return Err(LeafError::SanCount {
            uris: uris.len(),
            others,
        });
    }
    if !key_usage_ok {
        return Err(LeafError::KeyUsage);
    }
    let uri = uris.pop().unwrap_or_default();
    let principal: Principal = uri
        .parse()
        .map_err(|_| LeafError::BadSpiffeId(uri.clone()))?;
    if principal.trust_domain() != trust_domain {
        return Err(LeafError::ForeignTrustDomain(
            principal.trust_domain().to_string(),
        ));
    }
    Ok(LeafInfo {
        principal,
        serial_hex: hex::encode(cert.raw_serial()),
        not_after_unix: validity.not_after.timestamp(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rcgen::{IsCa, SanType};

    use super::*;
    use crate::mint::{DEFAULT_LEAF_LIFETIME, TrustRoot};

    fn der(pem: &str) -> Vec<u8> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
            .to_vec()
    }

    fn setup() -> (TrustDomain, TrustRoot, Principal, SystemTime) {
        let td = TrustDomain::new("reach.test").unwrap();
        let now = SystemTime::now();
        let root = TrustRoot::generate(&td, now).unwrap();
        let p = Principal::new(td.clone(), "core").unwrap();
        (td, root, p, now)
    }

    #[test]
    fn good_leaf_proves_its_principal() {
        let (td, root, p, now) = setup();
        let leaf = root.issue_leaf(&p, now, DEFAULT_LEAF_LIFETIME).unwrap();
        let info = inspect_leaf(&der(&leaf.cert_pem), &td, now).unwrap();
        assert_eq!(info.principal, p);
        assert_eq!(info.serial_hex, leaf.serial_hex);
    }

    /// The serial recorded at issue is the certificate's, whatever its random first byte
    /// (a leading zero byte would be dropped by DER: about one leaf in 128 once differed).
    #[test]
    fn the_recorded_serial_is_the_certificates_for_every_leaf() {
        let (td, root, p, now) = setup();
        for _ in 0..512 {
            let leaf = root.issue_leaf(&p, now, DEFAULT_LEAF_LIFETIME).unwrap();
            let info = inspect_leaf(&der(&leaf.cert_pem), &td, now).unwrap();
            assert_eq!(info.serial_hex, leaf.serial_hex);
            assert_eq!(leaf.serial_hex.len(), 32);
        }
    }

    #[test]
    fn refusals() {
        let (td, root, p, now) = setup();
        let check = |tweak: &dyn Fn(&mut rcgen::CertificateParams), at: SystemTime| {
            let leaf = root
                .issue_with(&p, now, DEFAULT_LEAF_LIFETIME, tweak)
                .unwrap();
            inspect_leaf(&der(&leaf.cert_pem), &td, at).unwrap_err()
        };
        assert_eq!(
            check(&|_| {}, now + Duration::from_secs(2 * 86400)),
            LeafError::Expired
        );
        assert_eq!(
            check(&|_| {}, now - Duration::from_secs(3600)),
            LeafError::NotYetValid
        );
        assert_eq!(
            check(
                &|c| c.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained),
                now
            ),
            LeafError::CaAsLeaf
        );
        assert_eq!(
            check(
                &|c| c
                    .subject_alt_names
                    .push(SanType::URI("spiffe://reach.test/ward".try_into().unwrap())),
                now
            ),
            LeafError::SanCount { uris: 2, others: 0 }
        );
        assert_eq!(
            check(
                &|c| c
                    .subject_alt_names
                    .push(SanType::DnsName("x.test".try_into().unwrap())),
                now
            ),
            LeafError::SanCount { uris: 1, others: 1 }
        );
        assert_eq!(check(&|c| c.key_usages.clear(), now), LeafError::KeyUsage);
        assert_eq!(
            check(
                &|c| c.subject_alt_names =
                    vec![SanType::URI("spiffe://other.test/core".try_into().unwrap())],
                now
            ),
            LeafError::ForeignTrustDomain("other.test".into())
        );
    }
}
