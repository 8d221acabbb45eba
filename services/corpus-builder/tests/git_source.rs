//! A git source through the admin port, against the real HTTPS git server
//! (`reach_corpus::testing`): a source without an admitted commit only reveals a candidate; only
//! `Admit <commit>` activates; a moved branch shows the new tip as a candidate while `Build`
//! keeps rebuilding the admitted commit. The loopback server is reached as an exact local road.
#![allow(clippy::disallowed_methods)] // Test knobs, never secrets.

use std::net::SocketAddr;
use std::sync::Arc;

use reach_corpus::git::GitTls;
use reach_corpus::testing::{git, mint, serve};
use reach_corpus::{CorpusStore, SystemClock};
use reach_corpus_builder::admin::Builder;
use reach_corpus_builder::embedded::Source;
use reach_corpus_builder::fetch::ArchiveFetcher;
use reach_corpus_builder::settings::Settings;
use reach_destination::roads::{Road, Roads};
use reach_proto::corpus::v1 as pb;
use reach_proto::corpus::v1::build_event::Event;
use reach_proto::corpus::v1::corpus_admin_server::CorpusAdmin;
use tokio_stream::StreamExt as _;
use tonic::Request;

async fn last(stream: tonic::Response<<Builder as CorpusAdmin>::BuildStream>) -> Event {
    let events: Vec<Event> = stream
        .into_inner()
        .map(|e| e.unwrap().event.unwrap())
        .collect()
        .await;
    events.last().cloned().unwrap()
}

async fn status(b: &Builder) -> pb::SourceStatus {
    b.status(Request::new(pb::StatusRequest {}))
        .await
        .unwrap()
        .into_inner()
        .sources
        .into_iter()
        .find(|s| s.source == "fixture")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_source_activates_only_the_admitted_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let served = tmp.path().join("served");
    std::fs::create_dir_all(work.join("docs")).unwrap();
    std::fs::create_dir_all(&served).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(
        work.join("docs/corpus.md"),
        "# Public corpus\n\n## Freshness\n\nA snapshot is fresh for 24 hours after activation.\n",
    )
    .unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "v1"]);
    let commit_a = git(&work, &["rev-parse", "HEAD"]);
    let bare = served.join("fixture.git");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let ca = mint();
    let port = serve(served.clone(), &ca);
    let settings = Settings {
        roads: Roads {
            local_roads: vec![Road {
                host: "localhost".into(),
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
            }],
            ..Roads::default()
        },
        ..Settings::default()
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.ca.clone()).unwrap();
    let builder = Builder::new(
        CorpusStore::new(tmp.path().join("corpus"), Arc::new(SystemClock)).unwrap(),
        Source::pack().unwrap(),
        tmp.path(),
        ArchiveFetcher::new(settings.admission().unwrap(), roots),
        GitTls::Roots(vec![ca.ca.clone()]),
    );
    builder.ensure_embedded_active().await.unwrap();

    let added = builder
        .add_source(Request::new(pb::AddSourceRequest {
            name: "fixture".into(),
            kind: "git".into(),
            url: format!("https://localhost:{port}/fixture.git"),
            branch: "main".into(),
            include: vec!["docs/**".into()],
            citation_base: "https://git.example.org/reach/fixture".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(added.refusal_code, "");

    // Without an admitted commit a build only reveals the candidate.
    let build = || {
        builder.build(Request::new(pb::BuildRequest {
            source: "fixture".into(),
        }))
    };
    match last(build().await.unwrap()).await {
        Event::Refusal(r) => assert_eq!(r.code, "corpus/not-admitted"),
        other => panic!("{other:?}"),
    }
    let st = status(&builder).await;
    assert_eq!(st.candidate_revision, commit_a);
    assert_eq!(st.admitted_revision, "");
    assert_eq!(st.active_snapshot_id, "");

    // Admit the exact commit: fetched, built, activated.
    let admit = |rev: String| {
        builder.admit(Request::new(pb::AdmitRequest {
            source: "fixture".into(),
            revision: rev,
        }))
    };
    let summary = match last(admit(commit_a.clone()).await.unwrap()).await {
        Event::Summary(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(summary.revision, commit_a);
    let st = status(&builder).await;
    assert_eq!(st.admitted_revision, commit_a);
    assert_eq!(st.active_snapshot_id, summary.snapshot_id);

    // The branch moves: Build shows the new tip as the candidate and keeps the admitted commit.
    std::fs::write(work.join("docs/corpus.md"), "# Public corpus\n\nChanged.\n").unwrap();
    git(&work, &["commit", "-q", "-am", "v2"]);
    let commit_b = git(&work, &["rev-parse", "HEAD"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    match last(build().await.unwrap()).await {
        Event::Summary(s) => assert_eq!(s.revision, commit_a),
        other => panic!("{other:?}"),
    }
    let st = status(&builder).await;
    assert_eq!(st.candidate_revision, commit_b);
    assert_eq!(st.admitted_revision, commit_a);

    // Only Admit moves the active snapshot to the candidate.
    match last(admit(commit_b.clone()).await.unwrap()).await {
        Event::Summary(s) => assert_eq!(s.revision, commit_b),
        other => panic!("{other:?}"),
    }
    assert_eq!(status(&builder).await.admitted_revision, commit_b);

    // A refused admit (a commit the repository does not have) forgets nothing: the good commit
    // stays admitted and active, and the failure is shown for this source.
    let missing = "0123456789abcdef0123456789abcdef01234567".to_string();
    match last(admit(missing).await.unwrap()).await {
        Event::Refusal(r) => assert!(r.code.starts_with("corpus/"), "{r:?}"),
        other => panic!("{other:?}"),
    }
    let st = status(&builder).await;
    assert_eq!(st.admitted_revision, commit_b);
    assert!(!st.last_failure.is_empty(), "{st:?}");
    match last(build().await.unwrap()).await {
        Event::Summary(s) => assert_eq!(s.revision, commit_b),
        other => panic!("{other:?}"),
    }
}
