//! Dialing a port: TLS 1.3 with this role's leaf, and the server must be exactly the principal
//! the port table names.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use reach_identity::Principal;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
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
            let mut tls = connector.connect(name, io).await?;
            confirm_admitted(&mut tls).await?;
            Ok::<_, std::io::Error>(TokioIo::new(tls))
        }
    });
    (Endpoint::from_static("http://reach.port"), dial)
}

/// Returns once the server has sent application data on `tls`, or the server's refusal.
///
/// Under TLS 1.3 a client's handshake ends before the server has checked the client's
/// certificate, so a refused client "connects" and learns of the refusal only from the alert
/// that follows. Handed to tonic, such a connection dies before it is ready, and tonic's
/// reconnect dials again at once: the same refused handshake, possibly in a loop until the
/// caller's deadline. Every port's server speaks first (HTTP/2's server preface goes out as the
/// connection is accepted), so its first application bytes prove that it admitted this client;
/// they stay buffered in the TLS session for hyper to read.
pub async fn confirm_admitted<IO: AsyncRead + Unpin>(tls: &mut TlsStream<IO>) -> io::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        let (io, session) = tls.get_mut();
        let state = session.process_new_packets().map_err(refused)?;
        if state.plaintext_bytes_to_read() > 0 {
            return Ok(());
        }
        let n = io.read(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the port closed the connection without admitting this client",
            ));
        }
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            session.read_tls(&mut rest)?;
            session.process_new_packets().map_err(refused)?;
        }
    }
}

/// The server's alert (or any other TLS failure), as tokio-rustls reports it.
fn refused(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
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
