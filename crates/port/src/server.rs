//! Serving one port: accept, TLS 1.3 handshake with required client certificates, hand the
//! verified peer to tonic as connection info, authorize each RPC. An established connection
//! is ended as soon as its peer's leaf no longer verifies under reloaded material (a retired
//! root, after `reach compromise`), before another byte of it is read.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use reach_identity::{Principal, inspect_leaf};
use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::server::NamedService;
use tonic::transport::server::Connected;

use crate::authz::{AuthorizeLayer, PortPolicy};
use crate::client::PortAddress;
use crate::material::PortMaterial;
use crate::verify::AdmittedClients;

/// A handshake that has not finished by then is dropped, so a silent client cannot hold a slot.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Concurrent handshakes per port; further connections wait in the kernel backlog.
pub const MAX_HANDSHAKES: usize = 64;

/// A peer whose leaf chained to the trust bundle, passed the SPIFFE rules and is admitted on
/// this port. Only the handshake can build one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedPeer {
    principal: Principal,
    serial_hex: String,
}

impl VerifiedPeer {
    pub fn principal(&self) -> &Principal {
        &self.principal
    }
    pub fn serial_hex(&self) -> &str {
        &self.serial_hex
    }
}

/// The byte stream under TLS: a Unix socket or loopback TCP.
#[derive(Debug)]
pub enum Transport {
    Unix(UnixStream),
    Tcp(TcpStream),
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Transport::Unix($s) => {
                let $s = Pin::new($s);
                $e
            }
            Transport::Tcp($s) => {
                let $s = Pin::new($s);
                $e
            }
        }
    };
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => s.poll_write(cx, buf))
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_shutdown(cx))
    }
}

/// A TLS connection carrying its verified peer as tonic connection info.
#[derive(Debug)]
pub struct PeerStream {
    inner: TlsStream<Transport>,
    peer: VerifiedPeer,
    trust: PeerTrust,
}

/// The peer's leaf and the material generation it last verified under. A handshake verifies a
/// leaf once; a connection outlives it. When the material changes (a reload after a rotation)
/// the leaf is verified again under the new roots, and a leaf that no longer chains ends the
/// connection: a retired root's leaf keeps no session open.
struct PeerTrust {
    material: Arc<PortMaterial>,
    leaf: rustls::pki_types::CertificateDer<'static>,
    checked: Arc<crate::material::Generation>,
}

impl std::fmt::Debug for PeerTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTrust")
    }
}

impl PeerTrust {
    fn still_trusted(&mut self) -> io::Result<()> {
        let now = self.material.current();
        if Arc::ptr_eq(&now, &self.checked) {
            return Ok(());
        }
        now.client_verifier
            .verify_client_cert(&self.leaf, &[], rustls::pki_types::UnixTime::now())
            .map_err(|e| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("the peer's leaf no longer verifies: {e}"),
                )
            })?;
        self.checked = now;
        Ok(())
    }
}

impl Connected for PeerStream {
    type ConnectInfo = VerifiedPeer;
    fn connect_info(&self) -> VerifiedPeer {
        self.peer.clone()
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if let Err(e) = me.trust.still_trusted() {
            tracing::warn!(peer = %me.peer.principal, serial = %me.peer.serial_hex, error = %e, "connection ended");
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[derive(Debug)]
struct OwnCert(Arc<PortMaterial>);

impl ResolvesServerCert for OwnCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current().key.clone())
    }
}

impl rustls::client::ResolvesClientCert for OwnCert {
    fn resolve(
        &self,
        _hints: &[&[u8]],
        _schemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current().key.clone())
    }
    fn has_certs(&self) -> bool {
        true
    }
}

pub(crate) fn own_cert(
    material: &Arc<PortMaterial>,
) -> Arc<dyn rustls::client::ResolvesClientCert> {
    Arc::new(OwnCert(material.clone()))
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// One bound port, ready to serve a single gRPC service.
#[derive(Debug)]
pub struct PortServer {
    incoming: ReceiverStream<Result<PeerStream, Infallible>>,
    policy: PortPolicy,
    accept_task: tokio::task::JoinHandle<()>,
    tcp_addr: Option<std::net::SocketAddr>,
}

impl PortServer {
    /// Binds `address` and starts accepting. A stale Unix socket file is replaced.
    pub fn bind(
        address: &PortAddress,
        material: Arc<PortMaterial>,
        policy: PortPolicy,
    ) -> io::Result<Self> {
        let mut tcp_addr = None;
        let listener = match address {
            PortAddress::Unix(path) => {
                if path.exists() {
                    std::fs::remove_file(path)?;
                }
                Listener::Unix(UnixListener::bind(path)?)
            }
            PortAddress::Tcp(addr) => {
                if !addr.ip().is_loopback() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "ports bind loopback only",
                    ));
                }
                let std = std::net::TcpListener::bind(addr)?;
                std.set_nonblocking(true)?;
                tcp_addr = Some(std.local_addr()?);
                Listener::Tcp(TcpListener::from_std(std)?)
            }
        };
        let verifier = Arc::new(AdmittedClients::new(material.clone(), policy.admitted()));
        let mut config = ServerConfig::builder_with_provider(material.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(io::Error::other)?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(OwnCert(material.clone())));
        config.alpn_protocols = vec![crate::ALPN_H2.to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (tx, rx) = mpsc::channel(MAX_HANDSHAKES);
        let accept_task = tokio::spawn(accept_loop(
            listener,
            acceptor,
            material,
            tx,
            policy.port.clone(),
        ));
        Ok(Self {
            incoming: ReceiverStream::new(rx),
            policy,
            accept_task,
            tcp_addr,
        })
    }

    /// The bound loopback address of a TCP port (useful after binding port 0).
    pub fn tcp_addr(&self) -> Option<std::net::SocketAddr> {
        self.tcp_addr
    }

    /// Serves `service` on this port until `shutdown` completes, then drains.
    pub async fn serve<S>(
        self,
        service: S,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), tonic::transport::Error>
    where
        S: tower_service::Service<
                http::Request<tonic::body::Body>,
                Response = http::Response<tonic::body::Body>,
                Error = Infallible,
            > + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let Self {
            incoming,
            policy,
            accept_task,
            ..
        } = self;
        let result = tonic::transport::Server::builder()
            .layer(AuthorizeLayer::new(policy))
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await;
        accept_task.abort();
        result
    }
}

async fn accept_loop(
    listener: Listener,
    acceptor: TlsAcceptor,
    material: Arc<PortMaterial>,
    tx: mpsc::Sender<Result<PeerStream, Infallible>>,
    port: String,
) {
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let accepted = match &listener {
            Listener::Unix(l) => l.accept().await.map(|(s, _)| Transport::Unix(s)),
            Listener::Tcp(l) => l.accept().await.map(|(s, _)| Transport::Tcp(s)),
        };
        let io = match accepted {
            Ok(io) => io,
            Err(e) => {
                tracing::warn!(%port, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (acceptor, material, tx, port) =
            (acceptor.clone(), material.clone(), tx.clone(), port.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                Ok(Ok(tls)) => match peer_of(&tls, &material) {
                    Some((peer, leaf)) => {
                        let trust = PeerTrust {
                            checked: material.current(),
                            material,
                            leaf,
                        };
                        let _ = tx
                            .send(Ok(PeerStream {
                                inner: tls,
                                peer,
                                trust,
                            }))
                            .await;
                    }
                    None => tracing::warn!(%port, "handshake finished without a verifiable peer"),
                },
                Ok(Err(e)) => tracing::warn!(%port, error = %e, "handshake refused"),
                Err(_) => tracing::warn!(%port, "handshake timed out"),
            }
        });
    }
}

fn peer_of(
    tls: &TlsStream<Transport>,
    material: &PortMaterial,
) -> Option<(VerifiedPeer, rustls::pki_types::CertificateDer<'static>)> {
    let (_, conn) = tls.get_ref();
    let leaf = conn.peer_certificates()?.first()?;
    // The verifier already accepted this leaf; re-inspecting yields its principal.
    let info = inspect_leaf(leaf, material.trust_domain(), std::time::SystemTime::now()).ok()?;
    Some((
        VerifiedPeer {
            principal: info.principal,
            serial_hex: info.serial_hex,
        },
        leaf.clone().into_owned(),
    ))
}
