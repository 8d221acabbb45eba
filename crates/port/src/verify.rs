//! Handshake verification: chain to the trust bundle (webpki), then the SPIFFE leaf rules and
//! the exact principals this port expects.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reach_identity::{LeafError, Principal, inspect_leaf};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::material::PortMaterial;

/// Why a peer failed the handshake, beyond what webpki reports.
#[derive(Debug, thiserror::Error)]
pub enum PeerRefusal {
    /// the peer's leaf breaks the SPIFFE rules
    #[error("peer leaf refused: {0}")]
    Leaf(#[from] LeafError),
    /// the peer is a valid principal this port does not admit
    #[error("principal {0} is not admitted on this port")]
    NotAdmitted(Principal),
}

fn other(e: PeerRefusal) -> rustls::Error {
    tracing::warn!(reason = %e, "handshake refused");
    rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(e))))
}

fn system_time(now: UnixTime) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(now.as_secs())
}

/// Server side: requires a client leaf from one of `admitted`.
#[derive(Debug)]
pub struct AdmittedClients {
    material: Arc<PortMaterial>,
    admitted: BTreeSet<Principal>,
}

impl AdmittedClients {
    pub fn new(material: Arc<PortMaterial>, admitted: BTreeSet<Principal>) -> Self {
        Self { material, admitted }
    }
}

impl ClientCertVerifier for AdmittedClients {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // Hints are optional; every role holds exactly one leaf, so none are needed.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let generation = self.material.current();
        generation
            .client_verifier
            .verify_client_cert(end_entity, intermediates, now)?;
        let leaf = inspect_leaf(end_entity, self.material.trust_domain(), system_time(now))
            .map_err(|e| other(e.into()))?;
        if !self.admitted.contains(&leaf.principal) {
            return Err(other(PeerRefusal::NotAdmitted(leaf.principal)));
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls12_refused()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(&self.material, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        schemes(&self.material)
    }
}

/// Client side: requires the server leaf to be exactly `expected`. The TLS server name is
/// ignored; SPIFFE leaves carry no DNS name and the socket path proves nothing.
#[derive(Debug)]
pub struct ExpectedServer {
    material: Arc<PortMaterial>,
    expected: Principal,
}

impl ExpectedServer {
    pub fn new(material: Arc<PortMaterial>, expected: Principal) -> Self {
        Self { material, expected }
    }
}

impl ServerCertVerifier for ExpectedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let generation = self.material.current();
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &generation.roots,
            intermediates,
            now,
            self.material.provider.signature_verification_algorithms.all,
        )?;
        let leaf = inspect_leaf(end_entity, self.material.trust_domain(), system_time(now))
            .map_err(|e| other(e.into()))?;
        if leaf.principal != self.expected {
            return Err(other(PeerRefusal::NotAdmitted(leaf.principal)));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls12_refused()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(&self.material, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        schemes(&self.material)
    }
}

/// Ports speak TLS 1.3 only; a TLS 1.2 signature is never verified.
fn tls12_refused() -> Result<HandshakeSignatureValid, rustls::Error> {
    Err(rustls::Error::PeerIncompatible(
        rustls::PeerIncompatible::Tls12NotOffered,
    ))
}

fn tls13_signature(
    material: &PortMaterial,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    rustls::crypto::verify_tls13_signature(
        message,
        cert,
        dss,
        &material.provider.signature_verification_algorithms,
    )
}

fn schemes(material: &PortMaterial) -> Vec<SignatureScheme> {
    material
        .provider
        .signature_verification_algorithms
        .supported_schemes()
}
