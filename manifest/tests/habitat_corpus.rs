//! `habitat.corpus` must name a source the manifest's corpus-builder provides (issue #34: a
//! manifest naming no configured source was accepted silently and every answer was "not in
//! the docs").

use expect_test::expect;
use reach_manifest::{ManifestErrorKind as K, VPS_PUBLIC, load};

const BUILDER: &str = "network = \"egress:corpus-source\"\n";

fn with(corpus: &str, settings: Option<&str>) -> String {
    assert!(VPS_PUBLIC.contains("corpus = \"reach-docs\"") && VPS_PUBLIC.contains(BUILDER));
    let m = VPS_PUBLIC.replacen(
        "corpus = \"reach-docs\"",
        &format!("corpus = \"{corpus}\""),
        1,
    );
    match settings {
        Some(s) => m.replacen(BUILDER, &format!("{BUILDER}settings = {s}\n"), 1),
        None => m,
    }
}

#[test]
fn a_corpus_no_source_provides_is_refused_at_validation() {
    let err = load(&with("my-book", None)).expect_err("an unknown corpus is refused");
    expect![[r#"habitat.corpus: corpus `my-book` is no source of corpus-builder (sources: reach-docs); declare an operator source in corpus-builder's `settings.sources`"#]]
        .assert_eq(&err.to_string());
    assert!(matches!(err.kind, K::UnknownCorpus { .. }));

    // With a local docs directory the default source is `local-docs`, not the embedded docs.
    let err = load(&with("reach-docs", Some("{ docs_dir = \"/srv/docs\" }")))
        .expect_err("the embedded docs are not built with docs_dir");
    expect!["habitat.corpus: corpus `reach-docs` is no source of corpus-builder (sources: local-docs); declare an operator source in corpus-builder's `settings.sources`"]
        .assert_eq(&err.to_string());
    let _ = load(&with(
        "reach-docs",
        Some("{ docs_dir = \"/srv/docs\", sources = [\"other\"] }"),
    ))
    .expect_err("still refused");
}

#[test]
fn the_default_a_local_directory_or_a_declared_source_is_accepted() {
    for (corpus, settings) in [
        ("reach-docs", None),
        ("local-docs", Some("{ docs_dir = \"/srv/docs\" }")),
        ("my-book", Some("{ sources = [\"my-book\"] }")),
    ] {
        let m = load(&with(corpus, settings)).unwrap_or_else(|e| panic!("{corpus}: {e}"));
        assert_eq!(m.habitat.corpus, corpus);
    }
}
