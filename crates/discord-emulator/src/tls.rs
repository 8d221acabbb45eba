//! The emulator's throwaway CA and the REST server's leaf, minted with rcgen at start.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA that exists only for one emulator run.
pub(crate) struct EmulatorCa {
    pub(crate) cert_der: CertificateDer<'static>,
    pub(crate) cert_pem: String,
    pub(crate) server: Arc<ServerConfig>,
}

/// Mint a CA and a leaf for `names`, and the rustls server configuration presenting it.
pub(crate) fn mint(names: &[&str]) -> Result<EmulatorCa, String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "reach discord emulator CA");
    let ca_key = KeyPair::generate().map_err(|e| e.to_string())?;
    let ca_cert = params.self_signed(&ca_key).map_err(|e| e.to_string())?;
    let cert_der = ca_cert.der().clone();
    let cert_pem = ca_cert.pem();
    let issuer = Issuer::new(params, ca_key);

    let leaf_params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .map_err(|e| e.to_string())?;
    let leaf_key = KeyPair::generate().map_err(|e| e.to_string())?;
    let leaf = leaf_params
        .signed_by(&leaf_key, &issuer)
        .map_err(|e| e.to_string())?;
    let chain = vec![leaf.der().clone(), cert_der.clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(EmulatorCa {
        cert_der,
        cert_pem,
        server: Arc::new(config),
    })
}

impl EmulatorCa {
    pub(crate) fn root_store(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        // The certificate was just minted; adding it cannot fail on a well-formed DER.
        let _ = roots.add(self.cert_der.clone());
        roots
    }
}
