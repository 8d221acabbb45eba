//! Release-archive unpacking (crates/corpus `unpack_release_archive`) and processing of what
//! it yields: raw bytes (gzip, tar headers, bombs) and structured entries packed here.
//!
//! Promised: anything but a gzip-compressed tar is refused before decompression; unpacking
//! never expands past `max_bytes` nor past the ratio ceiling (above the floor); every refusal
//! is a `corpus/...` code; what is accepted obeys every ceiling and path rule.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_corpus::archive::EXPANSION_FLOOR_BYTES;
use reach_corpus::{EntryKind, Revision, pack_entries, unpack_release_archive};
use reach_digest::Sha256Digest;

include!("corpus_common.rs");

#[derive(Debug)]
enum Input<'a> {
    Raw(&'a [u8]),
    Entries(Vec<(&'a str, &'a [u8])>),
}

// Bytes: a mode byte (even: the rest is the archive; odd: entries built from the rest).
fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let input = if mode % 2 == 0 {
        Input::Raw(rest)
    } else {
        match <Vec<(&str, &[u8])> as arbitrary::Arbitrary>::arbitrary_take_rest(
            arbitrary::Unstructured::new(rest),
        ) {
            Ok(e) => Input::Entries(e),
            Err(_) => return,
        }
    };
    let bytes = match input {
        Input::Raw(b) => b.to_vec(),
        Input::Entries(e) => match pack_entries(e) {
            Ok(b) => b,
            Err(_) => return,
        },
    };
    let c = ceilings();
    let digest = Sha256Digest::of(&bytes);
    let other = Sha256Digest::of(b"another archive");
    assert_eq!(
        unpack_release_archive(&bytes, &other, &c)
            .map(|_| ())
            .map_err(|e| e.code()),
        Err("corpus/digest-mismatch"),
    );
    match unpack_release_archive(&bytes, &digest, &c) {
        Ok(un) => {
            assert!(bytes.starts_with(&[0x1f, 0x8b]));
            assert!(
                un.expanded_bytes <= c.max_bytes,
                "expanded past the byte ceiling"
            );
            if un.expanded_bytes > EXPANSION_FLOOR_BYTES {
                assert!(
                    un.expanded_bytes <= c.max_expansion_ratio * bytes.len() as u64,
                    "expanded past the ratio"
                );
            }
            let files: u64 = un
                .entries
                .iter()
                .map(|e| match &e.kind {
                    EntryKind::File { bytes, .. } => bytes.len() as u64,
                    _ => 0,
                })
                .sum();
            assert!(
                files <= un.expanded_bytes,
                "more file bytes than were expanded"
            );
            let tree = AcquiredTree {
                revision: Revision {
                    commit: None,
                    archive_digest: Some(digest),
                    citation_rev: digest.hex(),
                },
                entries: un.entries,
                compressed_bytes: un.compressed_bytes,
                expanded_bytes: un.expanded_bytes,
            };
            check_processed(&tree, &["**".to_owned()]);
        }
        Err(e) => {
            typed(&e);
            if !bytes.starts_with(&[0x1f, 0x8b]) {
                assert_eq!(e.code(), "corpus/unsupported-archive");
            }
        }
    }
});
