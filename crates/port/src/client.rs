//! Dialing a port: TLS 1.3 with this role's leaf, and the server must be exactly the principal
//! the port table names.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use reach_identity::Principal;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint};

use crate::material::PortMaterial;
use crate::server::{Transport, own_cert};
use crate::verify::ExpectedServer;

/// Where a port listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortAddress {
    /// A Unix socket inside the port's own directory (the default: no network needed).
    Unix(PathBuf),
    /// Loopback TCP, for hosts where sockets cannot be shared.
    Tcp(SocketAddr),
}

/// The TLS server name sent in the ClientHello. It proves nothing and is never checked; the
/// server's SPIFFE ID is.
const UNUSED_SERVER_NAME: &str = "reach.port.invalid";

fn client_config(material: &Arc<PortMaterial>, expected: Principal) -> Arc<ClientConfig> {
    let mut config = ClientConfig::builder_with_provider(material.provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("ring supports TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ExpectedServer::new(material.clone(), expected)))
        .with_client_cert_resolver(own_cert(material));
    config.alpn_protocols = vec![crate::ALPN_H2.to_vec()];
    config.enable_sni = false;
    Arc::new(config)
}

fn endpoint(
    address: PortAddress,
    material: &Arc<PortMaterial>,
    expected: Principal,
) -> (
    Endpoint,
    impl tower_service::Service<
        http::Uri,
        Response = TokioIo<tokio_rustls::client::TlsStream<Transport>>,
        Error = std::io::Error,
        Future = impl Send,
    > + Clone
    + Send
    + 'static,
) {
    let connector = TlsConnector::from(client_config(material, expected));
    let dial = tower::service_fn(move |_: http::Uri| {
        let (connector, address) = (connector.clone(), address.clone());
        async move {
            let io = match &address {
                PortAddress::Unix(p) => Transport::Unix(UnixStream::connect(p).await?),
                PortAddress::Tcp(a) => Transport::Tcp(TcpStream::connect(a).await?),
            };
            let name = ServerName::try_from(UNUSED_SERVER_NAME).expect("static name");
            let tls = connector.connect(name, io).await?;
            Ok::<_, std::io::Error>(TokioIo::new(tls))
        }
    });
    (Endpoint::from_static("http://reach.port"), dial)
}

/// Connects now; fails if the server is absent or refuses the handshake.
pub async fn connect(
    address: PortAddress,
    material: &Arc<PortMaterial>,
    expected: Principal,
) -> Result<Channel, tonic::transport::Error> {
    let (ep, dial) = endpoint(address, material, expected);
    ep.connect_with_connector(dial).await
}

/// Connects on first use, so a role can start before the roles it calls.
pub fn connect_lazy(
    address: PortAddress,
    material: &Arc<PortMaterial>,
    expected: Principal,
) -> Channel {
    let (ep, dial) = endpoint(address, material, expected);
    ep.connect_with_connector_lazy(dial)
}
