//! The named limits on a return, and the violation that names the one crossed.

use std::fmt;
use std::time::Duration;

/// Limits on one response. Each field is one bound; the default and the reason are beside it.
/// An egress role starts from [`Bounds::default`] and tightens per destination.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Statuses accepted (default `[200]`). Anything else, redirects included, is refused
    /// before the body is read: redirects are re-admitted by the caller, never followed here.
    pub allowed_statuses: Vec<u16>,
    /// Media types accepted, compared case-insensitively without parameters (default
    /// `application/json`, `text/event-stream`). A missing Content-Type is refused.
    pub allowed_content_types: Vec<String>,
    /// Header lines in the response head and trailers (default 100: real APIs send ~20;
    /// hyper's own default is also 100).
    pub max_header_count: u64,
    /// Bytes of the response head and trailers (default 64 KiB: an order of magnitude above
    /// what providers send, far below what could pressure memory).
    pub max_header_bytes: u64,
    /// Bytes read from the connection in total, head included, after TLS (default 8 MiB:
    /// a chat completion or A2A task is kilobytes).
    pub max_wire_bytes: u64,
    /// Bytes of body after content decoding (default 8 MiB, same reasoning).
    pub max_expanded_bytes: u64,
    /// Largest expanded/compressed ratio (default 20: text compresses 3-10x; a bomb
    /// compresses 1000x). Checked once more than [`RATIO_GRACE_BYTES`] are expanded, so a tiny
    /// highly compressible body is not refused.
    pub max_compression_ratio: u64,
    /// Chunks of a chunked body (default 100 000: a token-per-chunk stream of a long answer;
    /// an endless stream crosses it quickly).
    pub max_chunk_count: u64,
    /// Declared size of one chunk (default 1 MiB).
    pub max_chunk_bytes: u64,
    /// Time from sending the request until the response head (default 120 s: a model may
    /// think before answering).
    pub max_head_time: Duration,
    /// Time from sending the request until the body ends (default 300 s).
    pub max_stream_time: Duration,
    /// Longest silence between body reads (default 30 s: a slowloris sender is cut here).
    pub max_idle_time: Duration,
    /// Nesting depth of JSON (default 64: real payloads nest < 10; deep nesting is a parser
    /// stack attack).
    pub max_json_depth: u64,
    /// Array elements plus object members, across the document (default 100 000).
    pub max_json_items: u64,
    /// Tokens of the body by the approximation in [`crate::scan::Tokenizer`] (default 200 000).
    pub max_tokens: u64,
    /// Bytes of the longest single token (default 4 KiB: longer "words" are encoded blobs).
    pub max_token_bytes: u64,
    /// Bytes of one server-sent-events line (default 256 KiB).
    pub max_sse_line_bytes: u64,
    /// Server-sent events in one stream (default 50 000).
    pub max_sse_events: u64,
}

/// Expanded bytes before the compression ratio is checked.
pub const RATIO_GRACE_BYTES: u64 = 64 * 1024;

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            allowed_statuses: vec![200],
            allowed_content_types: vec!["application/json".into(), "text/event-stream".into()],
            max_header_count: 100,
            max_header_bytes: 64 * 1024,
            max_wire_bytes: 8 * 1024 * 1024,
            max_expanded_bytes: 8 * 1024 * 1024,
            max_compression_ratio: 20,
            max_chunk_count: 100_000,
            max_chunk_bytes: 1024 * 1024,
            max_head_time: Duration::from_secs(120),
            max_stream_time: Duration::from_secs(300),
            max_idle_time: Duration::from_secs(30),
            max_json_depth: 64,
            max_json_items: 100_000,
            max_tokens: 200_000,
            max_token_bytes: 4 * 1024,
            max_sse_line_bytes: 256 * 1024,
            max_sse_events: 50_000,
        }
    }
}

/// The bound a return crossed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// [`Bounds::allowed_statuses`].
    Status,
    /// [`Bounds::allowed_content_types`].
    ContentType,
    /// A Content-Encoding other than identity or gzip.
    ContentEncoding,
    /// [`Bounds::max_header_count`].
    HeaderCount,
    /// [`Bounds::max_header_bytes`].
    HeaderBytes,
    /// [`Bounds::max_wire_bytes`].
    WireBytes,
    /// [`Bounds::max_expanded_bytes`].
    ExpandedBytes,
    /// [`Bounds::max_compression_ratio`].
    CompressionRatio,
    /// [`Bounds::max_chunk_count`].
    ChunkCount,
    /// [`Bounds::max_chunk_bytes`] (also an over-long chunk-size line).
    ChunkBytes,
    /// [`Bounds::max_head_time`].
    HeadTime,
    /// [`Bounds::max_stream_time`].
    StreamTime,
    /// [`Bounds::max_idle_time`].
    IdleTime,
    /// [`Bounds::max_json_depth`].
    JsonDepth,
    /// [`Bounds::max_json_items`].
    JsonItems,
    /// [`Bounds::max_tokens`].
    Tokens,
    /// [`Bounds::max_token_bytes`].
    TokenBytes,
    /// [`Bounds::max_sse_line_bytes`].
    SseLineBytes,
    /// [`Bounds::max_sse_events`].
    SseEvents,
}

impl Bound {
    /// The stable name, used in codes (`bounded/<name>`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Bound::Status => "status",
            Bound::ContentType => "content-type",
            Bound::ContentEncoding => "content-encoding",
            Bound::HeaderCount => "header-count",
            Bound::HeaderBytes => "header-bytes",
            Bound::WireBytes => "wire-bytes",
            Bound::ExpandedBytes => "expanded-bytes",
            Bound::CompressionRatio => "compression-ratio",
            Bound::ChunkCount => "chunk-count",
            Bound::ChunkBytes => "chunk-bytes",
            Bound::HeadTime => "head-time",
            Bound::StreamTime => "stream-time",
            Bound::IdleTime => "idle-time",
            Bound::JsonDepth => "json-depth",
            Bound::JsonItems => "json-items",
            Bound::Tokens => "tokens",
            Bound::TokenBytes => "token-bytes",
            Bound::SseLineBytes => "sse-line-bytes",
            Bound::SseEvents => "sse-events",
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A return crossed a bound; the response was closed and nothing further was parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("return crossed bound {bound}: observed {observed}, limit {limit}")]
pub struct BoundViolation {
    /// The bound crossed.
    pub bound: Bound,
    /// Its limit (for status and content type: 0).
    pub limit: u64,
    /// What was observed when it was crossed (bytes, count, milliseconds or status code).
    pub observed: u64,
}

impl BoundViolation {
    pub(crate) fn new(bound: Bound, limit: u64, observed: u64) -> Self {
        BoundViolation {
            bound,
            limit,
            observed,
        }
    }
}

pub(crate) fn check(bound: Bound, limit: u64, observed: u64) -> Result<(), BoundViolation> {
    if observed > limit {
        Err(BoundViolation::new(bound, limit, observed))
    } else {
        Ok(())
    }
}
