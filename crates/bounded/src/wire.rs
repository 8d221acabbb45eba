//! The wire meter: an I/O wrapper under hyper that sees every byte read from the connection
//! and enforces the wire-level bounds (total bytes, header count and size, chunk count and
//! size) *before* hyper parses those bytes. hyper does the real parsing; the meter only tracks
//! enough framing to count. A violation is recorded in a shared slot and surfaces to hyper as
//! an I/O error, which stops the connection.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::bounds::{Bound, BoundViolation, Bounds, check};

/// Longest chunk-size line (hex size plus extensions); real servers send < 20 bytes.
const MAX_CHUNK_LINE: u64 = 256;

/// Where the first violation is recorded for the reader to name.
pub(crate) type Slot = Arc<Mutex<Option<BoundViolation>>>;

pub(crate) fn take(slot: &Slot) -> Option<BoundViolation> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

pub(crate) fn record(slot: &Slot, violation: BoundViolation) {
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(violation);
    }
}

#[derive(Debug)]
enum State {
    /// In a head (or the trailers); `line` is the current line so far (bounded by head bytes).
    Head {
        line: Vec<u8>,
        trailers: bool,
    },
    /// In a body framed by Content-Length or by close: nothing to count but bytes.
    Plain,
    /// In a chunk-size line.
    ChunkLine {
        len: u64,
        size: u64,
        digits: u32,
        in_ext: bool,
    },
    /// In chunk data with this many bytes left, then the CRLF.
    ChunkData {
        left: u64,
    },
    ChunkCrlf {
        left: u8,
    },
}

#[derive(Debug)]
struct Meter {
    wire: u64,
    header_count: u64,
    header_bytes: u64,
    chunks: u64,
    chunked: bool,
    status_line: bool,
    interim: bool,
    state: State,
}

/// The metered connection.
#[derive(Debug)]
pub(crate) struct Metered<S> {
    inner: S,
    meter: Meter,
    limits: Bounds,
    slot: Slot,
}

impl<S> Metered<S> {
    pub(crate) fn new(inner: S, limits: Bounds, slot: Slot) -> Self {
        Metered {
            inner,
            meter: Meter {
                wire: 0,
                header_count: 0,
                header_bytes: 0,
                chunks: 0,
                chunked: false,
                status_line: true,
                interim: false,
                state: State::Head {
                    line: Vec::new(),
                    trailers: false,
                },
            },
            limits,
            slot,
        }
    }
}

impl Meter {
    fn observe(&mut self, bytes: &[u8], b: &Bounds) -> Result<(), BoundViolation> {
        self.wire += bytes.len() as u64;
        check(Bound::WireBytes, b.max_wire_bytes, self.wire)?;
        let mut i = 0;
        while i < bytes.len() {
            let byte = bytes[i];
            match &mut self.state {
                State::Head { line, trailers } => {
                    self.header_bytes += 1;
                    check(Bound::HeaderBytes, b.max_header_bytes, self.header_bytes)?;
                    if byte != b'\n' {
                        line.push(byte);
                        i += 1;
                        continue;
                    }
                    let text = String::from_utf8_lossy(line)
                        .trim_end_matches('\r')
                        .to_owned();
                    let trailers = *trailers;
                    line.clear();
                    if text.is_empty() {
                        self.end_of_head(trailers);
                    } else if self.status_line && !trailers {
                        self.status_line = false;
                        self.interim =
                            text.starts_with("HTTP/1.1 1") || text.starts_with("HTTP/1.0 1");
                    } else {
                        self.header_count += 1;
                        check(Bound::HeaderCount, b.max_header_count, self.header_count)?;
                        let lower = text.to_ascii_lowercase();
                        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                            self.chunked = true;
                        }
                    }
                    i += 1;
                }
                State::Plain => return Ok(()),
                State::ChunkLine {
                    len,
                    size,
                    digits,
                    in_ext,
                } => {
                    *len += 1;
                    check(Bound::ChunkBytes, MAX_CHUNK_LINE, *len)?;
                    i += 1;
                    if byte == b'\n' {
                        let size = *size;
                        self.chunks += 1;
                        check(Bound::ChunkCount, b.max_chunk_count, self.chunks)?;
                        check(Bound::ChunkBytes, b.max_chunk_bytes, size)?;
                        self.state = if size == 0 {
                            State::Head {
                                line: Vec::new(),
                                trailers: true,
                            }
                        } else {
                            State::ChunkData { left: size }
                        };
                    } else if !*in_ext {
                        if let Some(d) = (byte as char).to_digit(16) {
                            *digits += 1;
                            // More than 15 hex digits cannot be a size we would accept.
                            if *digits > 15 {
                                return Err(BoundViolation::new(
                                    Bound::ChunkBytes,
                                    b.max_chunk_bytes,
                                    u64::MAX,
                                ));
                            }
                            *size = *size * 16 + u64::from(d);
                        } else {
                            *in_ext = true;
                        }
                    }
                }
                State::ChunkData { left } => {
                    let take = (*left).min((bytes.len() - i) as u64);
                    *left -= take;
                    i += take as usize;
                    if *left == 0 {
                        self.state = State::ChunkCrlf { left: 2 };
                    }
                }
                State::ChunkCrlf { left } => {
                    *left -= 1;
                    i += 1;
                    if *left == 0 {
                        self.state = State::ChunkLine {
                            len: 0,
                            size: 0,
                            digits: 0,
                            in_ext: false,
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

impl Meter {
    fn end_of_head(&mut self, trailers: bool) {
        if trailers {
            self.state = State::Plain;
        } else if self.interim {
            // A 1xx interim head: another head follows, counted against the same bounds.
            self.interim = false;
            self.status_line = true;
            self.state = State::Head {
                line: Vec::new(),
                trailers: false,
            };
        } else if self.chunked {
            self.state = State::ChunkLine {
                len: 0,
                size: 0,
                digits: 0,
                in_ext: false,
            };
        } else {
            self.state = State::Plain;
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = &buf.filled()[before..];
                if let Err(violation) = this.meter.observe(fresh, &this.limits) {
                    record(&this.slot, violation.clone());
                    // Hand hyper none of the offending bytes.
                    buf.set_filled(before);
                    return Poll::Ready(Err(io::Error::other(violation)));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
