//! Streaming checks over the decoded body: gzip expansion with a bounded sink, a JSON
//! pre-scan (depth and items) and a token approximation. Each consumes bytes as they arrive
//! and fails the moment a bound is crossed, before any serde parse sees the body.

use std::io::{self, Write};

use flate2::write::GzDecoder;

use crate::ReturnError;
use crate::bounds::{Bound, BoundViolation, Bounds, RATIO_GRACE_BYTES, check};

/// A streaming JSON structure scan. It does not validate JSON (serde does that later); it
/// only counts nesting and items, ignoring brackets and commas inside strings.
///
/// Items are array elements plus object members: each non-empty container counts its first
/// value plus one per separating comma.
#[derive(Debug, Default, Clone)]
pub struct JsonScan {
    depth: u64,
    items: u64,
    in_string: bool,
    escape: bool,
    awaiting_first: bool,
}

impl JsonScan {
    /// A scanner at the start of a document.
    pub fn new() -> Self {
        JsonScan::default()
    }

    /// Feed the next bytes.
    pub fn feed(&mut self, bytes: &[u8], b: &Bounds) -> Result<(), BoundViolation> {
        for &byte in bytes {
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if byte == b'\\' {
                    self.escape = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            if byte.is_ascii_whitespace() {
                continue;
            }
            if self.awaiting_first && byte != b']' && byte != b'}' {
                self.awaiting_first = false;
                self.items += 1;
                check(Bound::JsonItems, b.max_json_items, self.items)?;
            }
            match byte {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    check(Bound::JsonDepth, b.max_json_depth, self.depth)?;
                    self.awaiting_first = true;
                }
                b']' | b'}' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.awaiting_first = false;
                }
                b',' if self.depth > 0 => {
                    self.items += 1;
                    check(Bound::JsonItems, b.max_json_items, self.items)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Items counted so far.
    pub fn items(&self) -> u64 {
        self.items
    }
}

/// The token approximation: a maximal run of ASCII alphanumerics and non-ASCII bytes is one
/// token; every other non-whitespace ASCII byte (punctuation) is a token on its own;
/// whitespace separates. This roughly tracks BPE tokenizers on prose (which split long words
/// into several tokens, so long words are undercounted); it is a budget, not billing. The
/// longest run is bounded separately because a multi-kilobyte "word" is an encoded blob, not
/// language.
#[derive(Debug, Default, Clone)]
pub struct Tokenizer {
    tokens: u64,
    run: u64,
}

impl Tokenizer {
    /// A tokenizer at the start of a text.
    pub fn new() -> Self {
        Tokenizer::default()
    }

    /// Feed the next bytes.
    pub fn feed(&mut self, bytes: &[u8], b: &Bounds) -> Result<(), BoundViolation> {
        for &byte in bytes {
            if byte.is_ascii_alphanumeric() || byte >= 0x80 {
                if self.run == 0 {
                    self.tokens += 1;
                    check(Bound::Tokens, b.max_tokens, self.tokens)?;
                }
                self.run += 1;
                check(Bound::TokenBytes, b.max_token_bytes, self.run)?;
            } else {
                self.run = 0;
                if !byte.is_ascii_whitespace() {
                    self.tokens += 1;
                    check(Bound::Tokens, b.max_tokens, self.tokens)?;
                }
            }
        }
        Ok(())
    }

    /// Tokens counted so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
}

/// The sink the gzip decoder writes into: it refuses the write that would cross the expanded
/// or ratio bound, so decoding stops at once.
#[derive(Debug)]
pub(crate) struct Sink {
    out: Vec<u8>,
    expanded: u64,
    compressed: u64,
    max_expanded: u64,
    max_ratio: u64,
    violation: Option<BoundViolation>,
}

impl Sink {
    fn accept(&mut self, buf: &[u8]) -> Result<(), BoundViolation> {
        let expanded = self.expanded + buf.len() as u64;
        check(Bound::ExpandedBytes, self.max_expanded, expanded)?;
        if expanded > RATIO_GRACE_BYTES {
            let ratio = expanded / self.compressed.max(1);
            check(Bound::CompressionRatio, self.max_ratio, ratio)?;
        }
        self.expanded = expanded;
        self.out.extend_from_slice(buf);
        Ok(())
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.accept(buf) {
            Ok(()) => Ok(buf.len()),
            Err(v) => {
                self.violation = Some(v.clone());
                Err(io::Error::other(v))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Content decoding under the expanded-bytes and ratio bounds: the body stage of [`fetch`]
/// and [`fetch_sse`] between the wire meter and the tokenizer. Public so the fuzz targets
/// (`fuzz/`) feed it bytes; an egress role never needs it directly.
///
/// [`fetch`]: crate::fetch
/// [`fetch_sse`]: crate::fetch_sse
#[derive(Debug)]
pub struct Expander(Decoding);

#[derive(Debug)]
enum Decoding {
    Identity(Sink),
    Gzip(Box<GzDecoder<Sink>>),
}

impl Expander {
    /// An expander for a body with `Content-Encoding: gzip` (`gzip`) or none, under `b`'s
    /// [`Bounds::max_expanded_bytes`] and [`Bounds::max_compression_ratio`].
    pub fn new(gzip: bool, b: &Bounds) -> Self {
        let sink = Sink {
            out: Vec::new(),
            expanded: 0,
            compressed: 0,
            max_expanded: b.max_expanded_bytes,
            max_ratio: b.max_compression_ratio,
            violation: None,
        };
        if gzip {
            Expander(Decoding::Gzip(Box::new(GzDecoder::new(sink))))
        } else {
            Expander(Decoding::Identity(sink))
        }
    }

    /// Decode `wire` body bytes; returns the newly expanded bytes.
    pub fn push(&mut self, wire: &[u8]) -> Result<Vec<u8>, ReturnError> {
        match &mut self.0 {
            Decoding::Identity(sink) => {
                sink.compressed += wire.len() as u64;
                sink.accept(wire).map_err(ReturnError::from)?;
                Ok(std::mem::take(&mut sink.out))
            }
            Decoding::Gzip(decoder) => {
                decoder.get_mut().compressed += wire.len() as u64;
                let result = decoder.write_all(wire);
                let sink = decoder.get_mut();
                if let Some(v) = sink.violation.take() {
                    return Err(v.into());
                }
                if let Err(e) = result {
                    return Err(ReturnError::Protocol(format!("gzip: {e}")));
                }
                Ok(std::mem::take(&mut sink.out))
            }
        }
    }

    /// End of body: flush the decoder.
    pub fn finish(&mut self) -> Result<Vec<u8>, ReturnError> {
        match &mut self.0 {
            Decoding::Identity(sink) => Ok(std::mem::take(&mut sink.out)),
            Decoding::Gzip(decoder) => {
                let result = decoder.try_finish();
                let sink = decoder.get_mut();
                if let Some(v) = sink.violation.take() {
                    return Err(v.into());
                }
                if let Err(e) = result {
                    return Err(ReturnError::Protocol(format!("gzip: {e}")));
                }
                Ok(std::mem::take(&mut sink.out))
            }
        }
    }
}
