//! Test support (feature `test-support`): a test CA minted with rcgen and a scripted TLS server
//! on `127.0.0.1:0`. Nothing here is used in production builds.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A throwaway certificate authority.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    cert: CertificateDer<'static>,
    pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

impl TestCa {
    /// Mint a fresh CA.
    pub fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("ca key");
        let cert = params.self_signed(&key).expect("ca cert");
        let pem = cert.pem();
        let cert = cert.der().clone();
        TestCa {
            issuer: Issuer::new(params, key),
            cert,
            pem,
        }
    }

    /// A root store trusting only this CA.
    pub fn root_store(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert.clone()).expect("add test root");
        roots
    }

    /// The CA certificate as PEM, for a role whose settings name a `ca_file`.
    pub fn cert_pem(&self) -> &str {
        &self.pem
    }

    /// A server configuration presenting a leaf for `names` (DNS names or IP literals).
    pub fn server_config(&self, names: &[&str]) -> Arc<ServerConfig> {
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("leaf params");
        let key = KeyPair::generate().expect("leaf key");
        let leaf = params.signed_by(&key, &self.issuer).expect("leaf cert");
        let chain = vec![leaf.der().clone(), self.cert.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server cert");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}

/// Start a TLS server on `127.0.0.1:0` that runs `handler` for each accepted connection whose
/// handshake succeeds. Returns the bound address and the accept loop's handle (abort it, or
/// let the runtime end it with the test).
pub async fn serve_tls<F, Fut>(
    config: Arc<ServerConfig>,
    handler: F,
) -> (SocketAddr, JoinHandle<()>)
where
    F: Fn(TlsStream<tokio::net::TcpStream>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind test server");
    let addr = listener.local_addr().expect("local addr");
    let acceptor = TlsAcceptor::from(config);
    let handler = Arc::new(handler);
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let handler = Arc::clone(&handler);
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    handler(tls).await;
                }
            });
        }
    });
    (addr, task)
}
