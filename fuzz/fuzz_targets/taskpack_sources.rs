//! Task-pack sources and facts (crates/taskpack `Sources::parse`, `Facts::derive`,
//! `build_files`, `conform`), structure-aware: the MTA-neutral test pack with arbitrary edits
//! to its files (profile, flow, command profiles, patch policy, verifier, refusal corpus,
//! fixture answers, image and prepared specs).
//!
//! Promised: every refusal is a typed `package/...` or `verifier/...` code; a pack that
//! builds installs (its archive conforms, the facts recomputed at install equal the built
//! ones, and read → write of its archive is byte-exact); facts' canonical bytes are stable.
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reach_taskpack::{Facts, Sources, archive, build_files, conform};

include!("taskpack_common.rs");

#[derive(Debug, Arbitrary)]
enum Edit<'a> {
    /// Replace the file's bytes.
    Replace {
        file: u8,
        bytes: &'a [u8],
    },
    /// Splice bytes into the file at an offset, dropping `cut` bytes there.
    Splice {
        file: u8,
        at: u16,
        cut: u8,
        bytes: &'a [u8],
    },
    /// Replace the first occurrence of one line with another.
    Line {
        file: u8,
        line: u8,
        with: &'a str,
    },
    Remove {
        file: u8,
    },
    Add {
        path: &'a str,
        bytes: &'a [u8],
    },
}

fuzz_target!(|edits: Vec<Edit<'_>>| {
    let mut map: BTreeMap<String, Vec<u8>> = app_local().clone().into_map();
    for e in edits.into_iter().take(4) {
        let names: Vec<String> = map.keys().cloned().collect();
        if names.is_empty() {
            break;
        }
        let pick = |i: u8| names[i as usize % names.len()].clone();
        match e {
            Edit::Replace { file, bytes } => {
                map.insert(pick(file), bytes.to_vec());
            }
            Edit::Splice {
                file,
                at,
                cut,
                bytes,
            } => {
                let f = map.get_mut(&pick(file)).expect("picked");
                let at = usize::from(at) % (f.len() + 1);
                let end = (at + usize::from(cut)).min(f.len());
                f.splice(at..end, bytes.iter().copied());
            }
            Edit::Line { file, line, with } => {
                let f = map.get_mut(&pick(file)).expect("picked");
                let text = String::from_utf8_lossy(f).into_owned();
                let mut lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let n = lines.len();
                    lines[usize::from(line) % n] = with;
                }
                *f = lines.join("\n").into_bytes();
            }
            Edit::Remove { file } => {
                map.remove(&pick(file));
            }
            Edit::Add { path, bytes } => {
                map.insert(path.to_owned(), bytes.to_vec());
            }
        }
    }
    let Ok(files) = PackFiles::new(map) else {
        return;
    };
    match Sources::parse(&files) {
        Ok(sources) => {
            let facts = Facts::derive(&files, &sources);
            assert_eq!(
                facts.canonical_bytes(),
                Facts::derive(&files, &sources).canonical_bytes()
            );
        }
        Err(e) => {
            let code = e.code();
            assert!(matches!(
                code,
                "package/schema" | "verifier/check-missing" | "verifier/mutation-not-admitted"
            ));
        }
    }
    let (key, trusted) = key();
    match build_files(files, key) {
        Ok(built) => {
            let c = archive::read(&built.archive).expect("a built archive reads");
            assert_eq!(
                archive::write(&c.facts_json, &c.facts_sig, &c.files),
                built.archive
            );
            match conform(&built.archive, trusted, None, 0) {
                Ok(p) => assert_eq!(p.facts(), &built.facts, "install derived other facts"),
                Err(InstallRefusal::Expired { .. }) => {}
                Err(r) => panic!("a pack that built does not install: {}: {r}", r.code()),
            }
        }
        Err(r) => assert!(
            matches!(
                r.code(),
                "package/schema"
                    | "verifier/check-missing"
                    | "verifier/mutation-not-admitted"
                    | "package/conformance-failed"
            ),
            "untyped build refusal {}",
            r.code()
        ),
    }
});
