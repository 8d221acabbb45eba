//! HTTPS download of an immutable release archive: destination admission
//! (`reach-destination`), bounded reading (`reach-bounded`), and every redirect judged by the
//! source's own rules before it is re-admitted as a brand-new destination.
//!
//! **Architecture Invariant:** nothing here unpacks or trusts the bytes: the archive goes to
//! [`reach_corpus::CorpusStore::refresh_archive`], which verifies the published sha256 before
//! the archive code reads a single entry.

use bytes::Bytes;
use http::Method;
use http::header::{LOCATION, USER_AGENT};
use reach_bounded::{Bounds, ReturnError};
use reach_corpus::{AdmittedUrl, SourceRefusal, SourceSpec, admit_redirect};
use reach_destination::{
    Admission, Destination, DestinationError, PinnedConnector, Purpose, TcpDialer,
};

use reach_destination::roads::ConfiguredResolver;

/// Most redirects one download may follow (each admitted again from scratch).
pub const MAX_REDIRECTS: usize = 5;
/// The purpose every corpus destination is admitted for (the manifest's `corpus-source`).
pub const PURPOSE: &str = "corpus-acquisition";
/// Most bytes of one archive held in memory: the download is buffered whole before its digest
/// is checked, and the role's container has 256 MiB (manifest `limits.memory_mib`).
pub const MAX_ARCHIVE_BYTES: u64 = 96 * 1024 * 1024;
/// Statuses read: success, and the redirects this module judges itself.
const STATUSES: [u16; 6] = [200, 301, 302, 303, 307, 308];
/// Media types a release host sends for a `.tar.gz` (and for a redirect's small body). The
/// type decides nothing: the digest check does.
const MEDIA_TYPES: [&str; 8] = [
    "application/gzip",
    "application/x-gzip",
    "application/x-gtar",
    "application/x-tar",
    "application/octet-stream",
    "application/x-compressed-tar",
    "text/html",
    "text/plain",
];

/// Why a download was refused. Each keeps the previous snapshot active.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The source or a redirect broke the source rules (plain HTTP, foreign origin…).
    #[error(transparent)]
    Source(#[from] SourceRefusal),
    /// Destination admission refused, or the connection failed.
    #[error(transparent)]
    Destination(#[from] DestinationError),
    /// The response crossed a bound or broke HTTP.
    #[error(transparent)]
    Return(#[from] ReturnError),
    /// A redirect carried no usable Location.
    #[error("redirect without a Location header")]
    NoLocation,
    /// The chain was longer than [`MAX_REDIRECTS`].
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
}

impl FetchError {
    pub fn code(&self) -> String {
        match self {
            FetchError::Source(r) => r.code().into(),
            FetchError::Destination(e) => e.code().into(),
            FetchError::Return(e) => e.code(),
            FetchError::NoLocation => "corpus/redirect-without-location".into(),
            FetchError::TooManyRedirects => "corpus/too-many-redirects".into(),
        }
    }
}

/// Downloads release archives through admitted, pinned connections.
#[derive(Debug)]
pub struct ArchiveFetcher {
    admission: Admission<ConfiguredResolver>,
    connector: PinnedConnector<TcpDialer>,
}

impl ArchiveFetcher {
    pub fn new(admission: Admission<ConfiguredResolver>, roots: rustls::RootCertStore) -> Self {
        ArchiveFetcher {
            admission,
            connector: PinnedConnector::new(roots, TcpDialer),
        }
    }

    pub fn admission(&self) -> &Admission<ConfiguredResolver> {
        &self.admission
    }

    /// The bytes at `spec`'s URL, following only redirects the source admits. The byte and
    /// work-time ceilings of the source bound the download.
    pub async fn fetch(&self, spec: &SourceSpec, url: &AdmittedUrl) -> Result<Bytes, FetchError> {
        let bounds = Bounds {
            allowed_statuses: STATUSES.to_vec(),
            allowed_content_types: MEDIA_TYPES.iter().map(|t| t.to_string()).collect(),
            max_wire_bytes: spec.ceilings.max_bytes.min(MAX_ARCHIVE_BYTES),
            max_expanded_bytes: spec.ceilings.max_bytes.min(MAX_ARCHIVE_BYTES),
            // An archive is not text: token bounds do not apply to it.
            max_tokens: u64::MAX,
            max_token_bytes: u64::MAX,
            max_stream_time: spec.ceilings.max_work_time(),
            ..Bounds::default()
        };
        let mut current = url.clone();
        for _ in 0..=MAX_REDIRECTS {
            let destination = Destination::parse(current.as_str(), Purpose::new(PURPOSE)?)?;
            let admitted = self.admission.admit(destination).await?;
            let stream = self.connector.connect(&admitted).await?;
            let request = admitted
                .request(Method::GET)
                .header(
                    USER_AGENT,
                    concat!("reach-corpus-builder/", env!("CARGO_PKG_VERSION")),
                )
                .body(Bytes::new())
                .map_err(|e| ReturnError::Protocol(e.to_string()))?;
            let response = reach_bounded::fetch(stream, request, &bounds).await?;
            if !response.status.is_redirection() {
                return Ok(response.body);
            }
            let location = response
                .headers
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or(FetchError::NoLocation)?;
            current = admit_redirect(&current, location, &spec.redirect_origins)?;
            tracing::info!(source = %spec.name, to = %current, "redirect admitted");
        }
        Err(FetchError::TooManyRedirects)
    }
}
