//! The handshake verifiers, called directly: a leaf that chains to the trust bundle but breaks
//! the SPIFFE rules is refused as `PeerRefusal::Leaf`, a valid leaf of a principal the port does
//! not admit as `PeerRefusal::NotAdmitted`, on the server's side (client leaves) and the
//! client's (the server's leaf). Over a socket both are only a TLS alert.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reach_identity::{IssuedLeaf, LeafError, Principal, TrustDomain, TrustRoot};
use reach_port::PortMaterial;
use reach_port::verify::{AdmittedClients, ExpectedServer, PeerRefusal};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::{CertificateError, Error};

const DAY: Duration = Duration::from_secs(24 * 3600);

struct Setup {
    _dir: tempfile::TempDir,
    td: TrustDomain,
    root: TrustRoot,
    material: Arc<PortMaterial>,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let td = TrustDomain::new("verify.test").unwrap();
        let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
        let server = Principal::new(td.clone(), "server").unwrap();
        root.provision(&dir.path().join("server"), &server, DAY)
            .unwrap();
        let material = PortMaterial::load(&dir.path().join("server"), td.clone()).unwrap();
        Self {
            _dir: dir,
            td,
            root,
            material,
        }
    }

    fn principal(&self, name: &str) -> Principal {
        Principal::new(self.td.clone(), name).unwrap()
    }

    /// A good leaf for `name`, signed by the trust root.
    fn leaf(&self, name: &str) -> CertificateDer<'static> {
        der(&self
            .root
            .issue_leaf(&self.principal(name), SystemTime::now(), DAY)
            .unwrap())
    }

    /// A leaf for `name` that chains to the root but carries its URI SAN twice.
    fn two_san_leaf(&self, name: &str) -> CertificateDer<'static> {
        der(&self
            .root
            .issue_with(&self.principal(name), SystemTime::now(), DAY, |p| {
                p.subject_alt_names.push(p.subject_alt_names[0].clone())
            })
            .unwrap())
    }

    /// A server-side verifier admitting only `client`.
    fn clients(&self) -> AdmittedClients {
        AdmittedClients::new(
            self.material.clone(),
            BTreeSet::from([self.principal("client")]),
        )
    }

    fn verify_client(&self, leaf: &CertificateDer<'_>) -> Result<(), Error> {
        self.clients()
            .verify_client_cert(leaf, &[], UnixTime::now())
            .map(|_| ())
    }

    fn verify_server(&self, leaf: &CertificateDer<'_>) -> Result<(), Error> {
        ExpectedServer::new(self.material.clone(), self.principal("server"))
            .verify_server_cert(
                leaf,
                &[],
                &ServerName::try_from("ignored").unwrap(),
                &[],
                UnixTime::now(),
            )
            .map(|_| ())
    }
}

fn der(leaf: &IssuedLeaf) -> CertificateDer<'static> {
    rustls_pemfile::certs(&mut leaf.cert_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
}

/// The `PeerRefusal` a verifier's error carries, if it is one of ours (not webpki's).
fn ours(e: &Error) -> Option<&PeerRefusal> {
    match e {
        Error::InvalidCertificate(CertificateError::Other(o)) => o.0.downcast_ref::<PeerRefusal>(),
        _ => None,
    }
}

/// The `PeerRefusal` a verifier's error carries; panics if rustls refused on its own.
fn peer_refusal(e: &Error) -> &PeerRefusal {
    ours(e).unwrap_or_else(|| panic!("not a PeerRefusal: {e:?}"))
}

#[test]
fn a_client_of_another_principal_is_not_admitted() {
    let s = Setup::new();
    s.verify_client(&s.leaf("client")).unwrap();
    let e = s.verify_client(&s.leaf("stranger")).unwrap_err();
    match peer_refusal(&e) {
        PeerRefusal::NotAdmitted(p) => assert_eq!(p, &s.principal("stranger")),
        other => panic!("expected NotAdmitted, got {other:?}"),
    }
}

#[test]
fn a_client_leaf_breaking_the_spiffe_rules_is_a_leaf_refusal() {
    let s = Setup::new();
    // The admitted principal, but its URI SAN twice: the leaf rules refuse before admission.
    let e = s.verify_client(&s.two_san_leaf("client")).unwrap_err();
    match peer_refusal(&e) {
        PeerRefusal::Leaf(l) => assert_eq!(l, &LeafError::SanCount { uris: 2, others: 0 }),
        other => panic!("expected Leaf, got {other:?}"),
    }
    // Signed by the root, but naming another trust domain.
    let elsewhere = Principal::new(TrustDomain::new("elsewhere.test").unwrap(), "client").unwrap();
    let foreign = der(&s
        .root
        .issue_leaf(&elsewhere, SystemTime::now(), DAY)
        .unwrap());
    let e = s.verify_client(&foreign).unwrap_err();
    match peer_refusal(&e) {
        PeerRefusal::Leaf(l) => {
            assert_eq!(l, &LeafError::ForeignTrustDomain("elsewhere.test".into()))
        }
        other => panic!("expected Leaf, got {other:?}"),
    }
    // An expired leaf and a CA certificate never reach the SPIFFE rules: the chain check
    // (webpki) refuses them first, with its own errors.
    let expired = der(&s
        .root
        .issue_leaf(&s.principal("client"), SystemTime::now() - 3 * DAY, DAY)
        .unwrap());
    let e = s.verify_client(&expired).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidCertificate(CertificateError::ExpiredContext { .. })
        ),
        "{e:?}"
    );
    let ca = rustls_pemfile::certs(&mut s.root.cert_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    let e = s.verify_client(&ca).unwrap_err();
    assert!(
        matches!(e, Error::InvalidCertificate(CertificateError::Other(_))) && ours(&e).is_none(),
        "{e:?}"
    );
    assert!(e.to_string().contains("CaUsedAsEndEntity"), "{e}");
}

#[test]
fn a_server_of_another_principal_is_refused_by_the_client() {
    let s = Setup::new();
    s.verify_server(&s.leaf("server")).unwrap();
    let e = s.verify_server(&s.leaf("client")).unwrap_err();
    match peer_refusal(&e) {
        PeerRefusal::NotAdmitted(p) => assert_eq!(p, &s.principal("client")),
        other => panic!("expected NotAdmitted, got {other:?}"),
    }
    let e = s.verify_server(&s.two_san_leaf("server")).unwrap_err();
    match peer_refusal(&e) {
        PeerRefusal::Leaf(l) => assert_eq!(l, &LeafError::SanCount { uris: 2, others: 0 }),
        other => panic!("expected Leaf, got {other:?}"),
    }
}
