//! Task-pack archives from outside (crates/taskpack `archive::read`, `conform`,
//! `archive_name`): raw bytes, and the MTA-neutral test pack's real archive (signed here)
//! with byte edits, so headers, sizes, padding, `facts.json` and `facts.sig` are all reached
//! without committing a large seed.
//!
//! Promised: `read` accepts only what `write` would have written, so read → write gives the
//! very same bytes; no archive over `MAX_ARCHIVE_BYTES` is read; every install refusal is one
//! of `InstallRefusal`'s codes; an archive that installs has facts equal to those derived
//! from its own sources; an edited signed archive is never parsed (`package/schema`) before
//! its files match their signed digests.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_taskpack::archive::{self, MAX_ARCHIVE_BYTES};
use reach_taskpack::{Facts, Sources, archive_name, conform};

include!("taskpack_common.rs");

/// The test pack's archive, built and signed once per process.
fn built() -> &'static [u8] {
    static ARCHIVE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ARCHIVE.get_or_init(|| {
        reach_taskpack::build_files(app_local().clone(), &key().0)
            .expect("app-local builds")
            .archive
    })
}

// Bytes: a mode byte (even: the rest is the archive; odd: the rest is edits of the test
// pack's archive, each 4 bytes: a 3-byte big-endian offset and a byte to XOR there, or with
// offset 0xFFFFFF the cut of the archive at the next edit's offset).
fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let owned;
    let data = if mode % 2 == 0 {
        rest
    } else {
        let mut a = built().to_vec();
        let mut cut = false;
        for e in rest.chunks_exact(4).take(16) {
            let at = usize::from(e[0]) << 16 | usize::from(e[1]) << 8 | usize::from(e[2]);
            if at == 0xFF_FFFF {
                cut = true;
                continue;
            }
            let at = at % a.len().max(1);
            if cut {
                a.truncate(at);
                cut = false;
            } else if let Some(b) = a.get_mut(at) {
                *b ^= e[3];
            }
        }
        owned = a;
        &owned[..]
    };
    match archive::read(data) {
        Ok(c) => {
            assert!(data.len() <= MAX_ARCHIVE_BYTES);
            let again = archive::write(&c.facts_json, &c.facts_sig, &c.files);
            assert_eq!(
                again, data,
                "read accepted bytes write would not have written"
            );
        }
        Err(e) => assert!(
            !e.entry.is_empty(),
            "an archive refusal names no entry: {e:?}"
        ),
    }
    if let Err(r) = archive_name(data) {
        install_typed(&r);
    }
    match conform(data, &key().1, None, 0) {
        Ok(p) => {
            let sources = Sources::parse(p.files()).expect("an installed pack parses");
            let facts = Facts::derive(p.files(), &sources);
            assert_eq!(
                &facts,
                p.facts(),
                "installed facts differ from the sources'"
            );
        }
        Err(r) => {
            install_typed(&r);
            if data == built() {
                panic!("the test pack's own archive does not install: {r}");
            }
            // Edits of a signed archive never reach the source parser: a file that differs
            // from its signed digest is refused first.
            assert!(
                mode % 2 == 0 || r.code() != "package/schema",
                "an edited signed archive was parsed before it was verified: {r}"
            );
        }
    }
});
