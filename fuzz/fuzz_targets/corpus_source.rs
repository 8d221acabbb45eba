//! Operator source configs (crates/corpus `SourceSpec::from_json`, the one admission every
//! source passes, on `reach corpus add` and again on every read of corpus-builder's
//! `sources.toml`), and the TOML form that file stores.
//!
//! Promised: an admitted source is https, with no credentials, proxy settings, query or
//! fragment anywhere; its origin's tag was a string naming the variant (never a variant
//! index); JSON → spec → JSON → spec and spec → TOML → spec are stable; every refusal is a
//! `corpus/...` code.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_corpus::{Origin, SourceSpec};
use serde_json::Value;

const BANNED: &[&str] = &[
    "credential_helper",
    "credential",
    "credentials",
    "username",
    "password",
    "token",
    "netrc",
    "askpass",
    "proxy",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

fn keys_clean(v: &Value) {
    if let Value::Object(m) = v {
        for (k, v) in m {
            assert!(
                !BANNED.contains(&k.to_ascii_lowercase().as_str()),
                "admitted `{k}`"
            );
            keys_clean(v);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match SourceSpec::from_json(text) {
        Ok(spec) => {
            let raw: Value = serde_json::from_str(text).expect("admitted text is JSON");
            keys_clean(&raw);
            let tag = raw.pointer("/origin/kind");
            let want = match spec.origin {
                Origin::Git { .. } => "git",
                Origin::ReleaseArchive { .. } => "release_archive",
            };
            assert_eq!(
                tag.and_then(Value::as_str),
                Some(want),
                "origin tag was {tag:?}"
            );
            let url = spec.url().as_str();
            assert!(url.starts_with("https://"), "admitted {url}");
            let authority = url["https://".len()..].split('/').next().unwrap_or("");
            assert!(!authority.contains('@'), "admitted credentials in {url}");
            assert!(!url.contains('?') && !url.contains('#'), "admitted {url}");
            let json = serde_json::to_string(&spec).expect("a spec serializes");
            assert_eq!(
                SourceSpec::from_json(&json).as_ref(),
                Ok(&spec),
                "JSON round trip drifted"
            );
            // What corpus-builder's sources.toml stores and reads back (sources.rs).
            if let Ok(t) = toml::Value::try_from(spec.to_stored()) {
                let stored = toml::to_string(&t).expect("toml writes");
                let read: toml::Value = toml::from_str(&stored).expect("toml reads what it wrote");
                assert_eq!(
                    SourceSpec::from_stored(&read).as_ref(),
                    Ok(&spec),
                    "TOML round trip drifted"
                );
            }
        }
        Err(r) => assert!(
            r.code().starts_with("corpus/"),
            "untyped refusal {}",
            r.code()
        ),
    }
});
