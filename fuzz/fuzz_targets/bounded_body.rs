//! The bounded reader's body stage (crates/bounded `scan::Expander` and `scan::Tokenizer`):
//! identity and gzip decoding under the expanded-bytes and ratio bounds, then the token count.
//!
//! Promised: no more than `max_expanded_bytes` ever come out; past the grace bytes the
//! expanded/compressed ratio stays within `max_compression_ratio`; an identity body comes out
//! unchanged and a gzip body as exactly what was compressed; every failure is a
//! `bounded/...` code.
#![no_main]

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use libfuzzer_sys::fuzz_target;
use reach_bounded::scan::{Expander, Tokenizer};
use reach_bounded::{Bounds, RATIO_GRACE_BYTES, ReturnError};

/// Bytes: flags (1: bit 0 gzip, bit 1 compress here), repeat (2), expanded bound in KiB (2),
/// ratio (1), read size (1), then the body (all big-endian).
struct Input<'a> {
    gzip: bool,
    /// Compress `body` here first (a valid gzip stream, possibly a bomb).
    compress: bool,
    /// Repeat `body` this many times before compressing (bombs from few bytes).
    repeat: u16,
    max_expanded: u32,
    ratio: u8,
    cuts: Vec<u16>,
    body: &'a [u8],
}

const CODES: &[&str] = &[
    "bounded/expanded-bytes",
    "bounded/compression-ratio",
    "bounded/tokens",
    "bounded/token-bytes",
    "bounded/protocol",
];

fn input(data: &[u8]) -> Option<Input<'_>> {
    let (h, body) = data.split_at_checked(7)?;
    let step = u16::from(h[6]) * 16 + 1;
    Some(Input {
        gzip: h[0] & 1 != 0,
        compress: h[0] & 2 != 0,
        repeat: u16::from_be_bytes([h[1], h[2]]),
        max_expanded: u32::from(u16::from_be_bytes([h[3], h[4]])) * 1024,
        ratio: h[5],
        cuts: vec![step; 4096],
        body,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = input(data) else {
        return;
    };
    let b = Bounds {
        max_expanded_bytes: u64::from(input.max_expanded % (1 << 20)),
        max_compression_ratio: u64::from(input.ratio % 40) + 1,
        max_tokens: 5_000,
        max_token_bytes: 512,
        ..Bounds::default()
    };
    let plain: Vec<u8> = if input.compress {
        input.body.repeat(usize::from(input.repeat % 2048) + 1)
    } else {
        input.body.to_vec()
    };
    let wire = if input.gzip && input.compress {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(&plain).expect("in memory");
        e.finish().expect("in memory")
    } else {
        plain.clone()
    };
    let mut pieces = Vec::new();
    let mut rest = &wire[..];
    for c in &input.cuts {
        if rest.is_empty() {
            break;
        }
        let (head, tail) = rest.split_at(usize::from(*c).min(rest.len()));
        pieces.push(head);
        rest = tail;
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    let mut x = Expander::new(input.gzip, &b);
    let mut tokens = Tokenizer::new();
    let mut out = Vec::new();
    let mut compressed = 0u64;
    let mut take = |bytes: Vec<u8>, compressed: u64| -> Result<(), ReturnError> {
        out.extend_from_slice(&bytes);
        let total = out.len() as u64;
        assert!(total <= b.max_expanded_bytes, "expanded past the bound");
        if total > RATIO_GRACE_BYTES {
            assert!(
                total / compressed.max(1) <= b.max_compression_ratio,
                "ratio past the bound"
            );
        }
        tokens.feed(&bytes, &b)?;
        assert!(tokens.tokens() <= b.max_tokens);
        Ok(())
    };
    let verdict = (|| {
        for p in &pieces {
            compressed += p.len() as u64;
            take(x.push(p)?, compressed)?;
        }
        take(x.finish()?, compressed)
    })();
    drop(take);
    match verdict {
        Ok(()) => {
            if !input.gzip || input.compress {
                assert_eq!(out, plain, "the body changed in decoding");
            }
        }
        Err(e) => {
            let code = e.code();
            assert!(CODES.contains(&code.as_str()), "untyped failure {code}");
            if !input.gzip {
                assert_ne!(code, "bounded/protocol");
            }
        }
    }
});
