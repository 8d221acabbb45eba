//! The pinned connector: TCP to the pinned address only, then TLS with SNI and certificate
//! verification for the admitted name against a configured root store.
//!
//! **Architecture Invariant:** this module never resolves a name, never reads a proxy setting
//! and never attaches a client certificate or credential. The only address it dials is
//! [`AdmittedDestination::pinned_addr`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::{AdmittedDestination, DestinationError};

/// Longest wait for TCP connect plus TLS handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the TCP connection to a pinned address. Tests wrap it to record every attempt.
pub trait Dialer: Send + Sync {
    /// Connect to exactly `addr`.
    fn dial(&self, addr: SocketAddr) -> impl Future<Output = io::Result<TcpStream>> + Send;
}

/// The production dialer: a plain tokio TCP connect with `TCP_NODELAY`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpDialer;

impl Dialer for TcpDialer {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

/// A dialer that records every attempted address and refuses (without any traffic) any
/// address outside loopback, so a test can assert nothing ever dialed a refused address and
/// nothing ever leaves the machine.
#[derive(Clone, Debug, Default)]
pub struct RecordingDialer {
    dials: Arc<Mutex<Vec<SocketAddr>>>,
}

impl RecordingDialer {
    /// A fresh recorder.
    pub fn new() -> Self {
        RecordingDialer::default()
    }

    /// Every address dialed so far, in order.
    pub fn dials(&self) -> Vec<SocketAddr> {
        self.dials.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Dialer for RecordingDialer {
    fn dial(&self, addr: SocketAddr) -> impl Future<Output = io::Result<TcpStream>> + Send {
        self.dials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(addr);
        async move {
            if !addr.ip().is_loopback() {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "recording dialer connects to loopback only",
                ));
            }
            TcpDialer.dial(addr).await
        }
    }
}

/// Build a client TLS configuration (ring provider, TLS 1.2 and 1.3, no client auth, ALPN
/// `http/1.1`) trusting `roots`. Nothing in it can be refused: ring supports both versions.
pub fn client_config(roots: RootCertStore) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// The Mozilla root store shipped by `webpki-roots`, for production destinations.
pub fn webpki_root_store() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// Dials admitted destinations.
#[derive(Clone)]
pub struct PinnedConnector<D = TcpDialer> {
    tls: TlsConnector,
    dialer: D,
    timeout: Duration,
}

impl<D: std::fmt::Debug> std::fmt::Debug for PinnedConnector<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedConnector")
            .field("dialer", &self.dialer)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<D: Dialer> PinnedConnector<D> {
    /// A connector trusting `roots` and dialing through `dialer`.
    pub fn new(roots: RootCertStore, dialer: D) -> Self {
        PinnedConnector {
            tls: TlsConnector::from(Arc::new(client_config(roots))),
            dialer,
            timeout: CONNECT_TIMEOUT,
        }
    }

    /// The dialer.
    pub fn dialer(&self) -> &D {
        &self.dialer
    }

    /// Dial the pinned address, check the peer, and complete TLS for the admitted name.
    pub async fn connect(
        &self,
        admitted: &AdmittedDestination,
    ) -> Result<PinnedStream, DestinationError> {
        let pinned = admitted.pinned_addr();
        let name = admitted.server_name().clone();
        let work = async {
            let tcp = self
                .dialer
                .dial(pinned)
                .await
                .map_err(|source| DestinationError::Dial {
                    addr: pinned,
                    source,
                })?;
            let peer = tcp.peer_addr().map_err(|source| DestinationError::Dial {
                addr: pinned,
                source,
            })?;
            if peer != pinned {
                return Err(DestinationError::PeerMismatch {
                    pinned,
                    found: peer,
                });
            }
            self.tls
                .connect(name, tcp)
                .await
                .map_err(|source| DestinationError::Tls {
                    name: admitted.destination().authority(),
                    source,
                })
        };
        let tls = tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| DestinationError::Dial {
                addr: pinned,
                source: io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
            })??;
        Ok(PinnedStream {
            tls,
            admitted: admitted.clone(),
        })
    }
}

/// A TLS stream to an admitted destination, carrying the admission it was opened for.
#[derive(Debug)]
pub struct PinnedStream {
    tls: TlsStream<TcpStream>,
    admitted: AdmittedDestination,
}

impl PinnedStream {
    /// The admission this stream was opened for.
    pub fn admitted(&self) -> &AdmittedDestination {
        &self.admitted
    }
}

impl AsyncRead for PinnedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

impl AsyncWrite for PinnedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}
